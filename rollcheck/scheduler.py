"""Run ``rollcheck verify``'s sections side by side, each in a process of its own.

Jobs (sections, or the ``PARTS`` a section declares) run longest first, at most ``engine_slots``
engine jobs at a time, with *timed* jobs started first beside the others; each lowers its own
priority by kind (:data:`NICENESS`). Every job runs in its own process group, its processes are
tracked and killed at the end, and its CPU time is summed from the process table. Rows come back
in section order. See docs/internals/verify.md#the-scheduler-rollcheckscheduler.

References
----------
``specs/cli.md`` (``verify``), R. L. Graham, *Bounds on multiprocessing timing anomalies*, SIAM J.
Appl. Math. 17 (1969) (longest-processing-time-first list scheduling).
"""

from __future__ import annotations

import contextlib
import importlib
import os
import pickle
import queue as queue_mod
import signal
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

__all__ = ["SectionJob", "SectionOutcome", "default_engine_slots", "default_jobs", "plan_jobs", "run_sections",
           "section_parts"]

#: Resource kinds: an ``engine`` job holds an engine slot (a JVM of a gigabyte); ``cpu`` jobs
#: (TLC included) only need a core; a ``timed`` job mostly *waits* (a Flink sweep of timed runs)
#: and needs the CPU promptly: timed jobs start first, beside the others, at the highest priority.
KINDS = ("cpu", "engine", "timed")

#: ``nice`` increments per kind (a section process lowers its own priority): timed jobs measure
#: time and keep rollcheck's; CPU-bound jobs fill the cycles the others leave and yield to both.
NICENESS = {"timed": 0, "engine": 2, "cpu": 5}


@dataclass
class SectionJob:
    """One section to run: its name (``sec_<name>``), title, resource kind and estimated time."""

    name: str
    title: str
    kind: str = "cpu"
    estimate: float = 60.0
    module: str = ""  # the module whose run(ctx) is the section (default rollcheck.sections.sec_<section>)
    section: str = ""  # the section the job is (a part of); default: name
    part: str | None = None  # the part of the section this job runs (None: all of it)

    def __post_init__(self) -> None:
        if not self.section:
            self.section = self.name
        if not self.module:
            self.module = f"rollcheck.sections.sec_{self.section}"
        if self.kind not in KINDS:
            raise ValueError(f"section {self.name}: kind must be one of {KINDS}, not {self.kind!r}")


@dataclass
class SectionOutcome:
    """What a section produced: its rows, wall time, log file and, if it crashed, why."""

    name: str
    title: str
    rows: list[Any] = field(default_factory=list)
    seconds: float = 0.0
    started: float = 0.0
    log_path: Path | None = None
    error: str | None = None
    cpu_seconds: float | None = None  # user + system CPU of the section's process and the children it waited for


def default_jobs() -> int:
    """Sections run at once: the cores this process may use plus one, at least 2.

    An engine section mostly waits; the extra CPU-bound section fills the gap.
    """
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        n = os.cpu_count() or 1
    return max(2, n + 1)


def default_engine_slots() -> int:
    """Engine sections (Spark, Flink) at once: 2, or 1 with less than 4 GB of memory available."""
    try:
        avail = int(psutil.virtual_memory().available)
    except (psutil.Error, OSError, RuntimeError):
        return 1
    return 2 if avail >= 4 * 1024 * 1024 * 1024 else 1


def section_parts(module: Any, quick: bool) -> list[str]:
    """The parts a section module declares for a quick or full run ([] for none).

    A module's ``PARTS`` is a tuple, or a dict ``{"quick": (...), "full": (...)}`` when the two
    runs split differently.

    Examples
    --------
    >>> import types
    >>> section_parts(types.SimpleNamespace(PARTS={"quick": ("a",), "full": ("a", "b")}), quick=False)
    ['a', 'b']
    >>> section_parts(types.SimpleNamespace(), quick=True)
    []
    """
    parts = getattr(module, "PARTS", ()) or ()
    if isinstance(parts, dict):
        parts = parts.get("quick" if quick else "full", ()) or ()
    return [str(p) for p in parts]


