"""A machine calibration recorded next to measured times, so that times compare across machines.

``rollcheck verify`` and ``make bench-verify`` record the CPU time of a pure-Python loop
(:data:`LOOP`), the JVM start time, the core counts and the load average. A time divided by the
loop's (:func:`normalise`) is in "calibration loops", about the same on a machine twice as slow;
:func:`slower_sections` compares records that way. A record without a calibration is never given
an invented one. The fields: docs/internals/verify.md#calibration-rollcheckcalibration.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["LOOP", "LOOP_N", "Slower", "calibrate", "finish", "jvm_start_seconds", "load_average",
           "loop_cpu_seconds", "normalise", "slower_sections", "usable_cores", "describe"]

#: the number of iterations of the calibration loop
LOOP_N = 20_000_000
#: the calibration loop, as recorded next to its time
LOOP = "s = 0; for i in range(20_000_000): s += i"


def loop_cpu_seconds(n: int = LOOP_N, repeat: int = 1) -> float:
    """Process CPU seconds of ``s = 0; for i in range(n): s += i``, the best of ``repeat`` runs.

    Parameters
    ----------
    n : int, optional
        Iterations of the loop (at least 1).
    repeat : int, optional
        Runs timed (at least 1).

    Returns
    -------
    float
        The fastest run's process CPU seconds.

    Examples
    --------
    >>> t = loop_cpu_seconds(200_000, repeat=2)
    >>> 0.0 < t < 5.0
    True
    """
    if n < 1 or repeat < 1:
        raise ValueError("the calibration loop needs n >= 1 and repeat >= 1")
    # run as a script runs it (module level: ``s`` and ``i`` are globals), so the figure compares
    # with the same loop timed as ``python3 -c`` on another machine (a function's locals run it
    # about twice as fast)
    code = compile(f"s = 0\nfor i in range({n}):\n    s += i\n", "<calibration loop>", "exec")
    best = float("inf")
    for _ in range(repeat):
        scope: dict[str, object] = {}
        t0 = time.process_time()
        exec(code, scope)  # our own constant code, no input
        best = min(best, time.process_time() - t0)
        if scope["s"] != n * (n - 1) // 2:  # pragma: no cover - keeps the loop this sum
            raise AssertionError("calibration loop miscounted")
    return best


def jvm_start_seconds(java: str | None = None, timeout: float = 60.0) -> float | None:
    """Wall seconds of one ``java -version``; None when there is no Java or it failed.

    ``java`` is the executable (default ``$JAVA_HOME/bin/java`` or the one on the PATH).

    Parameters
    ----------
    java : str, optional
        The ``java`` executable (None: found as said).
    timeout : float, optional
        Seconds allowed for the JVM.

    Returns
    -------
    float or None
        Seconds, rounded to 0.001.

    Examples
    --------
    >>> jvm_start_seconds("/nonexistent/java") is None
    True
    """
    if java is None:
        home = os.environ.get("JAVA_HOME")
        java = os.path.join(home, "bin", "java") if home and os.path.exists(os.path.join(home, "bin", "java")) \
            else shutil.which("java")
    if not java:
        return None
    t0 = time.perf_counter()
    try:
        proc = subprocess.run([java, "-version"], capture_output=True, timeout=timeout, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    wall = time.perf_counter() - t0
    return round(wall, 3) if proc.returncode == 0 else None


def usable_cores() -> int:
    """The CPUs this process may run on (its affinity mask; ``os.cpu_count()`` where the OS has none).

    Examples
    --------
    >>> 1 <= usable_cores() <= (os.cpu_count() or 1)
    True
    """
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def load_average() -> float | None:
    """The 1-minute load average, rounded to 0.01 (None where the OS does not say)."""
    try:
        return round(os.getloadavg()[0], 2)
    except (AttributeError, OSError):
        return None


def calibrate(*, repeat: int = 1, n: int = LOOP_N, java: str | None = None,
              load_start: float | None = None) -> dict[str, Any]:
    """Measure the machine now: the calibration loop, one JVM start, the cores and the load.

    ``load_start``: the load average already taken at the start of the run (default: now, before
    the loop). The end load is added by :func:`finish`.

    Parameters
    ----------
    repeat : int, optional
        Runs of the calibration loop (the fastest is kept).
    n : int, optional
        Iterations of the loop.
    java : str, optional
        The ``java`` executable timed (None: the default one).
    load_start : float, optional
        The 1-minute load average at the start of the run.

    Returns
    -------
    dict
        ``loop``, ``loop_cpu_seconds``, ``jvm_start_seconds``, ``cpu_count``, ``usable_cores`` and
        ``load_average`` (``start``, ``end`` None).

    Examples
    --------
    >>> c = calibrate(n=100_000, java="/nonexistent/java")
    >>> sorted(c)  # doctest: +NORMALIZE_WHITESPACE
    ['cpu_count', 'jvm_start_seconds', 'load_average', 'loop', 'loop_cpu_seconds', 'usable_cores']
    >>> c["jvm_start_seconds"] is None, c["loop"] == "s = 0; for i in range(100000): s += i"
    (True, True)
    """
    start = load_average() if load_start is None else load_start
    loop = round(loop_cpu_seconds(n, repeat), 3)
    return {"loop": LOOP if n == LOOP_N else f"s = 0; for i in range({n}): s += i",
            "loop_cpu_seconds": loop, "jvm_start_seconds": jvm_start_seconds(java),
            "cpu_count": os.cpu_count(), "usable_cores": usable_cores(),
            "load_average": {"start": start, "end": None}}


def finish(cal: dict[str, Any], load_end: float | None = None) -> dict[str, Any]:
    """The calibration with the load average at the end of the run filled in (default: now).

    Parameters
    ----------
    cal : dict
        A calibration from :func:`calibrate`.
    load_end : float, optional
        The load average to record (None: measured now).

    Returns
    -------
    dict
        A copy of ``cal`` with ``load_average.end`` set.

    Examples
    --------
    >>> finish({"loop_cpu_seconds": 1.0, "load_average": {"start": 0.5, "end": None}}, 2.0)["load_average"]
    {'start': 0.5, 'end': 2.0}
    """
    load = dict(cal.get("load_average") or {})
    load["end"] = load_average() if load_end is None else load_end
    return {**cal, "load_average": load}


def _loop_seconds(record: Mapping[str, Any] | None) -> float | None:
    cal = (record or {}).get("calibration")
    if not isinstance(cal, Mapping):
        return None
    v = cal.get("loop_cpu_seconds")
    return float(v) if isinstance(v, (int, float)) and v > 0 else None


def normalise(seconds: float, record: Mapping[str, Any] | None) -> float | None:
    """``seconds`` in calibration loops (seconds / the record's ``loop_cpu_seconds``).

    None for an uncalibrated record (no ``calibration`` or no positive loop time).

    Parameters
    ----------
    seconds : float
        A time measured on the record's machine.
    record : Mapping, optional
        The record holding a ``calibration``.

    Returns
    -------
    float or None
        Calibration loops.

    Examples
    --------
    >>> normalise(100.0, {"calibration": {"loop_cpu_seconds": 2.0}})
    50.0
    >>> normalise(100.0, {"when": "2026-11-26"}) is None
    True
    """
    loop = _loop_seconds(record)
    return None if loop is None else seconds / loop


def describe(record: Mapping[str, Any] | None, *, load: bool = True) -> str:
    """The calibration of a record in words (or that it has none); ``load=False``: without the load.

    Parameters
    ----------
    record : Mapping, optional
        A record with or without a ``calibration``.
    load : bool, optional
        Include the load averages.

    Returns
    -------
    str
        One line.

    Examples
    --------
    >>> describe({"calibration": {"loop_cpu_seconds": 1.2, "jvm_start_seconds": 0.31, "cpu_count": 2,
    ...           "usable_cores": 2, "load_average": {"start": 0.1, "end": 3.5}}})
    'calibration loop 1.20 s of CPU, JVM start 0.31 s, 2 cores (2 usable), load 0.1 at the start and 3.5 at the end'
    >>> describe({"calibration": {"loop_cpu_seconds": 2.0, "cpu_count": 4, "usable_cores": 2}}, load=False)
    'calibration loop 2.00 s of CPU, JVM start unknown (no Java), 4 cores (2 usable)'
    >>> describe({})
    'uncalibrated (recorded before calibrations were kept)'
    """
    cal = (record or {}).get("calibration")
    if not isinstance(cal, Mapping) or _loop_seconds(record) is None:
        return "uncalibrated (recorded before calibrations were kept)"
    jvm = cal.get("jvm_start_seconds")
    la = cal.get("load_average") or {}

    def num(x: Any) -> str:
        return "unknown" if x is None else f"{float(x):.1f}"

    text = (f"calibration loop {float(cal['loop_cpu_seconds']):.2f} s of CPU, "
            f"JVM start {'unknown (no Java)' if jvm is None else f'{float(jvm):.2f} s'}, "
            f"{cal.get('cpu_count')} cores ({cal.get('usable_cores')} usable)")
    if load:
        text += f", load {num(la.get('start'))} at the start and {num(la.get('end'))} at the end"
    return text


@dataclass(frozen=True)
class Slower:
    """A section slower than in the previous record.

    Its times are in seconds and, when both records are calibrated, in calibration loops;
    ``ratio`` is the one compared with the tolerance.
    """

    name: str
    seconds: float
    previous_seconds: float
    loops: float | None
    previous_loops: float | None
    ratio: float

    @property
    def normalised(self) -> bool:
        """Whether the comparison was in calibration loops (both records calibrated)."""
        return self.loops is not None and self.previous_loops is not None


def slower_sections(current: Mapping[str, Any], previous: Mapping[str, Any] | None, *, tolerance: float = 0.25,
                    key: str = "sections", require_calibration: bool = False) -> list[Slower]:
    """Sections of ``current`` more than ``tolerance`` (a fraction) slower than in ``previous``.

    When both records carry a calibration the times are compared in calibration loops (seconds /
    ``loop_cpu_seconds`` of each record's own machine); otherwise as seconds, unless
    ``require_calibration`` (then nothing is flagged). ``key``: the record's mapping of times
    (``sections``: wall seconds, ``sections_cpu``: CPU seconds).

    Parameters
    ----------
    current : Mapping
        The new record.
    previous : Mapping, optional
        The record compared with (None or empty: nothing is flagged).
    tolerance : float, optional
        Allowed slowdown as a fraction (0.25: 25 %), non-negative.
    key : str, optional
        The record's mapping of section times.
    require_calibration : bool, optional
        Flag nothing unless both records are calibrated.

    Returns
    -------
    list of Slower
        The slower sections, by name.

    Examples
    --------
    The same work on a machine twice as slow is not slower; a section whose normalised time grew by
    half is:

    >>> prev = {"sections": {"tlc": 100.0, "spark": 100.0}, "calibration": {"loop_cpu_seconds": 1.0}}
    >>> cur = {"sections": {"tlc": 200.0, "spark": 300.0}, "calibration": {"loop_cpu_seconds": 2.0}}
    >>> [(s.name, round(s.ratio, 2), s.normalised) for s in slower_sections(cur, prev)]
    [('spark', 1.5, True)]

    An uncalibrated previous record is compared in seconds (both sections are flagged then):

    >>> [s.name for s in slower_sections(cur, {"sections": prev["sections"]})]
    ['spark', 'tlc']
    >>> slower_sections(cur, {"sections": prev["sections"]}, require_calibration=True)
    []
    """
    if tolerance < 0:
        raise ValueError("the tolerance is a non-negative fraction")
    if not previous:
        return []
    loop_now, loop_then = _loop_seconds(current), _loop_seconds(previous)
    calibrated = loop_now is not None and loop_then is not None
    if require_calibration and not calibrated:
        return []
    now = {str(k): float(v) for k, v in (current.get(key) or {}).items() if isinstance(v, (int, float))}
    then = {str(k): float(v) for k, v in (previous.get(key) or {}).items() if isinstance(v, (int, float))}
    out: list[Slower] = []
    for name in sorted(now):
        s, p = now[name], then.get(name)
        if p is None or p <= 0:
            continue
        if calibrated:
            assert loop_now is not None and loop_then is not None
            a, b = s / loop_now, p / loop_then
            ratio = a / b
            slower = Slower(name, s, p, round(a, 2), round(b, 2), ratio)
        else:
            ratio = s / p
            slower = Slower(name, s, p, None, None, ratio)
        if ratio > 1.0 + tolerance:
            out.append(slower)
    return out
