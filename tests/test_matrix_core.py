"""The engine-neutral matrix core (rollcheck.infra.matrix) with a toy adapter, no engine.

What every engine's matrix relies on: shared preparations (a failed one makes its cells
inconclusive without running them), retries, a cell that raises stops the matrix and reaches the
caller, the verdict from decide (an empty matrix is 3), and the interrupt: Ctrl-C or SIGTERM kill
every child process at once and leave matrix.json and index.html whole (about 10 s).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from rollcheck.infra.matrix import (
    EngineAdapter,
    GenericCell,
    Prepared,
    Recording,
    Replayed,
    matrix_verdict,
    run_matrix,
)
from rollcheck.pyimpl.errors import InvalidInputError
from rollcheck.pyimpl.verdict import Check, Report


class Toy(EngineAdapter):
    """A cell's column says what its replay finds: ok, bad, or gap (an unchecked check)."""

    engine = "toy"
    retries = 1

    def __init__(self, prepare_fails=False, flaky=(), raise_on=()):
        self.prepare_fails, self.flaky, self.raise_on = prepare_fails, set(flaky), set(raise_on)
        self.recorded: list[str] = []
        self.prepared: list[str] = []

    def describe(self, cell):
        return {"row": cell.row}, {"kind": cell.column}, {}

    def group(self, cell):
        return cell.row if cell.row.startswith("shared") else None

    def prepare(self, group, cells, runner, out):
        self.prepared.append(group)
        return Prepared(error="the reference run failed") if self.prepare_fails else Prepared(context="ref")

    def record(self, cell, context, runner, out):
        if cell.column in self.raise_on:
            raise InvalidInputError("the module's records() raised ZeroDivisionError", source="m.py")
        self.recorded.append(cell.ident)
        trace = out / f"{cell.ident}.jsonl"
        trace.parent.mkdir(parents=True, exist_ok=True)
        trace.write_text("{}\n")
        return Recording(trace, extra={"context": context})

    def replay(self, cell, recording):
        if cell.column == "ok" or (cell.column == "flaky" and self.recorded.count(cell.ident) > 1):
            return Replayed(Report([Check.held("output", "same rows", examined=3)]))
        if cell.column == "bad":
            return Replayed(Report([Check.violated("output", "row 2 lost")]))
        return Replayed(Report([Check.unchecked("failure-struck", "the failure struck elsewhere")]))

    def retry(self, cell, entry, recording):
        return cell.column == "flaky"


def cells(row, *cols):
    return [GenericCell("m.py", row, c) for c in cols]


def test_preparation_retries_and_verdicts(tmp_path):
    toy = Toy()
    doc = run_matrix(toy, cells("shared", "ok", "bad") + cells("alone", "flaky", "gap"), tmp_path, jobs=2)
    by = {(c["row"], c["column"]): c for c in doc["cells"]}
    assert toy.prepared == ["shared"] and by[("shared", "ok")]["context"] == "ref"
    assert by[("alone", "flaky")]["verdict"] == "conformant" and by[("alone", "flaky")]["tries"] == 2
    assert by[("alone", "gap")]["verdict"] == "inconclusive" and by[("alone", "gap")]["tries"] == 1  # not retried
    assert by[("shared", "bad")]["reason"] == "finding: output: row 2 lost"
    assert by[("shared", "bad")]["attributed_to"] == "engine"
    assert [c["column"] for c in doc["cells"]] == ["ok", "bad", "flaky", "gap"]  # table order
    assert doc["verdict"] == "not-conformant" and matrix_verdict(doc["cells"]).exit_code == 1
    assert json.loads(Path(by[("shared", "ok")]["checks"]).read_text())["verdict"] == "conformant"


def test_a_failed_preparation_makes_its_cells_inconclusive_without_running_them(tmp_path):
    toy = Toy(prepare_fails=True)
    doc = run_matrix(toy, cells("shared", "ok", "bad"), tmp_path)
    assert toy.recorded == [] and {c["verdict"] for c in doc["cells"]} == {"inconclusive"}
    assert doc["cells"][0]["reason"] == "inconclusive: the reference run failed"
    assert matrix_verdict(doc["cells"]).exit_code == 3


def test_an_empty_matrix_is_undecided(tmp_path):
    doc = run_matrix(Toy(), [], tmp_path)
    assert doc["cells"] == [] and doc["verdict"] == "inconclusive" and matrix_verdict([]).exit_code == 3


def test_a_cell_that_raises_stops_the_matrix_and_reaches_the_caller(tmp_path):
    with pytest.raises(InvalidInputError, match="ZeroDivisionError"):
        run_matrix(Toy(raise_on={"boom"}), cells("alone", "boom", "ok"), tmp_path)


def test_two_cells_on_one_table_place_are_refused(tmp_path):
    with pytest.raises(InvalidInputError, match="share"):
        run_matrix(Toy(), cells("alone", "ok", "ok"), tmp_path)


