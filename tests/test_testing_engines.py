"""``rollcheck.testing``'s matrix slices: check_query / assert_query_exactly_once (Spark) and
check_job / assert_job_exactly_once (Flink).

Without an engine (about 1 s): the files go into ``--rollcheck-out`` (or ``out``), the assertion
names every failing cell with its trace, witness and reproducer, a cell the engine's documentation
explains still fails it, and an undecided one too. With Spark (``spark``, ``slow``: two one-cell
slices, 1-3 minutes on a loaded machine): the at-least-once ``foreachBatch`` example keeps its
declaration under a sink failure, and the appending sink that declares nothing fails the assertion.
With Flink (``slow``, skipped without the PyFlink environment: 1-2 minutes): one cell of a library
job through ``assert_job_exactly_once``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import rollcheck.spark_replay.matrix.run as spark_matrix
from rollcheck.pyimpl.errors import InvalidInputError
from rollcheck.testing import (
    EngineReport,
    assert_job_exactly_once,
    assert_query_exactly_once,
    check_query,
)

ROOT = Path(__file__).resolve().parents[1]


def _fake(cells):
    def run(opts, **_kw):
        out = Path(opts.out)
        (out / "a.jsonl").write_text("{}\n")
        return {"cells": [dict(c, trace=str(out / "a.jsonl")) for c in cells],
                "summary": {"conformant": sum(c["verdict"] == "conformant" for c in cells),
                            "not_conformant": sum(c["verdict"] == "not-conformant" for c in cells),
                            "inconclusive": sum(c["verdict"] == "inconclusive" for c in cells),
                            "expected_by_engine": sum(bool(c.get("expected_by_engine")) for c in cells),
                            "findings": 0}, "index": str(out / "index.html")}
    return run


def _cell(verdict, **kw):
    return {"row": "q · hdfs", "column": "sink", "verdict": verdict, "reason": f"{verdict} because", **kw}


def test_files_go_into_rollcheck_out_and_a_pass_is_every_cell_conformant(tmp_path, monkeypatch):
    from rollcheck.testing import _config

    monkeypatch.setattr(_config, "OUT", str(tmp_path / "artifacts"))
    monkeypatch.setattr(spark_matrix, "run_matrix", _fake([_cell("conformant")]))
    rep = assert_query_exactly_once("q.py")
    assert isinstance(rep, EngineReport) and rep.verdict == "conformant" and rep.exit_code == 0
    assert Path(rep.out).parent == tmp_path / "artifacts" and Path(rep.out).name.startswith("q-spark-")


@pytest.mark.parametrize("cell, word", [
    (_cell("not-conformant", expected_by_engine=True, attributed_to="module",
           reproducer="/r/q.reproducer.py"), "expected by the engine"),
    (_cell("inconclusive"), "inconclusive"),
])
def test_the_assertion_names_each_failing_cell_and_its_files(tmp_path, monkeypatch, cell, word):
    monkeypatch.setattr(spark_matrix, "run_matrix", _fake([_cell("conformant", column="task"), cell]))
    with pytest.raises(AssertionError) as e:
        assert_query_exactly_once("q.py", out=tmp_path)
    msg = str(e.value)
    assert word in msg and "q · hdfs · sink: " in msg and "because" in msg and "trace: " + str(tmp_path) in msg
    assert "q · hdfs · task" not in msg  # a conformant cell is not named
    if cell.get("reproducer"):
        assert "reproducer: /r/q.reproducer.py" in msg
    rep = check_query("q.py", out=tmp_path)
    assert rep.exit_code == (1 if cell["verdict"] == "not-conformant" else 3)


def test_a_missing_job_module_is_bad_input(tmp_path):
    with pytest.raises(InvalidInputError, match="no such job module"):
        assert_job_exactly_once(tmp_path / "nope.py", out=tmp_path)


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.engines
def test_real_slices_declared_at_least_once_passes_undeclared_appending_sink_fails(tmp_path):
    rep = assert_query_exactly_once(ROOT / "examples" / "queries" / "foreachbatch_append.py", batches=3,
                                    fail_at_batch=1, out=tmp_path)
    (cell,) = rep.cells
    assert cell["verdict"] == "conformant" and Path(cell["trace"]).is_file()
    with pytest.raises(AssertionError) as e:
        assert_query_exactly_once(ROOT / "tests" / "queries" / "append_sink.py", batches=3, fail_at_batch=1,
                                  out=tmp_path)
    msg = str(e.value)
    assert "not-conformant" in msg and "trace: " in msg and "witness: " in msg, msg
    doc = json.loads(next(tmp_path.glob("append_sink-spark-*/matrix.json")).read_text())
    assert doc["cells"][0]["expected_by_engine"] is True and doc["cells"][0]["attributed_to"] == "module"


def _flink_available() -> bool:
    from rollcheck.flink_replay.environment import find_flink
    from rollcheck.pyimpl.errors import InconclusiveError

    try:
        find_flink()
    except InconclusiveError:
        return False
    return True


@pytest.mark.slow


@pytest.mark.engines
@pytest.mark.skipif(not _flink_available(), reason="no PyFlink environment (make flink-setup)")
def test_real_flink_slice_of_a_job_module(tmp_path):
    """One Flink cell (hashmap, aligned, a task failure) of the library's keyed totals: conformant,
    its trace and the table in the slice's folder (1-2 minutes)."""
    rep = assert_job_exactly_once(ROOT / "examples" / "flink_jobs" / "keyed_totals.py", out=tmp_path)
    (cell,) = rep.cells
    assert cell["engine"] == "flink" and cell["column"] == "task" and Path(cell["trace"]).is_file()
    assert Path(rep.index).is_file() and Path(rep.out).parent == tmp_path
