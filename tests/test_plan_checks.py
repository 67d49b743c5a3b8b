"""``plan-stable`` and ``complete-key-unique`` (spark_replay/query/plan_checks.py).

The fixtures are real failure-free recordings of the bug zoo's SPARK-47840 module (two sources
unioned, each tagged with a constant kind, counted per (kind, ad) in complete mode): on pyspark
3.5.2 (fixed) both checks hold; on 3.5.1 (affected) the constant folded into the aggregation makes a
micro-batch write one (kind, ad) key twice, which ``complete-key-unique`` names — while every batch
still lists its one ``stateStoreSave`` (``plan-stable`` holds: the bug prunes a branch of the union,
not a stateful operator).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rollcheck.spark_replay.query.plan_checks import (
    CAUGHT_BY,
    PLAN_TAMPERS,
    complete_key_unique,
    plan_stable,
)
from rollcheck.spark_replay.replay.conformance import replay_file, replay_trace
from rollcheck.spark_replay.trace import parse_trace_text, read_trace

DATA = Path(__file__).parent / "data" / "spark"
FIXED = DATA / "spark-47840-complete-3.5.2.jsonl"
AFFECTED = DATA / "spark-47840-complete-3.5.1.jsonl"


def _status(rep, name: str) -> str:
    return next(c.status.value for c in rep.checks if c.name == name)


def test_both_checks_hold_on_the_fixed_release_and_run_in_every_replay() -> None:
    rep = replay_file(FIXED)
    assert _status(rep, "plan-stable") == "held"
    assert _status(rep, "complete-key-unique") == "held"


def test_complete_key_unique_finds_spark_47840_on_the_affected_release() -> None:
    rep = replay_file(AFFECTED)
    check = next(c for c in rep.checks if c.name == "complete-key-unique")
    assert check.status.value == "violated"
    assert "micro-batch 2" in check.detail and "ad-2" in check.detail
    assert _status(rep, "plan-stable") == "held"  # one stateStoreSave in every batch on 3.5.1 too


@pytest.mark.parametrize("how", sorted(PLAN_TAMPERS))
def test_each_check_catches_its_mutant(how: str) -> None:
    trace = read_trace(FIXED)
    lines, seq = PLAN_TAMPERS[how](trace)
    rep = replay_trace(parse_trace_text(("\n".join(lines) + "\n").encode()))
    check = next(c for c in rep.checks if c.name == CAUGHT_BY[how])
    assert check.status.value == "violated", check.detail
    assert check.offending_seq == seq
    others = [c.name for c in rep.checks if c.status.value == "violated" and c.name in CAUGHT_BY.values()]
    assert others == [CAUGHT_BY[how]]


def _progress(batch: int, ops: list[str], attempt: int = 1, seq: int = 1) -> dict:
    return {"seq": seq, "kind": "spark.progress", "attempt": attempt, "batch": batch, "state_operators": ops}


def test_plan_stable_cases() -> None:
    h: dict = {"config": {}}
    same = [_progress(b, ["stateStoreSave", "dedupe"], seq=b + 1) for b in range(3)]
    assert plan_stable(h, same).status.value == "held"
    pruned = [*same[:2], _progress(2, ["dedupe"], seq=3)]
    c = plan_stable(h, pruned)
    assert c.status.value == "violated" and "micro-batch 2" in c.detail and c.offending_seq == 3
    assert "pruned" in c.detail
    stateless = [_progress(b, [], seq=b + 1) for b in range(3)]
    assert plan_stable(h, stateless).status.value == "not-applicable"
    old = [{"seq": 1, "kind": "spark.progress", "attempt": 1, "batch": 0}]  # before the recorder kept them
    assert plan_stable(h, old).status.value == "not-applicable"
    assert plan_stable(h, []).status.value == "not-applicable"
    # an idle re-report of the same batch repeats the last execution's operators: no violation
    again = [*same, _progress(2, ["stateStoreSave", "dedupe"], seq=9)]
    assert plan_stable(h, again).status.value == "held"


def test_complete_key_unique_cases() -> None:
    rows = [{"k": "a", "n": 1}, {"k": "b", "n": 1}]
    ev = [{"seq": 1, "kind": "spark.sink_written", "attempt": 1, "batch": 0, "rows": rows}]
    assert complete_key_unique({"config": {"output_mode": "complete", "key": ["k"]}}, ev).status.value == "held"
    assert complete_key_unique({"config": {"output_mode": "update", "key": ["k"]}}, ev).status.value == \
        "not-applicable"
    assert complete_key_unique({"config": {"output_mode": "complete", "key": []}}, ev).status.value == \
        "not-applicable"
    assert complete_key_unique({"config": {"output_mode": "complete", "key": ["k"]}}, []).status.value == \
        "not-applicable"
    dup = [{"seq": 4, "kind": "spark.sink_written", "attempt": 2, "batch": 3, "rows": [*rows, {"k": "a", "n": 2}]}]
    c = complete_key_unique({"config": {"output_mode": "complete", "key": ["k"]}}, ev + dup)
    assert c.status.value == "violated" and c.offending_seq == 4 and "micro-batch 3" in c.detail


def test_tampers_refuse_traces_without_what_they_change() -> None:
    from rollcheck.pyimpl.errors import InvalidInputError

    trace = read_trace(DATA / "wordcount-sink.jsonl")
    for how in PLAN_TAMPERS:
        with pytest.raises(InvalidInputError):
            PLAN_TAMPERS[how](trace)
