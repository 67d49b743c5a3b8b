"""Flink record/replay (docs/flink.md).

Most tests replay real traces recorded once with ``rollcheck flink record`` and stored in
``tests/data/flink`` (aligned and unaligned checkpoints, a task failure at the middle record), so
they need no Flink. ``test_record_real_run`` records one small run for real in the PyFlink
environment (one JVM) and replays it.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from rollcheck.cli.main import main
from rollcheck.flink_replay.checks.replay import failure_free_output, replay
from rollcheck.flink_replay.checks.tamper import tamper

DATA = Path(__file__).parent / "data" / "flink"
TRACES = sorted(DATA.glob("*.jsonl"))


def _events(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()[1:]]


@pytest.mark.parametrize("trace", TRACES, ids=[t.stem for t in TRACES])
def test_recorded_trace_is_conformant(trace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["flink", "replay", str(trace), "--json"])
    doc = json.loads(capsys.readouterr().out)
    tlc_ran = all(c["status"] != "unchecked" for c in doc["checks"])
    assert rc == (0 if tlc_ran else 3) and doc["conformant"] is (True if tlc_ran else None)
    names = [c["name"] for c in doc["checks"]]
    # the shared checker's generic checks on the core events, then Flink's own plug-ins
    assert names[:3] == ["pattern-valid", "recovery-line", "log-replay"]
    flink = ["failure-observed", "restore-latest-completed", "snapshot-consistent", "barrier-alignment",
             "barrier-alignment-tlc", "output-exactly-once", "side-effect-duplicates"]
    assert [n for n in names if n in flink] == flink
    tlc = next(c for c in doc["checks"] if c["name"] == "barrier-alignment-tlc")
    # TLC validates aligned runs (or could not run here: then never a pass); unaligned: not applicable
    aligned = "-aligned" in f"-{trace.stem}" or "rescale" in trace.stem  # the rescaled run is aligned at 2
    assert tlc["status"] in (("held", "unchecked") if aligned else ("not-applicable",))
    assert all(c["ok"] is True or c["status"] == "not-applicable"  # log-replay: nothing in transit
               for c in doc["checks"] if c["name"] != "barrier-alignment-tlc")
    ev = _events(trace)
    kinds = Counter(e["kind"] for e in ev)
    for k in ("failure", "flink.snapshot", "flink.checkpoint_completed", "flink.restore", "flink.barrier",
              "flink.sink_commit", "flink.sink_output"):
        assert kinds[k] > 0, k
    # the naive sink really duplicated something: the failure struck after the restored checkpoint
    naive = [e for e in ev if e["kind"] == "flink.sink_output" and e["sink"] == "naive"]
    header = json.loads(trace.read_text().splitlines()[0])
    expected = failure_free_output(header["config"]["records"], header["config"]["keys"])
    assert Counter(naive[0]["lines"]) + Counter(naive[1]["lines"]) - expected


@pytest.mark.parametrize("trace", TRACES, ids=[t.stem for t in TRACES])
# (the key-by-key tampers and the duplicated row are tested in tests/test_flink_jobs.py)
@pytest.mark.parametrize("how", ["barrier-after-snapshot", "drop-failure", "older-restore"])
def test_tampered_trace_caught_by_the_right_check(trace: Path, how: str, tmp_path: Path) -> None:
    out = tmp_path / "t.jsonl"
    expected = tamper(trace, how, out)
    rep = replay(out)
    check = {c.name: c for c in rep.checks}[expected]
    if how == "drop-failure":
        assert check.status.value == "unchecked" and rep.conformant is None and rep.exit_code == 3
        assert main(["flink", "replay", str(out), "--no-tlc"]) == 3
        return
    assert check.ok is False, check
    assert rep.conformant is False and rep.first_offending_seq is not None
    assert main(["flink", "replay", str(out), "--no-tlc"]) == 1


def test_failure_free_output_is_the_word_count() -> None:
    out = failure_free_output(100, 7)
    assert sum(out.values()) == 100
    for k in range(7):
        n = sum(1 for v in range(1, 101) if v % 7 == k)
        assert {line for line in out if line.startswith(f"w{k},")} == {f"w{k},{c}" for c in range(1, n + 1)}


def test_duplicate_in_transactional_output_is_caught(tmp_path: Path) -> None:
    trace = TRACES[0]
    lines = trace.read_text().splitlines()
    out = []
    for line in lines:
        e = json.loads(line)
        if e.get("kind") == "flink.sink_output" and e["sink"] == "tx":
            e["lines"].append(e["lines"][0])
        out.append(json.dumps(e))
    p = tmp_path / "dup.jsonl"
    p.write_text("\n".join(out) + "\n")
    rep = replay(p)
    check = {c.name: c for c in rep.checks}["output-exactly-once"]
    assert check.ok is False and "duplicates" in check.detail


def test_bad_input_is_one_line_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "x.jsonl"
    p.write_text('{"format": "rollcheck.trace/1", "source": "spark", "config": {}}\n')
    assert main(["flink", "replay", str(p)]) == 2
    err = capsys.readouterr().err
    assert "x.jsonl" in err and "not a Flink trace" in err and "Traceback" not in err
    good = TRACES[0].read_text().splitlines()
    p.write_text(good[0] + "\n" + good[1] + "\n{not json\n")
    assert main(["flink", "replay", str(p)]) == 2
    assert "line 3" in capsys.readouterr().err
    assert main(["flink", "replay", str(tmp_path / "missing.jsonl")]) == 2


def test_without_flink_every_record_is_inconclusive(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("ROLLCHECK_FLINK_PYTHON", str(tmp_path / "no-such-python"))
    rc = main(["flink", "record", "wordcount", "--out", str(tmp_path / "t.jsonl"),
               "--fail-at-record", "10", "--failure", "task"])
    assert rc == 3
    assert "make flink-setup" in capsys.readouterr().err
    assert not (tmp_path / "t.jsonl").exists()


def test_record_refuses_bad_options(tmp_path: Path) -> None:
    out = str(tmp_path / "t.jsonl")
    assert main(["flink", "record", "wordcount", "--out", out, "--parallelism", "1"]) == 2
    assert main(["flink", "record", "wordcount", "--out", out, "--records", "10", "--fail-at-record", "11",
                 "--failure", "task"]) == 2
    assert main(["flink", "record", "wordcount", "--out", out, "--fail-at-record", "5"]) == 2


def _flink_available() -> bool:
    from rollcheck.flink_replay.environment import find_flink
    from rollcheck.pyimpl.errors import InconclusiveError

    try:
        find_flink()
    except InconclusiveError:
        return False
    return True


@pytest.mark.slow
@pytest.mark.skipif(not _flink_available(), reason="no PyFlink environment (make flink-setup)")
def test_record_real_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "rec.jsonl"
    rc = main(["flink", "record", "wordcount", "--out", str(out), "--checkpoints", "aligned",
               "--records", "1200", "--rate", "600", "--interval", "250", "--fail-at-record", "600",
               "--failure", "task", "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert rc == 0, doc
    assert doc["restored_checkpoint"] is not None and doc["restored_checkpoint"] >= 2
    rep = replay(out)
    assert rep.conformant is True, [c.as_dict() for c in rep.checks]


def _tlc():
    from rollcheck.cli.cmd_flink import tlc_validator

    return tlc_validator()


@pytest.mark.tlc
def test_tlc_accepts_the_recorded_aligned_trace() -> None:
    from rollcheck.flink_replay.checks.replay import read_flink_trace
    from rollcheck.flink_replay.checks.tlc import cl_segments

    trace = DATA / "aligned-task-failure.jsonl"
    v = _tlc()(trace)
    assert v.accepted is True, v.detail
    header, events, _ = read_flink_trace(trace)
    tr, seqs = cl_segments(header, events)
    assert sum(e["op"] == "snap" for e in tr) >= 4 and len(tr) == len(seqs)


@pytest.mark.tlc
@pytest.mark.parametrize("how", ["barrier-after-snapshot", "state-count"])
def test_tlc_rejects_a_tampered_aligned_trace(how: str, tmp_path: Path) -> None:
    """The Chandy-Lamport model itself rejects the tampered run (not only the Python checks)."""
    src = DATA / "aligned-task-failure.jsonl"
    out = tmp_path / "t.jsonl"
    if how == "barrier-after-snapshot":
        tamper(src, how, out)
    else:  # one keyed snapshot reflects a record more than the sources sent before the barrier
        lines = src.read_text().splitlines()
        done = False
        for i, line in enumerate(lines[1:], start=1):
            e = json.loads(line)
            if not done and e["kind"] == "flink.snapshot" and e["task"] == "keyed" and e["checkpoint"] == 1:
                k = next(k for k, c in enumerate(e["per_key"]) if c > 0)
                e["per_key"][k] += 1
                lines[i] = json.dumps(e)
                done = True
        out.write_text("\n".join(lines) + "\n")
    v = _tlc()(out)
    assert v.accepted is False and v.seq is not None, v.detail
    rep = replay(out, tlc=_tlc())
    check = {c.name: c for c in rep.checks}
    assert check["barrier-alignment-tlc"].ok is False  # the model's own verdict, next to the Python checks
    assert check["barrier-alignment"].ok is False if how == "barrier-after-snapshot" else \
        check["snapshot-consistent"].ok is False


def test_taskmanager_failure_needs_the_jobmanager_to_see_the_loss(tmp_path: Path) -> None:
    """A recorded TaskManager kill (standalone cluster) counts only with the JobManager's report."""
    trace = DATA / "aligned-taskmanager-failure.jsonl"
    ev = _events(trace)
    fail = next(e for e in ev if e["kind"] == "failure")
    assert fail["failure"] == "taskmanager"
    assert any(e["kind"] == "flink.taskmanager_lost" for e in ev)
    assert {c.name: c for c in replay(trace).checks}["failure-observed"].ok is True
    lines = trace.read_text().splitlines()
    kept = [lines[0]] + [x for x in lines[1:] if json.loads(x)["kind"] != "flink.taskmanager_lost"]
    for n in range(1, len(kept)):
        e = json.loads(kept[n])
        e["seq"] = n
        kept[n] = json.dumps(e)
    p = tmp_path / "t.jsonl"
    p.write_text("\n".join(kept) + "\n")
    rep = replay(p)
    assert {c.name: c for c in rep.checks}["failure-observed"].status.value == "unchecked" and rep.exit_code == 3




