"""rollcheck SIGKILLed during Spark and TLC runs: no process of the run survives 10 s, nothing
more is written, the previous ``--out`` is unchanged and the run's fragment is ``OUT.partial``.

Each test starts the real CLI as a separate process with a tag in its environment
(:mod:`rollcheck.testing.faults`), waits until the JVM of the run is up and the run is recording,
SIGKILLs the CLI, and looks for survivors by the tag. Costs (2 cores, loaded): the Spark tests
about one JVM start and a batch or two each (~30–90 s), the TLC test ~10 s.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

from rollcheck.testing.faults import java_running, sigkill_during, tlc_sigkill

ROOT = Path(__file__).resolve().parents[1]
QUERY = ROOT / "examples" / "queries" / "clicks_per_window.py"

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs /proc to find survivors")


def _lines(p: Path) -> int:
    try:
        return p.read_bytes().count(b"\n")
    except OSError:
        return 0


def _sigkill_during(argv: list[str], tmp: Path, ready, wait_s: float = 400, within: float = 10) -> None:
    problem = sigkill_during(argv, tmp, ready, wait_s, within=within)
    assert problem is None, problem


@pytest.mark.spark
@pytest.mark.slow
def test_sigkill_during_a_kill_mode_recording_kills_driver_and_jvm(tmp_path):
    """The driver child and its JVM (the reporter's case: they wrote on and slept for 600 s)."""
    out = tmp_path / "o.jsonl"
    out.write_text("previous result\n", encoding="utf-8")
    partial = tmp_path / "o.jsonl.partial"

    def ready(tag: str) -> bool:  # the driver child's JVM is up and the recording is under way
        return java_running(tag) and _lines(partial) >= 3

    _sigkill_during(["spark", "record", "query", "--module", str(QUERY), "--out", str(out),
                     "--fail-at-batch", "2", "--failure", "kill", "--no-reference"], tmp_path, ready)
    size = partial.stat().st_size
    time.sleep(2)
    assert partial.stat().st_size == size, "the trace grew after rollcheck was killed"
    assert out.read_text(encoding="utf-8") == "previous result\n"


@pytest.mark.spark
@pytest.mark.slow
def test_sigkill_during_an_in_process_recording_kills_the_jvm(tmp_path):
    """Spark in rollcheck's own process (the word count with a task failure): its JVM was started
    in a process group that dies with rollcheck, at once. (Left to itself, the JVM notices its
    closed standard input and exits after its shutdown hooks, 4-5 s later on a loaded machine,
    still writing meanwhile; hence 3 s here, stricter than the contract's 10 s.)"""
    out = tmp_path / "wc.jsonl"
    out.write_text("previous result\n", encoding="utf-8")
    partial = tmp_path / "wc.jsonl.partial"

    def ready(tag: str) -> bool:
        return java_running(tag) and _lines(partial) >= 2

    _sigkill_during(["spark", "record", "wordcount", "--out", str(out), "--batches", "6", "--fail-at-batch", "3",
                     "--failure", "task"], tmp_path, ready, within=3)
    size = partial.stat().st_size
    time.sleep(2)
    assert partial.stat().st_size == size, "the trace grew after rollcheck was killed"
    assert out.read_text(encoding="utf-8") == "previous result\n"


@pytest.mark.tlc
def test_sigkill_during_tlc_kills_the_jvm(tmp_path):
    if shutil.which("java") is None:
        pytest.skip("no java")
    problem = tlc_sigkill(tmp_path)
    assert problem is None, problem
