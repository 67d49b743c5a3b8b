"""The apache-flink release as a dimension (``rollcheck flink record job --engine-version V``).

Fast tests: the range and the refusals (exit 2 naming the release and the reason, before anything
is installed), the lock and the stamp (a half-made environment is never reused), the matrix's
row group per release. Slow tests (one per supported minor line on its newest patch, every release
the bug zoo uses, and the pinned release): the release's environment is made once into rollcheck's cache folder
(``$ROLLCHECK_CACHE`` when set, else the user cache folder, so later runs reuse it), and
``examples/flink_jobs/keyed_totals.py`` is recorded with a task failure and replayed conformant;
they are skipped only when pip cannot reach the package index.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rollcheck.flink_replay import releases
from rollcheck.flink_replay.matrix import RELEASE_ROW_HEADER, ROW_HEADER, cells, row_header
from rollcheck.flink_replay.recording.record import RecordConfig
from rollcheck.flink_replay.releases import STAMP, cluster_config_name, flink_python, parse_release
from rollcheck.pyimpl.errors import InvalidInputError

ROOT = Path(__file__).resolve().parent.parent
RC = [sys.executable, "-m", "rollcheck.cli.main"]
JOB = str(ROOT / "examples" / "flink_jobs" / "keyed_totals.py")
#: The newest patch of every supported minor line (``pip index versions apache-flink``, November
#: 2026: 1.19.3, 1.20.5, 2.0.2, 2.1.3, 2.2.1, 2.3.0 the pinned one); all install on Python 3.11.
LINES = ["1.19.3", "1.20.5", "2.0.2", "2.1.3", "2.2.1"]
#: Every apache-flink release the bug zoo runs (``benchmarks/engine_bugs/manifest.json``), affected and fixed.
ZOO = sorted({e[w] for e in json.loads((ROOT / "benchmarks" / "engine_bugs" / "manifest.json").read_text())["entries"]
              if e["engine"] == "flink" for w in ("affected", "fixed")} - set(LINES))


# ----------------------------------------------------------------------------- without Flink
@pytest.mark.parametrize("bad, reason", [("1.18.1", "not supported"), ("3.0.0", "not supported"),
                                         ("2.3", "not a release"), ("latest", "not a release")])
def test_release_out_of_range_or_malformed_is_refused(bad: str, reason: str) -> None:
    with pytest.raises(InvalidInputError) as e:
        parse_release(bad)
    assert reason in str(e.value) and bad in str(e.value) and "--engine-version" in str(e.value)


def test_record_config_checks_the_release_first() -> None:
    with pytest.raises(InvalidInputError, match="apache-flink 1.17.2 is not supported"):
        RecordConfig.make(module=JOB, engine_version="1.17.2")
    assert RecordConfig.make(module=JOB, engine_version=" 1.20.5")["engine_version"] == "1.20.5"


@pytest.mark.parametrize("cmd", [["record", "job", "--module", JOB, "--out", "t.jsonl"],
                                 ["matrix", "--module", JOB, "--failures", "task", "--backends", "hashmap",
                                  "--checkpoints", "aligned", "--out", "m"]])
def test_cli_refuses_an_unsupported_release_with_exit_2(cmd: list[str], tmp_path: Path) -> None:
    version = "1.20.5,1.18.1" if cmd[0] == "matrix" else "1.18.1"
    r = subprocess.run([*RC, "flink", *cmd, "--engine-version", version], capture_output=True, text=True,
                       cwd=tmp_path, timeout=120, env={**os.environ, "ROLLCHECK_CACHE": str(tmp_path / "cache")})
    assert r.returncode == 2, r.stderr
    last = r.stderr.strip().splitlines()[-1]
    assert "apache-flink 1.18.1 is not supported" in last and "--engine-version" in last
    assert not (tmp_path / "cache").exists()  # refused before anything was made


def test_cluster_configuration_file_follows_the_release() -> None:
    assert cluster_config_name("1.19.3") == "flink-conf.yaml"
    assert cluster_config_name("2.0.2") == "config.yaml"


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
        elif version == "1.19.1":
            raise InvalidInputError(f"apache-flink {version} cannot be installed: No matching distribution",
                                    location="--engine-version")

    monkeypatch.setattr(releases, "_run", fake_run)
    monkeypatch.setattr(releases, "release_of", lambda python: "1.19.2")
    root = tmp_path / "flink" / "apache-flink-1.19.2"
    (root / "bin").mkdir(parents=True)
    (root / "junk-of-a-killed-install").write_text("x", encoding="utf-8")
    py = flink_python("1.19.2")
    assert py == root / "bin" / "python" and (root / STAMP).exists()
    assert not (root / "junk-of-a-killed-install").exists()  # rebuilt from scratch
    assert any("apache-flink==1.19.2" in a for a in calls[-1])
    n = len(calls)
    assert flink_python("1.19.2") == py and len(calls) == n  # reused: pip not called again
    with pytest.raises(InvalidInputError, match="1.19.1 cannot be installed"):
        flink_python("1.19.1")
    assert not (tmp_path / "flink" / "apache-flink-1.19.1").exists()
    assert flink_python(None) is None  # no release asked: the default environment


def test_matrix_has_a_row_group_per_release() -> None:
    plain = cells([JOB], ["hashmap"], ["aligned"], ["task"], [None])
    two = cells([JOB], ["hashmap"], ["aligned"], ["task"], [None], ["1.20.5", "2.3.0"])
    assert row_header(plain) == ROW_HEADER and row_header(two) == RELEASE_ROW_HEADER
    assert [c.row.split(" | ")[0] for c in two] == ["apache-flink 1.20.5", "apache-flink 2.3.0"]
    assert [c.config()["engine_version"] for c in two] == ["1.20.5", "2.3.0"]
    assert plain[0].config()["engine_version"] == releases.PINNED  # the release is in every cell
    assert len({c.ident for c in two}) == 2


# ----------------------------------------------------------------------------- real releases
def _index_reachable() -> bool:
    try:
        r = subprocess.run([sys.executable, "-m", "pip", "index", "versions", "apache-flink"], capture_output=True,
                           text=True, timeout=180)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return r.returncode == 0


def _flink_or_skip() -> None:
    from rollcheck.flink_replay.environment import find_flink
    from rollcheck.pyimpl.errors import InconclusiveError

    try:
        find_flink()
    except InconclusiveError as e:
        pytest.skip(str(e))


@pytest.mark.slow


@pytest.mark.engines
def test_uninstallable_release_is_exit_2_with_pips_reason(tmp_path: Path) -> None:
    r = subprocess.run([*RC, "flink", "record", "job", "--module", JOB, "--out", str(tmp_path / "t.jsonl"),
                        "--engine-version", "1.19.99"], capture_output=True, text=True, cwd=ROOT, timeout=900,
                       env={**os.environ, "ROLLCHECK_CACHE": str(tmp_path / "cache")})
    if r.returncode != 2 and not _index_reachable():
        pytest.skip("pip cannot reach the package index")
    assert r.returncode == 2, r.stderr
    last = r.stderr.strip().splitlines()[-1]
    assert "apache-flink 1.19.99 cannot be installed" in last and "No matching distribution" in last
    assert not (tmp_path / "cache" / "flink" / "apache-flink-1.19.99").exists()


@pytest.mark.slow


@pytest.mark.engines
@pytest.mark.parametrize("version", [*LINES, *ZOO, releases.PINNED])
def test_record_and_replay_on_each_release_line(version: str, tmp_path: Path) -> None:
    """Record keyed_totals with a task failure on the release and replay it: the trace names the
    release, the job really ran on it (the job process's Python is the release's environment), and
    the replay is conformant (restore, keyed state, user state and exactly-once output held)."""
    _flink_or_skip()
    if version != releases.PINNED and not (releases.release_root(version) / STAMP).exists() \
            and not _index_reachable():
        pytest.skip("pip cannot reach the package index to install apache-flink " + version)
    out = tmp_path / "t.jsonl"
    r = subprocess.run([*RC, "flink", "record", "job", "--module", JOB, "--out", str(out), "--fail-at-record",
                        "300", "--failure", "task", "--engine-version", version, "--json"],
                       capture_output=True, text=True, cwd=ROOT, timeout=3000)
    assert r.returncode == 0, r.stderr[-3000:]
    header = json.loads(out.read_text(encoding="utf-8").splitlines()[0])
    assert header["engine_version"] == version and header["config"]["engine_version"] == version
    assert header["flink"]["pyflink"] == version
    run = json.loads((tmp_path / "t.flinkrun" / "run.json").read_text(encoding="utf-8"))
    if version != releases.PINNED:
        assert Path(run["pyflink_python"]).is_relative_to(releases.release_root(version)), run["pyflink_python"]
    rp = subprocess.run([*RC, "flink", "replay", str(out), "--json"], capture_output=True, text=True, cwd=ROOT,
                        timeout=600)
    rep = json.loads(rp.stdout)
    checks = {c["name"]: c for c in rep["checks"]}
    assert rp.returncode == 0 and rep["conformant"] is True, rp.stdout[-3000:]
    for name in ("failure-observed", "restore-latest-completed", "keyed-state-restored-once",
                 "user-state-restored-once", "output-exactly-once", "recovery-succeeded", "batch-equivalent"):
        assert checks[name]["status"] == "held", checks[name]
