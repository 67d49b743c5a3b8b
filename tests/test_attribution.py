"""classify_cell over synthetic reports: the verdict is decide()'s, the attribution never a pass.

Each hole of the old per-engine rules has a test here (issue 29): a lost KEY beside a duplicated
one, unchecked checks, copies counted, handings within one attempt or with no failure between.
"""

from __future__ import annotations

import pytest

from rollcheck.pyimpl.attribution import check_guarantee, classify_cell, judge_sink, sink_check_of
from rollcheck.pyimpl.verdict import Check, Report

DOC = "Engine guide, section \"Sinks\": at-least-once after a failure"


def _sink(guarantee: str, want: dict, got: dict, **kw) -> Check:
    j = judge_sink(guarantee, want, got, documentation=DOC, **kw)
    name = f"user-sink-{guarantee}"
    return Check.held(name, j["detail"], **j["data"]) if j["ok"] else \
        Check.violated(name, j["detail"], offending_seq=9, **j["data"])


ENGINE_OK = [Check.held("failure-observed", "kill at batch 2", examined=1),
             Check.held("commit-protocol", "7 batches", examined=7)]


def test_a_conformant_cell_is_attributed_to_nobody() -> None:
    c = classify_cell(Report([*ENGINE_OK, _sink("exactly-once", {"a": {"r": 1}}, {"a": {"r": 1}},
                                                 redelivered={"a": 1})]))
    assert c == {"verdict": "conformant", "expected_by_engine": False, "attributed_to": None,
                 "reason": "conformant: 3 checks held"}


def test_undeclared_duplicate_explained_by_a_redelivery_is_expected_but_not_a_pass() -> None:
    c = classify_cell(Report([*ENGINE_OK, _sink("exactly-once", {"a": {"r": 1}}, {"a": {"r": 2}},
                                                 redelivered={"a": 1})]))
    assert c["verdict"] == "not-conformant" and c["expected_by_engine"] is True
    assert c["attributed_to"] == "module" and DOC in c["reason"]


def test_declared_at_least_once_keeping_its_declaration_is_conformant() -> None:
    c = classify_cell(Report([*ENGINE_OK, _sink("at-least-once", {"a": {"r": 1}}, {"a": {"r": 2}},
                                                 redelivered={"a": 1})]))
    assert c["verdict"] == "conformant" and c["expected_by_engine"] is False and c["attributed_to"] is None
    assert "at-least-once" in c["reason"] and DOC in c["reason"]


def test_lost_key_beside_a_duplicated_key_is_never_expected() -> None:
    # the old Flink rule looked at the first differing key only ("a", duplicated)
    s = _sink("exactly-once", {"a": {"r": 1}, "b": {"s": 1}}, {"a": {"r": 2}}, redelivered={"a": 1})
    assert s.data["lost"] == {"b": 1} and s.data["extra_copies"] == {"a": 1}
    c = classify_cell(Report([*ENGINE_OK, s]))
    assert c["verdict"] == "not-conformant" and c["expected_by_engine"] is False
    assert c["attributed_to"] == "engine" and c["reason"].startswith("finding:")
    # the engine handed the lost KEY to the sink (the trace says so): the module's sink lost it
    s = _sink("exactly-once", {"a": {"r": 1}, "b": {"s": 1}}, {"a": {"r": 2}}, redelivered={"a": 1},
              handed_keys={"a", "b"})
    c = classify_cell(Report([*ENGINE_OK, s]))
    assert c["expected_by_engine"] is False and c["attributed_to"] == "module"


def test_copies_are_counted() -> None:
    # three extra copies of rows handed again once after the failure
    s = _sink("exactly-once", {"a": {"r": 1}}, {"a": {"r": 4}}, redelivered={"a": 1})
    c = classify_cell(Report([*ENGINE_OK, s]))
    assert c["verdict"] == "not-conformant" and c["expected_by_engine"] is False
    assert c["attributed_to"] == "module"
    assert _sink("at-least-once", {"a": {"r": 1}}, {"a": {"r": 4}}, redelivered={"a": 1}).ok is False
    assert _sink("at-least-once", {"a": {"r": 1}}, {"a": {"r": 3}}, redelivered={"a": 2}).ok is True


@pytest.mark.parametrize("kw, word", [({"within_attempt": {"a": 1}}, "within one attempt"),
                                      ({"again_without_failure": {"a": 1}}, "no failure")])
