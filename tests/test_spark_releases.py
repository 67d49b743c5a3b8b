"""The pyspark release as a dimension (``rollcheck spark record query --engine-version V``).

Fast tests: the range and the refusals (exit 2 naming the release and the reason), the import
hook of a release environment, the lock and the stamp (a half-made environment is never reused).
Slow tests (one per supported minor line on its newest patch, every release the bug zoo uses, and
the pinned release): the
release's environment is made once into rollcheck's cache folder (``$ROLLCHECK_CACHE`` when set,
else the user cache folder, so later runs reuse it) and a query is recorded and replayed there;
they are skipped only when pip cannot reach the package index.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rollcheck.pyimpl.errors import InvalidInputError
from rollcheck.spark_replay import releases
from rollcheck.spark_replay.releases import (
    BRIDGE,
    STAMP,
    companions,
    parse_release,
    pinned_release,
    sources_map,
    spark_environment,
)

ROOT = Path(__file__).resolve().parent.parent
RC = [sys.executable, "-m", "rollcheck.cli.main"]
QUERY = str(ROOT / "tests" / "queries" / "windowed_agg.py")
#: The newest patch of every supported minor line that installs on Python 3.11 here (pip index
#: versions pyspark, November 2026: 3.4.4, 3.5.9, 4.0.5, 4.1.4, 4.2.1; 4.3.0 is the pinned one).
LINES = ["3.4.4", "3.5.9", "4.0.5", "4.1.4", "4.2.1"]
#: Every pyspark release the bug zoo runs (``benchmarks/engine_bugs/manifest.json``), affected and fixed.
ZOO = sorted({e[w] for e in json.loads((ROOT / "benchmarks" / "engine_bugs" / "manifest.json").read_text())["entries"]
              if e["engine"] == "spark" for w in ("affected", "fixed")} - set(LINES))


# ----------------------------------------------------------------------------- without Spark
@pytest.mark.parametrize("bad, reason", [("3.3.4", "not supported"), ("5.0.0", "not supported"),
                                         ("3.5", "not a release"), ("latest", "not a release")])
def test_release_out_of_range_or_malformed_is_refused(bad: str, reason: str) -> None:
    with pytest.raises(InvalidInputError) as e:
        parse_release(bad)
    assert reason in str(e.value) and bad in str(e.value) and "--engine-version" in str(e.value)


def test_cli_refuses_an_unsupported_release_with_exit_2(tmp_path: Path) -> None:
    r = subprocess.run([*RC, "spark", "record", "query", "--module", QUERY, "--out", str(tmp_path / "t.jsonl"),
                        "--engine-version", "3.3.4"], capture_output=True, text=True, cwd=ROOT, timeout=120,
                       env={**os.environ, "ROLLCHECK_CACHE": str(tmp_path / "cache")})
    assert r.returncode == 2, r.stderr
    assert "pyspark 3.3.4 is not supported" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "cache").exists()  # refused before anything was made


def test_reference_release_is_checked_like_the_engine_release() -> None:
    from rollcheck.spark_replay.query.record import QueryConfig

    with pytest.raises(InvalidInputError) as e:
        QueryConfig(QUERY, engine_version="3.5.9", reference_version="2.4.8").validate()
    assert "--reference-version" in str(e.value) and "2.4.8" in str(e.value)


def test_pinned_release_needs_no_environment() -> None:
    assert spark_environment(None) == Path(sys.executable)
    assert spark_environment(pinned_release()) == Path(sys.executable)


def test_companions_follow_the_release_line() -> None:
    assert "numpy>=1.26,<2" in companions("3.5.9")  # numpy 2 removed np.NaN, which 3.5 uses
    assert any(p.startswith("protobuf") for p in companions("4.0.1"))
    assert not any(p.startswith("protobuf") for p in companions("3.4.4"))


def test_bridge_maps_rollcheck_only_when_asked(tmp_path: Path) -> None:
    """Without site-packages (-S) rollcheck is importable only through the hook, and only with
    ROLLCHECK_SOURCES set: the release environment sees nothing else of ours."""
    (tmp_path / "_rollcheck_bridge.py").write_text(BRIDGE, encoding="utf-8")
    probe = ("import sys; sys.path.insert(0, sys.argv[1]); import _rollcheck_bridge\n"
             "try:\n import rollcheck.spark_replay.releases as r; print(r.__file__)\n"
             "except ImportError: print('none')\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", releases.SOURCES_VAR)}
    off = subprocess.run([sys.executable, "-S", "-P", "-c", probe, str(tmp_path)], capture_output=True, text=True,
                         env=env, cwd=tmp_path, timeout=60)
    assert off.stdout.strip() == "none", off.stderr
    on = subprocess.run([sys.executable, "-S", "-P", "-c", probe, str(tmp_path)], capture_output=True, text=True,
                        env={**env, releases.SOURCES_VAR: json.dumps(sources_map())}, cwd=tmp_path, timeout=60)
    assert on.stdout.strip() == str(Path(releases.__file__).resolve()), on.stderr


def test_half_made_environment_is_never_reused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No stamp: removed and made again; with the stamp: reused; a failed install leaves nothing."""
    monkeypatch.setenv("ROLLCHECK_CACHE", str(tmp_path))
    calls: list[list[str]] = []

    def fake_run(argv: list[str], what: str, version: str, timeout: float) -> None:
        calls.append(argv)
        if what == "python -m venv":
            py = Path(argv[-1]) / "bin" / "python"
            py.parent.mkdir(parents=True)
            py.write_text("", encoding="utf-8")
            (Path(argv[-1]) / "lib" / "python3.11" / "site-packages").mkdir(parents=True)
        elif version == "3.5.1":
            raise InvalidInputError(f"pyspark {version} cannot be installed: No matching distribution",
                                    location="--engine-version")

    monkeypatch.setattr(releases, "_run", fake_run)
    monkeypatch.setattr(releases, "release_of", lambda python: "3.5.2")
    root = tmp_path / "spark" / "pyspark-3.5.2"
    (root / "bin").mkdir(parents=True)
    (root / "junk-of-a-killed-install").write_text("x", encoding="utf-8")
    py = spark_environment("3.5.2")
    assert py == root / "bin" / "python" and (root / STAMP).exists()
    assert not (root / "junk-of-a-killed-install").exists()  # rebuilt from scratch
    assert (root / "lib" / "python3.11" / "site-packages" / "_rollcheck_bridge.pth").exists()
    n = len(calls)
    assert spark_environment("3.5.2") == py and len(calls) == n  # reused: pip not called again
    with pytest.raises(InvalidInputError, match="3.5.1 cannot be installed"):
        spark_environment("3.5.1")
    assert not (tmp_path / "spark" / "pyspark-3.5.1").exists()


