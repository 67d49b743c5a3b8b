"""Unit and CLI tests of rollcheck.pyimpl.spans (Falkirk Wheel spans)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rollcheck.properties.spans_props import brute_force, greatest_by_z3
from rollcheck.pyimpl.errors import InvalidInputError
from rollcheck.pyimpl.spans import (
    TOP,
    load_system,
    solve,
    solve_literal,
    system_from_dict,
    system_to_dict,
)
from rollcheck.pyimpl.spans import times as T
from rollcheck.pyimpl.spans.builder import EpochEdge, EpochProcessor, epoch_system, resume_epoch
from rollcheck.pyimpl.spans.executor import (
    EXAMPLES,
    Counter_,
    Dataflow,
    Edge,
    Run,
    Sink,
    Source,
    exactly_once,
    example,
    failure_experiment,
    failure_sweep,
    recover,
    run_to_end,
)
from rollcheck.pyimpl.spans.fixpoint import compile_system, run_rounds, run_worklist, solve_levels
from rollcheck.pyimpl.spans.watermark import low_watermark

EXAMPLE = {
    "format": "rollcheck.spans/1",
    "processors": {
        "p": {"chain": [[], ["e1:1"], ["e1:1", "e1:2"]], "top": ["e1:1", "e1:2", "e1:3"]},
        "q": {"chain": [[], ["e2:1"]]},
    },
    "edges": [
        {"name": "e2", "src": "p", "dst": "q",
         "discarded": [[], ["e2:1"], ["e2:1", "e2:2"]],
         "discarded_top": ["e2:1", "e2:2", "e2:3"],
         "processed": ["e2:1", "e2:2"],
         "phi": [[], ["e2:1"], ["e2:1", "e2:2"]]},
    ],
}

# A bridge that uses per-epoch counts (3 messages in epoch 0, 1 in epoch 1) instead of running
# totals: φ(c_1) = {c:1..3} but φ(c_2) = {c:1}. Not monotone: no greatest solution exists.
NON_MONOTONE = {
    "format": "rollcheck.spans/1",
    "processors": {
        "bridge": {"chain": [[], [0], [0, 1]]},
        "count": {"chain": [[], [["c", 1], ["c", 2], ["c", 3]]],
                  "top": [["c", 1], ["c", 2], ["c", 3], ["c", 4]]},
    },
    "edges": [
        {"name": "c", "src": "bridge", "dst": "count", "discarded": [[], [], []],
         "processed": [["c", 1], ["c", 2], ["c", 3], ["c", 4]],
         "phi": [[], [["c", 1], ["c", 2], ["c", 3]], [["c", 1]]]},
    ],
}


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rollcheck.cli.main", *args],
                          capture_output=True, text=True, timeout=120)


def _write(tmp_path: Path, doc: object, name: str = "s.json") -> str:
    p = tmp_path / name
    p.write_text(json.dumps(doc))
    return str(p)


def test_contract_example_cli(tmp_path: Path) -> None:
    r = _cli("spans", _write(tmp_path, EXAMPLE), "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == {"spans": {"p": 1, "q": 1}}


@pytest.mark.parametrize("mutate, needle", [
    (lambda d: d["processors"]["p"].__setitem__("chain", [[], ["e1:1"], ["e1:1"]]), "strictly increasing"),
    (lambda d: d["edges"][0].__setitem__("phi", [[], ["e2:1"]]), "phi has 2 entries"),
    (lambda d: d["edges"][0].__setitem__("dst", "zz"), "unknown processor 'zz'"),
    (lambda d: d["edges"][0].__setitem__("phi", [[], ["e2:1", "e2:2"], ["e2:1"]]), "not monotone"),
    (lambda d: d["edges"][0].pop("discarded_top"), "discarded_top is required"),
    (lambda d: d["processors"]["q"].__setitem__("chain", [["x"]]), "c_0 must be the empty span"),
    (lambda d: d.__setitem__("format", "nope"), "format"),
])
def test_invalid_exit_2_names_the_culprit(tmp_path: Path, mutate, needle: str) -> None:
    doc = json.loads(json.dumps(EXAMPLE))
    mutate(doc)
    r = _cli("spans", _write(tmp_path, doc), "--json")
    assert r.returncode == 2
    assert needle in r.stderr
    assert "Traceback" not in r.stderr and r.stdout == ""
    if needle in ("phi has 2 entries", "not monotone", "unknown processor 'zz'"):
        assert "e2" in r.stderr


def test_not_json_and_missing_file(tmp_path: Path) -> None:
    bad = tmp_path / "b.json"
    bad.write_text("{")
    assert _cli("spans", str(bad), "--json").returncode == 2
    assert _cli("spans", str(tmp_path / "missing.json"), "--json").returncode == 2


def test_normalise_phi(tmp_path: Path) -> None:
    doc = json.loads(json.dumps(EXAMPLE))
    doc["edges"][0]["phi"] = [[], ["e2:1", "e2:2"], ["e2:1"]]
    r = _cli("spans", _write(tmp_path, doc), "--json", "--normalise-phi")
    assert r.returncode == 0, r.stderr
    s = system_from_dict(doc, phi="normalise")
    assert s.edges[0].phi[2] == frozenset({"e2:1", "e2:2"})
    assert json.loads(r.stdout)["spans"] == solve(s)


def test_roundtrip_and_load(tmp_path: Path) -> None:
    s = system_from_dict(EXAMPLE)
    assert system_from_dict(system_to_dict(s)) == s
    assert load_system(_write(tmp_path, EXAMPLE)) == s


def test_top_top_exemption() -> None:
    s = system_from_dict(EXAMPLE)
    e = s.edges[0]
    q_live = system_from_dict({**EXAMPLE, "processors": {**EXAMPLE["processors"],
                              "q": {"chain": [[], ["e2:1"]], "top": ["e2:1", "e2:2"]}}})
    assert q_live.c1_holds(q_live.edges[0], 3, 2)          # both at ⊤: exempt
    assert not s.c1_holds(e, 3, 1)                          # T_D(⊤_p) ⊄ c_1 of q
    assert solve(q_live) == {"p": TOP, "q": TOP}


def test_non_monotone_phi_breaks_maximality() -> None:
    with pytest.raises(InvalidInputError, match="not monotone"):
        system_from_dict(NON_MONOTONE)
    s = system_from_dict(NON_MONOTONE, phi="keep")
    with pytest.raises(InvalidInputError):
        solve(s)
    lit = solve_literal(s)
    assert lit == {"bridge": 2, "count": 0}
    feasible = brute_force(s)
    assert {"bridge": 1, "count": 1} in feasible             # count could keep its checkpoint
    assert not any(all(f[n] >= lit[n] for n in lit) and f != lit for f in feasible)
    assert any(f["count"] > lit["count"] for f in feasible)   # so the literal result is not greatest
    norm = system_from_dict(NON_MONOTONE, phi="normalise")
    got = solve(norm)
    lv = norm.levels_from_labels(got)
    assert all(all(f[n] <= lv[n] for n in lv) for f in brute_force(norm))


def test_z3_encoding_rejects_a_non_greatest_result() -> None:
    s = system_from_dict(EXAMPLE)
    assert greatest_by_z3(s, {"p": 1, "q": 1}) == (True, False)
    assert greatest_by_z3(s, {"p": 0, "q": 0}) == (True, True)
    assert greatest_by_z3(s, {"p": 3, "q": 1})[0] is False


def test_orders_and_counts() -> None:
    s = system_from_dict(EXAMPLE)
    answers = {o: solve(s, o, seed=7) for o in ("fifo", "lifo", "random", "rounds")}
    assert len({json.dumps(a, sort_keys=True) for a in answers.values()}) == 1
    r = solve_levels(s)
    assert r.decreases <= sum(p.top_level for p in s.processors)


def test_worklist_beats_rounds_on_domino() -> None:
    from rollcheck.pyimpl.spans.fixpoint import domino_chain

    small, big = domino_chain(40), domino_chain(80)
    w1, w2 = run_worklist(small), run_worklist(big)
    r1, r2 = run_rounds(small), run_rounds(big)
    assert w1.levels == r1.levels and w2.levels == r2.levels
    assert all(x == 0 for x in w2.levels)
    assert r2.examinations / r1.examinations > 3.5      # quadratic
    assert w2.examinations / w1.examinations < 2.5      # linear


def test_frontiers_exact_sets() -> None:
    u = [("e", n) for n in range(1, 5)] + [("f", 1)]
    assert T.SeqFrontier({"e": 2}).restrict(u) == {("e", 1), ("e", 2)}
    assert T.EpochFrontier(-1).restrict(range(3)) == frozenset()
    lf = T.LoopFrontier({0: T.ALL, 1: 0})
    assert lf.complete_epochs([0, 1]) == {0}
    assert T.LoopExit()(lf, [0, 1]) == {0}
    top = T.concrete_top(T.SeqFrontier({"e": 1}), [("e", 2)])
    assert top.restrict(u) == {("e", 1), ("e", 2)}


def test_transformers_monotone_except_per_epoch_bridge() -> None:
    spans = [T.EpochFrontier(e) for e in range(-1, 3)]
    uni = [("c", n) for n in range(1, 8)]
    for tr in (T.Identity(), T.Bridge("c", (3, 1, 2)), T.Conservative()):
        outs = [tr(s, uni if isinstance(tr, T.Bridge) else range(3)) for s in spans]
        assert all(a <= b for a, b in zip(outs, outs[1:], strict=False))
    bad = T.BridgePerEpoch("c", (3, 1, 2))
    outs = [bad(s, uni) for s in spans]
    assert not all(a <= b for a, b in zip(outs, outs[1:], strict=False))
    loops = [T.LoopFrontier({0: c}) for c in range(-1, 3)]
    luni = [(0, c) for c in range(5)]
    for tr in (T.LoopFeedback(), T.Identity()):
        outs = [tr(s, luni) for s in loops]
        assert all(a <= b for a, b in zip(outs, outs[1:], strict=False))
    assert T.LoopEntry()(T.EpochFrontier(0), [(0, 0), (0, 3), (1, 0)]) == {(0, 0), (0, 3)}


def test_epoch_system_and_resume() -> None:
    s = epoch_system({"src": EpochProcessor((1, 2), processed=3), "agg": EpochProcessor((1,), None)},
                     [EpochEdge("a", "src", "agg", sent=3, logged=False, received=3)])
    spans = solve(s)
    assert spans == {"src": 1, "agg": 1}
    assert resume_epoch(s, spans, "agg") == 2 and resume_epoch(s, spans, "src") == 2
    with pytest.raises(InvalidInputError, match="strictly increase"):
        epoch_system({"x": EpochProcessor((2, 1), 3)}, [])
    with pytest.raises(InvalidInputError, match="unknown processor"):
        epoch_system({"x": EpochProcessor((), 3)}, [EpochEdge("a", "x", "y")])


def test_watermark_never_above_a_failure() -> None:
    s = system_from_dict(EXAMPLE)
    wm = low_watermark(s)
    lv = s.levels_from_labels(solve(s))
    assert all(lv[n] >= wm[n] for n in wm)


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_examples_exactly_once(name: str) -> None:
    rolled = 0
    for seed in (0, 1):
        df = example(name, seed)
        n = run_to_end(Run.start(df, seed)).steps
        for fail_at in (n // 4, n // 2, 3 * n // 4):
            for p in df.ops:
                out = failure_experiment(lambda s=seed: example(name, s), seed, fail_at, {p}, track_watermark=True)
                assert out.ok, (name, seed, fail_at, p, out.detail)
                rolled += sum(v != TOP for v in out.levels.values()) > 1
    assert rolled > 0  # the cases really roll back more than the failed processor


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_failure_sweep_equals_failure_experiment(name: str) -> None:
    # the shared failure-free run and the copied recorded run give exactly the outcomes of
    # separate failure_experiment calls (levels, lost messages, verdict, detail, span system)
    for seed, track in ((0, True), (3, False)):
        df = example(name, seed)
        n = run_to_end(Run.start(df, seed)).steps
        points = [0, n // 3, n // 3, 2 * n // 3, n, n + 5]
        procs = sorted(df.ops)
        failed_sets = [{p} for p in procs] + [{procs[0], procs[-1]}, set(procs)]
        got = list(failure_sweep(lambda s=seed: example(name, s), seed, points, failed_sets, track_watermark=track))
        assert [(t, f) for t, f, _o in got] == [(t, f) for t in points for f in failed_sets]
        for fail_at, failed, out in got:
            want = failure_experiment(lambda s=seed: example(name, s), seed, fail_at, failed, track_watermark=track)
            assert (out.levels, out.lost, out.ok, out.detail) == (want.levels, want.lost, want.ok, want.detail)
            assert out.system is not None and want.system is not None
            assert system_to_dict(out.system) == system_to_dict(want.system)


def test_failure_sweep_reports_a_wrong_top() -> None:
    # the sweep shows the failure of ⊤ = all times like failure_experiment does
    got = [(t, o.ok, o.detail) for t, _f, o in failure_sweep(_inflight_dataflow, 0, [0, 1, 2, 3], [{"a"}],
                                                             top_all=True)]
    want = [(t, o.ok, o.detail) for t in (0, 1, 2, 3)
            for o in [failure_experiment(_inflight_dataflow, 0, t, {"a"}, top_all=True)]]
    assert got == want and not all(ok for _t, ok, _d in got)


def _inflight_dataflow() -> Dataflow:
    """src -> a -> b with an unlogged seq edge a -> b; a checkpoints after every delivery."""
    ops = {"src": Source({0: [1, 2, 3]}, seq_out=True), "a": Counter_(), "b": Sink(domain="seq")}
    edges = [Edge("e0", "src", "a", logged=True, seq=True, phi="recorded"),
             Edge("e1", "a", "b", logged=False, seq=True, phi="recorded")]
    return Dataflow(ops, edges, {"a": ("seq", 1), "b": ("seq", 1)})


def test_top_all_times_loses_an_inflight_unlogged_message() -> None:
    # a fails after checkpointing the event that sent m, before m reaches b: with the concrete
    # ⊤ of b, C1 forces a below that checkpoint (m is re-sent); with ⊤ = all times, m is lost
    for top_all, expect_ok in ((False, True), (True, False)):
        r = Run.start(_inflight_dataflow(), 0)
        while not r.chan["e1"]:
            r.step()
        assert len(r.chain["a"]) == 2, "a checkpointed the event that sent the in-flight message"
        r.checkpointing = False
        levels, lost, s = recover(r, {"a"}, top_all=top_all)
        assert s.labels(levels)["b"] == TOP
        assert s.labels(levels)["a"] == (1 if top_all else 0)
        run_to_end(r)
        ref = run_to_end(Run.start(_inflight_dataflow(), 0))
        assert (not lost and exactly_once(r, ref) is None) == expect_ok
        if top_all:
            assert lost and lost[0][0] == "e1"


def test_compiled_need_tables() -> None:
    c = compile_system(system_from_dict(EXAMPLE))
    assert c.watchers == [[1], [0]]
    assert c.downstream == [[1], []]


def test_frontier_form_equals_explicit_sets() -> None:
    from rollcheck.pyimpl.spans.frontier import compile_seq, random_seq_system, run_bulk, run_flat

    differs_from_top = 0
    for seed in range(60):
        s = random_seq_system(12, cyclic=seed % 2 == 0, seed=seed, K=3, failed=0.3, n_procs=4,
                              jitter=0.9 if seed % 3 else 0.0, logged=0.5)
        ref = solve_levels(s.to_span_system()).levels
        fc = compile_seq(s)
        assert run_flat(fc)[0] == ref
        assert run_flat(fc, "rounds")[0] == ref
        assert run_bulk(fc)[0].tolist() == ref
        differs_from_top += ref != s.top_levels().tolist()
    assert differs_from_top > 10


def test_watermark_acknowledges_inputs_and_releases_outputs() -> None:
    r = Run.start(example("epoch", 1), 1)
    r.track_watermark = True
    run_to_end(r)
    assert r.acked["s1"] == {0, 1, 2} and r.acked["s2"] == {0, 1, 2}
    assert r.released["out"] == {0, 1, 2}
    # part way through, only what the watermark passed is acknowledged, and a failure of every
    # processor still never needs an acknowledged batch nor rolls back a released output
    r = Run.start(example("epoch", 1), 1)
    r.track_watermark = True
    while not r.acked["s1"] and r.step():
        pass
    assert r.acked["s1"] and r.acked["s1"] < {0, 1, 2}
    r.checkpointing = False
    recover(r, set(r.df.ops))          # raises if an acked batch or released output is lost
    run_to_end(r)
    assert exactly_once(r, run_to_end(Run.start(example("epoch", 1), 1))) is None


def test_sort_key_is_the_json_text_of_the_time() -> None:
    # system_to_dict orders every set by the JSON text of its times; the direct key must agree
    import random

    from rollcheck.pyimpl.spans.system import _sort_key, time_to_json

    rng = random.Random(5)
    atoms: list = ["a", "é", 'q"uote', "\n", "\u2028", "", 0, -3, 10**30, True, False, 1.5, None]

    def draw(depth: int = 0) -> object:
        if depth < 3 and rng.random() < 0.3:
            return tuple(draw(depth + 1) for _ in range(rng.randrange(4)))
        return rng.choice(atoms)

    times = [draw() for _ in range(2000)]
    assert any(isinstance(t, tuple) and t for t in times)
    for t in times:
        assert _sort_key(t) == json.dumps(time_to_json(t), sort_keys=True), t


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_run_epoch_caches_match_a_fresh_scan(name: str) -> None:
    # the executor keeps the largest epoch seen and the last checkpointed epoch per processor;
    # at every step, and after a recovery replaced the lists, they equal a scan from scratch
    from rollcheck.pyimpl.spans.executor.run import _epoch_of

    def check(r: Run) -> None:
        for p in r.df.ops:
            seen = [_epoch_of(ev.time) for ev in r.history[p]]
            assert r._max_epoch_seen(p) == (max(seen) if seen else None)
            assert r._last_epoch(p) == Run._last_epoch_of(r.pending_ckpt[p] + r.chain[p])

    for seed in (0, 1):
        r = Run.start(example(name, seed), seed)
        check(r)
        while r.step():
            check(r)
            if r.steps == 7:
                r.checkpointing = False
                recover(r, {sorted(r.df.ops)[1]})
                check(r)
        check(r)