def test_handings_not_after_a_failure_are_never_expected(kw: dict, word: str) -> None:
    s = _sink("exactly-once", {"a": {"r": 1}}, {"a": {"r": 2}}, redelivered={"a": 1}, **kw)
    c = classify_cell(Report([*ENGINE_OK, s]))
    assert c["verdict"] == "not-conformant" and c["expected_by_engine"] is False
    assert c["attributed_to"] == "engine" and word in c["reason"]


def test_an_unchecked_check_is_never_masked() -> None:
    s = _sink("exactly-once", {"a": {"r": 1}}, {"a": {"r": 2}}, redelivered={"a": 1})
    c = classify_cell(Report([*ENGINE_OK, s, Check.unchecked("kill-point", "no checkpoint_logs")]))
    assert c["verdict"] == "not-conformant"  # decide(): a violation outranks a gap
    assert c["expected_by_engine"] is False and c["attributed_to"] is None and "kill-point" in c["reason"]
    c = classify_cell(Report([*ENGINE_OK, _sink("at-least-once", {"a": {"r": 1}}, {"a": {"r": 2}},
                                                 redelivered={"a": 1}),
                              Check.unchecked("kill-point", "no checkpoint_logs")]))
    assert c["verdict"] == "inconclusive" and c["expected_by_engine"] is False and c["attributed_to"] is None


def test_an_engine_check_violated_is_a_finding_whatever_the_sink() -> None:
    s = _sink("exactly-once", {"a": {"r": 1}}, {"a": {"r": 2}}, redelivered={"a": 1})
    c = classify_cell(Report([*ENGINE_OK, s, Check.violated("state-failure-free", "store 0 differs")]))
    assert c["expected_by_engine"] is False and c["attributed_to"] == "engine"
    # without a user-sink check (rollcheck's own sink), a duplicate is the engine's
    c = classify_cell(Report([*ENGINE_OK, Check.violated("output-exactly-once", "row 3 twice (duplicated output)")]))
    assert c["expected_by_engine"] is False and c["attributed_to"] == "engine"


def test_aggregating_output_changed_at_a_redelivered_key() -> None:
    # a ledger read back as balances: a re-delivered batch changes the balance, it adds no row
    want, got = {"u1": {"b=10": 1}, "u2": {"b=5": 1}}, {"u1": {"b=13": 1}, "u2": {"b=5": 1}}
    s = _sink("exactly-once", want, got, redelivered={"u1": 1})
    assert s.data["changed"] == {"u1": 1} and not s.data["extra_copies"] and not s.data["lost"]
    c = classify_cell(Report([*ENGINE_OK, s]))
    assert c["expected_by_engine"] is True and c["attributed_to"] == "module"
    assert _sink("at-least-once", want, got, redelivered={"u1": 1}).ok is True
    # changed at a KEY the engine never handed again: not explained
    assert _sink("at-least-once", want, got, redelivered={"u2": 1}).ok is False
    c = classify_cell(Report([*ENGINE_OK, _sink("exactly-once", want, got, redelivered={"u2": 1})]))
    assert c["expected_by_engine"] is False


def test_no_record_of_the_handings_attributes_nothing() -> None:
    s = _sink("exactly-once", {"a": {"r": 1}}, {"a": {"r": 2}}, redelivered=None)
    assert s.data["redelivered_after_failure"] is None
    c = classify_cell(Report([*ENGINE_OK, s]))
    assert c["verdict"] == "not-conformant" and c["expected_by_engine"] is False and c["attributed_to"] is None


def test_inconclusive_and_sink_check_lookup() -> None:
    c = classify_cell(Report([Check.unchecked("failure-observed", "no failure happened")]))
    assert c["verdict"] == "inconclusive" and c["reason"].startswith("inconclusive: failure-observed")
    assert sink_check_of(Report(ENGINE_OK)) is None
    with pytest.raises(ValueError, match="SINK_GUARANTEE"):
        check_guarantee("exactly_once")


def test_same_rows_in_another_order_is_not_attributed() -> None:
    j = judge_sink("exactly-once", {"a": {"r1": 1, "r2": 1}}, {"a": {"r1": 1, "r2": 1}}, redelivered={})
    assert j["ok"] is True
    # the engine's check saw the last row per KEY differ; nothing is lost, copied or changed
    s = Check.violated("output-exactly-once", "the last row per key ['a'] differs", **j["data"])
    c = classify_cell(Report([*ENGINE_OK, s]))
    assert c["verdict"] == "not-conformant" and c["attributed_to"] is None and not c["expected_by_engine"]
