"""What a matrix cell costs: wall and CPU seconds of every process it ran, :class:`TreeCpu`, :class:`Usage`.

:class:`TreeCpu` samples the CPU time of a process and of all its descendants a few times a
second (``getrusage`` misses killed, unreaped JVMs); :class:`Usage` is one cell's account.
See docs/internals/infra.md#matrix-cost.

Examples
--------
>>> import subprocess, sys
>>> p = subprocess.Popen([sys.executable, "-c", "sum(range(3_000_000))"])
>>> with TreeCpu(p.pid, interval=0.05) as meter:
...     _ = p.wait()
>>> meter.seconds() >= 0.0
True
"""

from __future__ import annotations

import contextlib
import threading
import time
from dataclasses import dataclass, field
from typing import Any

__all__ = ["TreeCpu", "Usage", "metered"]


class TreeCpu:
    """CPU seconds of process ``pid`` and its descendants, sampled every ``interval`` seconds.

    Parameters
    ----------
    pid : int
        The root process.
    interval : float
        Seconds between samples (a thread samples while the meter is entered).
    """

    def __init__(self, pid: int, interval: float = 0.25) -> None:
        self.pid = pid
        self.interval = interval
        self._seen: dict[tuple[int, float], float] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def sample(self) -> None:
        """Read the CPU times of the root and of every descendant now."""
        try:
            import psutil
        except ImportError:  # pragma: no cover - psutil is a dependency
            return
        try:
            root = psutil.Process(self.pid)
            procs = [root, *root.children(recursive=True)]
        except (psutil.Error, OSError):
            return
        got: dict[tuple[int, float], float] = {}
        for p in procs:
            with contextlib.suppress(psutil.Error, OSError):
                with p.oneshot():
                    t = p.cpu_times()
                    got[(p.pid, p.create_time())] = float(t.user + t.system)
        with self._lock:
            for k, v in got.items():
                if v > self._seen.get(k, -1.0):
                    self._seen[k] = v

    def seconds(self) -> float:
        """The CPU seconds seen so far, summed over every process of the tree."""
        with self._lock:
            return round(sum(self._seen.values()), 3)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self.sample()

    def __enter__(self) -> TreeCpu:
        self.sample()
        self._thread = threading.Thread(target=self._loop, name=f"cpu-{self.pid}", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5.0)
        self.sample()  # the last word of a root that has not ended yet


@dataclass
class Usage:
    """One cell's (or one preparation's) account: wall and CPU seconds over all its tries.

    ``cpu_seconds`` adds the CPU of every child process tree the cell ran (:class:`TreeCpu`) and
    of rollcheck's own thread while it worked for the cell (the replay); ``runs`` counts the
    engine runs it made.

    >>> u = Usage(); u.charge(1.5); u.charge(0.25, runs=0); u.cpu_seconds, u.runs
    (1.75, 1)
    """

    wall_seconds: float = 0.0
    cpu_seconds: float = 0.0
    runs: int = 0
    notes: dict[str, Any] = field(default_factory=dict)

    def charge(self, cpu: float, runs: int = 1) -> None:
        """Add ``cpu`` seconds of a run (``runs``: how many engine runs they were).

        Parameters
        ----------
        cpu : float
            CPU seconds.
        runs : int, optional
            The engine runs they were.
        """
        self.cpu_seconds = round(self.cpu_seconds + max(0.0, float(cpu)), 3)
        self.runs += runs

    def fields(self) -> dict[str, Any]:
        """The keys a cell's entry carries: ``wall_seconds``, ``cpu_seconds``."""
        return {"wall_seconds": round(self.wall_seconds, 1), "cpu_seconds": round(self.cpu_seconds, 1)}


@contextlib.contextmanager
def metered(usage: Usage) -> Any:
    """Add the wall time and this thread's CPU time of the block to ``usage``."""
    t0, c0 = time.perf_counter(), time.thread_time()
    try:
        yield usage
    finally:
        usage.wall_seconds += time.perf_counter() - t0
        usage.charge(time.thread_time() - c0, runs=0)