def plan_jobs(sections: list[tuple[str, Any]], quick: bool,
              measured: dict[str, float] | None = None) -> list[SectionJob]:
    """The sections as jobs, with their kind and estimated seconds.

    A section module may say ``SCHEDULE = {"kind": "engine", "quick": 60, "full": 400}``;
    otherwise :data:`rollcheck.sections.SCHEDULE` has its entry. ``measured`` (job → seconds of a
    previous run with the same quick/full setting) overrides the estimate. A section with
    ``PARTS`` becomes one job per part, named ``<section>.<part>``; a part's kind and estimate come
    from the entry ``<section>.<part>`` of the schedule when there is one, else from its section's
    (the section's estimate shared equally among its parts).

    Examples
    --------
    >>> import types
    >>> m = types.SimpleNamespace(TITLE="t", SCHEDULE={"kind": "engine", "quick": 5, "full": 50})
    >>> plan_jobs([("x", m)], quick=False)
    [SectionJob(name='x', title='t', kind='engine', estimate=50.0, module='rollcheck.sections.sec_x', section='x', part=None)]
    """
    from rollcheck.sections import SCHEDULE

    jobs = []
    for name, module in sections:
        hint: dict[str, Any] = dict(getattr(module, "SCHEDULE", None) or SCHEDULE.get(name, {}))
        key = "quick" if quick else "full"
        est = float(hint.get(key, 60.0))
        kind = str(hint.get("kind", "cpu"))
        title = str(getattr(module, "TITLE", name))
        parts = section_parts(module, quick)
        each: list[str | None] = [*parts] or [None]
        for part in each:
            job = name if part is None else f"{name}.{part}"
            part_hint: dict[str, Any] = dict(SCHEDULE.get(job, {})) if part is not None else {}
            e = float(part_hint.get(key, est / max(1, len(parts))))
            if measured and job in measured:
                e = float(measured[job])
            jobs.append(SectionJob(job, title if part is None else f"{title} [{part}]",
                                   str(part_hint.get("kind", kind)), e, f"rollcheck.sections.sec_{name}", name, part))
    return jobs


def _pick(pending: list[SectionJob], engines_running: int, engine_slots: int) -> SectionJob | None:
    """Longest pending ``cpu`` or ``engine`` job that may start now.

    An engine job may start only while an engine slot is free.

    Examples
    --------
    >>> jobs = [SectionJob("a", "a", "cpu", 10), SectionJob("s", "s", "engine", 50)]
    >>> _pick(jobs, 0, 1).name, _pick(jobs, 1, 1).name
    ('s', 'a')
    """
    ok = [j for j in pending if j.kind != "timed" and not (j.kind == "engine" and engines_running >= engine_slots)]
    return max(ok, key=lambda j: (j.estimate, j.kind == "engine")) if ok else None


def _pick_timed(pending: list[SectionJob], timed_running: int, timed_slots: int) -> SectionJob | None:
    """Longest pending ``timed`` job, while a timed slot is free.

    Examples
    --------
    >>> jobs = [SectionJob("a", "a", "cpu", 10), SectionJob("u", "u", "timed", 50)]
    >>> _pick_timed(jobs, 0, 1).name, _pick_timed(jobs, 1, 1)
    ('u', None)
    """
    ok = [j for j in pending if j.kind == "timed"] if timed_running < timed_slots else []
    return max(ok, key=lambda j: j.estimate) if ok else None


