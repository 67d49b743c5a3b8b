"""Faults that only a cluster has, and the retried task (``docs/spark-matrix.md``, "An executor
lost" and "A task retried after its state store committed").

Fast tests: planning and option validation of the ``executor`` and ``retry`` failures, the
executor finder and killer on a stand-in process, the ``executor-lost`` and ``task-retried`` checks
and their mutants, and the replay of two shipped recordings (``tests/data/spark/spark-query-retry.jsonl``,
``spark-query-executor.jsonl``, ``spark-query-during-recovery.jsonl``, ``spark-query-twice.jsonl``:
``clicks_per_window`` recorded with each failure) with the tamper
that drops the retried task's state. Slow tests (``spark``, ``slow``; one Spark run each, a few
minutes on a loaded 2-core machine): each failure recorded for real on ``clicks_per_window``, the
executor on a local standalone cluster that rollcheck starts, and that cluster dying with its owner.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rollcheck.cli.main import main
from rollcheck.pyimpl.errors import InvalidInputError
from rollcheck.spark_replay.cluster import (
    EXECUTOR_CLASS,
    cluster_conf,
    executor_processes,
    kill_executor,
    validate_cluster,
)
from rollcheck.spark_replay.faults.killpoints import (
    executor_struck,
    retry_restart_batch,
    retry_struck,
    second_failure_struck,
)
from rollcheck.spark_replay.matrix.plan import MatrixOptions, columns, plan_cells
from rollcheck.spark_replay.query.record import QueryConfig, _master

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "spark"
CLICKS = ROOT / "examples" / "queries" / "clicks_per_window.py"


# ----------------------------------------------------------------------------- planning and options
def test_the_new_failures_are_columns_after_the_kill_points():
    assert columns(["retry", "executor", "task", "kill"], ["commit"]) == ["task", "kill:commit", "executor", "retry"]
    cells = plan_cells(["q.py"], ["hdfs", "rocksdb"], ["executor", "retry"], [])
    assert [(c.provider, c.column, c.kill_point) for c in cells] == [
        ("hdfs", "executor", None), ("hdfs", "retry", None), ("rocksdb", "executor", None), ("rocksdb", "retry", None)]
    assert cells[0].stem == "q--hdfs/executor"
    with pytest.raises(InvalidInputError, match="unknown failure 'thrice'.*executor, retry, twice, during-recovery"):
        plan_cells(["q.py"], ["hdfs"], ["thrice"], [])


def test_matrix_options_executor_needs_a_cluster():
    with pytest.raises(InvalidInputError, match="--cluster local-standalone") as e:
        MatrixOptions(modules=["q.py"], failures=["executor"]).validate()
    assert e.value.location == "--cluster"
    MatrixOptions(modules=["q.py"], failures=["executor"], cluster="local-standalone").validate()
    MatrixOptions(modules=["q.py"], failures=["executor"], master="spark://127.0.0.1:7077").validate()
    MatrixOptions(modules=["q.py"], failures=["retry"]).validate()  # retry runs in local mode too
    with pytest.raises(InvalidInputError, match="--jobs 2") as e:
        MatrixOptions(modules=["q.py"], failures=["executor"], cluster="local-standalone", jobs=2).validate()
    assert e.value.location == "--jobs"
    with pytest.raises(InvalidInputError, match="not both"):
        MatrixOptions(modules=["q.py"], cluster="local-standalone", master="spark://127.0.0.1:7077").validate()
    with pytest.raises(InvalidInputError, match="unknown cluster 'yarn'"):
        validate_cluster("yarn", None)
    assert MatrixOptions(modules=["q.py"]).failures == ["task", "sink", "kill"]  # the default: no cluster needed


def test_record_query_executor_needs_a_cluster():
    with pytest.raises(InvalidInputError, match="--cluster") as e:
        QueryConfig(str(CLICKS), failure="executor", fail_at_batch=1).validate()
    assert e.value.location == "--cluster"
    QueryConfig(str(CLICKS), failure="executor", fail_at_batch=1, cluster="local-standalone").validate()
    QueryConfig(str(CLICKS), failure="executor", fail_at_batch=1, master="spark://127.0.0.1:7077").validate()


@pytest.mark.parametrize("argv", [
    ["spark", "record", "query", "--module", str(CLICKS), "--out", "x.jsonl", "--fail-at-batch", "1",
     "--failure", "executor"],
    ["spark", "matrix", "--module", str(CLICKS), "--failures", "executor,task", "--json"]])
def test_cli_executor_without_a_cluster_is_exit_2_naming_cluster(capsys, tmp_path, monkeypatch, argv):
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "--cluster" in err and "executor" in err
    assert not (tmp_path / "x.jsonl").exists() and not (tmp_path / "spark-matrix").exists()


def test_retry_allows_task_retries_in_local_mode(monkeypatch):
    monkeypatch.delenv("ROLLCHECK_SPARK_MASTER", raising=False)
    retry = {"failure": "retry", "fail_at_batch": 1}
    assert _master(QueryConfig("q.py", **retry)) == "local[2,4]"
    assert _master(QueryConfig("q.py", master="local[*]", **retry)) == "local[*,4]"
    assert _master(QueryConfig("q.py", master="local", **retry)) == "local[1,4]"
    assert _master(QueryConfig("q.py", master="spark://127.0.0.1:7077", **retry)) == "spark://127.0.0.1:7077"
    assert _master(QueryConfig("q.py", master="local[3]")) == "local[3]"  # other failures: as given
    assert retry_restart_batch(2, 6) == 3 and retry_restart_batch(5, 6) == 5
    assert cluster_conf("spark://127.0.0.1:7077")["spark.cores.max"] == "2" and cluster_conf(None) == {}


# ----------------------------------------------------------------------------- the executor finder
def test_executors_are_found_by_their_command_line_and_killed(tmp_path):
    stand_in = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", EXECUTOR_CLASS,
                                 "--driver-url", "x", "--executor-id", "7", "--app-id", "app-rollcheck-test"])
    try:
        deadline = time.monotonic() + 10
        found = []
        while not found and time.monotonic() < deadline:
            found = executor_processes("app-rollcheck-test")
            time.sleep(0.05)
        assert [(e.pid, e.executor_id) for e in found] == [(stand_in.pid, "7")]
        assert executor_processes("app-other") == []
        assert kill_executor(found[0]) is True
        assert stand_in.wait(timeout=10) == -signal.SIGKILL
    finally:
        stand_in.kill()
        stand_in.wait()


# ----------------------------------------------------------------------------- the checks and their mutants
EXEC_HEADER = {"config": {"failure": "executor", "fail_at_batch": 2}}
EXEC_FAILURE = {"seq": 20, "kind": "spark.failure", "mode": "executor", "batch": 2, "attempt": 1, "executor_id": "1",
                "pid": 4242, "process_gone": True, "removed": True, "remove_reason": "Command exited with code 137",
                "checkpoint_logs": {"offsets": 2, "commits": 1}, "kill_point": "state"}
LATER_COMMIT = {"seq": 30, "kind": "spark.batch_committed", "batch": 3, "attempt": 1}


@pytest.mark.parametrize("change,fragment", [
    ({"removed": False}, "never listed it as removed"),
    ({"process_gone": False}, "did not end"),
    ({"executor_id": None}, "does not say which executor"),
    ({"checkpoint_logs": {"offsets": 2, "commits": 2}}, "not inside batch 2"),
    ({"batch": 1}, "no executor was killed in batch 2")])
def test_executor_lost_is_unchecked_without_its_evidence(change, fragment):
    assert executor_struck(EXEC_HEADER, [EXEC_FAILURE, LATER_COMMIT]).status.value == "held"
    c = executor_struck(EXEC_HEADER, [{**EXEC_FAILURE, **change}, LATER_COMMIT])
    assert c.status.value == "unchecked" and fragment in c.detail, c.detail


def test_executor_lost_needs_every_state_store_committed_again_after_the_loss():
    def sc(seq, part, version):
        return {"seq": seq, "kind": "spark.state_committed", "attempt": 1, "partition": part, "version": version,
                "file": f"state/0/{part}/{version}.delta"}

    before = [sc(10, 0, 3), sc(11, 1, 3)]
    nxt = {**LATER_COMMIT, "seq": 40}
    held = executor_struck(EXEC_HEADER, [*before, EXEC_FAILURE, sc(25, 0, 4), sc(26, 1, 4), LATER_COMMIT, nxt])
    assert held.status.value == "held" and "committed version 4 after the loss" in held.detail
    lost = executor_struck(EXEC_HEADER, [*before, EXEC_FAILURE, sc(25, 0, 4), LATER_COMMIT, nxt])
    assert lost.status.value == "unchecked" and "never committed version 4" in lost.detail, lost.detail


def test_executor_lost_needs_the_same_driver_to_go_on():
    c = executor_struck(EXEC_HEADER, [EXEC_FAILURE, {**LATER_COMMIT, "attempt": 2}])
    assert c.status.value == "unchecked" and "did not go on" in c.detail
    assert executor_struck({"config": {"failure": "kill", "fail_at_batch": 2}}, []).status.value == "not-applicable"


RETRY_HEADER = {"config": {"failure": "retry", "fail_at_batch": 2}}
RETRY_FAILURE = {"seq": 17, "kind": "failure", "mode": "retry", "batch": 2, "stateful": True,
                 "failed_attempt": {"partition": 0, "stage": 24, "attempt": 0, "state_files": ["3.delta"]},
                 "succeeded_attempts": [{"partition": 0, "stage": 24, "attempt": 1, "state_files": ["3.delta"]},
                                        {"partition": 1, "stage": 24, "attempt": 0, "state_files": ["3.delta"]}]}
RESTART = {"seq": 29, "kind": "spark.restart", "resume_batch": 3}


@pytest.mark.parametrize("change,events,fragment", [
    ({"succeeded_attempts": [RETRY_FAILURE["succeeded_attempts"][1]]}, True, "Spark did not retry it"),
    ({"succeeded_attempts": [{**RETRY_FAILURE["succeeded_attempts"][0], "stage": 25}]}, True, "did not retry"),
    ({"failed_attempt": {**RETRY_FAILURE["failed_attempt"], "state_files": []}}, True, "after its state store"),
    ({}, False, "never followed by a restart"),
    ({"failed_attempt": None}, True, "does not record the failed task attempt")])
def test_task_retried_is_unchecked_without_its_evidence(change, events, fragment):
    assert retry_struck(RETRY_HEADER, [RETRY_FAILURE, RESTART]).status.value == "held"
    c = retry_struck(RETRY_HEADER, [{**RETRY_FAILURE, **change}] + ([RESTART] if events else []))
    assert c.status.value == "unchecked" and fragment in c.detail, c.detail


# ----------------------------------------------------------------------------- shipped recordings
def _replay(capsys, path: Path) -> tuple[int, dict]:
    rc = main(["spark", "replay", str(path), "--json"])
    return rc, json.loads(capsys.readouterr().out)


def _checks(doc: dict) -> dict[str, dict]:
    return {c["name"]: c for c in doc["checks"]}


@pytest.mark.parametrize("name,check", [("spark-query-retry.jsonl", "task-retried"),
                                        ("spark-query-executor.jsonl", "executor-lost"),
                                        ("spark-query-during-recovery.jsonl", "second-failure"),
                                        ("spark-query-twice.jsonl", "second-failure")])
def test_shipped_recordings_are_conformant_and_prove_their_failure(capsys, name, check):
    rc, doc = _replay(capsys, DATA / name)
    assert rc == 0 and doc["conformant"] is True, doc
    checks = _checks(doc)
    assert checks[check]["status"] == "held" and checks["failure-observed"]["status"] == "held"
    for must in ("output-exactly-once", "state-failure-free", "commit-protocol"):
        assert checks[must]["status"] == "held", checks[must]


def test_the_retried_tasks_state_dropped_is_caught(capsys, tmp_path):
    """The mutant: a recovery that lost the state version the retried task committed."""
    out = tmp_path / "t.jsonl"
    assert main(["spark", "tamper", str(DATA / "spark-query-retry.jsonl"), "--how", "drop-retried-state",
                 "-o", str(out)]) == 0
    capsys.readouterr()
    from rollcheck.spark_replay.tamper import drop_retried_state
    from rollcheck.spark_replay.trace import read_trace

    _lines, seq = drop_retried_state(read_trace(DATA / "spark-query-retry.jsonl"))
    rc, doc = _replay(capsys, out)
    assert rc == 1 and doc["conformant"] is False and doc["first_offending_seq"] == seq, doc
    assert _checks(doc)["resume-prediction"]["status"] == "violated"


def test_a_retry_without_the_retried_attempt_is_inconclusive(capsys, tmp_path):
    lines = (DATA / "spark-query-retry.jsonl").read_text(encoding="utf-8").splitlines()
    out = []
    for ln in lines:
        e = json.loads(ln)
        if e.get("kind") == "failure" and e.get("mode") == "retry":
            p = e["failed_attempt"]["partition"]
            e["succeeded_attempts"] = [a for a in e["succeeded_attempts"] if a["partition"] != p]
        out.append(json.dumps(e))
    t = tmp_path / "no-retry.jsonl"
    t.write_text("\n".join(out) + "\n", encoding="utf-8")
    rc, doc = _replay(capsys, t)
    assert rc == 3 and doc["conformant"] is None
    assert _checks(doc)["task-retried"]["status"] == "unchecked"


# ----------------------------------------------------------------------------- real runs
def _record(tmp_path: Path, *extra: str) -> tuple[dict, dict]:
    trace = tmp_path / "q.jsonl"
    r = subprocess.run([sys.executable, "-m", "rollcheck.cli.main", "spark", "record", "query", "--module",
                        str(CLICKS), "--out", str(trace), "--fail-at-batch", "2", *extra, "--json"],
                       capture_output=True, text=True, timeout=1500)
    assert r.returncode == 0, r.stderr[-3000:]
    rep = subprocess.run([sys.executable, "-m", "rollcheck.cli.main", "spark", "replay", str(trace), "--json"],
                         capture_output=True, text=True, timeout=600)
    doc = json.loads(rep.stdout)
    assert rep.returncode == 0 and doc["conformant"] is True, doc
    return json.loads(r.stdout), _checks(doc)


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.engines
def test_real_retry_after_the_state_store_committed(tmp_path):
    res, checks = _record(tmp_path, "--failure", "retry")
    assert checks["task-retried"]["status"] == "held" and "failed in attempt 0" in checks["task-retried"]["detail"]
    assert checks["resume-prediction"]["status"] == "held" and res["children"] == 2


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.engines
@pytest.mark.parametrize("failure", ["twice", "during-recovery"])
def test_real_second_kill(tmp_path, failure):
    res, checks = _record(tmp_path, "--failure", failure)
    assert checks["second-failure"]["status"] == "held", checks["second-failure"]
    assert res["children"] == 3  # the killed driver, the restarted one killed again, the one that finished


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.engines
def test_real_executor_lost_on_a_local_standalone_cluster(tmp_path):
    res, checks = _record(tmp_path, "--failure", "executor", "--cluster", "local-standalone")
    assert checks["executor-lost"]["status"] == "held" and "code 137" in checks["executor-lost"]["detail"]
    assert res["children"] == 1  # the same driver went on
    assert _processes_under(tmp_path / "q.jsonl.work" / "cluster") == []  # the cluster was stopped


def _processes_under(folder: Path) -> list[int]:
    """Processes whose command line or working folder lies in ``folder`` (the cluster's JVMs)."""
    return [int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) != os.getpid()
            and str(folder) in " ".join([*_cmdline(int(p)), _cwd(int(p))])]


