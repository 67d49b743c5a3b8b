"""The hunt's loop: programs generated in order, their cells run in parallel, findings decided.

Programs are generated and stored (with their cells) in seed order before any cell runs; worker
threads run cells and decide candidate groups. A resumed hunt finishes what a kill left open
first. See docs/internals/infra.md#hunt-loop.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, TextIO

from rollcheck.infra.hunt.adapter import (
    CHECK_STATES,
    VERDICTS,
    CellOutcome,
    HuntAdapter,
    HuntCell,
    Program,
)
from rollcheck.infra.hunt.budget import Budget, format_seconds
from rollcheck.infra.hunt.findings import FindingContext, process_group
from rollcheck.infra.hunt.signature import is_candidate, signature
from rollcheck.infra.hunt.store import HuntStore, StoreClosed, StoredProgram
from rollcheck.pyimpl.errors import InternalError, TerminationRequested
from rollcheck.pyimpl.patternio import atomic_write_text

__all__ = ["Hunt", "HuntOptions", "coverage_of", "progress_line"]

#: Seconds a stopping hunt waits for its workers to leave the cell they are in.
STOP_GRACE = 5.0


@dataclass
class HuntOptions:
    """How a hunt runs.

    Parameters
    ----------
    out : Path
        The hunt's folder (``hunt.sqlite``, ``programs/``, ``findings/``, ``work/``).
    seed : int
        The seed every program and fault schedule is drawn from.
    budget : Budget
        Time or programs.
    jobs : int
        Programs run at the same time.
    shrink_runs : int
        Cell runs a finding's minimisation may spend.
    progress : TextIO or None
        Where the progress line goes (None: nowhere).
    progress_every : float or None
        Seconds between progress lines (None: 2 on a terminal, 10 otherwise).
    """

    out: Path
    seed: int
    budget: Budget
    jobs: int = 1
    shrink_runs: int = 20
    progress: TextIO | None = None
    progress_every: float | None = None


def coverage_of(programs: list[StoredProgram] | list[Program]) -> Counter[str]:
    """Operator kinds and pairs -> how many of ``programs`` use them."""
    cov: Counter[str] = Counter()
    for p in programs:
        prog = p.program if isinstance(p, StoredProgram) else p
        cov.update(set(prog.operators))
        cov.update(set(prog.pairs))
    return cov


class Hunt:
    """One run of a hunt over ``store`` (a new one or one to resume).

    Parameters
    ----------
    adapter : HuntAdapter
        The engine's hunt adapter.
    store : HuntStore
        The hunt's store.
    options : HuntOptions
        The run's settings.
    """

    def __init__(self, adapter: HuntAdapter, store: HuntStore, options: HuntOptions):
        self.adapter, self.store, self.options = adapter, store, options
        self.stop = threading.Event()
        self._cond = threading.Condition()
        self._active: dict[str, threading.Thread] = {}
        self._errors: list[BaseException] = []
        self._groups_started: set[str] = set()
        self.coverage = coverage_of(store.programs())
        self._seconds_before = float(store.meta().get("seconds") or 0.0)
        self._last_tick = 0.0
        self._signal: int | None = None
        self._tty = bool(options.progress is not None and getattr(options.progress, "isatty", lambda: False)())

    # the main thread -----------------------------------------------------------------------------
    def run(self) -> None:
        """Run until the budget is spent or nothing is left.

        SIGINT / SIGTERM (in the main thread) only ask the hunt to stop: the loop leaves at its
        next step (never inside a write or a draw), the workers after their cell, and then
        :class:`KeyboardInterrupt` / :class:`TerminationRequested` is raised. A second signal
        interrupts at once.
        """
        with self._deferred_signals():
            resume = [sp for sp in self.store.programs() if sp.status != "done"]
            try:
                while not self.stop.is_set():
                    self._raise_worker_error()
                    if len(self._active) < max(1, self.options.jobs) and self._start_next(resume):
                        continue
                    if not self._active:
                        break
                    with self._cond:
                        self._cond.wait_for(self._slot_free, timeout=0.5)
                    self._tick()
                self._raise_worker_error()
            except KeyboardInterrupt:
                self.stop.set()
                self._drain(STOP_GRACE)
                self._tick(final=True)
                raise
            if self._signal is not None:
                self._drain(STOP_GRACE)
            self._tick(final=True)
        if self._signal is not None:
            raise KeyboardInterrupt if self._signal == signal.SIGINT else TerminationRequested(self._signal)

    @contextlib.contextmanager
    def _deferred_signals(self) -> Iterator[None]:
        """SIGINT and SIGTERM set :attr:`stop` (the second one raises at once)."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return

        def ask(signum: int, frame: Any) -> None:
            if self._signal is not None:
                raise KeyboardInterrupt if signum == signal.SIGINT else TerminationRequested(signum)
            self._signal = signum
            self.stop.set()

        previous = {s: signal.signal(s, ask) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield
        finally:
            for s, handler in previous.items():
                signal.signal(s, handler)

    def _slot_free(self) -> bool:
        return len(self._active) < max(1, self.options.jobs) or bool(self._errors)

    def _start_next(self, resume: list[StoredProgram]) -> bool:
        """Start the next piece of work (resumed program, undecided group, new program); whether any."""
        budget = self.options.budget
        if resume and not budget.expired():
            sp = resume.pop(0)
            self._start(sp.program.id, self._run_program, sp)
            return True
        resume.clear()
        for presig, pid, key in self.store.pending_groups():
            if presig not in self._groups_started:
                self._groups_started.add(presig)
                self._start("group:" + presig, self._run_group, presig, pid, key)
                return True
        index = self.store.next_index()
        if budget.allows_program(index):
            sp = self._generate(index)
            self._start(sp.program.id, self._run_program, sp)
            return True
        return False

    def _generate(self, index: int) -> StoredProgram:
        """Program ``index``: drawn, checked, its module written, stored with its cells."""
        program = self.adapter.generate(self.options.seed, index, MappingProxyType(dict(self.coverage)))
        name = self.adapter.engine
        if not isinstance(program, Program):
            raise InternalError(f"the {name} hunt adapter's generate returned {type(program).__name__}")
        if not program.id or not all(ch.isalnum() or ch in "-_" for ch in program.id):
            raise InternalError(f"the {name} hunt adapter's program id {program.id!r} is not a file name")
        if any(sp.program.id == program.id for sp in self.store.programs()):
            raise InternalError(f"the {name} hunt adapter generated the id {program.id} twice")
        cells = self.adapter.cells(program, self.options.seed)
        if not cells or not all(isinstance(c, HuntCell) for c in cells) or \
                len({c.key for c in cells}) != len(cells):
            raise InternalError(f"the {name} hunt adapter's cells for {program.id} are not distinct HuntCells")
        module = f"programs/{program.id}.py"
        atomic_write_text(self.options.out / module, program.text)
        self.store.add_program(index, program, module, list(cells))
        self.coverage.update(set(program.operators))
        self.coverage.update(set(program.pairs))
        return StoredProgram(index, program, module, "pending", None)

    def _start(self, name: str, fn: Callable[..., Any], *args: Any) -> None:
        def body() -> None:
            try:
                fn(*args)
            except StoreClosed:
                pass
            except BaseException as e:  # noqa: BLE001 - handed to the main thread
                self._errors.append(e)
            finally:
                with self._cond:
                    self._active.pop(name, None)
                    self._cond.notify_all()

        t = threading.Thread(target=body, name=f"hunt-{name}", daemon=True)
        with self._cond:
            self._active[name] = t
        t.start()

    def _raise_worker_error(self) -> None:
        if self._errors:
            self.stop.set()
            self._drain(STOP_GRACE)
            raise self._errors[0]

    def _drain(self, grace: float) -> None:
        """Wait up to ``grace`` seconds for the workers to stop."""
        end = time.monotonic() + grace
        with self._cond:
            while self._active and time.monotonic() < end:
                self._cond.wait(timeout=max(0.0, min(0.5, end - time.monotonic())))

    # the workers ---------------------------------------------------------------------------------
    def _should_stop(self) -> bool:
        return self.stop.is_set() or self.options.budget.expired()

    def _run_program(self, sp: StoredProgram) -> None:
        """Run the open cells of ``sp``, recording each outcome as it comes."""
        pid = sp.program.id
        cells = self.store.open_cells(pid)
        if cells and not self._should_stop():
            self.store.mark_running(pid, [c.key for c in cells])
            module = self.options.out / sp.module
            it = iter(self.adapter.run(sp.program, module, cells, self.options.out / "work" / pid, jobs=1))
            try:
                for cell, outcome in it:
                    self._check_outcome(pid, cell, outcome)
                    presig = signature(outcome, sp.program.operators) if is_candidate(outcome) else None
                    self.store.record_outcome(pid, cell.key, outcome, presig)
                    if self._should_stop():
                        break
            finally:
                close = getattr(it, "close", None)
                if close is not None:
                    close()
        self.store.finish_program(pid)

    def _check_outcome(self, pid: str, cell: Any, outcome: Any) -> None:
        name = self.adapter.engine
        if not isinstance(cell, HuntCell) or not isinstance(outcome, CellOutcome):
            raise InternalError(f"the {name} hunt adapter's run yielded ({type(cell).__name__}, "
                                f"{type(outcome).__name__}) for {pid}, not (HuntCell, CellOutcome)")
        if outcome.verdict not in VERDICTS:
            raise InternalError(f"the {name} hunt adapter's verdict {outcome.verdict!r} for "
                                f"{pid}/{cell.key} is not one of {', '.join(VERDICTS)}")
        bad = {k: v for k, v in outcome.checks.items() if v not in CHECK_STATES}
        if bad:
            raise InternalError(f"the {name} hunt adapter's check states {bad} for {pid}/{cell.key} "
                                f"are not among {', '.join(CHECK_STATES)}")

    def _run_group(self, presig: str, pid: str, key: str) -> None:
        ctx = FindingContext(self.adapter, self.store, self.options.out, self.options.seed,
                             self.options.shrink_runs, self.options.budget.expired, self.stop.is_set)
        process_group(ctx, presig, pid, key)

    # progress ------------------------------------------------------------------------------------
    def _tick(self, final: bool = False) -> None:
        """The progress line (at most every few seconds) and the hunt's seconds in the store."""
        every = self.options.progress_every
        if every is None:
            every = 2.0 if self._tty else 10.0
        now = time.monotonic()
        if not final and now - self._last_tick < every:
            return
        self._last_tick = now
        try:
            self.store.set_meta(seconds=round(self._seconds_before + self.options.budget.elapsed(), 3))
            line = progress_line(self.store.counts(), len(self.store.findings()), self.options.budget)
        except StoreClosed:
            return
        stream = self.options.progress
        if stream is None:
            return
        if self._tty:
            stream.write("\r" + line + "\033[K" + ("\n" if final else ""))
        else:
            stream.write(line + "\n")
        stream.flush()


def progress_line(counts: Mapping[str, int], findings: int, budget: Budget) -> str:
    """``hunt: 12 programs, 40 cells, 1 finding, 23m10s left``.

    Parameters
    ----------
    counts : mapping of str to int
        ``programs`` and ``cells`` done.
    findings : int
        Findings so far.
    budget : Budget
        The hunt's budget (its limits are shown).

    Returns
    -------
    str
        One line.

    Examples
    --------
    >>> progress_line({"programs": 3, "cells": 9}, 0, Budget(programs=10))
    'hunt: 3/10 programs, 9 cells, 0 findings'
    """
    programs = f"{counts['programs']}/{budget.programs}" if budget.programs is not None else str(counts["programs"])
    text = (f"hunt: {programs} programs, {counts['cells']} cells, "
            f"{findings} finding{'' if findings == 1 else 's'}")
    left = budget.left()
    if left is not None:
        text += f", {format_seconds(left)} left"
    return text