def _cpu_seconds() -> float:
    """User + system CPU seconds of this process and of every child it has waited for."""
    import resource

    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def _worker(name: str, module_name: str, section: str, part: str | None, ctx_args: dict[str, Any],
            log_path: str, q: Any, kind: str = "cpu") -> None:
    """Body of a section's process: run ``module_name.run`` and send the rows back."""
    import contextlib as _cl

    with _cl.suppress(OSError):
        os.setpgid(0, 0)  # the section's JVMs and TLC runs die with its group
    if NICENESS.get(kind) and ctx_args.get("priorities", True):
        with _cl.suppress(OSError):
            os.nice(NICENESS[kind])
    from rollcheck.pyimpl.errors import TerminationRequested

    def _term(signum: int, _frame: Any) -> None:  # clean up as on Ctrl-C: finally blocks stop the JVMs
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        raise TerminationRequested(signum)

    signal.signal(signal.SIGTERM, _term)
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    t0 = time.perf_counter()

    def log(msg: str) -> None:
        q.put(("log", name, str(msg)))
        print(f"[{time.perf_counter() - t0:7.1f}s] {msg}", file=sys.stderr, flush=True)

    from rollcheck.properties.profiles import load_profile
    from rollcheck.suite import Row, VerifyContext

    load_profile(ctx_args["profile"])
    error = None
    try:
        module = importlib.import_module(module_name)
        ctx = VerifyContext(profile=ctx_args["profile"], quick=ctx_args["quick"], out_dir=Path(ctx_args["out_dir"]),
                            seed=ctx_args["seed"], log=log, part=part)
        rows = list(module.run(ctx))
        for r in rows:
            if not isinstance(r, Row):
                raise TypeError(f"section {name} returned a {type(r).__name__}, not a Row")
    except BaseException as e:  # a crashing section is a failure of that section, not of the job
        traceback.print_exc()
        error = f"{type(e).__name__}: {e}"
        rows = [Row(section, "pyimpl", f"section ran{f' (part {part})' if part else ''}", "fail", 0, "runs",
                    time.perf_counter() - t0, error)]
    for r in rows:
        r.section = section
    try:
        blob = pickle.dumps(rows)
    except Exception as e:  # noqa: BLE001  (the rows hold something that cannot travel)
        traceback.print_exc()
        error = f"the rows could not be sent back: {type(e).__name__}: {e}"
        blob = pickle.dumps([Row(section, "pyimpl", "section ran", "fail", 0, "runs", time.perf_counter() - t0,
                                 error, section=section)])
    sys.stdout.flush()
    sys.stderr.flush()
    q.put(("done", name, blob, time.perf_counter() - t0, error, _cpu_seconds()))


#: A process as the scheduler tracks it: (pid, start time); the start time guards against pid reuse.
_ProcKey = tuple[int, float]


def _proc_table(cpu: dict[_ProcKey, float] | None = None) -> dict[int, tuple[int, float]]:
    """Map each pid to (parent pid, start time) ({} where the processes cannot be listed).

    ``cpu``, when given, is filled with (pid, start time) → the process's own user + system CPU
    seconds so far.
    """
    out: dict[int, tuple[int, float]] = {}
    attrs = ["ppid", "create_time"] + (["cpu_times"] if cpu is not None else [])
    try:
        procs = list(psutil.process_iter(attrs, ad_value=None))
    except (psutil.Error, OSError):
        return out
    for p in procs:
        ppid, start = p.info["ppid"], p.info["create_time"]
        if ppid is None or start is None:  # gone while listed, or not readable
            continue
        out[p.pid] = (int(ppid), float(start))
        times = p.info.get("cpu_times")
        if cpu is not None and times is not None:
            cpu[(p.pid, float(start))] = float(times.user + times.system)
    return out


def _descendants(roots: list[int], table: dict[int, tuple[int, float]]) -> set[_ProcKey]:
    """(pid, start time) of every descendant of ``roots`` (start times guard against pid reuse)."""
    kids: dict[int, list[int]] = {}
    for pid, (ppid, _start) in table.items():
        kids.setdefault(ppid, []).append(pid)
    found: set[_ProcKey] = set()
    todo = list(roots)
    while todo:
        for c in kids.get(todo.pop(), []):
            if (c, table[c][1]) not in found:
                found.add((c, table[c][1]))
                todo.append(c)
    return found


def _kill_tracked(tracked: set[_ProcKey]) -> None:
    """SIGKILL every tracked process that is still the same process.

    A JVM or TLC run that a section started in a session of its own is not in the section's group.
    """
    table = _proc_table()
    for pid, start in tracked:
        if pid in table and table[pid][1] == start:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)


