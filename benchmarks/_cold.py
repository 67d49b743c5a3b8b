"""Timing as a user meets it: first calls in fresh interpreters, commands as child processes.

A figure measured on a second call in a warm process (imports done, caches on the objects filled)
is not what a user waits for, so the benchmarks time

- :func:`child` — a snippet run by a fresh ``python -c`` (nothing imported, nothing cached), which
  prints one JSON object of its own timings;
- :func:`command` — ``rollcheck ARGV`` as a child process, wall time from start to exit
  (interpreter start, imports, reading the input, the work, printing);

and print :func:`load` (the load average) at the start and the end of each benchmark: the figures
in the docs quote it.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

__all__ = ["child", "command", "command_times", "load"]


def load() -> str:
    """The load average over 1, 5 and 15 minutes, as ``a / b / c``."""
    one, five, fifteen = os.getloadavg()
    return f"{one:.1f} / {five:.1f} / {fifteen:.1f}"


def child(code: str, *args: str) -> dict[str, Any]:
    """Run ``code`` in a fresh interpreter with ``args`` as ``sys.argv[1:]``; its JSON stdout."""
    out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"benchmark child failed ({out.returncode}): {out.stderr[-2000:]}")
    return json.loads(out.stdout)


def command(*argv: str, ok: tuple[int, ...] = (0,)) -> float:
    """Wall time of ``rollcheck ARGV`` as a fresh process (stdout discarded); its exit code must be
    in ``ok``."""
    return command_times(*argv, ok=ok)[0]


def command_times(*argv: str, ok: tuple[int, ...] = (0,)) -> tuple[float, float]:
    """``(wall, cpu)`` seconds of ``rollcheck ARGV`` as a fresh process: wall time from start to
    exit, and its CPU time (user + system), which other jobs on a shared machine do not inflate."""
    exe = Path(sys.executable).with_name("rollcheck")
    cmd = [str(exe), *argv] if exe.exists() else [sys.executable, "-m", "rollcheck.cli.main", *argv]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    seconds = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode not in ok:
        raise RuntimeError(f"rollcheck {' '.join(argv)} exited {r.returncode}: {r.stderr[-1000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return seconds, cpu
