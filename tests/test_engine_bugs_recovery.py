"""The bug zoo's recovery bugs (``benchmarks/engine_bugs``): the table's "needs a failure" column and
the recall stated apart for bugs that need a failure, the retry schedules an entry's slice hands to
``spark matrix``, and the standalone Spark reproducer's task retry (``--retry-at-batch``). Fast: no
engine runs (``make bench-bugs`` runs the entries)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
ZOO = ROOT / "benchmarks" / "engine_bugs"


def _load(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(f"zoo_recovery_{name}", ZOO / f"{name}.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _result(bug: str, status: str, needs: bool) -> dict[str, Any]:
    return {"id": bug, "engine": "spark", "kind": "restore failure" if needs else "wrong output",
            "affected": "3.4.0", "fixed": "3.4.1", "module": "modules/x.py", "description": "d",
            "expected": {"wrong": "w", "right": "r"}, "needs_failure": needs,
            "reproducer_run": {"3.4.0": {"outcome": "reproduced"}, "3.4.1": {"outcome": "not reproduced"}},
            "rollcheck": {"3.4.0": {"found": status == "found", "how": "spark matrix"},
                          "3.4.1": {"found": False, "how": "spark matrix"}},
            "status": status}


def test_table_says_which_bugs_need_a_failure_and_recall_apart() -> None:
    run = _load("run")
    entries = [_result("SPARK-1", "found", False), _result("SPARK-2", "found", True),
               _result("SPARK-3", "missed", True), _result("SPARK-4", "found", True)]
    results = {"generated": "now", "entries": entries, "notes": [],
               "summary": {"entries": 4, "reproduced_affected": 4, "quiet_fixed_reproducer": 4, "found": 3,
                           "missed": 1, "not_run": 0, "findings_on_fixed": 0}}
    text = run.render_markdown(results)
    header = next(ln for ln in text.splitlines() if ln.startswith("| bug |"))
    assert "| needs a failure |" in header
    rows = {ln.split(" | ")[0][2:]: ln.split(" | ") for ln in text.splitlines() if ln.startswith("| SPARK-")}
    assert rows["SPARK-1"][2] == "no" and rows["SPARK-2"][2] == "yes" and rows["SPARK-3"][2] == "yes"
    assert "bugs that show without a failure 1/1 (100 %) (1 entries: 1 found, 0 missed, 0 neither" in text
    assert "bugs that need a failure or a restore 2/3 (67 %) (3 entries: 2 found, 1 missed, 0 neither" in text
    assert run.recall(entries, True) == (2, 3) and run.recall(entries, False) == (1, 1)
    assert "## Recovery bugs examined, not entries" not in text
    text = run.render_markdown(dict(results, candidates=["SPARK-9: needs two live executors"]))
    assert "## Recovery bugs examined, not entries\n\n- SPARK-9: needs two live executors" in text


def test_manifest_says_for_every_entry_whether_it_needs_a_failure() -> None:
    entries = json.loads((ZOO / "manifest.json").read_text(encoding="utf-8"))["entries"]
    assert all(isinstance(e.get("needs_failure"), bool) for e in entries)
    recovery = [e for e in entries if e["engine"] == "spark" and e["needs_failure"]]
    assert {"SPARK-52553", "SPARK-43404"} <= {e["id"] for e in recovery}
    for e in recovery:  # a bug that needs a failure is run with a failure that restores state
        assert set(e["slice"]["failures"]) - {"task", "sink"}, e["id"]


def test_matrix_gets_the_slice_retry_schedules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = _load("run")
    calls: list[list[str]] = []

    def fake_run(cmd: list[str], **kw: Any) -> subprocess.CompletedProcess[str]:
        calls.append(cmd)
        return subprocess.CompletedProcess(cmd, 1, stdout=json.dumps({"cells": [
            {"verdict": "not-conformant", "checks": [{"name": "recovery-succeeded", "ok": False}]}]}), stderr="")

    monkeypatch.setattr(run, "_help", lambda *sub: "--engine-version")
    monkeypatch.setattr(run.subprocess, "run", fake_run)
    entry: dict[str, Any] = {"engine": "spark", "module": "modules/spark_43404_retry_sst_reuse.py", "affected": "3.4.0",
             "fixed": "3.4.1", "slice": {"providers": ["rocksdb"], "failures": ["retry"], "kill_points": [],
                                         "retry_schedules": ["load=first", "tasks=all"], "fail_at_batch": 1}}
    got = run._rollcheck(entry, "3.4.0", tmp_path)
    cmd = calls[0]
    assert cmd[cmd.index("--retry-schedules") + 1] == "load=first,tasks=all"
    assert cmd[cmd.index("--reference-version") + 1] == "3.4.1"
    assert got["found"] is True and got["failed_checks"] == ["recovery-succeeded"]
    calls.clear()
    run._rollcheck(dict(entry, slice=dict(entry["slice"], retry_schedules=[])), "3.4.1", tmp_path)
    assert "--retry-schedules" not in calls[0] and "--reference-version" not in calls[0]


class _Attempt:
    def __init__(self, n: int) -> None:
        self.n = n

    def attemptNumber(self) -> int:  # noqa: N802 - the name PySpark's TaskContext has
        return self.n


def test_reproducer_retry_fails_the_first_attempt_after_draining(monkeypatch: pytest.MonkeyPatch) -> None:
    pyspark = pytest.importorskip("pyspark")
    standalone = _load("spark_standalone")
    drained: list[int] = []

    def rows() -> Any:
        for i in range(3):
            drained.append(i)
            yield i

    monkeypatch.setattr(pyspark.TaskContext, "get", staticmethod(lambda: _Attempt(0)))
    with pytest.raises(RuntimeError, match="first attempt"):
        standalone._fail_first_attempt(rows())
    assert drained == [0, 1, 2]  # every row read (the state store committed) before the raise
    monkeypatch.setattr(pyspark.TaskContext, "get", staticmethod(lambda: _Attempt(1)))
    assert standalone._fail_first_attempt(iter([4, 5])) == [4, 5]



def test_reproducer_runner_kills_what_the_script_left_running(tmp_path: Path) -> None:
    """A reproducer whose JVM outlives it (it keeps the output open) does not hold the runner: the
    script's answer is read once it exited, and what it left in its session is killed."""
    import sys
    import time

    run = _load("run")
    pid_file = tmp_path / "child.pid"
    script = ("import subprocess, sys\n"
              f"c = subprocess.Popen(['sleep', '300'])\nopen({str(pid_file)!r}, 'w').write(str(c.pid))\n"
              "print('{\"rows\": []}', flush=True)\n")
    t0 = time.time()
    p = run.run_script([sys.executable, "-c", script], {}, tmp_path / "r.log", 120)
    assert p is not None and p.returncode == 0 and p.stdout.strip() == '{"rows": []}'
    assert time.time() - t0 < 60
    child = int(pid_file.read_text())
    for _ in range(50):  # killed: gone, or a zombie of init's until reaped
        stat = Path(f"/proc/{child}/stat")
        if not stat.exists() or stat.read_text().split(")")[-1].split()[0] == "Z":
            break
        time.sleep(0.1)
    else:
        raise AssertionError(f"the script's child {child} is still running")
    assert run.run_script([sys.executable, "-c", "import time; time.sleep(30)"], {}, tmp_path / "t.log", 1) is None


