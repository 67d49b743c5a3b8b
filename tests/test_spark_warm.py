"""Warm Spark drivers and the reference kept across runs (spark_replay/matrix/warm.py, shared_reference.py).

The real test runs two small matrices (clicks_per_window, hdfs, 3 batches): the first with a warm
driver damaged on purpose (a streaming query leaked after its first recording: the driver is
replaced and the recording run again on a fresh one), task and sink cells in the warm driver; the
second finds the reference kept by the first (no reference run) — a few minutes in all."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rollcheck.spark_replay.matrix.plan import MatrixOptions
from rollcheck.spark_replay.query.config import QueryConfig
from rollcheck.spark_replay.shared_reference import reference_key, store_reference, stored_reference

LIB = Path(__file__).resolve().parents[1] / "examples" / "queries"


def test_the_kept_reference_is_invalidated_by_any_byte_of_the_module(tmp_path, monkeypatch):
    monkeypatch.setenv("ROLLCHECK_CACHE", str(tmp_path / "cache"))
    mod = tmp_path / "q.py"
    mod.write_text((LIB / "clicks_per_window.py").read_text())
    cfg = QueryConfig(str(mod), batches=3, state_store="hdfs")
    key = reference_key(cfg)
    assert key is not None and key == reference_key(cfg)
    assert reference_key(QueryConfig(str(mod), batches=4, state_store="hdfs")) != key
    assert reference_key(QueryConfig(str(mod), batches=3, state_store="rocksdb")) != key
    assert stored_reference(key) is None
    not_whole = tmp_path / "r.jsonl"
    not_whole.write_text('{"format": "rollcheck.trace/1"}\n')
    assert store_reference(key, not_whole) is None and stored_reference(key) is None
    mod.write_text(mod.read_text() + "\n# one more comment\n")
    assert reference_key(cfg) != key


@pytest.mark.spark
@pytest.mark.slow
def test_warm_cells_a_damaged_driver_replaced_and_the_reference_kept(tmp_path, monkeypatch):
    from rollcheck.spark_replay.matrix.run import run_matrix
    from rollcheck.spark_replay.matrix.warm import LEAK_FOR_TESTS

    monkeypatch.setenv("ROLLCHECK_CACHE", str(tmp_path / "cache"))
    marker = tmp_path / "leak-once"
    marker.write_text("")
    monkeypatch.setenv(LEAK_FOR_TESTS, str(marker))
    mod = tmp_path / "clicks.py"
    mod.write_text((LIB / "clicks_per_window.py").read_text())
    opts = MatrixOptions([str(mod)], providers=["hdfs"], failures=["task", "sink"], batches=3, fail_at_batch=1,
                         out=tmp_path / "m1", minimise=False)
    doc = run_matrix(opts)
    assert not marker.exists(), "the leak was injected"
    task, sink = doc["cells"]
    assert [c["verdict"] for c in doc["cells"]] == ["conformant", "conformant"], doc["cells"]
    # the reference leaked a query in driver 1: replaced, recorded again in driver 2, which then ran both cells
    assert (tmp_path / "m1" / "warm" / "warm-2.log").exists() and not (tmp_path / "m1" / "warm" / "warm-3.log").exists()
    assert doc["preparations"][0]["reference"] == "recorded"
    assert task["shared"] == {"reference": "recorded", "engine": "warm"}
    assert sink["shared"] == {"reference": "recorded", "engine": "warm"}
    assert task["cpu_seconds"] > 0 and sink["wall_seconds"] > 0
    assert json.loads((tmp_path / "m1" / "matrix.json").read_text())["cost"]["cells_warm"] == 2

    # a later run of the same module and configuration takes the kept reference: no reference run
    doc2 = run_matrix(MatrixOptions([str(mod)], providers=["hdfs"], failures=["sink"], batches=3, fail_at_batch=1,
                                    out=tmp_path / "m2", minimise=False))
    (cell,) = doc2["cells"]
    assert cell["verdict"] == "conformant", cell
    assert doc2["preparations"][0]["reference"] == "reused" and doc2["preparations"][0]["cpu_seconds"] < 5
    assert cell["shared"] == {"reference": "reused", "engine": "fresh"}
    assert not (tmp_path / "m2" / "clicks--hdfs" / "reference.log").exists()
