"""Flink oracles that do not trust the engine's failure-free run (:mod:`rollcheck.flink_replay.checks.oracles`).

``batch-equivalent``: on a recorded keyed_totals run (apache-flink 2.3.0, a task failure, the same
job in BATCH mode recorded inside): held; the mutants that drop a KEY's last record or count it
twice in every run (the failure-free reference included, so output-exactly-once sees nothing) are
caught; a declared opt-out, a failed batch run and a split KEY are not applicable / unchecked.

``recovery-succeeded``: fast tests on synthetic events and on two recorded traces (a conformant
rescaled job, and a real apache-flink 2.3.0 run whose checkpoint files vanished with the injected
failure, so that every restart failed with Flink's ``FileNotFoundException``); the mutant that
swallows the recovery exception is caught. A slow test records that storage fault again.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rollcheck.cli.main import main
from rollcheck.flink_replay.checks.oracles import (
    BATCH,
    ORACLE_TAMPERS,
    RECOVERY,
    batch_check,
    recovery_check,
    swallow_recovery_exception,
)
from rollcheck.flink_replay.checks.user_replay import JOB_CHECKS
from rollcheck.pyimpl.verdict import Status

ROOT = Path(__file__).resolve().parents[1]
GOOD = ROOT / "examples" / "flink-job-rescale-2-1.jsonl"
FAILED = ROOT / "tests" / "data" / "flink_oracles" / "recovery-failed-2.3.0.jsonl"
JOB = ROOT / "examples" / "flink_jobs" / "keyed_totals.py"
TOTALS = ROOT / "tests" / "data" / "flink_oracles" / "keyed-totals-task-2.3.0.jsonl"


def _load(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    lines = path.read_text(encoding="utf-8").splitlines()
    return json.loads(lines[0]), [json.loads(x) for x in lines[1:]]


def _write(path: Path, header: dict[str, Any], events: list[dict[str, Any]]) -> Path:
    path.write_text("\n".join(json.dumps(x) for x in [header, *events]) + "\n", encoding="utf-8")
    return path


def _ev(seq: int, kind: str, **kw: Any) -> dict[str, Any]:
    return {"seq": seq, "kind": kind, **kw}


def test_recovery_succeeded_is_a_check_of_every_job_trace() -> None:
    assert RECOVERY in JOB_CHECKS and BATCH in JOB_CHECKS and JOB_CHECKS[-1] == "user-sink"


def test_batch_equivalent_holds_on_a_recorded_run(capsys: pytest.CaptureFixture[str]) -> None:
    h, ev = _load(TOTALS)
    batch = next(e for e in ev if e["kind"] == "flink.batch_output")
    assert batch["final_state"] == "FINISHED" and sum(map(len, batch["subtasks"])) == 600
    c = batch_check(h, ev)
    assert c.status is Status.HELD and c.detail.startswith("12 KEY(s)"), c.detail
    assert main(["flink", "replay", str(TOTALS), "--json", "--no-tlc"]) == 0
    capsys.readouterr()


@pytest.mark.parametrize("mutant", ["drop-last-record", "double-count-last-record"])
def test_batch_equivalent_catches_a_bug_of_every_run(mutant: str, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    fn, check = ORACLE_TAMPERS[mutant]
    h, ev = fn(*_load(TOTALS))
    assert check == BATCH
    c = batch_check(h, ev)
    assert c.status is Status.VIOLATED and "BATCH mode gives" in c.detail and "reference" in c.detail, c.detail
    path = _write(tmp_path / "t.jsonl", h, ev)
    assert main(["flink", "replay", str(path), "--json", "--no-tlc"]) == 1
    got = {x["name"]: x for x in json.loads(capsys.readouterr().out)["checks"]}
    # the failure-free reference is just as wrong: the engine-trusting check cannot see it
    assert got["output-exactly-once"]["status"] == "held" and got[BATCH]["status"] == "violated"


def test_batch_equivalent_not_applicable_or_unchecked_with_the_reason() -> None:
    h, ev = _load(TOTALS)
    i = next(k for k, e in enumerate(ev) if e["kind"] == "flink.batch_output")
    skipped = [*ev[:i], {**ev[i], "final_state": "NOT_RUN", "reason": "processing-time windows"}, *ev[i + 1:]]
    c = batch_check(h, skipped)
    assert c.status is Status.NOT_APPLICABLE and "processing-time windows" in c.detail
    failed = [*ev[:i], {**ev[i], "final_state": "FAILED", "reason": "UnsupportedOperationException: x"}, *ev[i + 1:]]
    assert "UnsupportedOperationException" in batch_check(h, failed).detail
    assert batch_check(h, [e for e in ev if e["kind"] != "flink.batch_output"]).status is Status.NOT_APPLICABLE
    rows = [x for sub in ev[i]["subtasks"] for x in sub]
    split = [*ev[:i], {**ev[i], "subtasks": [rows, rows[:1]]}, *ev[i + 1:]]
    c = batch_check(h, split)
    assert c.status is Status.HELD and "1 KEY(s) unchecked" in c.detail, c.detail


def test_restart_that_ran_to_the_end_holds() -> None:
    h, ev = _load(GOOD)
    c = recovery_check(h, ev)
    assert c.status is Status.HELD, c.detail
    assert "restarted from checkpoint" in c.detail and "ran to the end" in c.detail


def test_restart_failing_with_the_engines_exception_is_a_finding_naming_it_and_the_checkpoint() -> None:
    h, ev = _load(FAILED)
    c = recovery_check(h, ev)
    assert c.status is Status.VIOLATED
    assert "checkpoint 2" in c.detail and "java.io.FileNotFoundException" in c.detail
    assert "restarted 3 time(s)" in c.detail and "a finding against apache-flink 2.3.0" in c.detail


def test_the_cli_reports_the_failed_restart(capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["flink", "replay", str(FAILED), "--json", "--no-tlc"])
    rep = json.loads(capsys.readouterr().out)
    assert rc == 1
    got = {c["name"]: c for c in rep["checks"]}[RECOVERY]
    assert got["status"] == "violated" and "FileNotFoundException" in got["detail"]


@pytest.mark.parametrize("trace", [GOOD, FAILED], ids=["restored", "restore-failed"])
def test_mutant_swallowing_the_recovery_exception_is_caught(trace: Path, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    """The restart died, its exception was swallowed and the job claims FINISHED: still a violation."""
    fn, check = ORACLE_TAMPERS["swallow-recovery-exception"]
    h, ev = fn(*_load(trace))
    assert check == RECOVERY and h["flink"]["final_state"] == "FINISHED"
    assert not any(e["kind"] == "flink.recovery_failed" for e in ev)
    c = recovery_check(h, ev)
    assert c.status is Status.VIOLATED and "not restarted" in c.detail, c.detail
    path = _write(tmp_path / "t.jsonl", h, ev)
    assert main(["flink", "replay", str(path), "--json", "--no-tlc"]) == 1
    capsys.readouterr()


def test_no_failure_is_not_applicable_and_a_cut_trace_unchecked() -> None:
    assert recovery_check({}, [_ev(1, "flink.snapshot"), _ev(2, "end")]).status is Status.NOT_APPLICABLE
    cut = [_ev(1, "failure"), _ev(2, "flink.restore", attempt=1, task="source", subtask=0, checkpoint=1)]
    assert recovery_check({}, cut).status is Status.UNCHECKED


def test_restored_subtask_that_never_finished_is_a_violation() -> None:
    ev = [_ev(1, "failure"),
          _ev(2, "flink.restore", attempt=1, task="source", subtask=0, checkpoint=3),
          _ev(3, "flink.restore", attempt=1, task="keyed", subtask=0, checkpoint=3),
          _ev(4, "flink.task_finished", attempt=1, task="source", subtask=0), _ev(5, "end")]
    c = recovery_check({"flink": {"final_state": "FINISHED"}}, ev)
    assert c.status is Status.VIOLATED and "keyed 0" in c.detail
    ev.insert(4, _ev(5, "flink.task_finished", attempt=1, task="keyed", subtask=0))
    assert recovery_check({"flink": {"final_state": "FINISHED"}}, ev).status is Status.HELD


def test_job_that_did_not_finish_after_restoring_names_flinks_cause() -> None:
    ev = [_ev(1, "failure"), _ev(2, "flink.restore", attempt=1, task="source", subtask=0, checkpoint=3),
          _ev(3, "end")]
    h = {"engine_version": "1.20.5", "flink": {"final_state": "FAILED", "failure_cause": "java.lang.X: boom"}}
    c = recovery_check(h, ev)
    assert c.status is Status.VIOLATED and "checkpoint 3" in c.detail and "java.lang.X: boom" in c.detail
    assert "apache-flink 1.20.5" in c.detail
    h["flink"].pop("failure_cause")  # nothing says the engine failed it: not a finding, inconclusive
    assert recovery_check(h, ev).status is Status.UNCHECKED


def test_swallow_needs_a_failure() -> None:
    with pytest.raises(ValueError, match="no failure"):
        swallow_recovery_exception({}, [_ev(1, "end")])


@pytest.mark.slow


@pytest.mark.engines
def test_a_real_restart_that_fails_is_recorded_and_found(tmp_path: Path) -> None:
    """apache-flink 2.3.0: the checkpoints' state files vanish with the injected failure (a storage
    fault); every restart fails in Flink's restore and the job ends FAILED."""
    from rollcheck.flink_replay.environment import find_flink
    from rollcheck.flink_replay.recording.record import RecordConfig, record
    from rollcheck.pyimpl.errors import InconclusiveError

    try:
        find_flink()
    except InconclusiveError as e:
        pytest.skip(str(e))
    cfg = RecordConfig.make(module=str(JOB), fail_at_record=300, failure="task")
    cfg["lose_checkpoint_files"] = True
    res = record(tmp_path / "t.jsonl", cfg)
    assert res["final_state"] == "FAILED" and res["failure_injected"]
    h, ev = _load(tmp_path / "t.jsonl")
    failed = next(e for e in ev if e["kind"] == "flink.recovery_failed")
    assert failed["exception"] == "java.io.FileNotFoundException" and failed["checkpoint"] is not None
    c = recovery_check(h, ev)
    assert c.status is Status.VIOLATED and "FileNotFoundException" in c.detail


