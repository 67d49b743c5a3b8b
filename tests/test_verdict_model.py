"""The one verdict rule (rollcheck.pyimpl.verdict): each clause has a case that fails without it."""

from __future__ import annotations

import pytest

from rollcheck.pyimpl.verdict import Check, Report, Status, Verdict, decide


def test_violation_wins_over_everything():
    checks = [Check.unchecked("tlc", "no java"), Check.violated("recovery-line", "orphan m3", offending_seq=4),
              Check.held("log-replay", "2 replayed", examined=2)]
    assert decide(checks) is Verdict.VIOLATED
    assert Report(checks).exit_code == 1


def test_unchecked_makes_inconclusive():
    checks = [Check.held("recovery-line", "ok", examined=1), Check.unchecked("outputs", "no end of run")]
    assert decide(checks) is Verdict.INCONCLUSIVE
    assert Report(checks).why_inconclusive == "outputs: no end of run"


def test_nothing_examined_is_inconclusive():
    assert decide([]) is Verdict.INCONCLUSIVE
    assert decide([Check.held("pattern-valid", "ok", substantive=False)]) is Verdict.INCONCLUSIVE
    assert decide([Check.not_applicable("recovery-line", "no failure")]) is Verdict.INCONCLUSIVE


def test_not_applicable_is_not_a_gap():
    checks = [Check.held("no-useless", "ok", examined=5), Check.not_applicable("recovery-line", "no failure")]
    assert decide(checks) is Verdict.CONFORMANT


def test_held_with_zero_examined_is_refused_or_unchecked():
    with pytest.raises(ValueError):
        Check("x", Status.HELD, examined=0)
    assert Check.held("x", "", examined=0).status is Status.UNCHECKED


def test_root_cause_skips_consequences():
    r = Report([Check.violated("tlc", "rejected", offending_seq=15, consequence_of="recovery-line"),
                Check.violated("recovery-line", "orphan", offending_seq=19)])
    assert r.root_cause.name == "recovery-line"
    assert r.first_offending_seq == 19
    # without the consequence mark the earliest seq is the root
    r2 = Report([Check.violated("tlc", "rejected", offending_seq=15),
                 Check.violated("recovery-line", "orphan", offending_seq=19)])
    assert r2.first_offending_seq == 15


def test_json_shape():
    r = Report([Check.held("a", "fine", examined=2), Check.not_applicable("b", "no failure")],
               extra={"truncated": False})
    j = r.to_json()
    assert j["conformant"] is True and j["verdict"] == "conformant" and j["truncated"] is False
    assert [c["status"] for c in j["checks"]] == ["held", "not-applicable"]
    assert [c["ok"] for c in j["checks"]] == [True, None]
    assert Report([Check.violated("x", "bad")]).to_json("protocol")["verdict"] == "unsafe"


def test_decide_refuses_foreign_objects():
    with pytest.raises(TypeError):
        decide([{"name": "x", "ok": True}])  # type: ignore[list-item]