_SLOW = textwrap.dedent("""
    import signal, sys, time
    from pathlib import Path
    from rollcheck.infra.matrix import EngineAdapter, GenericCell, Recording, Replayed, run_matrix
    from rollcheck.pyimpl.verdict import Check, Report

    def term(*_):  # as rollcheck's entry point does: SIGTERM becomes an exception in the main thread
        raise KeyboardInterrupt("SIGTERM")
    signal.signal(signal.SIGTERM, term)

    class Slow(EngineAdapter):
        engine = "slow"
        def describe(self, cell):
            return {}, {}, {}
        def record(self, cell, context, runner, out):
            trace = out / f"{cell.ident}.jsonl"
            trace.parent.mkdir(parents=True, exist_ok=True)
            if cell.column != "quick":
                runner.run(["sh", "-c", f"echo $$ >> {out}/pids; sleep 120"], 300, out / f"{cell.ident}.log")
            trace.write_text("{}")
            return Recording(trace)
        def replay(self, cell, recording):
            return Replayed(Report([Check.held("x", "ok", examined=1)]))

    out = Path(sys.argv[1])
    run_matrix(Slow(), [GenericCell("m.py", "r", c) for c in ("quick", "slow1", "slow2", "slow3")], out, jobs=2)
""")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupt_kills_the_children_and_leaves_whole_files(tmp_path, sig):
    out = tmp_path / "m"
    out.mkdir()
    p = subprocess.Popen([sys.executable, "-c", _SLOW, str(out)], stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        pids = (out / "pids").read_text().split() if (out / "pids").exists() else []
        if len(pids) == 2 and (out / "matrix.json").exists():
            break
        time.sleep(0.1)
    else:
        p.kill()
        pytest.fail("the matrix never had its two slow cells running")
    time.sleep(0.3)
    t0 = time.monotonic()
    p.send_signal(sig)
    _, err = p.communicate(timeout=60)
    assert p.returncode != 0 and "KeyboardInterrupt" in err and time.monotonic() - t0 < 20
    for pid in map(int, pids):  # every child died with the matrix
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    doc = json.loads((out / "matrix.json").read_text())  # whole, as after the last finished cell
    assert doc["finished"] is False and [c["column"] for c in doc["cells"]] == ["quick"]
    assert "</html>" in (out / "index.html").read_text()
    leftovers = [f.name for f in out.rglob("*") if f.name.endswith((".tmp", ".partial")) or ".tmp" in f.name]
    assert leftovers == []


def test_both_engines_tamper_modules_share_one_file_interface(tmp_path):
    import rollcheck.flink_replay.checks.tamper as ft
    import rollcheck.spark_replay.tamper as st

    root = Path(__file__).resolve().parents[1] / "examples"
    s = st.tamper_file(root / "spark-wordcount-kill.jsonl", "drop-commit", tmp_path / "s.jsonl")
    f = ft.tamper_file(root / "flink-aligned-task-failure.jsonl", "drop-failure", tmp_path / "f.jsonl")
    assert set(s) == set(f) == {"trace", "how", "expected_check", "expected_first_offending_seq"}
    assert isinstance(s["expected_first_offending_seq"], int) and f["expected_check"] == "failure-observed"
    assert (tmp_path / "s.jsonl").is_file() and (tmp_path / "f.jsonl").is_file()
    assert "drop-commit" in st.TAMPER_NAMES and "drop-failure" in ft.TAMPER_NAMES
    with pytest.raises(InvalidInputError, match="unknown tampering"):
        st.tamper_file(root / "spark-wordcount-kill.jsonl", "nope", tmp_path / "x.jsonl")


def test_flink_adapter_writes_a_findings_reproducer_without_a_jvm(tmp_path):
    """The Flink adapter's part of a finding (no Flink run): a word-count cell's reproducer from
    the engine's template, with the failure at the recorded record."""
    from rollcheck.flink_replay.matrix import Cell, FlinkAdapter
    from rollcheck.infra.matrix import ChildRunner

    cell = Cell("wordcount", "rocksdb", "aligned", "task", None)
    rep = Report([Check.violated("output-exactly-once", "row 3 of KEY [\"w1\"] committed 2 times")])
    got = FlinkAdapter(records=600).finding(cell, {"verdict": "not-conformant"},
                                            Replayed(rep, {"config": {"records": 600, "fail_at_record": 277}}),
                                            ChildRunner(), tmp_path)
    text = Path(got["reproducer"]).read_text()
    assert got["reproducer"].endswith("wordcount-rocksdb-aligned-task-same.repro.py")
    # the word count is not re-run: its minimised input is the whole one, in the core's schema
    assert got["minimised"] == {"check": "output-exactly-once", "input": {"unit": "records", "kept": 600, "of": 600},
                                "batches": None, "sources_dropped": [], "fail_at": {"record": 277}, "runs": 0,
                                "tries": [], "trace": None}
    assert "FAIL_AT, SEED, RATE = 277, 0, 400.0" in text and "import rollcheck" not in text


def test_flink_adapter_runs_the_reproducer_on_request(tmp_path, monkeypatch):
    """With run_reproducer the finding's script is run once with the PyFlink environment's Python
    (here a stand-in interpreter that prints what the template prints) and the run recorded."""
    import rollcheck.flink_replay.environment as env
    from rollcheck.flink_replay.matrix import Cell, FlinkAdapter
    from rollcheck.infra.matrix import ChildRunner

    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\necho 'KEY [\"w1\"]: 3 rows committed, 2 without the failure'\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setattr(env, "find_flink", lambda: env.FlinkEnvironment(fake, tmp_path, "2.3"))
    rep = Report([Check.violated("output-exactly-once", "row 3 committed 2 times")])
    got = FlinkAdapter(run_reproducer=True).finding(Cell("wordcount", "hashmap", "aligned", "task", None), {},
                                                    Replayed(rep, {"config": {}}), ChildRunner(), tmp_path)
    assert got["reproducer_run"]["reproduced"] is True and got["reproducer_run"]["exit"] == 1
    assert got["reproducer_run"]["shows"] == ['KEY ["w1"]: 3 rows committed, 2 without the failure']
