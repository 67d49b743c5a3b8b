"""Unit and end-to-end tests of the SPATE elastic upstream backup model (rollcheck.pyimpl.elastic)."""

from __future__ import annotations

import json

import pytest

from rollcheck.properties.mutants_elastic import BROKEN_RULES, WITNESSES
from rollcheck.pyimpl.elastic import (
    Config,
    Event,
    Failure,
    OutputQueue,
    Partition,
    ScaleEvent,
    Simulator,
    Slice,
    SliceRecord,
    config_from_dict,
    config_to_dict,
    contiguous_ranges,
    failure_sweep,
    l1_ready,
    load_config,
    merge_records,
    merge_slices,
    queue_bound,
    reference_output,
    reference_streams,
    repartition_keyed,
    retention_rounds,
    simulate,
    split_records,
    split_slice,
)
from rollcheck.pyimpl.errors import InvalidInputError

# ---------------------------------------------------------------- slices


def test_split_then_merge_gives_back_the_slice_per_key():
    s = Slice(4, (Event(0, 1, 1), Event(3, 1, 2), Event(0, 2, 3), Event(5, 1, 4), Event(3, 2, 5)))
    owner = {k: ("a" if k < 3 else "b") for k in range(6)}
    parts = split_slice(s, owner)
    assert parts["a"].events == (Event(0, 1, 1), Event(0, 2, 3))
    assert parts["b"].events == (Event(3, 1, 2), Event(5, 1, 4), Event(3, 2, 5))
    (merged,) = merge_slices(parts.values())
    assert merged.k == 4 and sorted(merged.events) == sorted(s.events)
    assert merged.last_seq() == s.last_seq() == {0: 2, 3: 2, 5: 1}


def test_records_split_and_merge_keep_the_checkpoint_flag_conservative():
    recs = [SliceRecord(1, {0: 2, 1: 1}, {0: 2}, True), SliceRecord(2, {1: 3}, {1: 3}, False)]
    a, b = split_records(recs, [0]), split_records(recs, [1])
    assert [r.k for r in a] == [1] and [r.k for r in b] == [1, 2]
    merged = merge_records([*a, *b])
    assert merged[0].su == {0: 2, 1: 1} and merged[0].checkpointed
    other = merge_records([SliceRecord(1, {0: 1}, {}, True), SliceRecord(1, {1: 1}, {}, False)])
    assert other == [SliceRecord(1, {0: 1, 1: 1}, {}, False)]


def test_queue_trim_is_per_key_and_drops_empty_slices():
    q = OutputQueue()
    q.append(Slice(1, (Event(0, 1, 0), Event(1, 1, 0))))
    q.append(Slice(2, (Event(0, 2, 0),)))
    q.append(Slice(3, ()))
    assert len(q) == 3 and len(q.slices) == 2
    assert q.trim({1: 5}) == 1
    assert [s.k for s in q.slices] == [1, 2]
    assert q.trim({0: 1}) == 1 and [s.k for s in q.slices] == [2]


def test_l1_waits_for_checkpoint_and_successor_ack():
    rec = SliceRecord(3, {0: 4}, {0: 4}, checkpointed=False)
    assert not l1_ready(rec, True, {0: 4})  # stateful, no checkpoint yet
    assert l1_ready(rec, False, {0: 4})  # stateless: successor ack suffices
    assert not l1_ready(rec, False, {0: 3})  # successor has not received seq 4
    assert l1_ready(SliceRecord(3, {0: 4}, {0: 4}, True), True, {0: 4})
    assert l1_ready(SliceRecord(3, {0: 4}, {}, False), False, {})  # filtered: nothing to ack


# ---------------------------------------------------------------- partitions


def test_contiguous_ranges_cover_every_key_once():
    for keys in range(1, 9):
        for g in range(1, keys + 1):
            rs = contiguous_ranges(keys, g)
            assert [k for r in rs for k in r] == list(range(keys)) and all(len(r) for r in rs)
    with pytest.raises(InvalidInputError):
        contiguous_ranges(3, 4)


def test_repartition_moves_each_key_to_its_new_owner():
    out = repartition_keyed([{0: 1, 1: 2}, {2: 3, 3: 4}], {0: "x", 1: "y", 2: "y", 3: "z"})
    assert out == {"x": {0: 1}, "y": {1: 2, 2: 3}, "z": {3: 4}}
    assert Partition(("x", "y", "y", "z")).keys_of("y") == frozenset({1, 2})