# ----------------------------------------------------------------------------- during-restore, twice
def _second(kind: str, attempt: int = 1, seq: int = 5) -> dict[str, Any]:
    return _ev(seq, "failure" if kind == "twice" else "flink.failure_during_restore", second=kind, phase="during-restore" if kind == "during-restore" else "after-recovery",
               in_attempt=attempt)


def _restore(seq: int, attempt: int) -> dict[str, Any]:
    return _ev(seq, "flink.restore", attempt=attempt, task="source", subtask=0, checkpoint=1)


@pytest.mark.parametrize("kind, events, problem", [
    ("during-restore", [_ev(1, "failure"), _restore(3, 1), _second("during-restore"), _restore(7, 2)], None),
    ("during-restore", [_ev(1, "failure"), _restore(3, 1), _ev(4, "flink.snapshot", attempt=1),
                        _second("during-restore"), _restore(7, 2)], "not restoring any more"),
    ("during-restore", [_ev(1, "failure"), _second("during-restore"), _restore(7, 2)], "no task of attempt 1"),
    ("twice", [_ev(1, "failure"), _restore(3, 1), _second("twice"), _restore(7, 2)], None),
    ("twice", [_ev(1, "failure"), _second("twice"), _restore(7, 1), _restore(8, 2)], "had not recovered"),
    ("twice", [_ev(1, "failure"), _restore(3, 1), _second("twice")], "never restored after the second"),
    ("twice", [_ev(1, "failure"), _restore(3, 1), _second("twice", attempt=0), _restore(7, 2)], "not raised by"),
])
def test_the_second_failure_must_be_proven_where_it_was_meant_to_strike(kind: str, events: list[dict[str, Any]],
                                                                       problem: str | None) -> None:
    from rollcheck.flink_replay.checks.oracles import second_failure_problem
    from rollcheck.flink_replay.checks.user_replay import failure_check

    got = second_failure_problem(events)
    header = {"config": {"failure": kind}}
    c = failure_check(events, header)
    if problem is None:
        assert got is None and c.status is Status.HELD and "then a second task failure" in c.detail, (got, c.detail)
    else:
        assert got is not None and problem in got, got
        assert c.status is Status.UNCHECKED and "not proven" in c.detail