def _kill_group(proc: Any, sig: int = signal.SIGKILL) -> None:
    """Signal a section's process group (the section, its JVMs, TLC, Flink jobs)."""
    if proc.pid is None:
        return
    with contextlib.suppress(OSError):
        os.killpg(proc.pid, sig)
    with contextlib.suppress(OSError, ValueError):
        os.kill(proc.pid, sig)


def run_sections(jobs: list[SectionJob], ctx_args: dict[str, Any], log_dir: Path, slots: int,
                 on_event: Callable[[str, str, Any], None], engine_slots: int = 1,
                 timed_slots: int = 2) -> dict[str, SectionOutcome]:
    """Run ``jobs`` side by side, each in a process of its own.

    An exception here (Ctrl-C, SIGTERM) kills every section's process group before it propagates.

    Parameters
    ----------
    jobs : list of SectionJob
    ctx_args : dict
        The keyword arguments of each job's :class:`~rollcheck.suite.VerifyContext`.
    log_dir : Path
        Where each job's ``<job>.log`` goes.
    slots : int
        ``cpu`` and ``engine`` jobs at once.
    on_event : callable
        ``on_event(kind, name, payload)``, called in this process for ``"start"`` (payload: the
        job), ``"log"`` (a progress message) and ``"done"`` (the :class:`SectionOutcome`).
    engine_slots : int
        How many of the ``slots`` may be engine jobs.
    timed_slots : int
        ``timed`` jobs at once, beside the ``slots``.

    Returns
    -------
    dict of str to SectionOutcome
        Each job's outcome, by job name.
    """
    if slots < 1 or engine_slots < 1 or timed_slots < 1:
        raise ValueError(f"slots, engine_slots and timed_slots must be at least 1, got {slots}, {engine_slots}, "
                         f"{timed_slots}")
    log_dir.mkdir(parents=True, exist_ok=True)
    run = _SectionRun(list(jobs), ctx_args, log_dir, slots, on_event, engine_slots, timed_slots)
    try:
        run.loop()
    finally:
        run.stop()
    return run.done