def test_record_runner_gets_the_schedule_as_flags(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An entry whose slice says ``runner: record`` is recorded with ``spark record query`` (its
    retry schedule as that command's flags) and judged by ``spark replay``, not by the matrix."""
    run = _load("run")
    calls: list[list[str]] = []

    def fake_run(cmd: list[str], **kw: Any) -> subprocess.CompletedProcess[str]:
        calls.append(cmd)
        if "record" in cmd:  # a recording whose restart failed judges nothing (exit 3)
            return subprocess.CompletedProcess(cmd, 3, stdout="{}", stderr="inconclusive")
        return subprocess.CompletedProcess(cmd, 1, stdout=json.dumps({"conformant": False, "checks": [
            {"name": "recovery-succeeded", "status": "violated"}]}), stderr="")

    monkeypatch.setattr(run, "_help", lambda *sub: "--engine-version")
    monkeypatch.setattr(run.subprocess, "run", fake_run)
    entry: dict[str, Any] = {
        "engine": "spark", "module": "modules/spark_43404_retry_sst_reuse.py", "affected": "3.4.0", "fixed": "3.4.1",
        "slice": {"providers": ["rocksdb"], "failures": ["retry"], "kill_points": [], "runner": "record",
                  "retry_schedules": ["load=first+then=restart"], "fail_at_batch": 1}}
    got = run._rollcheck(entry, "3.4.0", tmp_path)
    rec, replay = calls[0], calls[1]
    assert rec[rec.index("spark") + 1:rec.index("spark") + 3] == ["record", "query"]
    assert replay[replay.index("spark") + 1] == "replay"
    assert rec[rec.index("--fail-load") + 1] == "first" and rec[rec.index("--after-failure") + 1] == "restart"
    assert "matrix" not in rec and "--retry-schedules" not in rec
    assert got["found"] is True and got["failed_checks"] == ["recovery-succeeded"]
    assert "retry schedule load=first+then=restart" in got["how"]
    with pytest.raises(ValueError, match="'cores=2'"):
        run.schedule_flags("load=first+cores=2")


def test_merge_keeps_the_part_a_later_pass_skipped(tmp_path: Path) -> None:
    """Passes run side by side, one with --skip-rollcheck and one with --skip-reproducer, merge into
    one entry: each part from the pass that ran it, the status judged from rollcheck's part."""
    run = _load("run")
    repro = dict(_result("SPARK-43404", "not run", True), rollcheck={})
    check = dict(_result("SPARK-43404", "found", True), reproducer_run={})
    got = run.combine(run.combine(None, repro), check)
    assert got["reproducer_run"] == repro["reproducer_run"] and got["rollcheck"] == check["rollcheck"]
    assert got["status"] == "found"
    again = run.combine(got, dict(_result("SPARK-43404", "missed", True), reproducer_run={}))
    assert again["status"] == "missed" and again["reproducer_run"] == repro["reproducer_run"]
