"""A full disk, a read-only file system, a missing permission: exit 2 naming the path and the OS
reason, never 1 or 4, nothing half-written left (``specs/cli.md``, "Faults the commands survive").

The disk-full cases run on a tmpfs of a few KiB mounted for the test, so they need root (skipped
with the reason otherwise); the mapping of a bare ``OSError`` in the CLI needs nothing. No JVM
here except the Spark case (marked); the rest costs about 15 s.
"""

from __future__ import annotations

import argparse
import errno
import subprocess
import sys
from pathlib import Path

import pytest

from rollcheck.testing.faults import can_mount, fill_to, small_fs

ROOT = Path(__file__).resolve().parents[1]
RC = [sys.executable, "-m", "rollcheck.cli.main"]
PATTERN = ROOT / "examples" / "useless.json"
UNSAFE = ROOT / "tests" / "user_protocols" / "unsafe_protocols.py"
QUERY = ROOT / "examples" / "queries" / "clicks_per_window.py"

root_only = pytest.mark.skipif(not can_mount(), reason="mounting a small tmpfs needs root on Linux")


def _cli(*argv: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*RC, *argv], capture_output=True, text=True, cwd=ROOT, timeout=timeout)


def _one_env_line(r: subprocess.CompletedProcess[str], path: str, reason: str) -> None:
    assert r.returncode == 2, (r.returncode, r.stderr[-2000:])
    assert "Traceback" not in r.stderr
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("rollcheck: environment error: ") and path in last and reason in last, last
    assert "bug in rollcheck" not in r.stderr and "query failed" not in r.stderr


@root_only
def test_render_on_a_full_disk(tmp_path):
    with small_fs(16, str(tmp_path)) as fs:
        fill_to(fs, 4096)
        r = _cli("render", str(PATTERN), "-o", str(fs / "pic.png"))
        _one_env_line(r, str(fs / "pic.png"), "No space left on device")
        assert sorted(p.name for p in fs.iterdir()) == ["filler"]  # no temporary left behind


@root_only
def test_check_protocol_when_the_json_fits_but_the_picture_does_not(tmp_path):
    with small_fs(16, str(tmp_path)) as fs:
        fill_to(fs, 8192)
        r = _cli("check", "protocol", f"{UNSAFE}:LazyIndex", "--out", str(fs / "o"))
        _one_env_line(r, ".png", "No space left on device")
        left = sorted(p.name for p in (fs / "o").iterdir())
        assert all(n.endswith(".json") for n in left), left  # whole files only, no temporaries


@root_only
def test_read_only_file_system(tmp_path):
    with small_fs(64, str(tmp_path)) as fs:
        subprocess.run(["mount", "-o", "remount,ro", str(fs)], check=True, timeout=30)
        r = _cli("render", str(PATTERN), "-o", str(fs / "pic.png"))
        _one_env_line(r, str(fs / "pic.png"), "Read-only file system [EROFS]")


def test_a_bare_oserror_in_a_command_is_an_environment_error(monkeypatch, capsys):
    """Any command: an OSError with ENOSPC/EROFS/EACCES that escapes is exit 2, not 4."""
    from rollcheck.cli import main as cli

    def boom(args: argparse.Namespace) -> int:
        raise OSError(errno.EROFS, "Read-only file system")

    def build() -> argparse.ArgumentParser:
        p = argparse.ArgumentParser(prog="rollcheck")
        p.add_argument("--out")
        p.set_defaults(handler=boom)
        return p

    monkeypatch.setattr(cli, "build_parser", build)
    assert cli.main(["--out", "/mnt/x.json"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == ("rollcheck: environment error: /mnt/x.json: Read-only file system [EROFS] "
                   "(an environment problem: write elsewhere)")

    def boom2(args: argparse.Namespace) -> int:
        raise RuntimeError("java.io.FileNotFoundException: /d/ck/1 (No space left on device)")

    monkeypatch.setattr(cli, "build_parser", lambda: (p := build(), p.set_defaults(handler=boom2))[0])
    assert cli.main(["--out", "/mnt/x.json"]) == 2
    assert "/d/ck/1: No space left on device [ENOSPC]" in capsys.readouterr().err

    def bug(args: argparse.Namespace) -> int:
        raise KeyError("not the environment")

    monkeypatch.setattr(cli, "build_parser", lambda: (p := build(), p.set_defaults(handler=bug))[0])
    assert cli.main([]) == 4


@root_only
@pytest.mark.spark
@pytest.mark.slow
def test_spark_record_query_with_300_kb_free(tmp_path):
    with small_fs(1024, str(tmp_path)) as fs:
        fill_to(fs, 300 * 1024)
        out = fs / "o.jsonl"
        r = _cli("spark", "record", "query", "--module", str(QUERY), "--out", str(out), "--fail-at-batch", "2",
                 "--failure", "kill", timeout=900)
        _one_env_line(r, str(fs), "No space left on device")
        assert not out.exists() and not (fs / "o.jsonl.partial").exists()
        assert not list((fs / "o.jsonl.work").glob("tmp-*"))


@root_only
@pytest.mark.slow
def test_verify_with_16_kb_free_is_an_environment_error_not_a_failure(tmp_path):
    """The reporter's case: ``verify --quick --only foundation --out`` on 16 KiB said FAIL, exit 1."""
    with small_fs(16, str(tmp_path)) as fs:
        r = _cli("verify", "--quick", "--only", "foundation", "--out", str(fs / "rep"), timeout=900)
        _one_env_line(r, str(fs / "rep"), "No space left on device")