def _pace_rows(t0: float, first_value: int, start_at: float, lam_i: float, mu_i: float, n: int) -> list[str]:
    rows, last = [], start_at - 1.0 / mu_i
    for v in range(first_value, first_value + n):
        due = t0 + (v - 1) / lam_i
        at = max(due, last + 1.0 / mu_i, start_at)
        last = at
        rows.append(f"{v} {due:.6f} {at:.6f}")
    return rows


def test_recovery_time_analysis_on_a_synthetic_run(tmp_path: Path) -> None:
    """The measurement and the Chiron prediction on a run whose answer is known in closed form:
    λ = 400/s, μ = 800/s (U = 0.5), so the catch-up takes as long as the backlog took to build."""
    from rollcheck.flink_replay.intervals.recovery import _predict, analyse_run

    t0, d, e = 1000.0, 0.4, 0.3
    t_fail = t0 + 5.0
    run = tmp_path / "i300-r0"
    run.mkdir()
    (run / "failure.json").write_text(json.dumps({"t": t_fail}))
    (run / "run.json").write_text(json.dumps({"rest": {"checkpoints": {
        "7": {"status": "COMPLETED", "trigger_timestamp": (t_fail - e) * 1000, "end_to_end_duration": 20}}}}))
    (run / "tap-tap-source-0-1.jsonl").write_text(json.dumps({"ev": "restore", "checkpoint": 7}) + "\n")
    for sub in (0, 1):  # both subtasks: the same schedule (the split start is value 1 in each file)
        (run / f"pace-gen0-{sub}.jsonl").write_text("\n".join(_pace_rows(t0, 1, t0 + 1.0, 200, 400, 900)))
        offset = int((t_fail - e - t0) * 200) + 1  # the first record after the restored checkpoint
        (run / f"pace-gen1-{sub}.jsonl").write_text("\n".join(_pace_rows(t0, offset, t_fail + d, 200, 400, 600)))
    x = analyse_run(run, 400.0, 2)
    assert x["restored_checkpoint"] == 7
    assert abs(x["downtime_s"] - d) < 0.01 and abs(x["checkpoint_age_s"] - e) < 1e-6
    assert abs(x["service_rate"] - 800) < 5 and abs(x["ratio"] - 0.5) < 0.01
    expected = d + (e + d)  # D + (E + D)·U/(1 − U) with U = 0.5, less the 50 ms caught-up tolerance
    assert abs(x["measured_s"] - expected) < 0.06
    pred = _predict(x)
    assert abs(pred["chiron-trt"] - expected) < 0.01
    assert abs(pred["utilization"] - (d + e)) < 0.01