def test_environment_of_an_older_rollcheck_gets_what_the_recorder_now_imports(tmp_path: Path,
                                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """A complete environment whose stamp lists fewer packages (made before the recorder imported
    lz4, xxhash and psutil) is topped up once with pip, not rebuilt and not reused as it is."""
    monkeypatch.setenv("ROLLCHECK_CACHE", str(tmp_path))
    calls: list[list[str]] = []
    monkeypatch.setattr(releases, "_run", lambda argv, what, version, timeout: calls.append(argv))
    root = tmp_path / "spark" / "pyspark-3.5.2"
    (root / "bin").mkdir(parents=True)
    (root / "bin" / "python").write_text("", encoding="utf-8")
    (root / "lib" / "python3.11" / "site-packages").mkdir(parents=True)
    old = [p for p in releases.companions("3.5.2") if p not in releases.RECORDER_PACKAGES]
    (root / STAMP).write_text(json.dumps({"pyspark": "3.5.2", "packages": old}), encoding="utf-8")
    assert spark_environment("3.5.2") == root / "bin" / "python"
    assert len(calls) == 1 and calls[0][1:4] == ["-m", "pip", "install"]
    assert all(p in calls[0] for p in releases.RECORDER_PACKAGES)
    assert json.loads((root / STAMP).read_text())["packages"] == releases.companions("3.5.2")
    assert spark_environment("3.5.2") == root / "bin" / "python" and len(calls) == 1  # now complete


# ----------------------------------------------------------------------------- real releases
def _index_reachable() -> bool:
    try:
        r = subprocess.run([sys.executable, "-m", "pip", "index", "versions", "pyspark"], capture_output=True,
                           text=True, timeout=180)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return r.returncode == 0


@pytest.mark.slow


@pytest.mark.engines
@pytest.mark.spark
def test_uninstallable_release_is_exit_2_with_pips_reason(tmp_path: Path) -> None:
    r = subprocess.run([*RC, "spark", "record", "query", "--module", QUERY, "--out", str(tmp_path / "t.jsonl"),
                        "--engine-version", "3.5.99"], capture_output=True, text=True, cwd=ROOT, timeout=600,
                       env={**os.environ, "ROLLCHECK_CACHE": str(tmp_path / "cache")})
    if r.returncode != 2 and not _index_reachable():
        pytest.skip("pip cannot reach the package index")
    assert r.returncode == 2, r.stderr
    last = r.stderr.strip().splitlines()[-1]
    assert "pyspark 3.5.99 cannot be installed" in last and "No matching distribution" in last
    assert not (tmp_path / "cache" / "spark" / "pyspark-3.5.99").exists()


@pytest.mark.slow


@pytest.mark.engines
@pytest.mark.spark
@pytest.mark.parametrize("version", [*LINES, *ZOO, "pinned"])
def test_record_and_replay_on_each_release_line(version: str, tmp_path: Path) -> None:
    """Record the windowed aggregation with a task failure on the release and replay it: the
    trace names the release, the driver really ran it, and the replay is conformant (on pyspark
    < 4.0 the state is compared through rollcheck's own decoder: no state data source there)."""
    v = pinned_release() if version == "pinned" else version
    if version != "pinned" and not (releases.cache_root() / "spark" / f"pyspark-{v}" / STAMP).exists() \
            and not _index_reachable():
        pytest.skip("pip cannot reach the package index to install pyspark " + v)
    out = tmp_path / "t.jsonl"
    r = subprocess.run([*RC, "spark", "record", "query", "--module", QUERY, "--out", str(out), "--batches", "4",
                        "--fail-at-batch", "2", "--failure", "task", "--engine-version", v,
                        "--reference-version", v, "--json"],
                       capture_output=True, text=True, cwd=ROOT, timeout=3000)
    assert r.returncode == 0, r.stderr[-3000:]
    assert json.loads(r.stdout)["engine_version"] == v
    header = json.loads(out.read_text(encoding="utf-8").splitlines()[0])
    assert header["engine_version"] == v and header["config"]["engine_version"] == v
    rp = subprocess.run([*RC, "spark", "replay", str(out), "--json"], capture_output=True, text=True, cwd=ROOT,
                        timeout=600)
    rep = json.loads(rp.stdout)
    checks = {c["name"]: c for c in rep["checks"]}
    assert rp.returncode == 0 and rep["conformant"] is True, rp.stdout[-3000:]
    for name in ("failure-observed", "output-exactly-once", "batch-equivalent", "recovery-succeeded",
                 "state-failure-free"):
        assert checks[name]["status"] == "held", checks[name]
    assert checks["release-differential"]["status"] == "not-applicable"


@pytest.mark.slow


@pytest.mark.engines
@pytest.mark.spark
def test_rocksdb_state_on_a_release_without_state_reader(tmp_path: Path) -> None:
    """pyspark 3.5 has no state data source and rollcheck decodes only HDFS-backed state: the
    state comparison is not applicable with that reason, everything else is still checked."""
    v = "3.5.9"
    if not (releases.cache_root() / "spark" / f"pyspark-{v}" / STAMP).exists() and not _index_reachable():
        pytest.skip("pip cannot reach the package index to install pyspark " + v)
    out = tmp_path / "t.jsonl"
    r = subprocess.run([*RC, "spark", "record", "query", "--module", QUERY, "--out", str(out), "--batches", "4",
                        "--fail-at-batch", "2", "--failure", "task", "--engine-version", v, "--reference-version", v,
                        "--state-store", "rocksdb", "--json"], capture_output=True, text=True, cwd=ROOT, timeout=3000)
    assert r.returncode == 0, r.stderr[-3000:]
    rp = subprocess.run([*RC, "spark", "replay", str(out), "--json"], capture_output=True, text=True, cwd=ROOT,
                        timeout=600)
    rep = json.loads(rp.stdout)
    checks = {c["name"]: c for c in rep["checks"]}
    assert rp.returncode == 0 and rep["conformant"] is True, rp.stdout[-3000:]
    assert checks["state-failure-free"]["status"] == "not-applicable"
    assert "no state data source" in checks["state-failure-free"]["detail"] and "RocksDB" in checks["state-failure-free"]["detail"]
    assert checks["output-exactly-once"]["status"] == "held" and checks["batch-equivalent"]["status"] == "held"
