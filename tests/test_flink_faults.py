"""Faults a Flink recording survives (issue 20): rollcheck SIGKILLed mid-run, a full disk.

- SIGKILL to the CLI while Flink runs: ``job.py`` and its JVM are gone within 10 s, the previous
  ``--out`` is unchanged and the run's own header is left beside it as ``OUT.partial`` (``slow``: it
  starts a JVM, about 30-60 s on a loaded machine).
- Too little room for a recording: exit 2 naming the path and "no space left on device", the
  previous ``--out`` unchanged (needs root to mount a small tmpfs; skipped otherwise).
- The job's own logs reporting a full disk are recognised as the environment's failure.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rollcheck.flink_replay.recording.record import _environment_failure

ROOT = Path(__file__).resolve().parent.parent
CLI = [sys.executable, "-m", "rollcheck.cli.main"]


def _processes_mentioning(text: str) -> list[str]:
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            args = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in args and str(os.getpid()) != pid:
            found.append(f"{pid}: {args[:160]}")
    return found


@pytest.mark.slow
def _private_tmp(tmp_path: Path) -> Path:
    d = tmp_path / "ptmp"
    d.mkdir(exist_ok=True)
    return d


def test_sigkill_during_recording_leaves_no_process_and_keeps_the_old_trace(tmp_path: Path) -> None:
    out = tmp_path / "o.jsonl"
    out.write_text("the previous trace\n")
    run = tmp_path / "o.flinkrun"
    proc = subprocess.Popen([*CLI, "flink", "record", "wordcount", "--out", str(out), "--records", "20000",
                             "--rate", "400", "--fail-at-record", "15000", "--failure", "task"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT,
                            # a SIGKILLed job cannot remove its temporary folders: keep them here
                            env={**os.environ, "TMPDIR": str(_private_tmp(tmp_path))})
    try:
        deadline = time.time() + 300
        while time.time() < deadline and not list(run.glob("tap-*.jsonl")):  # the job is running
            assert proc.poll() is None, "the recording ended before the job ran"
            time.sleep(0.5)
        assert list(run.glob("tap-*.jsonl")), "the Flink job never started"
        assert _processes_mentioning(str(run)), "no child process of the run found before the kill"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        t_kill = time.time()
        left = _processes_mentioning(str(run))
        while left and time.time() < t_kill + 10:
            time.sleep(0.25)
            left = _processes_mentioning(str(run))
        assert not left, f"still alive 10 s after SIGKILL: {left}"
    finally:
        if proc.poll() is None:
            proc.kill()
    assert out.read_text() == "the previous trace\n"
    partial = Path(str(out) + ".partial")
    assert partial.exists() and '"partial": true' in partial.read_text()


def test_full_disk_is_exit_2_naming_the_path(tmp_path: Path) -> None:
    mnt = tmp_path / "small"
    mnt.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=400k", "tmpfs", str(mnt)],
                                           capture_output=True).returncode != 0:
        pytest.skip("needs root to mount a small tmpfs")
    try:
        out = mnt / "o.jsonl"
        out.write_text("old\n")
        r = subprocess.run([*CLI, "flink", "record", "job", "--module", "examples/flink_jobs/keyed_totals.py",
                            "--out", str(out), "--fail-at-record", "3", "--failure", "task"],
                           capture_output=True, text=True, timeout=300, cwd=ROOT)
        assert r.returncode == 2, r.stderr
        assert "no space left on device" in r.stderr and str(mnt) in r.stderr
        assert "Traceback" not in r.stderr
        assert out.read_text() == "old\n"
    finally:
        subprocess.run(["umount", str(mnt)], capture_output=True)


def test_disk_full_in_the_job_logs_is_the_environment(tmp_path: Path) -> None:
    (tmp_path / "job.out").write_text("java.io.IOException: No space left on device\n")
    assert _environment_failure(tmp_path) == "no space left on device"
    (tmp_path / "job.out").write_text("all fine\n")
    (tmp_path / "x.log").write_text("INFO checkpoint 3 completed\n")
    assert _environment_failure(tmp_path) is None
