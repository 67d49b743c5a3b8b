"""A Flink matrix finding, shrunk by re-running and written as a pyflink-only reproducer (issue 23).

The bisection runs on a stand-in for Flink (a function deciding by the number of records) so that
its steps are exact; the reproducer is compiled and read. One `slow` test runs the whole path on
Flink: a deliberately broken job (``tests/data/flink_jobs/volatile_totals.py``, totals kept outside
Flink state) is a finding of the matrix, shrunk by two re-runs, and its reproducer, run with
PyFlink alone, shows the wrong output (about 3-5 min on a loaded machine).
"""

from __future__ import annotations

import json
import py_compile
import subprocess
import sys
from pathlib import Path

import pytest

from rollcheck.flink_replay.matrix import Cell, shrink_finding
from rollcheck.flink_replay.reproducer import write_reproducer
from rollcheck.pyimpl.errors import InconclusiveError
from rollcheck.pyimpl.verdict import Check, Report

ROOT = Path(__file__).resolve().parent.parent
BROKEN = ROOT / "tests" / "data" / "flink_jobs" / "volatile_totals.py"
CELL = Cell(str(BROKEN), "hashmap", "aligned", "task", None)


def _shows_from(n: int, check: str = "output-exactly-once"):
    seen: list[int] = []

    def run(trace: Path, cfg: dict) -> Report:
        seen.append(cfg["max_records"])
        if cfg["max_records"] >= n:
            return Report([Check.violated(check, "KEY x: final row 3, the failure-free run ends with 5")])
        return Report([Check.held(check, "ok", examined=cfg["max_records"])])
    return run, seen


def test_bisection_finds_the_fewest_records(tmp_path: Path) -> None:
    run, seen = _shows_from(37)
    r = shrink_finding(CELL, {"seed": 0}, tmp_path, "output-exactly-once", 400, runs=10, run=run)
    assert r.kept == 37 and r.of == 400 and r.unit == "records" and r.runs == len(r.tries) == len(seen)
    assert seen[:4] == [200, 100, 50, 25]                   # halving while it still shows
    assert all(x["violated"] == ["output-exactly-once"] and x["shows"] for x in r.tries if x["input"] >= 37)
    assert r.trace is not None and r.trace.endswith(".shrink-37.jsonl")


def test_bisection_is_bounded_and_keeps_the_full_input_when_nothing_smaller_shows(tmp_path: Path) -> None:
    run, seen = _shows_from(400)
    r = shrink_finding(CELL, {}, tmp_path, "output-exactly-once", 400, runs=3, run=run)
    assert r.kept == 400 and r.trace is None and seen == [200, 300, 350] and not r.smaller
    run, seen = _shows_from(1)
    assert shrink_finding(CELL, {}, tmp_path, "output-exactly-once", 400, runs=2, run=run).kept == 100


def test_another_violation_or_an_undecided_rerun_does_not_count(tmp_path: Path) -> None:
    run, _ = _shows_from(1, check="restore-latest-completed")
    r = shrink_finding(CELL, {}, tmp_path, "output-exactly-once", 400, runs=2, run=run)
    assert r.kept == 400 and r.tries[0]["violated"] == ["restore-latest-completed"] and not r.tries[0]["shows"]

    def undecided(trace: Path, cfg: dict) -> Report:
        raise InconclusiveError("the failure never struck")
    r = shrink_finding(CELL, {}, tmp_path, "output-exactly-once", 400, runs=1, run=undecided)
    assert r.kept == 400 and r.tries[0]["verdict"].startswith("inconclusive")


def test_reproducer_runs_the_shrunk_input_by_default(tmp_path: Path) -> None:
    rep = Report([Check.violated("output-exactly-once", "KEY [\"acct-1\"]: final row ...")])
    path = write_reproducer(CELL, {"interval_ms": 300, "parallelism": 2, "fail_at_record": 1, "seed": 0,
                                   "rate": 400.0}, tmp_path / "r.py", rep, records=25, fail_at=12)
    py_compile.compile(str(path), doraise=True)
    text = path.read_text()
    assert "RECORDS = 25" in text and "FAIL_AT, SEED, RATE = 12, 0, 400.0" in text
    assert "default=RECORDS" in text and "import rollcheck" not in text and "from rollcheck" not in text


@pytest.mark.slow
def test_broken_job_is_a_shrunk_finding_with_a_working_reproducer(tmp_path: Path) -> None:
    out = tmp_path / "m"
    r = subprocess.run([sys.executable, "-m", "rollcheck.cli.main", "flink", "matrix", "--module", str(BROKEN),
                        "--backends", "hashmap", "--checkpoints", "aligned", "--failures", "task",
                        "--shrink-runs", "2", "--out", str(out), "--json"],
                       capture_output=True, text=True, timeout=1800, cwd=ROOT)
    assert r.returncode == 1, r.stderr[-2000:]
    (cell,) = json.loads(r.stdout)["cells"]
    assert cell["verdict"] == "not-conformant" and not cell["expected_by_engine"]
    assert cell["reason"].startswith("finding: output-exactly-once") and cell["attributed_to"] == "engine"
    m = cell["minimised"]
    assert m["input"]["unit"] == "records" and m["input"]["kept"] < m["input"]["of"] == 600
    repro = Path(cell["reproducer"])
    assert f"RECORDS = {m['input']['kept']}" in repro.read_text()
    flink_python = ROOT / ".venv-flink" / "bin" / "python"
    if not flink_python.exists():
        pytest.skip("no PyFlink environment to run the reproducer with")
    p = subprocess.run([str(flink_python), str(repro)], capture_output=True, text=True, timeout=900)
    assert p.returncode == 1 and "reproduced" in p.stdout, p.stdout[-1500:] + p.stderr[-1500:]