def _cmdline(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return []


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.engines
def test_the_cluster_dies_with_its_owner(tmp_path):
    """A process that started a local standalone cluster is SIGKILLed: every JVM of the cluster
    (master, workers) ends within 10 s."""
    ready = tmp_path / "ready"
    code = ("import sys, time, pathlib\n"
            "from rollcheck.spark_replay.cluster import LocalStandaloneCluster\n"
            f"c = LocalStandaloneCluster(root=pathlib.Path({str(tmp_path / 'c')!r})); c.start()\n"
            f"pathlib.Path({str(ready)!r}).write_text(c.master_url)\n"
            "time.sleep(600)\n")
    owner = subprocess.Popen([sys.executable, "-c", code])
    try:
        deadline = time.monotonic() + 600
        while not ready.exists() and time.monotonic() < deadline and owner.poll() is None:
            time.sleep(0.5)
        assert ready.exists(), "the cluster did not start"

        assert len(_processes_under(tmp_path / "c")) >= 3  # the master and two workers
        owner.send_signal(signal.SIGKILL)
        owner.wait()
        deadline = time.monotonic() + 10
        while _processes_under(tmp_path / "c") and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _processes_under(tmp_path / "c") == []
    finally:
        owner.kill()
        owner.wait()


def _cwd(pid: int) -> str:
    try:
        return os.readlink(f"/proc/{pid}/cwd")
    except OSError:
        return ""


# ----------------------------------------------------------------------------- twice and during-recovery
LOGS = {"offsets": 2, "commits": 1}
FIRST = {"seq": 5, "kind": "failure", "mode": "kill", "batch": 2, "attempt": 1, "checkpoint_logs": LOGS}


def _second(mode: str, between: list[dict], **change) -> list[dict]:
    return [FIRST, {"seq": 6, "kind": "spark.attempt_start", "attempt": 2}, *between,
            {"seq": 20, "kind": "failure", "mode": mode, "batch": 2, "attempt": 2, "checkpoint_logs": LOGS, **change}]


def test_twice_needs_the_recovery_and_the_batch_written_again():
    h = {"config": {"failure": "twice", "fail_at_batch": 2}}
    restart = {"seq": 7, "kind": "spark.restart", "attempt": 2, "resume_batch": 2}
    sunk = {"seq": 8, "kind": "spark.sink_written", "attempt": 2, "batch": 2}
    assert second_failure_struck(h, _second("twice", [restart, sunk])).status.value == "held"
    for between, fragment in (([sunk], "before the restarted driver recovered"),
                              ([restart], "had not written batch 2 again")):
        c = second_failure_struck(h, _second("twice", between))
        assert c.status.value == "unchecked" and fragment in c.detail, c.detail
    c = second_failure_struck(h, _second("twice", [restart, sunk], checkpoint_logs={"offsets": 3, "commits": 2}))
    assert c.status.value == "unchecked" and "not inside batch 2" in c.detail
    c = second_failure_struck(h, _second("twice", [restart, sunk], attempt=1))
    assert c.status.value == "unchecked" and "did not strike a later driver" in c.detail
    assert second_failure_struck(h, [FIRST]).status.value == "unchecked"
    assert second_failure_struck({"config": {"failure": "kill"}}, []).status.value == "not-applicable"


@pytest.mark.parametrize("kind", ["spark.restart", "spark.sink_written", "spark.state_committed"])
def test_during_recovery_is_unchecked_once_the_restarted_driver_restored(kind):
    h = {"config": {"failure": "during-recovery", "fail_at_batch": 2}}
    assert second_failure_struck(h, _second("during-recovery", [])).status.value == "held"
    c = second_failure_struck(h, _second("during-recovery", [{"seq": 9, "kind": kind, "attempt": 2, "batch": 2}]))
    assert c.status.value == "unchecked" and "not during the recovery" in c.detail, c.detail


def test_twice_and_during_recovery_are_columns_and_run_in_local_mode():
    assert columns(["during-recovery", "twice", "task"], []) == ["task", "twice", "during-recovery"]
    MatrixOptions(modules=["q.py"], failures=["twice", "during-recovery"]).validate()
    QueryConfig(str(CLICKS), failure="during-recovery", fail_at_batch=2).validate()
    with pytest.raises(InvalidInputError, match="--failure kill"):
        QueryConfig(str(CLICKS), failure="twice", fail_at_batch=2, kill_point="commit").validate()


# ----------------------------------------------------------------------------- the matrix adapter
@pytest.mark.parametrize("name,status,again", [("second-failure", "unchecked", True),
                                               ("executor-lost", "unchecked", True),
                                               ("task-retried", "unchecked", True),
                                               ("second-failure", "held", False),
                                               ("output-exactly-once", "unchecked", False)])
def test_a_failure_that_struck_off_its_point_is_recorded_again(tmp_path, name, status, again):
    from rollcheck.spark_replay.matrix.run import _missed_kill

    checks = tmp_path / "c.json"
    checks.write_text(json.dumps({"checks": [{"name": name, "status": status}]}))
    assert _missed_kill({"checks": str(checks)}) is again


def test_a_finding_of_the_new_columns_says_it_has_no_standalone_reproducer(tmp_path):
    from rollcheck.spark_replay.matrix.plan import Cell
    from rollcheck.spark_replay.matrix.run import SparkAdapter

    opts = MatrixOptions(modules=[str(CLICKS)], failures=["retry"], out=tmp_path)
    cell = Cell(str(CLICKS), "hdfs", "retry")
    res = SparkAdapter(opts, [cell]).finding(cell, {}, None, None, tmp_path)  # type: ignore[arg-type]
    assert res["reproducer"] is None and "retry" in res["reproducer_note"]
    assert SparkAdapter(replace_master(opts), [cell]).describe(cell)[0]["cluster"] == "spark://127.0.0.1:7077"


def replace_master(opts: MatrixOptions) -> MatrixOptions:
    from dataclasses import replace

    return replace(opts, master="spark://127.0.0.1:7077")