def test_checkpoint_after_the_sources_finished_is_checked_for_orphans(tmp_path):
    """A checkpoint may complete after every source finished (downstream tasks only): its keyed state
    must not reflect records the sources never emitted; a doctored keyed snapshot there is caught."""


    from rollcheck.flink_replay.checks.replay import replay

    src = DATA / "unaligned-checkpoint-after-sources-finished.jsonl"
    res = replay(src)
    check = next(c for c in res.checks if c.name == "snapshot-consistent")
    assert check.ok is True and "after every source had finished" in check.detail
    lines = src.read_text(encoding="utf-8").splitlines()
    events = [json.loads(x) for x in lines[1:]]
    done = {e["checkpoint"] for e in events if e.get("kind") == "flink.checkpoint_completed"}
    last = max(done)
    k = next(i for i, e in enumerate(events) if e.get("kind") == "flink.snapshot" and e["task"] == "keyed"
             and e["checkpoint"] == last)
    events[k]["per_key"][0] += 10_000
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join([lines[0], *(json.dumps(e) for e in events)]) + "\n", encoding="utf-8")
    check = next(c for c in replay(bad).checks if c.name == "snapshot-consistent")
    assert check.ok is False and "after the sources finished" in check.detail


def test_checkpoint_id_reused_after_an_aborted_attempt(tmp_path: Path) -> None:
    """A task failed while checkpoint 6 was being taken (one snapshot of it in attempt 0); the job
    restored checkpoint 5 at another parallelism and took checkpoint 6 again in attempt 1. The
    completed checkpoint 6 is the restored job's, and it is a consistent cut. A checkpoint that had
    completed in the failed attempt and is then taken again under the same id is caught."""
    trace = DATA / "changelog-rescale-2-3-checkpoint-id-reused.jsonl"
    ev = _events(trace)
    snaps6 = {e["attempt"] for e in ev if e["kind"] == "flink.snapshot" and e["checkpoint"] == 6}
    assert snaps6 == {0, 1}  # the situation this test is about
    rep = replay(trace)
    check = {c.name: c for c in rep.checks}["snapshot-consistent"]
    assert check.ok is True, check
    # the mutant: checkpoint 6 reported completed right after attempt 0's snapshot of it
    lines = trace.read_text().splitlines()
    first0 = next(e for e in ev if e["kind"] == "flink.snapshot" and e["checkpoint"] == 6 and e["attempt"] == 0)
    done = next(e for e in ev if e["kind"] == "flink.checkpoint_completed" and e["checkpoint"] == 5)
    extra = dict(done, checkpoint=6, seq=first0["seq"] + 1)
    events = [json.loads(x) for x in lines[1:]]
    for e in events:
        if e["seq"] > first0["seq"]:
            e["seq"] += 1
    events.insert(next(i for i, e in enumerate(events) if e["seq"] > first0["seq"] + 1), extra)
    out = tmp_path / "reused.jsonl"
    out.write_text("\n".join([lines[0], *(json.dumps(e) for e in events)]) + "\n")
    bad = {c.name: c for c in replay(out).checks}["snapshot-consistent"]
    assert bad.ok is False and "taken again" in bad.detail, bad