# ---------------------------------------------------------------- simulator


def test_reference_streams_follow_the_operator_definitions():
    cfg = Config(keys=2, ops=("affine", "sum"), rounds=4, max_rate=3, seed=5)
    src, aff, tot = reference_streams(cfg)
    for k in src:
        assert [e.seq for e in src[k]] == list(range(1, len(src[k]) + 1))
        assert [e.value for e in aff[k]] == [3 * e.value + 1 for e in src[k]]
        running = 0
        for a, t in zip(aff[k], tot[k], strict=True):
            running += a.value
            assert t.value == running and t.seq == a.seq


def test_same_seed_same_run_and_other_seed_other_workload():
    cfg = Config(keys=4, ops=("affine", "sum"), parallelism=(2, 2), rounds=8, seed=11,
                 scaling=(ScaleEvent(3, 2, 4), ScaleEvent(6, 1, 1)))
    a = simulate(cfg, failure=Failure(40, 2, 3))
    b = simulate(cfg, failure=Failure(40, 2, 3))
    assert a.sink == b.sink and a.steps == b.steps and a.recoveries == b.recoveries
    assert reference_output(cfg) != reference_output(Config(**{**cfg.__dict__, "seed": 12}))


def test_failure_free_run_with_scale_up_and_down_matches_reference():
    cfg = Config(keys=6, ops=("filter", "sum", "count"), parallelism=(1, 2, 3), rounds=12,
                 max_rate=5, ack_interval=2, checkpoint_interval=3, seed=2,
                 scaling=(ScaleEvent(2, 2, 5), ScaleEvent(5, 3, 1), ScaleEvent(7, 2, 1), ScaleEvent(9, 1, 6)))
    res = simulate(cfg, check_trim=True)
    assert res.output_by_key() == reference_output(cfg)
    assert not res.violations
    assert [s["level"] for s in res.scalings] == [2, 3, 2, 1]
    assert all(res.max_queue[lv] <= queue_bound(cfg, lv) for lv in range(4))


def test_every_single_failure_after_scaling_is_exactly_once():
    cfg = Config(keys=4, ops=("affine", "sum"), parallelism=(1, 2), rounds=7, max_rate=3,
                 ack_interval=1, checkpoint_interval=3, seed=7,
                 scaling=(ScaleEvent(3, 2, 3), ScaleEvent(5, 1, 2)))
    sweep = failure_sweep(cfg)
    assert sweep.runs > 3 * sweep.failure_free_steps
    assert sweep.mismatches == [], sweep.first_difference


def test_recovery_restores_checkpoint_and_replays_upstream():
    cfg = Config(keys=1, ops=("sum",), rounds=6, max_rate=2, ack_interval=1, checkpoint_interval=3, seed=4)
    clean = simulate(cfg)
    hit = simulate(cfg, failure=Failure(40, 1, 0))  # round 5, after the checkpoint of round 3
    (rec,) = hit.recoveries
    assert rec["checkpoint_round"] == 3 and rec["replayed_events"] > 0
    assert hit.output_by_key() == clean.output_by_key() == reference_output(cfg)
    assert hit.duplicates_dropped > 0  # replayed outputs the sink already had


@pytest.mark.parametrize("name", sorted(WITNESSES))
def test_witness_breaks_mutant_but_not_reference(name):
    cfg, failure = WITNESSES[name]
    want = reference_output(cfg)
    assert simulate(cfg, failure=failure).output_by_key() == want
    assert simulate(cfg, failure=failure, rules=BROKEN_RULES[name]).output_by_key() != want


def test_l1_before_checkpoint_trims_what_recovery_needs():
    cfg, _ = WITNESSES["elastic-l1-before-checkpoint"]
    assert not simulate(cfg, check_trim=True).violations
    bad = simulate(cfg, check_trim=True, rules=BROKEN_RULES["elastic-l1-before-checkpoint"])
    assert bad.violations and "trimmed from" in bad.violations[0]


def test_split_loses_key_changes_failure_free_output():
    cfg = Config(keys=3, ops=("count",), parallelism=(1,), rounds=3, max_rate=1, seed=0,
                 checkpoint_interval=1, scaling=(ScaleEvent(3, 1, 2),))
    assert simulate(cfg).output_by_key() == reference_output(cfg)
    assert simulate(cfg, rules=BROKEN_RULES["elastic-split-loses-key"]).output_by_key() != reference_output(cfg)


