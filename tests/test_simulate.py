"""The dataflow simulator: topologies, determinism, recovery, metrics, sweep, CLI (``specs/simulate.md``)."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest

from rollcheck.cli.main import main
from rollcheck.pyimpl.consistency import is_consistent, orphans
from rollcheck.pyimpl.errors import InvalidInputError
from rollcheck.pyimpl.patternio import load_pattern
from rollcheck.pyimpl.recovery import recovery_line
from rollcheck.pyimpl.simulate import (
    Connection,
    Operator,
    SimConfig,
    Topology,
    Variant,
    lost_from_pattern,
    run_engine,
    semantics,
    simulate,
    workload,
)
from rollcheck.pyimpl.simulate.sweep import sweep, to_csv, to_markdown
from rollcheck.pyimpl.zpaths import useless_checkpoints

DATA = Path(__file__).parent / "data"


# --------------------------------------------------------------------------- topology
def test_pipeline_and_shuffle_channels():
    t = workload("wordcount", 2)
    assert t.process_names == ("source.0", "source.1", "split.0", "split.1", "count.0", "count.1", "sink.0")
    pairs = [(t.process_names[c.src], t.process_names[c.dst]) for c in t.channels]
    assert ("source.0", "split.0") in pairs and ("source.0", "split.1") not in pairs  # pipeline
    assert {("split.0", "count.0"), ("split.0", "count.1"), ("split.1", "count.0")} <= set(pairs)  # shuffle
    assert ("count.1", "sink.0") in pairs
    assert not t.is_cyclic and workload("nhop", 3).is_cyclic
    back = [(t2.process_names[c.src], t2.process_names[c.dst]) for t2 in [workload("nhop", 2)] for c in t2.channels
            if t2.connections[c.connection].kind == "shuffle"]
    assert sorted(back) == [("map1.0", "map0.0"), ("map1.0", "map0.1"), ("map1.1", "map0.0"), ("map1.1", "map0.1")]


@pytest.mark.parametrize("ops, conns, where", [
    ([Operator("s", "source", 2), Operator("f", "filter", 3)], [Connection("s", "f")], "connections[0]"),
    ([Operator("s", "source", 1), Operator("f", "nope", 1)], [], "operators[1]"),
    ([Operator("s", "source", 0)], [], "operators[0]"),
    ([Operator("s", "source", 1), Operator("f", "filter", 1)], [Connection("f", "s")], "connections[0]"),
    ([Operator("s", "source", 1)], [Connection("s", "x")], "connections[0]"),
    ([Operator("f", "filter", 1)], [], "operators"),
])
def test_bad_topologies_are_rejected(ops, conns, where):
    with pytest.raises(InvalidInputError) as e:
        Topology("t", tuple(ops), tuple(conns))
    assert e.value.location == where


@pytest.mark.parametrize("kw, flag", [
    ({"workload": "nope"}, "--workload"), ({"protocol": "nope"}, None), ({"interval": 0.0}, "--interval"),
    ({"interval": float("nan")}, "--interval"), ({"records": 0}, "--records"), ({"parallelism": 99}, "--parallelism"),
    ({"fail": "sink.7", "fail_at": 3.0}, "--fail"), ({"fail": "sink"}, "--fail"),
    ({"fail": "sink", "fail_at": -1.0}, "--fail-at"), ({"delay": -1.0}, "--delay"),
])
def test_out_of_range_parameters(kw, flag):
    with pytest.raises(InvalidInputError) as e:
        SimConfig(**kw).validate()
    if flag:
        assert e.value.location == flag


# --------------------------------------------------------------------------- engine
def test_same_seed_same_run_and_different_seed_different_run():
    cfg = SimConfig("wordcount", "hmnr", interval=3.0, records=30, seed=11)
    a, b = run_engine(cfg), run_engine(cfg)
    assert a.pattern == b.pattern and a.checkpoints == b.checkpoints and a.end_time == b.end_time
    c = run_engine(replace(cfg, seed=12))
    assert c.pattern != a.pattern


def test_failure_free_outputs_are_the_whole_input():
    r = simulate(SimConfig("nexmark", "uc", records=40, parallelism=2, seed=3))
    assert sum(r.outputs.values()) == sum(1 for g in range(80) if ((g * 2654435761) % 1000) % 2 == 0)
    r = simulate(SimConfig("wordcount", "bcs", records=30, parallelism=2, seed=3))
    assert sum(r.outputs.values()) == sum(1 + g % 3 for g in range(60))
    assert r.metrics["verdict"] == "exactly-once"


def test_forced_checkpoints_are_marked_in_the_pattern():
    r = run_engine(SimConfig("wordcount", "bcs", interval=2.0, records=40, seed=5))
    p = r.pattern
    forced = sum(p.is_forced(i, x) for i in range(p.n) for x in range(1, p.last_index(i) + 1))
    assert forced == r.checkpoints["forced"] > 0
    assert sum(p.last_indices) == r.checkpoints["regular"] + r.checkpoints["forced"]


def test_uc_makes_useless_checkpoints_on_the_cycle_hmnr_does_not():
    cfg = SimConfig("nhop", "uc", interval=3.0, records=40, seed=1)
    assert useless_checkpoints(run_engine(cfg).pattern)
    assert not useless_checkpoints(run_engine(replace(cfg, protocol="hmnr")).pattern)


def test_aligned_cl_deadlocks_on_the_cycle_and_reports_the_stuck_operators():
    r = simulate(SimConfig("nhop", "cl-aligned", interval=2.0, records=20, parallelism=2))
    assert r.deadlock is not None and r.metrics["verdict"] == "deadlock"
    assert r.deadlock.stuck == ("map0.0", "map0.1")
    assert r.deadlock.waiting["map0.1"] == ("source.1->map0.1",)
    assert not r.snapshots


def test_aligned_snapshots_have_empty_channels_unaligned_record_them():
    a = run_engine(SimConfig("wordcount", "cl-aligned", interval=2.0, records=30, seed=2))
    u = run_engine(SimConfig("wordcount", "cl-unaligned", interval=2.0, records=30, seed=2))
    assert a.snapshots and u.snapshots
    for s in a.snapshots:
        assert is_consistent(a.pattern, s.cut) and not any(s.recorded.values())
    assert any(s.recorded for s in u.snapshots)
    for s in u.snapshots:
        assert not orphans(u.pattern, s.cut)


# --------------------------------------------------------------------------- recovery
def test_recovery_uses_the_lead_recovery_line():
    cfg = SimConfig("nhop", "hmnr", interval=3.0, records=30, seed=4, fail="map1.1", fail_at=12.0)
    r = simulate(cfg)
    rec = r.recovery
    assert rec.line == recovery_line(rec.pattern, [rec.failed], virtual=True)
    assert r.metrics["rollback_distance"] == sum(rec.line.distance)
    r2 = simulate(replace(cfg, virtual=False))
    assert len(r2.recovery.line.rolled_back) == r2.topology.n


def test_volatile_logs_lose_exactly_what_the_pattern_predicts():
    seen_loss = False
    for seed in range(12):
        cfg = SimConfig("wordcount", "uc", interval=4.0, records=25, seed=seed, fail="split.0", fail_at=9.0,
                        virtual=False, persistent_logs=False)
        r = simulate(cfg)
        rec = r.recovery
        assert rec.lost == lost_from_pattern(rec.pattern, rec.line, rec.failed)
        assert r.metrics["verdict"] in (("exactly-once",) if rec.lost == 0 else ("at-most-once", "exactly-once"))
        seen_loss |= rec.lost > 0
        assert simulate(replace(cfg, persistent_logs=True)).metrics["verdict"] == "exactly-once"
    assert seen_loss


def test_no_channel_clearing_is_reported_as_an_orphan():
    # found by the property sim-exactly-once against the mutant sim-no-channel-clearing
    cfg = SimConfig("nexmark", "uc", interval=1.0, records=4, parallelism=1, seed=1, fail="source.0",
                    fail_at=1.77911, virtual=False)
    assert simulate(cfg).orphans == 0
    assert simulate(replace(cfg, variant=Variant(clear_channels=False))).orphans > 0


def test_without_dedup_replays_are_applied_twice():
    # found by the property sim-dedup-once against the mutant sim-no-dedup
    cfg = SimConfig("nexmark", "uc", interval=3.5, records=4, parallelism=1, seed=1, fail="source.0",
                    fail_at=1.77911)
    assert simulate(cfg).duplicates == 0
    assert simulate(replace(cfg, variant=Variant(dedup=False))).duplicates > 0


def test_fail_after_the_end_is_bad_input():
    with pytest.raises(InvalidInputError, match="after the run ended"):
        simulate(SimConfig("nexmark", "uc", records=5, fail="filter", fail_at=10_000.0))


def test_verdicts():
    assert semantics(Counter({1: 1, 2: 1}), Counter({1: 1, 2: 1})) == "exactly-once"
    assert semantics(Counter({1: 1}), Counter({1: 2})) == "at-least-once"
    assert semantics(Counter({1: 1, 2: 1}), Counter({1: 1})) == "at-most-once"
    assert semantics(Counter({1: 1, 2: 1}), Counter({1: 2})) == "none"


# --------------------------------------------------------------------------- the kept domino example
def test_kept_uc_domino_example():
    p = load_pattern(Path(__file__).parents[1] / "rollcheck" / "data" / "uc_domino_nhop.json")
    f = p.process_index("map1.0")
    line = recovery_line(p, [f], virtual=True)
    assert [line.line[p.process_index(n)] for n in ("map0.0", "map1.0", "sink.0")] == [0, 0, 0]
    assert min(p.last_index(i) for i in range(1, p.n)) >= 2  # yet every operator had 2+ checkpoints
    assert useless_checkpoints(p)
    # the same run under HMNR: the failed operator keeps its last checkpoint
    cfg = SimConfig("nhop", "hmnr", interval=3.0, parallelism=1, records=10, delay=0.2, gap=0.5, seed=294,
                    fail="map1.0", fail_at=5.668524)
    r = simulate(cfg)
    assert r.recovery.line.line[f] == r.recovery.pattern.last_index(f) > 0
    uc = simulate(replace(cfg, protocol="uc"))
    assert uc.recovery.pattern == p and uc.metrics["domino"]


# --------------------------------------------------------------------------- sweep and CLI
def test_sweep_shape():
    rows = sweep(["wordcount", "nhop"], ["uc", "hmnr", "cl-aligned"], [4.0], seeds=[0], records=30)
    by = {(r.workload, r.protocol): r for r in rows}
    assert by[("wordcount", "hmnr")].forced > 0  # forced checkpoints even on acyclic scatter-gather
    assert by[("wordcount", "uc")].forced == 0
    assert by[("nhop", "cl-aligned")].verdict == "deadlock"
    assert by[("nhop", "uc")].useless > 0 and by[("nhop", "hmnr")].useless == 0
    md, csv_text = to_markdown(rows), to_csv(rows)
    assert "**deadlock**" in md and csv_text.splitlines()[0].startswith("workload,protocol,interval")


def test_cli_single_run_json(capsys, tmp_path):
    out = tmp_path / "p.json"
    rc = main(["simulate", "--workload", "nhop", "--protocol", "hmnr", "--interval", "4", "--records", "20",
               "--fail", "map0.1", "--fail-at", "8", "--seed", "2", "--save-pattern", str(out), "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert rc == 0 and doc["failure"] == {"process": "map0.1", "time": 8.0}
    assert doc["metrics"]["useless_checkpoints"] == 0 and doc["deadlock"] is None
    assert doc["recovery"]["line"]["map0.1"] != "volatile"
    assert load_pattern(out).processes == tuple(doc["processes"])


def test_cli_deadlock_exit_1(capsys):
    rc = main(["simulate", "--workload", "nhop", "--protocol", "cl-aligned", "--interval", "2", "--records", "10",
               "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert rc == 1 and doc["deadlock"]["stuck"] == ["map0.0", "map0.1"]


@pytest.mark.parametrize("argv", [
    ["simulate", "--workload", "x"], ["simulate", "--protocol", "hmnr-no-c1"], ["simulate", "--interval", "-2"],
    ["simulate", "--fail", "map9", "--fail-at", "2"], ["simulate", "--fail-at", "2"],
    ["simulate", "sweep", "--protocols", "uc,zz"], ["simulate", "sweep", "--intervals", "0"],
    ["simulate", "--records", "0"],
])
def test_cli_bad_input_exit_2(argv, capsys, tmp_path):
    assert main(argv + (["--out", str(tmp_path)] if "sweep" in argv else [])) == 2
    assert "error" in capsys.readouterr().err


def test_cli_sweep_writes_three_files(tmp_path, capsys):
    rc = main(["simulate", "sweep", "--workloads", "nhop", "--protocols", "uc,cl-aligned", "--intervals", "4",
               "--seeds", "1", "--records", "15", "--out", str(tmp_path), "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert rc == 0 and len(doc["rows"]) == 2
    for k in ("sweep.md", "sweep.csv", "sweep.png"):
        assert (tmp_path / k).stat().st_size > 0


def test_case_b_with_virtual_checkpoints_is_reported_not_hidden():
    # FERDiS §7.2.6 case B (only the upstream rolls back, the channel is kept): with virtual
    # checkpoints a dependent sender's in-flight messages reach a receiver that kept its state.
    # The orphan check reports them; with several inputs the re-run orders its output
    # differently and the verdict is `none` (specs/simulate.md, "Observation").
    cfg = SimConfig("wordcount", "hmnr", interval=3.0, parallelism=2, records=30, seed=19, fail="split",
                    fail_at=19.0, virtual=True)
    r = simulate(cfg)
    assert r.orphans > 0 and r.metrics["verdict"] == "none"
    exact = simulate(replace(cfg, virtual=False))
    assert exact.orphans == 0 and exact.metrics["verdict"] == "exactly-once"


# --------------------------------------------------------------------------- user protocols
USER_PROTOCOL = '''
from rollcheck.pyimpl.protocols import Protocol


class ForceEveryDelivery(Protocol):
    """Checkpoint before every delivery: no Z-path can be completed, so no useless checkpoint."""

    name = "force-every-delivery"
    zcycle_free = True

    def initial(self, i, n):
        return 0

    def on_checkpoint(self, st):
        return st

    def on_send(self, st, dst):
        return st, None

    def must_force(self, st, src, piggyback):
        return True

    def on_deliver(self, st, src, piggyback):
        return st + 1
'''


def _user_protocol(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    f = tmp_path / "userproto_sim.py"
    f.write_text(USER_PROTOCOL)
    monkeypatch.syspath_prepend(str(tmp_path))
    return f


@pytest.mark.parametrize("form", ["file", "module"])
def test_simulate_accepts_user_protocol(form: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    """``--protocol`` takes ``file.py:CLASS`` and ``MODULE:CLASS``; the class really drives the run:
    every delivery of the pattern is preceded by a forced checkpoint."""
    f = _user_protocol(tmp_path, monkeypatch)
    spec = f"{f}:ForceEveryDelivery" if form == "file" else "userproto_sim:ForceEveryDelivery"
    out = tmp_path / "run.json"
    code = main(["simulate", "--workload", "wordcount", "--protocol", spec, "--records", "15",
                 "--interval", "50", "--save-pattern", str(out), "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0
    assert doc["protocol"] == spec
    p = load_pattern(out)
    deliveries = sum(1 for e in p.events if e.kind == "deliver")
    forced = sum(1 for e in p.events if e.kind == "checkpoint" and e.forced)
    assert deliveries > 0 and forced == deliveries == doc["metrics"]["forced_checkpoints"]
    assert doc["metrics"]["useless_checkpoints"] == 0 == len(useless_checkpoints(p))


def test_simulate_sweep_accepts_user_protocol(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    f = _user_protocol(tmp_path, monkeypatch)
    code = main(["simulate", "sweep", "--workloads", "nexmark", "--protocols", f"uc,{f}:ForceEveryDelivery",
                 "--intervals", "50", "--seeds", "1", "--records", "15", "--out", str(tmp_path / "sw"), "--json"])
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert code == 0
    by = {r["protocol"].split(":")[-1]: r for r in rows}
    assert by["uc"]["forced"] == 0 and by["ForceEveryDelivery"]["forced"] > 0


@pytest.mark.parametrize(
    ("args", "flag"),
    [(["simulate", "--protocol", "{f}:Missing"], "--protocol"),
     (["simulate", "--protocol", "no_such_module_xyz:Cls"], "--protocol"),
     (["simulate", "sweep", "--protocols", "uc,{f}:Missing"], "--protocols")],
)
def test_simulate_bad_user_protocol(args: list[str], flag: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    f = _user_protocol(tmp_path, monkeypatch)
    code = main([a.replace("{f}", str(f)) for a in args] + ["--out", str(tmp_path / "o")] * (args[1] == "sweep"))
    err = capsys.readouterr().err
    assert code == 2
    assert flag in err and "Traceback" not in err and len(err.strip().splitlines()) <= 2
    assert not (tmp_path / "o").exists()
