"""A task cell on another pyspark release runs in a warm driver of that release and is decided as a
fresh child decides it (real Spark: pyspark 3.5.2 from rollcheck's cache, about a minute idle).

The reference release is 3.5.2 as well, so no run on a second release is needed; the reference
cache is a folder of the test's own (the release environments are the real cache's)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rollcheck.spark_replay import releases

LIB = Path(__file__).resolve().parents[1] / "examples" / "queries"
RELEASE = "3.5.2"


@pytest.mark.spark
@pytest.mark.slow
def test_a_release_task_cell_runs_warm_and_is_decided_as_a_fresh_child(tmp_path, monkeypatch):
    from rollcheck.spark_replay.matrix.plan import MatrixOptions
    from rollcheck.spark_replay.matrix.run import run_matrix

    envs = releases.cache_root() / "spark"
    try:  # made once (about 30 s) on a fresh machine, as a matrix with --engine-version makes it
        releases.spark_environment(RELEASE)
    except Exception as e:  # under CI=true this skip fails the run (conftest.ENGINE_MISSING)
        pytest.skip(f"pip cannot reach the package index: pyspark {RELEASE}: {e}")
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "spark").symlink_to(envs)  # the environments shared, the references not
    monkeypatch.setenv("ROLLCHECK_CACHE", str(tmp_path / "cache"))
    mod = tmp_path / "clicks.py"
    mod.write_text((LIB / "clicks_per_window.py").read_text())

    def matrix(name: str, warm: bool) -> dict:
        return run_matrix(MatrixOptions([str(mod)], providers=["hdfs"], failures=["task"], batches=3,
                                        fail_at_batch=1, engine_versions=[RELEASE], reference_version=RELEASE,
                                        out=tmp_path / name, minimise=False, warm=warm))

    warm = matrix("warm", True)
    (cell,) = warm["cells"]
    # the reference ran in the driver first, so the task cell found it warm
    assert cell["shared"] == {"reference": "recorded", "engine": "warm"}, cell
    head = json.loads(Path(cell["trace"]).read_text().splitlines()[0])
    assert head["engine_version"] == RELEASE  # the driver checks it runs the release the header names
    assert sorted(p.name for p in (tmp_path / "warm" / "warm").glob("warm-*.log")) == ["warm-1.log"]
    fresh = matrix("fresh", False)  # the kept reference, the cell in a fresh child
    (other,) = fresh["cells"]
    assert other["shared"] == {"reference": "reused", "engine": "fresh"}, other

    def checks(entry: dict) -> dict[str, str]:
        return {c["name"]: c["status"] for c in json.loads(Path(entry["checks"]).read_text())["checks"]}

    assert cell["verdict"] == other["verdict"] == "conformant", (cell["reason"], other["reason"])
    assert checks(cell) == checks(other)