def test_queue_bound_formula_and_its_tightness():
    assert retention_rounds(1, 1, "sink") == 2
    assert retention_rounds(3, 1, "stateless") == 5
    assert retention_rounds(1, 4, "stateful") == 5
    for a in range(1, 4):
        for c in range(1, 5):
            assert retention_rounds(a, c, "stateful") <= a + max(c, 2)
    # at a constant full rate every queue reaches its bound exactly: the bound is tight
    for a in range(1, 4):
        for c in range(1, 5):
            for ops in (("sum",), ("affine", "count")):
                cfg = Config(keys=3, ops=ops, rounds=30, max_rate=2, ack_interval=a, checkpoint_interval=c,
                             workload="constant")
                res = simulate(cfg)
                assert [res.max_queue[lv] for lv in range(len(ops) + 1)] == \
                    [queue_bound(cfg, lv) for lv in range(len(ops) + 1)], (a, c, ops)
    cfg = Config(keys=1, ops=("sum",), rounds=12, max_rate=1, ack_interval=2, checkpoint_interval=3,
                 workload="constant")
    assert simulate(cfg, rules=BROKEN_RULES["elastic-lazy-l1"]).max_queue[0] > queue_bound(cfg, 0)


# ---------------------------------------------------------------- bad input and documents


@pytest.mark.parametrize("field,value,where", [
    ("keys", 0, "keys"),
    ("ops", ("sum", "nope"), "ops[1]"),
    ("parallelism", (1, 1, 1), "parallelism"),
    ("parallelism", (9, 1), "parallelism[0]"),
    ("ack_interval", 0, "ack_interval"),
    ("scaling", (ScaleEvent(2, 3, 1),), "scaling[0].op"),
    ("scaling", (ScaleEvent(2, 1, 0),), "scaling[0].parallelism"),
])
def test_invalid_config_names_the_field(field, value, where):
    cfg = Config(**{**Config(keys=4, ops=("affine", "sum"), parallelism=(1, 1)).__dict__, field: value})
    with pytest.raises(InvalidInputError) as ei:
        cfg.validate()
    assert ei.value.location == where


def test_invalid_failure_is_rejected():
    with pytest.raises(InvalidInputError, match="failure.key"):
        Simulator(Config(keys=2), failure=Failure(3, 1, 2))


def test_document_round_trip_and_errors(tmp_path):
    cfg = Config(keys=3, ops=("sum",), parallelism=(2,), scaling=(ScaleEvent(2, 1, 1),))
    doc = config_to_dict(cfg, Failure(7, 1, 2))
    path = tmp_path / "c.json"
    path.write_text(json.dumps(doc))
    assert load_config(path) == (cfg, Failure(7, 1, 2))
    bad = {**doc, "scaling": [{"round": 2, "op": "x", "parallelism": 1}]}
    with pytest.raises(InvalidInputError, match=r"scaling\[0\]\.op"):
        config_from_dict(bad)
    with pytest.raises(InvalidInputError, match="failure.op"):
        config_from_dict({**doc, "failure": {"step": 1, "op": 5, "key": 0}})
    with pytest.raises(InvalidInputError, match="format"):
        config_from_dict({**doc, "format": "x"})
    (tmp_path / "broken.json").write_text("{")
    with pytest.raises(InvalidInputError, match="broken.json"):
        load_config(tmp_path / "broken.json")


def test_parallel_recovery_splits_the_failed_task_and_stays_exactly_once():
    cfg = Config(keys=6, ops=("affine", "sum"), parallelism=(1, 1), rounds=8, max_rate=4,
                 checkpoint_interval=3, seed=9, scaling=(ScaleEvent(3, 1, 2),))
    clean = simulate(cfg)
    hit = simulate(cfg, failure=Failure(clean.steps // 2, 2, 0, parallel=3))
    (rec,) = hit.recoveries
    assert rec["task"] != rec["recovered_by"][0] and len(rec["recovered_by"]) == 3
    assert hit.output_by_key() == reference_output(cfg)
    sweep = failure_sweep(cfg, stride=2, parallel=2)
    assert sweep.mismatches == [], sweep.first_difference