def test_a_second_failure_that_never_struck_is_inconclusive() -> None:
    from rollcheck.flink_replay.checks.user_replay import failure_check

    c = failure_check([_ev(1, "failure"), _restore(3, 1), _ev(9, "end")], {"config": {"failure": "twice"}})
    assert c.status is Status.UNCHECKED and "never struck" in c.detail


def test_second_failures_are_refused_with_rescaling() -> None:
    from rollcheck.flink_replay.matrix import cells
    from rollcheck.flink_replay.recording.record import RecordConfig
    from rollcheck.pyimpl.errors import InvalidInputError

    with pytest.raises(InvalidInputError, match="not with --rescale"):
        RecordConfig.make(module=str(JOB), fail_at_record=3, failure="twice", rescale=(2, 1))
    got = cells([str(JOB)], ["hashmap"], ["aligned"], ["task", "twice", "during-restore"], [None, (2, 1)])
    assert sorted((c.failure, str(c.rescale)) for c in got) == [("during-restore", "None"), ("task", "(2, 1)"),
                                                               ("task", "None"), ("twice", "None")]


@pytest.mark.parametrize("kind", ["during-restore", "twice"])
def test_recorded_second_failures_replay_conformant_with_the_kill_point_proven(
        kind: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Real apache-flink 2.3.0 runs of keyed_totals (``--failure during-restore`` / ``twice``)."""
    path = ROOT / "tests" / "data" / "flink_oracles" / f"keyed-totals-{kind}-2.3.0.jsonl"
    h, ev = _load(path)
    assert h["config"]["failure"] == kind
    second = next(e for e in ev if e.get("second") == kind)
    assert second["kind"] == ("failure" if kind == "twice" else "flink.failure_during_restore")
    assert main(["flink", "replay", str(path), "--json", "--no-tlc"]) == 0
    got = {c["name"]: c for c in json.loads(capsys.readouterr().out)["checks"]}
    assert "then a second task failure" in got["failure-observed"]["detail"]
    assert all(got[n]["status"] == "held" for n in ("recovery-succeeded", "batch-equivalent", "output-exactly-once",
                                                     "keyed-state-restored-once", "user-state-restored-once"))
    if kind == "twice":  # two core failures, each with its recovery
        assert got["recovery-line"]["detail"].startswith("2 recovery(ies)")
    else:  # the attempt the second failure interrupted is no recovery: its restores are relabelled
        assert any(e["kind"] == "flink.restore_interrupted" for e in ev)
        assert any(e.get("phase") == "restore-interrupted" for e in ev if e["kind"] == "flink.user_state")


def test_a_second_failure_without_a_later_restore_is_inconclusive(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """The kill point must be proven by the trace: with the restores after the second failure gone
    (a mutant of the recorder), failure-observed is unchecked and the replay inconclusive."""
    h, ev = _load(ROOT / "tests" / "data" / "flink_oracles" / "keyed-totals-twice-2.3.0.jsonl")
    second = next(e for e in ev if e.get("second") == "twice")
    cut = [e for e in ev if not (e["kind"] == "flink.restore" and e["seq"] > second["seq"])]
    from rollcheck.flink_replay.checks.user_replay import failure_check

    c = failure_check(cut, h)
    assert c.status is Status.UNCHECKED and "never restored after the second failure" in c.detail


@pytest.mark.slow


@pytest.mark.engines
@pytest.mark.parametrize("kind", ["during-restore", "twice"])
def test_second_failures_on_the_command_line(kind: str, tmp_path: Path) -> None:
    import subprocess
    import sys

    from rollcheck.flink_replay.environment import find_flink
    from rollcheck.pyimpl.errors import InconclusiveError

    try:
        find_flink()
    except InconclusiveError as e:
        pytest.skip(str(e))
    out = tmp_path / "t.jsonl"
    rc = [sys.executable, "-m", "rollcheck.cli.main", "flink"]
    r = subprocess.run([*rc, "record", "job", "--module", str(JOB), "--out", str(out), "--fail-at-record", "300",
                        "--failure", kind], capture_output=True, text=True, cwd=ROOT, timeout=1200)
    assert r.returncode == 0, r.stderr[-2000:]
    rp = subprocess.run([*rc, "replay", str(out), "--json", "--no-tlc"], capture_output=True, text=True, cwd=ROOT,
                        timeout=600)
    assert rp.returncode == 0, rp.stdout[-2000:]


def test_the_word_count_replay_checks_the_recovery_too(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = ROOT / "examples" / "flink-aligned-task-failure.jsonl"
    assert main(["flink", "replay", str(trace), "--json", "--no-tlc"]) == 0
    got = {c["name"]: c for c in json.loads(capsys.readouterr().out)["checks"]}
    assert got[RECOVERY]["status"] == "held"
    h, ev = swallow_recovery_exception(*_load(trace))
    assert main(["flink", "replay", str(_write(tmp_path / "t.jsonl", h, ev)), "--json", "--no-tlc"]) == 1
    got = {c["name"]: c for c in json.loads(capsys.readouterr().out)["checks"]}
    assert got[RECOVERY]["status"] == "violated"
