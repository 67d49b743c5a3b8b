"""Warm drivers on every release, lent by one pool to many matrices (spark_replay/matrix/warm.py), without
Spark: a fake driver stands in for the Spark child; the bridge and release tests run a release
environment's interpreter only when one is cached."""

from __future__ import annotations

import json
import sys
import tomllib
import types
from pathlib import Path
from typing import Any

import pytest

from rollcheck.infra.matrix import ChildRunner
from rollcheck.spark_replay import releases
from rollcheck.spark_replay.matrix import warm
from rollcheck.spark_replay.matrix.cell import cell_config
from rollcheck.spark_replay.matrix.plan import MatrixOptions, plan_cells
from rollcheck.spark_replay.matrix.run import SparkAdapter
from rollcheck.spark_replay.matrix.warm import WarmPool, WarmReply, forget_user_modules
from rollcheck.spark_replay.releases import pinned_release, sources_map

ROOT = Path(__file__).resolve().parents[1]


class FakeDriver:
    """A driver that answers every cell at once (``damage`` names the cells it is damaged by)."""

    made: list[FakeDriver] = []
    damage: set[str] = set()

    def __init__(self, workdir: Path, n: int, master: str | None = None, runner: Any = None,
                 release: str | None = None) -> None:
        self.n, self.master, self.runner, self.release = n, master, runner, release
        self.cells, self.closed, self.ran = 0, False, []
        FakeDriver.made.append(self)

    @property
    def alive(self) -> bool:
        return not self.closed

    def start(self, timeout: float) -> None:
        if self.release == "9.9.9":
            raise RuntimeError("no such release")

    def attach(self, runner: Any) -> None:
        self.runner = runner

    def run(self, config: Path, timeout: float, cell_log: Path | None = None) -> WarmReply:
        self.cells += 1
        self.ran.append(config.name)
        if config.name in FakeDriver.damage:
            FakeDriver.damage.discard(config.name)
            return WarmReply(exit=None, damaged="a streaming query was still active")
        return WarmReply(exit=0, result={"driver": self.n}, cpu_seconds=1.0, seconds=1.0)

    def close(self) -> None:
        self.closed = True


@pytest.fixture
def fake(monkeypatch):
    FakeDriver.made, FakeDriver.damage = [], set()
    monkeypatch.setattr(warm, "WarmDriver", FakeDriver)
    return FakeDriver


def _charges(runner: ChildRunner, fn) -> tuple[Any, dict[str, Any]]:
    from rollcheck.infra.matrix.cost import Usage

    usage = Usage()
    with runner.metering(usage):
        out = fn()
    return out, dict(usage.notes)


def test_one_pool_serves_several_matrices_and_releases(tmp_path, fake):
    pool = WarmPool(tmp_path, limit=2)
    first, second = ChildRunner(), ChildRunner()  # two matrices in a row (the hunt)
    (rc, res), notes = _charges(first, lambda: pool.run(Path("a.cell.json"), first, tmp_path / "a.log", 60,
                                                        release="3.5.2"))
    assert rc == 0 and json.loads(res) == {"driver": 1} and notes["engine"] == "fresh"
    # the next matrix finds the same driver of 3.5.2 warm, and that matrix's runner now owns it
    (rc, res), notes = _charges(second, lambda: pool.run(Path("b.cell.json"), second, tmp_path / "b.log", 60,
                                                         release="3.5.2"))
    assert json.loads(res) == {"driver": 1} and notes["engine"] == "warm" and fake.made[0].runner is second
    # another release gets a driver of its own; the pinned release named is the running interpreter's
    assert json.loads(pool.run(Path("c.cell.json"), second, tmp_path / "c.log", 60, release="3.5.1")[1]) \
        == {"driver": 2}
    assert fake.made[1].release == "3.5.1"
    assert json.loads(pool.run(Path("d.cell.json"), second, tmp_path / "d.log", 60,
                               release=pinned_release())[1]) == {"driver": 3}
    assert fake.made[2].release is None
    # at most two alive: the least recently used idle one (3.5.2's) was ended for the third
    assert fake.made[0].closed and not fake.made[1].closed
    assert {d.n for d in pool.drivers()} == {2, 3}
    pool.close()
    assert all(d.closed for d in fake.made)


def test_a_damaged_driver_is_replaced_and_the_cell_run_again(tmp_path, fake):
    pool = WarmPool(tmp_path)
    runner = ChildRunner()
    fake.damage = {"x.cell.json"}
    rc, res = pool.run(Path("x.cell.json"), runner, tmp_path / "x.log", 60, release="3.5.2")
    assert rc == 0 and json.loads(res) == {"driver": 2}
    assert fake.made[0].closed and fake.made[0].ran == fake.made[1].ran == ["x.cell.json"]
    # a release whose driver cannot start: None twice (the caller runs fresh children), then no more tries
    assert pool.run(Path("y.cell.json"), runner, tmp_path / "y.log", 60, release="9.9.9") is None
    assert pool.run(Path("y.cell.json"), runner, tmp_path / "y.log", 60, release="9.9.9") is None
    n = len(fake.made)
    assert pool.run(Path("y.cell.json"), runner, tmp_path / "y.log", 60, release="9.9.9") is None
    assert len(fake.made) == n


