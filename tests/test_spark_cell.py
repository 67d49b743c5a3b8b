"""A matrix cell's recording as a typed configuration (rollcheck.spark_replay.matrix.cell): the one builder,
the JSON file a fresh child or a warm driver reads, and bad files refused with exit 2 naming the
field. No Spark run here (the real cells are in test_spark_warm.py)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from rollcheck.pyimpl.errors import InvalidInputError
from rollcheck.spark_replay.matrix.cell import CELL_FORMAT, CellConfig, cell_argv, cell_config
from rollcheck.spark_replay.matrix.plan import Cell, MatrixOptions


def test_builder_carries_every_option_of_the_matrix(tmp_path):
    opts = MatrixOptions(["q.py"], seed=5, batches=4, fail_at_batch=1, call_timeout=30.0, master="local[1]")
    ref = cell_config(None, opts, tmp_path / "r.jsonl", None, module="q.py", provider="rocksdb")
    assert ref.query.failure is None and ref.query.reference is False and ref.query.state_store == "rocksdb"
    kill = cell_config(Cell("q.py", "hdfs", "kill", "commit"), opts, tmp_path / "k.jsonl", tmp_path / "r.jsonl")
    q = kill.query
    assert (q.failure, q.kill_point, q.fail_at_batch, q.seed, q.batches, q.master, q.call_timeout) == \
        ("kill", "commit", 1, 5, 4, "local[1]", 30.0)
    assert kill.reference_from == str(tmp_path / "r.jsonl")
    retry = cell_config(Cell("q.py", "hdfs", "retry", schedule="tasks=all+attempts=2"), opts, "t.jsonl", None)
    assert retry.query.fail_tasks == "all" and retry.query.fail_attempts == 2
    retry.query.validate()
    rel = cell_config(Cell("q.py", "hdfs", "task", None, "3.5.9"), MatrixOptions(["q.py"], engine_versions=["3.5.9"],
                                                                                reference_version="4.0.1"),
                      "t.jsonl", None)
    assert rel.query.engine_version == "3.5.9" and rel.query.reference_version == "4.0.1"
    path = kill.write(tmp_path / "k.cell.json")
    assert CellConfig.read(path) == kill and cell_argv(path)[-2:] == ["rollcheck.spark_replay.matrix.cell", str(path)]


@pytest.mark.parametrize("doc, where", [
    ({"format": "other"}, "format"),
    ({"format": CELL_FORMAT, "query": {}}, "query.module"),
    ({"format": CELL_FORMAT, "query": {"module": "q.py", "colour": 1}, "trace": "t"}, "query.colour"),
    ({"format": CELL_FORMAT, "query": {"module": "q.py"}, "trace": 3}, "trace"),
])
def test_a_bad_configuration_names_its_field(tmp_path, doc, where):
    with pytest.raises(InvalidInputError) as e:
        CellConfig.from_json(doc, "c.json")
    assert e.value.location == where and e.value.source == "c.json"


def test_the_child_refuses_a_bad_file_in_one_line(tmp_path):
    bad = tmp_path / "c.cell.json"
    bad.write_text(json.dumps({"format": CELL_FORMAT, "query": {"module": "q.py", "failure": "task",
                                                                  "fail_at_batch": 1, "state_store": "leveldb"},
                               "trace": str(tmp_path / "t.jsonl")}))
    r = subprocess.run(cell_argv(bad), capture_output=True, text=True, timeout=120)
    assert r.returncode == 2, r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("rollcheck:")]
    assert len(lines) == 1 and "--state-store" in lines[0] and "leveldb" in lines[0] and "Traceback" not in r.stderr
    assert not (tmp_path / "t.jsonl").exists() and not (tmp_path / "t.jsonl.partial").exists()


@pytest.mark.parametrize("flags, warm, reuse", [([], True, True), (["--no-warm"], False, True),
                                                (["--no-reference-cache"], True, False)])
def test_matrix_flags_turn_warm_drivers_and_the_kept_reference_off(tmp_path, monkeypatch, flags, warm, reuse):
    import rollcheck.spark_replay.matrix.run as sm
    from rollcheck.cli.main import main

    seen = {}

    def fake_run(opts, on_update=None):
        seen["opts"] = opts
        return {"cells": [], "seconds": 0, "summary": {}, "index": str(tmp_path / "index.html")}

    monkeypatch.setattr(sm, "run_matrix", fake_run)
    module = Path(__file__).resolve().parent / "queries" / "windowed_agg.py"
    main(["spark", "matrix", "--module", str(module), "--failures", "task", "--out", str(tmp_path), *flags])
    assert seen["opts"].warm is warm and seen["opts"].reuse_reference is reuse


@pytest.mark.parametrize("rc, whole, replayed", [(3, True, True), (3, False, False), (4, True, False),
                                                  (0, True, True)])
def test_a_recording_that_ended_without_done_is_replayed(tmp_path, monkeypatch, rc, whole, replayed):
    """A restart that failed with the engine's exception ends the recording with exit 3 and a whole
    trace: the matrix replays it (recovery-succeeded judges it) instead of calling the cell
    unfinished; exit 3 without a trace, or exit 4, stays a recording that did not finish."""
    from rollcheck.spark_replay.matrix.run import SparkAdapter

    opts = MatrixOptions(["q.py"], out=tmp_path, warm=False)
    cell = Cell("q.py", "hdfs", "kill", "sink")
    adapter = SparkAdapter(opts, [cell])

    def fake_run(cfg, warm, runner, log):
        if whole:
            (tmp_path / f"{cell.stem}.jsonl").write_text("{}\n")
        return rc, ""

    monkeypatch.setattr(adapter, "_run", fake_run)
    runner = type("R", (), {"charge": lambda self, *a, **k: None, "stopping": False})()
    rec = adapter.record(cell, None, runner, tmp_path)
    assert (rec.error is None) is replayed, rec.error
