"""Bounded-exhaustive exploration of a protocol.

:func:`explore` calibrates and guards the user's code (type checks, in-place mutation,
determinism, a claimed symmetry), then walks the bounds in order with the frontier split over
worker processes (or Spark tasks), keeping the smallest violation. Workers die with their parent.
See docs/internals/properties.md#explore-explorer.

References
----------
``specs/protocols.md#exhaustive``.
"""

from __future__ import annotations

import contextlib
import ctypes
import multiprocessing
import os
import signal
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from rollcheck.properties.explore.calls import (
    CallTimeout,
    ProtocolCalls,
    ProtocolCodeError,
    Watchdog,
    method_codes,
    method_source,
)
from rollcheck.properties.explore.determinism import NONDETERMINISTIC
from rollcheck.properties.explore.engine import Violation, WalkError, WalkResult, walk
from rollcheck.pyimpl.protocols.base import Protocol

__all__ = ["Bound", "BoundResult", "Exploration", "DEFAULT_BOUNDS", "parse_bounds", "explore",
           "calibrate", "vet", "split_depth", "run_tasks"]


@dataclass(frozen=True)
class Bound:
    """``processes`` × at most ``events`` basic events."""

    processes: int
    events: int

    def __str__(self) -> str:
        return f"{self.processes}x{self.events}"


#: The bounds ``check protocol`` explores by default.
DEFAULT_BOUNDS = (Bound(2, 11), Bound(3, 9), Bound(4, 6))


def parse_bounds(text: str) -> tuple[Bound, ...]:
    """``"3x9,4x7"`` -> bounds (sorted by processes, then events).

    Examples
    --------
    >>> parse_bounds("4x7, 3x9")
    (Bound(processes=3, events=9), Bound(processes=4, events=7))
    >>> parse_bounds("1x5")
    Traceback (most recent call last):
    ...
    ValueError: bound '1x5': need 2 <= P <= 8 processes and 1 <= E <= 40 events
    """
    out = []
    for part in text.split(","):
        part = part.strip().lower()
        p, sep, e = part.partition("x")
        if not sep or not p.strip().isdigit() or not e.strip().isdigit():
            raise ValueError(f"bound {part!r}: expected PxE, e.g. 3x9")
        b = Bound(int(p), int(e))
        if not (2 <= b.processes <= 8 and 1 <= b.events <= 40):
            raise ValueError(f"bound {part!r}: need 2 <= P <= 8 processes and 1 <= E <= 40 events")
        out.append(b)
    if not out:
        raise ValueError("no bound given")
    return tuple(sorted(set(out), key=lambda b: (b.processes, b.events)))


@dataclass
class BoundResult:
    """One bound's coverage (the ``"exhaustive"`` entries of the JSON)."""

    bound: Bound
    schedules: int = 0
    complete: bool = True
    seconds: float = 0.0
    limit: int = 0  # the bound was searched for counterexamples of at most this many events

    def to_json(self) -> dict[str, Any]:
        """The bound's ``"exhaustive"`` entry of the JSON document."""
        return {"processes": self.bound.processes, "events": self.bound.events,
                "schedules": self.schedules, "complete": self.complete,
                "seconds": round(self.seconds, 2)}


@dataclass
class Exploration:
    """The outcome of :func:`explore`."""

    bounds: list[BoundResult] = field(default_factory=list)
    best: Violation | None = None
    best_processes: int = 0
    symmetry: str = "not claimed"
    calibration: int = 0
    determinism: str = ""
    workers: int = 1
    engine: str = "local"


# --- configuration shipped to workers -----------------------------------------------------------

@dataclass(frozen=True)
class _Job:
    proto: Protocol
    label: str
    n: int
    max_events: int
    limit: int
    deadline: float | None
    symmetric: bool
    zcycles: bool
    rollback_bound: int | None
    call_timeout: float | None


