r"""Child processes of a matrix, bounded in time, that die with it: :class:`ChildRunner`.

:meth:`ChildRunner.stop` kills every run still going and refuses new ones; runs inside
``metering(usage)`` add their process tree's CPU seconds to ``usage``.
See docs/internals/infra.md#matrix-runner.

Examples
--------
>>> import sys, tempfile, pathlib
>>> r = ChildRunner()
>>> with tempfile.TemporaryDirectory() as d:
...     r.run([sys.executable, "-c", "print('hi')"], 60, pathlib.Path(d) / "a.log")
(0, 'hi\n')
>>> r.stop(); r.run(["true"], 60, pathlib.Path("unused.log"))
(None, 'the matrix was stopped')
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rollcheck.infra.matrix.cost import TreeCpu, Usage

__all__ = ["ChildRunner", "STOPPED"]

#: The output of a run refused because the matrix is stopping.
STOPPED = "the matrix was stopped"


class ChildRunner:
    """Runs commands as child process groups; :meth:`stop` kills all of them."""

    def __init__(self) -> None:
        self.procs: set[Any] = set()
        self.lock = threading.Lock()
        self.stopping = False
        self._local = threading.local()

    @contextlib.contextmanager
    def metering(self, usage: Usage) -> Iterator[Usage]:
        """Within the block, every run of this thread (and :meth:`charge`) adds to ``usage``."""
        before = getattr(self._local, "usage", None)
        self._local.usage = usage
        try:
            yield usage
        finally:
            self._local.usage = before

    def charge(self, cpu: float, runs: int = 1, **notes: Any) -> None:
        """Add ``cpu`` seconds (and ``notes``: what the run shared) to this thread's account.

        Parameters
        ----------
        cpu : float
            CPU seconds.
        runs : int, optional
            Runs they count for.
        **notes
            What the run shared (``reference``, ``engine``).
        """
        usage: Usage | None = getattr(self._local, "usage", None)
        if usage is not None:
            usage.charge(cpu, runs)
            usage.notes.update(notes)

    def adopt(self, proc: Any) -> None:
        """Kill ``proc`` (a :class:`~rollcheck.infra.children.Child`) with the others on :meth:`stop`."""
        with self.lock:
            if self.stopping:
                with contextlib.suppress(Exception):
                    proc.kill_group()
                return
            self.procs.add(proc)

    def release(self, proc: Any) -> None:
        """Forget an adopted process (it ended)."""
        with self.lock:
            self.procs.discard(proc)

    def run(self, argv: list[str], timeout: float, log: Path) -> tuple[int | None, str]:
        """Run ``argv`` (stderr to ``log``) for at most ``timeout`` seconds.

        Parameters
        ----------
        argv : list of str
            The command.
        timeout : float
            Seconds before its group is killed.
        log : Path
            Its stderr's file.

        Returns
        -------
        (int or None, str)
            The exit status and the standard output; ``None`` and the reason when it timed out or
            the matrix was stopped.
        """
        from rollcheck.infra import children

        if self.stopping:
            return None, STOPPED
        log.parent.mkdir(parents=True, exist_ok=True)
        # the child's temporary files live and die with the run: an engine's launcher killed with its
        # group (PySpark's and PyFlink's gateways each hold a tempfile.mkdtemp()) litters nothing else
        scratch = Path(tempfile.mkdtemp(prefix=f".{log.stem}-tmp-", dir=log.parent))
        with open(log, "wb") as err, contextlib.ExitStack() as cleanup:
            cleanup.callback(shutil.rmtree, scratch, ignore_errors=True)
            with self.lock:
                if self.stopping:
                    return None, STOPPED
                p = children.spawn(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err,
                                   env={**os.environ, "TMPDIR": str(scratch)})
                self.procs.add(p)
            meter = TreeCpu(p.pid)
            try:
                with meter:
                    out, _ = p.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                p.kill_group()
                p.communicate()
                return None, f"timed out after {timeout:.0f} s"
            finally:
                p.kill_group()  # stragglers of an ended recording die with its group
                with self.lock:
                    self.procs.discard(p)
                self.charge(meter.seconds(), engine="fresh")
        if self.stopping and p.returncode is not None and p.returncode < 0:
            return None, STOPPED
        return p.returncode, out.decode(errors="replace")

    def stop(self) -> None:
        """Refuse new runs and kill every run still going."""
        with self.lock:
            self.stopping = True
            for p in list(self.procs):
                with contextlib.suppress(Exception):
                    p.kill_group()
