"""Issue 19, "honest figures": the verify rows that confirm a result do so independently.

- The "your system" row confirms the counterexample of ``check protocol`` with a brute-force
  Z-cycle search from the definitions (not the SCC pass that produced it), and that confirmation
  rejects a doctored counterexample.
- The Spark row of a non-idempotent sink reads the trace's sink writes and expects exactly what
  they imply (a named duplicate, or an exact output).
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from rollcheck.pyimpl.pattern import PatternBuilder
from rollcheck.pyimpl.zpaths import useless_checkpoints
from rollcheck.sections import sec_spark, sec_yours


def _zcycle_pattern():
    """P1:1 is useless: m2 leaves it (sent by P1 after it, delivered to P0) and m1, sent by P0 in
    the interval of that delivery (a Z-path need not be causal), returns to P1 before it."""
    b = PatternBuilder(["P0", "P1"])
    b.deliver(1, b.send(0, 1))
    b.checkpoint(1)
    b.deliver(0, b.send(1, 0))
    b.checkpoint(0)
    return b.build()


def test_counterexample_confirmed_independently():
    p = _zcycle_pattern()
    assert [p.checkpoint_name(c) for c in useless_checkpoints(p)] == ["P1:1"]
    ok, note = sec_yours.confirm_counterexample(p, ["P1:1"])
    assert ok, note
    assert "brute-force" in note and "doctored copy" in note


def test_a_false_claim_is_not_confirmed():
    ok, note = sec_yours.confirm_counterexample(_zcycle_pattern(), ["P0:1"])
    assert not ok and "no Z-cycle through P0:1 (" in note
    assert sec_yours.confirm_counterexample(_zcycle_pattern(), [])[0] is False


def test_the_doctored_counterexample_is_rejected():
    p = _zcycle_pattern()
    d = sec_yours._doctored(p, "P1:1")
    assert len(d.events) == len(p.events) - 1  # the delivery to P1 before P1:1 is gone
    assert sec_yours._zcycle_useless(d, ["P1:1"]) == {"P1:1": False}
    assert useless_checkpoints(d) == []  # and the production algorithm agrees


def test_confirmation_does_not_use_the_algorithm_it_checks(monkeypatch):
    """A broken useless_checkpoints (the producer) cannot make the confirmation say yes or no."""
    import rollcheck.pyimpl.zpaths as zpaths

    monkeypatch.setattr(zpaths, "useless_checkpoints", lambda p: [])
    assert sec_yours.confirm_counterexample(_zcycle_pattern(), ["P1:1"])[0] is True
    assert sec_yours.confirm_counterexample(_zcycle_pattern(), ["P0:1"])[0] is False


def test_a_confirmation_that_always_agrees_is_caught(monkeypatch):
    """Mutant: an oracle that confirms everything also 'confirms' the doctored copy: rejected."""
    monkeypatch.setattr(sec_yours, "_zcycle_useless", lambda p, names: dict.fromkeys(names, True))
    ok, note = sec_yours.confirm_counterexample(_zcycle_pattern(), ["P1:1"])
    assert not ok and "doctored counterexample" in note


def test_large_counterexample_is_not_confirmed(monkeypatch):
    monkeypatch.setattr(sec_yours, "MAX_ORACLE_MESSAGES", 1)
    ok, note = sec_yours.confirm_counterexample(_zcycle_pattern(), ["P1:1"])
    assert not ok and "exceed" in note


# ----------------------------------------------------------------------------- Spark sink row
def _trace(tmp_path, writes):
    lines = [{"format": "rollcheck.trace/1", "source": "spark-query"}]
    for k, (batch, rows) in enumerate(writes, start=1):
        lines.append({"seq": k, "kind": "spark.sink_written", "batch": batch, "rows": rows})
    f = tmp_path / "t.jsonl"
    f.write_text("".join(json.dumps(x) + "\n" for x in lines) + '{"seq": 99, "ki')  # a cut last line
    return f


@pytest.mark.parametrize("writes, implied", [
    ([(0, [{"u": 1}]), (1, [{"u": 2}]), (2, [{"u": 3}]), (2, [{"u": 3}])], True),   # written again
    ([(0, [{"u": 1}]), (1, [{"u": 2}]), (2, [{"u": 3}]), (3, [{"u": 4}])], False),  # written once
    ([(2, []), (2, [])], False),                                                   # no rows to repeat
    ([(1, [{"u": 2}]), (1, [{"u": 2}])], False),                                   # another batch
])
def test_sink_writes_imply_duplicate(tmp_path, writes, implied):
    got, evidence = sec_spark._sink_writes_imply_duplicate(_trace(tmp_path, writes), batch=2)
    assert got is implied
    assert "batch 2 written" in evidence


def _check(ok, detail=""):
    return SimpleNamespace(name="output-exactly-once", ok=ok, detail=detail)


DUP = _check(False, "duplicate: row {...} of batch 2 is in the output 2 time(s) (a non-idempotent sink)")


@pytest.mark.parametrize("implied, check, mode, expect", [
    (True, DUP, "kill", True),            # writes say duplicate, replay names it
    (True, _check(True), "kill", False),  # writes say duplicate, replay says exact: the row fails
    (False, _check(True), "kill", True),  # written once: exact output expected and found
    (False, DUP, "kill", False),          # written once, yet a duplicate is claimed: the row fails
    (True, DUP, "sink", True),
    (False, _check(True), "sink", False), # a sink failure must show the second write
    (True, _check(False, "lost: row {...}"), "kill", False),
    (True, None, "kill", False),
])
def test_sink_row_expects_exactly_what_the_writes_imply(implied, check, mode, expect):
    assert sec_spark._sink_row_ok(implied, check, mode, batch=2) is expect