def _named_error(job: _Job, err: WalkError) -> ProtocolCodeError:
    """Replay the failing schedule with a checking ProtocolCalls to name the error exactly."""
    cause = err.__cause__
    named: ProtocolCodeError | None = None
    if isinstance(cause, ProtocolCodeError):
        named = cause
    else:
        checking = ProtocolCalls(job.proto, job.label, checking=True)
        try:
            walk(job.n, len(err.word), checking, prefix=err.word, limit=len(err.word),
                 zcycles=False)
        except WalkError as again:
            if isinstance(again.__cause__, ProtocolCodeError):
                named = again.__cause__
        if named is None:
            method = _raising_method(job.proto, cause)
            named = ProtocolCodeError(
                f"{method} raised {type(cause).__name__}: {cause}, but not when the schedule was "
                f"run again: {NONDETERMINISTIC}", method=method, kind="nondeterministic",
                source=method_source(job.label, type(job.proto).__name__, method))
    return ProtocolCodeError(named.reason, method=named.method, kind=named.kind,
                             source=named.source,
                             location=f"events[{len(err.word) - 1}]" if err.word else "initial state",
                             word=err.word)


def _raising_method(proto: Protocol, exc: BaseException | None) -> str:
    """The protocol method in whose frame ``exc`` was raised (the outermost one).

    Else ``must_force`` (the one the walk checks itself).
    """
    codes = method_codes(proto)
    tb = exc.__traceback__ if exc is not None else None
    while tb is not None:
        if tb.tb_frame.f_code in codes:
            return codes[tb.tb_frame.f_code]
        tb = tb.tb_next
    return "must_force"


def run_tasks(job: _Job, prefixes: Iterable[tuple[Any, ...]]) -> tuple[int, bool, Violation | None]:
    """Walk below each prefix; ``(schedules, complete, smallest violation)``.

    Errors of the user's code are raised as :class:`ProtocolCodeError`.
    """
    calls = ProtocolCalls(job.proto, job.label)
    total, complete, best = 0, True, None
    with Watchdog(method_codes(job.proto), job.call_timeout) as dog:
        for prefix in prefixes:
            if job.deadline is not None and time.monotonic() > job.deadline:
                complete = False
                continue
            try:
                r = walk(job.n, job.max_events, calls, prefix=prefix, limit=job.limit,
                         deadline=job.deadline, symmetric=job.symmetric, zcycles=job.zcycles,
                         rollback_bound=job.rollback_bound)
            except WalkError as e:
                raise _named_error(job, e) from None
            except CallTimeout:
                raise _timeout(job, dog) from None
            total += r.schedules
            complete = complete and r.complete
            if r.best is not None and (best is None or r.best < best):
                best = r.best
    return total, complete, best


def _timeout(job: _Job, dog: Watchdog) -> ProtocolCodeError:
    method = dog.method or "a protocol method"
    return ProtocolCodeError(f"{method} did not return within {job.call_timeout:g} s "
                             f"(--call-timeout)", method=method, kind="timeout",
                             source=method_source(job.label, type(job.proto).__name__, method))


# --- local worker processes ---------------------------------------------------------------------

_WORKER_JOB: list[_Job] = []


def _die_with_parent() -> None:
    if sys.platform.startswith("linux"):
        with contextlib.suppress(Exception):
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles ^C and terminates us
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # not the CLI's handler: terminate() just ends us


def _worker_init() -> None:
    _die_with_parent()


def _worker_run(prefix: tuple[Any, ...]) -> tuple[str, Any]:
    job = _WORKER_JOB[0]  # inherited through fork: the user's class need not be importable
    try:
        return ("ok", run_tasks(job, [prefix]))
    except ProtocolCodeError as e:
        return ("error", e)


def split_depth(n: int, max_events: int) -> int | None:
    """The depth at which the tree is cut into tasks (None: one task)."""
    d = 4 if n == 2 else 3
    return d if max_events > d + 2 else None


# --- calibration ---------------------------------------------------------------------------------

def calibrate(proto: Protocol, label: str, call_timeout: float | None,
              bounds: Sequence[Bound] = (Bound(2, 6), Bound(3, 4))) -> int:
    """Run every schedule of ``bounds`` with a checking ProtocolCalls; the schedules run.

    Raises :class:`ProtocolCodeError` for a method that raises, returns a wrong type, changes its
    arguments in place or overruns ``call_timeout``.
    """
    calls = ProtocolCalls(proto, label, checking=True)
    total = 0
    with Watchdog(method_codes(proto), call_timeout) as dog:
        # by size (each level again: a few hundred calls more), so that a failing schedule is a
        # smallest one
        for step in [Bound(b.processes, e) for b in bounds for e in range(1, b.events + 1)]:
            job = _Job(proto, label, step.processes, step.events, step.events, None, False, False,
                       None, call_timeout)
            try:
                total += walk(step.processes, step.events, calls, zcycles=False).schedules
            except WalkError as e:
                raise _named_error(job, e) from None
            except CallTimeout:
                raise _timeout(job, dog) from None
    return total