def test_a_matrix_keeps_a_callers_pool_open_and_runs_release_cells_warm(tmp_path, fake):
    cells = plan_cells(["q.py"], ["hdfs"], ["task", "kill"], ["sink"], ["3.5.2"])
    opts = MatrixOptions(["q.py"], engine_versions=["3.5.2"], out=tmp_path / "m")
    pool = WarmPool(tmp_path / "pool")
    adapter = SparkAdapter(opts, cells, warm_pool=pool)
    assert adapter._warm_for("task") and adapter._warm_for(None) and not adapter._warm_for("kill")
    cfg = cell_config(cells[0], opts, tmp_path / "m" / "t.jsonl", None)
    rc, _ = adapter._run(cfg, True, ChildRunner(), tmp_path / "m" / "t.log")
    assert rc == 0 and fake.made[0].release == "3.5.2"
    adapter.close()
    assert pool.drivers() == fake.made  # the caller's pool: still open after the matrix
    own = SparkAdapter(opts, cells)
    own._run(cfg, True, ChildRunner(), tmp_path / "m" / "t2.log")
    own.close()
    assert fake.made[1].closed  # the matrix's own pool ends with it
    pool.close()


def test_a_release_cell_names_the_reference_release(tmp_path):
    """A recording on V inside V's environment must not take V for rollcheck's pinned release."""
    cell = plan_cells(["q.py"], ["hdfs"], ["task"], [], ["3.5.2"])[0]
    cfg = cell_config(cell, MatrixOptions(["q.py"], engine_versions=["3.5.2"]), tmp_path / "t.jsonl", None)
    assert cfg.query.reference_version == pinned_release()


def test_in_a_release_environment_the_pinned_release_is_rollchecks_interpreter(tmp_path, monkeypatch):
    monkeypatch.setenv("ROLLCHECK_CACHE", str(tmp_path / "cache"))

    def no_install(*a: Any, **k: Any) -> None:
        raise AssertionError("nothing is installed")

    monkeypatch.setattr(releases, "_run", no_install)
    home = tmp_path / "home-python"
    home.write_text("")
    env = releases.child_environment(tmp_path / "other" / "python", base={})
    assert json.loads(env[releases.HOME_VAR]) == {"python": sys.executable, "pyspark": pinned_release()}
    monkeypatch.setenv(releases.HOME_VAR, json.dumps({"python": str(home), "pyspark": "3.5.7"}))
    assert releases.spark_environment("3.5.7") == home
    # a child of that child keeps the first interpreter as home
    env = releases.child_environment(tmp_path / "other" / "python", base={})
    assert json.loads(env[releases.HOME_VAR]) == {"python": str(home), "pyspark": "3.5.7"}


def test_release_environments_see_every_package_of_ours():
    dirs = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    assert set(dirs) <= set(sources_map())


def test_a_cached_release_environment_imports_the_warm_driver():
    import subprocess

    try:  # made once (about 30 s) on a fresh machine, as a matrix with --engine-version makes it
        python = releases.spark_environment("3.5.2")
    except Exception as e:  # under CI=true this skip fails the run (conftest.ENGINE_MISSING)
        pytest.skip(f"pip cannot reach the package index: pyspark 3.5.2: {e}")
    r = subprocess.run([str(python), "-c", "import rollcheck.spark_replay.matrix.warm, rollcheck.spark_replay.query.record, "
                        "pyspark; print(pyspark.__version__)"], capture_output=True, text=True, timeout=120,
                       env=releases.child_environment(python))
    assert r.returncode == 0 and r.stdout.strip() == "3.5.2", r.stderr[-800:]


def test_the_users_modules_are_forgotten_after_a_cell(tmp_path, monkeypatch):
    (tmp_path / "helper_for_warm_test.py").write_text("X = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    before = set(sys.modules)
    import zipapp  # noqa: F401 - the standard library's: kept

    import helper_for_warm_test  # noqa: F401

    sys.modules["rollcheck_user_query_abc"] = types.ModuleType("rollcheck_user_query_abc")
    gone = forget_user_modules(before)
    assert gone == ["helper_for_warm_test", "rollcheck_user_query_abc"]
    assert "zipapp" in sys.modules and "rollcheck.spark_replay.matrix.warm" in sys.modules