class _SectionRun:
    """The jobs of one :func:`run_sections` call: pending, running and done.

    It also keeps the processes they started and their CPU seconds sampled from the process table.
    """

    def __init__(self, pending: list[SectionJob], ctx_args: dict[str, Any], log_dir: Path,
                 slots: int, on_event: Callable[[str, str, Any], None], engine_slots: int,
                 timed_slots: int):
        import multiprocessing as mp

        self.ctx_args = ctx_args
        self.log_dir = log_dir
        self.slots, self.engine_slots, self.timed_slots = slots, engine_slots, timed_slots
        self.on_event = on_event
        self.mpc = mp.get_context("spawn")
        self.q = self.mpc.Queue()
        self.pending = pending
        self.running: dict[str, tuple[Any, SectionJob, float]] = {}
        self.done: dict[str, SectionOutcome] = {}
        self.gone_since: dict[str, float] = {}
        self.tracked: set[_ProcKey] = set()  # every process the sections started, seen so far
        # job → (pid, start) → own CPU seconds last seen: the CPU of the JVMs a section starts and
        # never waits for (Spark's gateway, PyFlink's), which the section's own rusage does not count
        self.sampled: dict[str, dict[_ProcKey, float]] = {}
        self.last_scan = 0.0

    def loop(self) -> None:
        """Start, watch and collect jobs until none is pending or running."""
        while self.pending or self.running:
            self.start_ready()
            if time.monotonic() - self.last_scan > 1.0:
                self.last_scan = time.monotonic()
                self.sample()
            try:
                msg = self.q.get(timeout=0.25)
            except queue_mod.Empty:
                msg = None
            if msg is not None:
                if msg[0] == "log":
                    self.on_event("log", msg[1], msg[2])
                elif msg[0] == "done" and msg[1] in self.running:
                    _, name, blob, seconds, error, cpu = msg
                    self.finish(name, pickle.loads(blob), seconds, error, cpu)
                continue
            self.reap()

    def start_ready(self) -> None:
        """Start pending jobs while their kind has a free slot (timed ones first)."""
        running = self.running
        while self.pending:
            timed = sum(j.kind == "timed" for _, j, _ in running.values())
            job = _pick_timed(self.pending, timed, self.timed_slots)
            if job is None and len(running) - timed < self.slots:
                job = _pick(self.pending, sum(j.kind == "engine" for _, j, _ in running.values()),
                            self.engine_slots)
            if job is None:
                break
            self.pending.remove(job)
            log_path = self.log_dir / f"{job.name}.log"
            with contextlib.suppress(FileNotFoundError):
                log_path.unlink()
            proc = self.mpc.Process(target=_worker, args=(job.name, job.module, job.section, job.part,
                                                          self.ctx_args, str(log_path), self.q, job.kind),
                                    name=f"rollcheck-verify-{job.name}")
            proc.start()
            running[job.name] = (proc, job, time.perf_counter())
            self.on_event("start", job.name, job)

    def sample(self) -> None:
        """Scan the process table: track every running job's process tree, keep its CPU seconds."""
        ticks: dict[_ProcKey, float] = {}
        table = _proc_table(ticks)
        for jname, (p, _j, _t) in self.running.items():
            if not p.pid or p.pid not in table:
                continue
            tree = _descendants([p.pid], table) | {(p.pid, table[p.pid][1])}
            self.tracked |= tree
            seen = self.sampled.setdefault(jname, {})
            for key in tree:
                if key in ticks:
                    seen[key] = max(seen.get(key, 0.0), ticks[key])

    def finish(self, name: str, rows: list[Any], seconds: float, error: str | None,
               cpu: float | None = None) -> None:
        """Record job ``name``'s outcome (its process joined, else killed) and report it."""
        proc, job, t0 = self.running.pop(name)
        proc.join(5)
        if proc.is_alive():
            _kill_group(proc)
        # both are lower bounds of the section's CPU time: the children it waited for (exact,
        # short-lived ones included) and the processes of its tree seen once a second
        seen = sum(self.sampled.pop(name, {}).values())
        cpu = max(cpu or 0.0, seen)
        out = SectionOutcome(name, job.title, rows, seconds, t0, self.log_dir / f"{name}.log", error,
                             round(cpu, 1) if cpu else None)
        self.done[name] = out
        self.on_event("done", name, out)

    def reap(self) -> None:
        """Finish the jobs whose process ended without reporting (after a grace of 2 s)."""
        from rollcheck.suite import Row

        now = time.perf_counter()
        for name, (proc, _job, t0) in list(self.running.items()):
            if proc.is_alive():
                continue
            # its last message may still be in the queue: give it a moment before calling it dead
            if now - self.gone_since.setdefault(name, now) < 2.0:
                continue
            code = proc.exitcode
            why = (f"the section's process was killed by signal {-code} (out of memory?)" if code and code < 0
                   else f"the section's process exited with code {code} before reporting")
            status = "inconclusive" if code and code < 0 else "fail"
            sec = _job.section
            self.finish(name, [Row(sec, "pyimpl", "section ran", status, 0, "runs", now - t0, why, section=sec)],
                        now - t0, why)

    def stop(self) -> None:
        """Stop every running job (SIGTERM, then SIGKILL to its group) and what they left behind."""
        # interrupted: SIGTERM lets each section stop what it started (its finally blocks), then
        # whatever is left of its group is killed
        running = self.running
        table = _proc_table()
        self.tracked |= _descendants([p.pid for p, _j, _t in running.values() if p.pid], table)
        for proc, _job, _t0 in running.values():
            _kill_group(proc, signal.SIGTERM)
        deadline = time.monotonic() + 5.0
        for proc, _job, _t0 in running.values():
            proc.join(max(0.0, deadline - time.monotonic()))
            _kill_group(proc)
            proc.join(2)
        # and whatever the sections started in sessions of their own and left behind
        _kill_tracked(self.tracked)
        self.q.close()
        self.q.join_thread()