def vet(proto: Protocol, label: str, call_timeout: float | None,
        processes: Iterable[int] = (2, 3, 4)) -> tuple[int, str]:
    """:func:`calibrate`, then the determinism samples at each of ``processes``.

    Returns the calibration's schedule count and a line saying what the determinism check ran;
    raises :class:`ProtocolCodeError` for the user's code (exit 2).

    Examples
    --------
    >>> from rollcheck.pyimpl.protocols import BCS
    >>> vet(BCS(), "bcs", 5.0, [2, 3])
    (7185, 'the same results twice on 40 schedules of each of 2, 3 processes')
    """
    from rollcheck.properties.explore.determinism import refute_determinism

    counts = sorted(set(processes)) or [2]
    n = calibrate(proto, label, call_timeout)
    samples = 40
    err = refute_determinism(proto, label, call_timeout, processes=counts, samples=samples)
    if err is not None:
        raise err
    return n, (f"the same results twice on {samples} schedules of each of "
               f"{', '.join(map(str, counts))} processes")


# --- the exploration -----------------------------------------------------------------------------

def explore(proto: Protocol, label: str, bounds: Sequence[Bound] = DEFAULT_BOUNDS, *,
            budget: float | None = None, workers: int | None = None,
            call_timeout: float | None = 10.0, zcycles: bool = True,
            rollback_bound: int | None = None, symmetric: bool | None = None,
            spark: Callable[[_Job, list[tuple[Any, ...]]], tuple[int, bool, Violation | None]] | None = None,
            progress: Callable[[str], None] | None = None) -> Exploration:
    """Explore every schedule of every bound (docs/internals/properties.md#explore-explorer).

    Parameters
    ----------
    proto : Protocol
        The protocol object.
    label : str
        Its name in messages (the spec).
    bounds : sequence of Bound
    budget : float, optional
        Seconds for all bounds together; a bound cut short is ``complete: False``.
    workers : int, optional
        Worker processes (default: the CPUs available, at most 2 on this kind of machine: one
        per core); 1 walks in this process.
    call_timeout : float, optional
        Seconds per protocol method call.
    zcycles : bool
        Check for useless checkpoints (the protocol claims ``zcycle_free``).
    rollback_bound : int, optional
        Check the claimed rollback bound.
    symmetric : bool, optional
        Use the symmetry reduction (default: the class's ``symmetric`` claim, verified first).
    spark : callable, optional
        ``spark(job, prefixes) -> (schedules, complete, best)``: run the tasks elsewhere.
    progress : callable, optional
        Receives one line per finished bound.

    Returns
    -------
    Exploration

    Examples
    --------
    >>> from rollcheck.pyimpl.protocols import BCS, UC
    >>> e = explore(BCS(), "bcs", [Bound(2, 5)], workers=1)
    >>> [(str(b.bound), b.schedules, b.complete) for b in e.bounds], e.best
    ([('2x5', 830, True)], None)
    >>> explore(UC(), "uc", [Bound(2, 6)], workers=1).best.events
    5
    """
    start = time.monotonic()
    deadline = None if budget is None else start + budget
    out = Exploration()
    counts = sorted({b.processes for b in bounds})
    out.calibration, out.determinism = vet(proto, label, call_timeout, counts)
    use_sym = _use_symmetry(proto, label, call_timeout, counts, symmetric, out)
    if workers is None:
        workers = _default_workers()
    out.workers = workers if spark is None else 0
    out.engine = "spark" if spark is not None else "local"
    try:
        for b in bounds:
            t0 = time.monotonic()
            limit = b.events if out.best is None else min(b.events, out.best.events - 1)
            br = BoundResult(b, limit=limit)
            out.bounds.append(br)
            job = _Job(proto, label, b.processes, b.events, limit, deadline, use_sym, zcycles,
                       rollback_bound, call_timeout)
            if deadline is not None and time.monotonic() > deadline:
                br.complete = False
                continue
            best = _explore_bound(job, br, workers, spark)
            if best is not None and (out.best is None or best.events < out.best.events):
                out.best, out.best_processes = best, b.processes
            br.seconds = time.monotonic() - t0
            if progress is not None:
                progress(_progress_line(br, out.best))
    finally:
        _WORKER_JOB.clear()
    return out


