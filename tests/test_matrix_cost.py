"""What a matrix cell costs: wall and CPU seconds of every process it ran (grandchildren too), and
what it shared, in the JSON entry, the terminal table and the HTML page. No engine (a toy adapter
whose recording is a child that starts a CPU-burning grandchild, as a recorder starts a JVM)."""

from __future__ import annotations

import json
import sys
import time

from rollcheck.infra.matrix import (
    EngineAdapter,
    GenericCell,
    Prepared,
    Recording,
    Replayed,
    TreeCpu,
    run_matrix,
)
from rollcheck.pyimpl.verdict import Check, Report

#: a child that starts a grandchild burning about 1.5 s of CPU, waits for it, and exits
_BURN = ("import subprocess, sys; subprocess.run([sys.executable, '-c', "
         "'import time\\nt=time.process_time()\\nwhile time.process_time()-t<1.5: pass'])")


class Burner(EngineAdapter):
    engine = "toy"

    def describe(self, cell):
        return {}, {"kind": cell.column}, {}

    def group(self, cell):
        return "g"

    def prepare(self, group, cells, runner, out):
        runner.charge(0.0, runs=0, reference="recorded", engine="fresh")
        return Prepared(context="ref")

    def record(self, cell, context, runner, out):
        trace = out / f"{cell.ident}.jsonl"
        trace.parent.mkdir(parents=True, exist_ok=True)
        rc, _ = runner.run([sys.executable, "-c", _BURN], 120, out / f"{cell.ident}.log")
        assert rc == 0
        trace.write_text("{}\n")
        runner.charge(0.0, runs=0, reference="reused")
        return Recording(trace)

    def replay(self, cell, recording):
        return Replayed(Report([Check.held("output", "same rows", examined=1)]))


def test_cells_carry_wall_and_cpu_of_their_grandchildren(tmp_path):
    doc = run_matrix(Burner(), [GenericCell("m.py", "r", "burn")], tmp_path / "m")
    (cell,) = doc["cells"]
    assert cell["verdict"] == "conformant"
    # the grandchild's CPU counts (about 1.5 s, sampled: at most one interval lost)
    assert 1.0 <= cell["cpu_seconds"] <= 10.0, cell
    assert cell["wall_seconds"] >= 1.0 and cell["seconds"] is not None
    assert cell["shared"] == {"reference": "reused", "engine": "fresh"}
    assert doc["preparations"] and doc["preparations"][0]["reference"] == "recorded"
    assert doc["cost"]["cpu_seconds"] >= cell["cpu_seconds"] and doc["cost"]["cells_fresh"] == 1
    saved = json.loads((tmp_path / "m" / "matrix.json").read_text())
    assert saved["cells"][0]["cpu_seconds"] == cell["cpu_seconds"]
    page = (tmp_path / "m" / "index.html").read_text()
    assert "s CPU; fresh engine, reference reused" in page and 'id="cost"' in page


def test_terminal_table_says_what_a_cell_cost():
    from rich.console import Console

    from rollcheck.infra.matrix import terminal_table

    c = GenericCell("m.py", "r", "task")
    entry = {"row": "r", "column": "task", "verdict": "conformant", "wall_seconds": 12.0, "cpu_seconds": 30.5,
             "shared": {"engine": "warm", "reference": "reused"}}
    console = Console(width=200, record=True)
    console.print(terminal_table([entry], [c], {}, title="t", row_header="h"))
    assert "12.0 s wall, 30.5 s CPU; warm engine, reference reused" in console.export_text()


def test_tree_cpu_keeps_what_an_ended_process_used():
    import subprocess

    p = subprocess.Popen([sys.executable, "-c", "import subprocess, sys, time\n" + _BURN.split("; ", 1)[1]
                          + "\ntime.sleep(1)"])
    with TreeCpu(p.pid, interval=0.1) as meter:
        p.wait()
    assert meter.seconds() >= 1.0  # the grandchild ended a second before the child: still counted
    t0 = time.perf_counter()
    assert TreeCpu(999_999_999).seconds() == 0.0 and time.perf_counter() - t0 < 5