def _use_symmetry(proto: Protocol, label: str, call_timeout: float | None, counts: list[int],
                  symmetric: bool | None, out: Exploration) -> bool:
    """Whether to use the symmetry reduction: claimed (or asked) and not refuted on a sample.

    Sets ``out.symmetry`` when the reduction was claimed.
    """
    from rollcheck.properties.explore.symmetry import refute_symmetry

    claimed = bool(getattr(proto, "symmetric", False)) if symmetric is None else symmetric
    if not claimed:
        return False
    refuted = refute_symmetry(proto, label, call_timeout, processes=counts)
    if refuted is None:
        out.symmetry = "claimed, verified on a sample, used"
        return True
    out.symmetry = f"claimed but refuted ({refuted}): not used"
    return False


def _default_workers() -> int:
    """The CPUs available to this process, at most 2 (one worker per core)."""
    return max(1, min(2, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                      else (os.cpu_count() or 1)))


def _explore_bound(job: _Job, br: BoundResult, workers: int,
                   spark: Callable[[_Job, list[tuple[Any, ...]]],
                                   tuple[int, bool, Violation | None]] | None
                   ) -> Violation | None:
    """Walk one bound; its counts go into ``br``; returns its smallest violation.

    The first levels are walked here, the frontier by ``spark``, in this process or by a pool.
    """
    # always the same split, whoever runs the tasks: counts and counterexample do not depend on
    # the number of workers
    split = split_depth(job.n, job.limit)
    # the first levels (and the whole bound when it is small), in this process
    head = _walk_here(job, split)
    br.schedules, br.complete = head.schedules, head.complete
    best = head.best
    if head.frontier:
        sub = replace(job, limit=job.limit if best is None else min(job.limit, best.events - 1))
        if spark is not None:
            n_s, comp, b_best = spark(sub, head.frontier)
        elif workers == 1:
            n_s, comp, b_best = run_tasks(sub, head.frontier)
        else:
            n_s, comp, b_best = _run_pool(sub, head.frontier, workers)
        br.schedules += n_s
        br.complete = br.complete and comp
        if b_best is not None and (best is None or b_best < best):
            best = b_best
    return best


def _run_pool(job: _Job, frontier: list[tuple[Any, ...]], workers: int
              ) -> tuple[int, bool, Violation | None]:
    """Walk below every prefix of ``frontier`` in a pool of ``workers`` forked processes.

    The pool is terminated however the walk ends; returns ``(schedules, complete, smallest
    violation)``.
    """
    # a pool per bound, forked after the job is set: the workers inherit it (the user's class is
    # never pickled); only prefixes and results cross
    _WORKER_JOB[:] = [job]
    pool = multiprocessing.get_context("fork").Pool(workers, _worker_init)
    try:
        n_s, comp, b_best = 0, True, None
        for status, value in pool.imap_unordered(_worker_run, frontier, chunksize=1):
            if status == "error":
                raise value
            k, c, v = value
            n_s += k
            comp = comp and c
            if v is not None and (b_best is None or v < b_best):
                b_best = v
    finally:
        pool.terminate()
        pool.join()
        _WORKER_JOB.clear()
    return n_s, comp, b_best


def _progress_line(br: BoundResult, best: Violation | None) -> str:
    """The line reported when a bound is finished."""
    return (f"exhaustive {br.bound}: {br.schedules} schedule{'' if br.schedules == 1 else 's'} "
            f"in {br.seconds:.1f} s" + ("" if br.complete else " (budget ended it early)")
            + (f"; smallest violation so far: {best.events} events" if best is not None else ""))


def _walk_here(job: _Job, split: int | None) -> WalkResult:
    calls = ProtocolCalls(job.proto, job.label)
    with Watchdog(method_codes(job.proto), job.call_timeout) as dog:
        try:
            return walk(job.n, job.max_events, calls, limit=job.limit, split_at=split,
                        deadline=job.deadline, symmetric=job.symmetric, zcycles=job.zcycles,
                        rollback_bound=job.rollback_bound)
        except WalkError as e:
            raise _named_error(job, e) from None
        except CallTimeout:
            raise _timeout(job, dog) from None
