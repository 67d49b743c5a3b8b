"""Running a matrix: :func:`run_matrix`, the same for every engine.

Cells run ``jobs`` at a time after their group's shared preparation; ``matrix.json`` and
``index.html`` are rewritten atomically after every cell. An exception or an interrupt stops the
matrix, kills every child and publishes nothing more. See docs/internals/infra.md#matrix-run.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from rollcheck.infra.matrix.adapter import EngineAdapter, Prepared, Recording, Replayed
from rollcheck.infra.matrix.cells import MatrixCell, cell_key, check_unique, entry_key
from rollcheck.infra.matrix.classify import classify
from rollcheck.infra.matrix.cost import Usage, metered
from rollcheck.infra.matrix.document import base_entry, matrix_verdict, summarize, write_document
from rollcheck.infra.matrix.finding import Minimised
from rollcheck.infra.matrix.html import render_html
from rollcheck.infra.matrix.runner import ChildRunner
from rollcheck.pyimpl.errors import InconclusiveError, InternalError, InvalidInputError
from rollcheck.pyimpl.patternio import atomic_write_text

__all__ = ["run_matrix", "decide_cell", "entry_of", "finding_fields", "total_cost"]

Update = Callable[[list[dict[str, Any]], list[Any], dict[tuple[str, str], str]], None]


def entry_of(adapter: EngineAdapter, cell: MatrixCell, recording: Recording | None, out: Path,
             *, error: str | None = None) -> tuple[dict[str, Any], Replayed | None]:
    """Replay one recording and build the cell's entry (the contract's keys).

    Files written beside the trace: ``<ident>.checks.json``, and ``<ident>.witness.json`` when
    not conformant.

    Parameters
    ----------
    adapter : EngineAdapter
        The engine's adapter.
    cell : MatrixCell
        The cell.
    recording : Recording or None
        Its recording; None with ``error``.
    out : Path
        The matrix's output folder.
    error : str, optional
        Why the cell could not be recorded (it is inconclusive).

    Returns
    -------
    tuple of (dict, Replayed or None)
        The entry, and the replay when there was one.
    """
    config, failure, extra = adapter.describe(cell)
    entry = base_entry(adapter.engine, cell, config, failure, **extra)
    if recording is not None:
        entry["trace"] = str(recording.trace) if recording.trace.exists() else None
        entry.update(recording.extra)
        error = error or recording.error
    if error is not None or recording is None:
        entry["reason"] = f"inconclusive: {error or 'not recorded'}"
        return entry, None
    try:
        replayed = adapter.replay(cell, recording)
    except (InvalidInputError, InconclusiveError, OSError, ValueError) as e:
        entry["reason"] = f"inconclusive: the recording could not be replayed: {e}"
        return entry, None
    rep = replayed.report
    checks = out / f"{cell.ident}.checks.json"
    checks.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(checks, json.dumps(rep.to_json("trace"), indent=1, default=str) + "\n")
    entry["checks"] = str(checks)
    entry["check_statuses"] = [{"name": c.name, "status": c.status.value} for c in rep.checks]
    wit: dict[str, Any] | None = None
    if rep.verdict.word("trace") == "not-conformant":
        wit = adapter.witness(cell, replayed)
        rc = rep.root_cause
        doc = {"cell": cell.ident, "column": cell.column, "module": cell.module, "config": entry["config"],
               "root_cause": rc.to_json() if rc else None, "report": rep.to_json("trace"), **(wit or {})}
        wpath = out / f"{cell.ident}.witness.json"
        atomic_write_text(wpath, json.dumps(doc, indent=1, default=str) + "\n")
        entry["witness"] = str(wpath)
    entry.update(classify(rep))
    return entry, replayed


def total_cost(cells: Sequence[dict[str, Any]], preparations: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The matrix's account: CPU seconds, warm cells and shared references.

    CPU seconds of its cells and preparations, and how many cells ran in a warm engine or shared
    a reference kept from an earlier run.

    Parameters
    ----------
    cells : sequence of dict
        The cell entries.
    preparations : sequence of dict
        The shared preparations' accounts.

    Returns
    -------
    dict
        ``cpu_seconds``, ``cells_warm``, ``cells_fresh``, ``references_reused`` and
        ``references_recorded``.

    Examples
    --------
    >>> total_cost([{"cpu_seconds": 2.0, "shared": {"engine": "warm", "reference": "reused"}}],
    ...            [{"cpu_seconds": 1.5}])["cpu_seconds"]
    3.5
    """
    shared = [c.get("shared") or {} for c in cells]
    return {"cpu_seconds": round(sum(float(x.get("cpu_seconds") or 0) for x in [*cells, *preparations]), 1),
            "cells_warm": sum(1 for s in shared if s.get("engine") == "warm"),
            "cells_fresh": sum(1 for s in shared if s.get("engine") == "fresh"),
            "references_reused": sum(1 for p in preparations if p.get("reference") == "reused"),
            "references_recorded": sum(1 for p in preparations if p.get("reference") == "recorded")}


def _tries(adapter: EngineAdapter, cell: MatrixCell, context: Any, runner: ChildRunner, out: Path,
           started: Callable[[], None]) -> tuple[dict[str, Any], Replayed | None]:
    """Record and replay ``cell`` until it is decided or the adapter allows no more tries."""
    tries = 0
    while True:
        tries += 1
        started()
        t0 = time.perf_counter()
        rec = adapter.record(cell, context, runner, out)
        entry, replayed = entry_of(adapter, cell, rec, out)
        entry["seconds"] = round(time.perf_counter() - t0, 1)
        entry["tries"] = tries
        if runner.stopping:
            return entry, replayed
        if entry["verdict"] == "inconclusive" and tries <= adapter.retries and adapter.retry(cell, entry, rec):
            continue
        if entry["verdict"] == "inconclusive":
            better = adapter.explain(cell, entry, rec)
            if better:
                entry["reason"] = f"inconclusive: {better}"
        return entry, replayed


def decide_cell(adapter: EngineAdapter, cell: MatrixCell, context: Any, runner: ChildRunner, out: Path,
                *, prepared_error: str | None = None,
                started: Callable[[], None] = lambda: None) -> dict[str, Any]:
    """Record, replay and classify one cell (retried as the adapter allows); minimise a finding.

    Parameters
    ----------
    adapter : EngineAdapter
        The engine's adapter.
    cell : MatrixCell
        The cell.
    context : object
        Its group's prepared context (None without a group).
    runner : ChildRunner
        Runs the child processes.
    out : Path
        The matrix's output folder.
    prepared_error : str, optional
        Why the group's preparation failed: the cell is inconclusive, nothing is run.
    started : callable, optional
        Called when each try starts.

    Returns
    -------
    dict
        The cell's entry.
    """
    if prepared_error is not None:
        entry, _ = entry_of(adapter, cell, None, out, error=prepared_error)
        return entry
    usage = Usage()
    with runner.metering(usage), metered(usage):
        entry, replayed = _tries(adapter, cell, context, runner, out, started)
    entry.update(usage.fields())
    entry["shared"] = {"reference": None, "engine": None, **(entry.get("shared") or {}),
                       **{k: v for k, v in usage.notes.items() if k in ("reference", "engine")}}
    if runner.stopping:
        return entry
    if (entry["verdict"] == "not-conformant" and not entry["expected_by_engine"] and adapter.minimise
            and replayed is not None):
        try:
            fields = adapter.finding(cell, entry, replayed, runner, out)
        except Exception as e:  # the finding stands; say why it has no reproducer
            entry["reproducer_error"] = f"{type(e).__name__}: {e}"
        else:
            entry.update(finding_fields(adapter, fields))
    return entry


def finding_fields(adapter: EngineAdapter, fields: Mapping[str, Any]) -> dict[str, Any]:
    """An adapter's finding keys, checked against the one schema of findings.

    ``minimised`` must be a :class:`~rollcheck.infra.matrix.finding.Minimised`'s JSON (or
    absent/None); an adapter that gives another shape, or the engines' former keys (``shrink``),
    is a bug of rollcheck (:class:`~rollcheck.pyimpl.errors.InternalError`), not a finding's detail.

    Parameters
    ----------
    adapter : EngineAdapter
        The adapter that gave ``fields``.
    fields : mapping
        What its :meth:`~EngineAdapter.finding` returned.

    Returns
    -------
    dict
        The keys to add to the entry.
    """
    if "shrink" in fields:
        raise InternalError(f"the {adapter.engine} adapter's finding gives 'shrink': a finding's minimised "
                            "input is 'minimised' (rollcheck.infra.matrix.finding.Minimised)")
    if fields.get("minimised") is not None:
        try:
            Minimised.from_json(fields["minimised"])
        except (ValueError, KeyError, TypeError) as e:
            raise InternalError(f"the {adapter.engine} adapter's minimised is not the core's schema: {e}") from e
    return dict(fields)


def run_matrix(adapter: EngineAdapter, cells: Sequence[MatrixCell], out: str | Path, *, jobs: int = 1,
               on_update: Update | None = None, order: Sequence[int] | None = None,
               log: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Run every cell of ``cells`` with ``adapter`` (module docstring); return the JSON document.

    Parameters
    ----------
    adapter
        The engine's part.
    cells
        The planned cells, in table order.
    out
        The output folder (traces, checks, witnesses, reproducers, ``matrix.json``, ``index.html``).
    jobs
        Cells at a time.
    on_update
        Called with ``(results, planned, running)`` whenever a cell starts or ends; ``running``
        maps a table place ``(row, column)`` to what is running there.
    order
        Indices into ``cells``: the order to run them in (the table keeps the planned order).
    log
        Called with one line when a cell starts and when it ends.

    Returns
    -------
    dict
        ``{"cells", "summary", "verdict", "index", "seconds", "finished", ...adapter.meta()}``.
    """
    planned = list(cells)
    if jobs < 1:
        raise InvalidInputError(f"--jobs must be at least 1, got {jobs}", location="--jobs")
    for c in planned:
        if not adapter.is_member(c):
            raise TypeError(f"{type(c).__name__} is not a matrix cell (module, row, column, ident)")
    dup = check_unique(planned)
    if dup:
        raise InvalidInputError(dup, location="--module")
    outdir = Path(out)
    outdir.mkdir(parents=True, exist_ok=True)
    run = _MatrixRun(adapter, planned, outdir, order, on_update, log or (lambda _m: None))
    run.run(jobs)
    run.publish(done=True)
    doc = json.loads((outdir / "matrix.json").read_text())
    doc["index"] = str(outdir / "index.html")
    doc["verdict"] = matrix_verdict(doc["cells"]).word("trace")
    return doc


class _MatrixRun:
    """One matrix being run.

    Its results, what is running where, the work queue (a group's preparation before its cells)
    and the child processes.

    ``lock`` guards results, preparations and ``running``; ``qlock`` the queue and the groups'
    ``ready`` events.
    """

    def __init__(self, adapter: EngineAdapter, planned: list[MatrixCell], outdir: Path,
                 order: Sequence[int] | None, on_update: Update | None,
                 say: Callable[[str], None]):
        self.adapter = adapter
        self.planned = planned
        self.outdir = outdir
        self.on_update = on_update
        self.say = say
        self.meta = adapter.meta()
        self.results: list[dict[str, Any]] = []
        self.preparations: list[dict[str, Any]] = []
        self.running: dict[tuple[str, str], str] = {}
        self.lock = threading.RLock()
        self.runner = ChildRunner()
        self.t_start = time.perf_counter()
        self.place = {cell_key(c): i for i, c in enumerate(planned)}
        self.groups: dict[str, list[MatrixCell]] = {}
        for c in planned:
            g = adapter.group(c)
            if g is not None:
                self.groups.setdefault(g, []).append(c)
        self.prepared: dict[str, Prepared] = {}
        self.ready = {g: threading.Event() for g in self.groups}
        self.queue = self._queue(order)
        self.qlock = threading.Condition()
        self.fatal: list[BaseException] = []

    def _queue(self, order: Sequence[int] | None) -> list[tuple[str | None, MatrixCell | None]]:
        """The work items in ``order``: ``(group, None)`` prepares a group, before its first cell."""
        queue: list[tuple[str | None, MatrixCell | None]] = []
        seen: set[str] = set()
        for i in (list(order) if order is not None else range(len(self.planned))):
            c = self.planned[i]
            g = self.adapter.group(c)
            if g is not None and g not in seen:
                seen.add(g)
                queue.append((g, None))
            queue.append((g, c))
        return queue

    def publish(self, done: bool = False) -> None:
        """Rewrite ``matrix.json`` and ``index.html`` and call ``on_update`` (not once stopping)."""
        adapter, results = self.adapter, self.results
        with self.lock:
            if self.runner.stopping and not done:
                return  # interrupted: the files stay as after the last finished cell
            results.sort(key=lambda r: self.place.get(entry_key(r), 0))
            doc = {"cells": list(results), "summary": summarize(results), **self.meta,
                   "seconds": round(time.perf_counter() - self.t_start, 1), "finished": done,
                   "preparations": list(self.preparations),
                   "cost": total_cost(results, self.preparations)}
            write_document(self.outdir, doc)
            atomic_write_text(self.outdir / "index.html",
                              render_html(results, self.planned, self.outdir, done=done,
                                          title=adapter.title, row_header=adapter.row_header,
                                          legend=adapter.legend, caption=adapter.caption(),
                                          running=dict(self.running),
                                          skipped=self.meta.get("skipped") or []))
            if self.on_update is not None:
                self.on_update(list(results), self.planned, dict(self.running))

    def next_item(self) -> tuple[str | None, MatrixCell | None] | None:
        """The first runnable item (a cell waits for its group's preparation); None: no more."""
        with self.qlock:
            while not self.runner.stopping:
                if not self.queue:
                    return None
                for i, (g, c) in enumerate(self.queue):
                    if c is None or g is None or self.ready[g].is_set():
                        return self.queue.pop(i)
                self.qlock.wait(1.0)
            return None

    def prepare(self, g: str) -> None:
        """Run group ``g``'s shared preparation, metered; its cells may start afterwards."""
        members = self.groups[g]
        word = self.adapter.preparing_word
        with self.lock:
            for c in members:
                self.running[cell_key(c)] = word
        self.publish()
        usage = Usage()
        try:
            with self.runner.metering(usage), metered(usage):
                self.prepared[g] = self.adapter.prepare(g, members, self.runner, self.outdir)
        except (InvalidInputError, InconclusiveError, OSError) as e:
            self.prepared[g] = Prepared(error=str(e))
        finally:
            with self.lock:
                self.preparations.append(
                    {"group": g, "word": word, **usage.fields(),
                     **{k: v for k, v in usage.notes.items() if k in ("reference", "engine")}})
            with self.lock:
                for c in members:
                    self.running.pop(cell_key(c), None)
            with self.qlock:
                self.ready[g].set()
                self.qlock.notify_all()

    def cell(self, g: str | None, c: MatrixCell) -> None:
        """Decide cell ``c`` (of group ``g``) and publish its entry."""
        prep = self.prepared.get(g, Prepared()) if g is not None else Prepared()
        n = len(self.planned)
        self.say(f"[cell {self.place[cell_key(c)] + 1}/{n}] {c.ident} ...")

        def started() -> None:
            with self.lock:
                self.running[cell_key(c)] = "running"
            self.publish()

        entry = decide_cell(self.adapter, c, prep.context, self.runner, self.outdir,
                            prepared_error=prep.error, started=started)
        with self.lock:
            self.running.pop(cell_key(c), None)
            if self.runner.stopping:
                return
            self.results.append(entry)
            self.say(f"[{len(self.results)}/{n} done] {c.ident}: {entry['verdict']} "
                     f"({entry.get('seconds')} s) {str(entry['reason'])[:160]}")
        self.publish()

    def worker(self) -> None:
        """Take items until none is left; an exception stops the matrix (kept in ``fatal``)."""
        try:
            while True:
                item = self.next_item()
                if item is None:
                    return
                g, c = item
                if c is None:
                    assert g is not None
                    self.prepare(g)
                else:
                    self.cell(g, c)
        except Exception as e:  # bad input (the user's module) or a bug: the matrix stops, the caller sees it
            with self.lock:
                self.fatal.append(e)
            self.runner.stop()
            with self.qlock:
                self.qlock.notify_all()

    def run(self, jobs: int) -> None:
        """Run every item on ``jobs`` worker threads; the adapter is closed however it ends.

        A worker's exception or an interrupt is re-raised after killing every child.
        """
        from rollcheck.infra import children

        threads = [threading.Thread(target=self.worker, name=f"matrix-{i}", daemon=True)
                   for i in range(jobs)]
        try:
            for t in threads:
                t.start()
            for t in threads:
                while t.is_alive():
                    t.join(0.5)
        except BaseException:
            # interrupted (SIGINT/SIGTERM arrive in this thread): no new cell, every child killed,
            # the workers' last results dropped (the published files are those of the last
            # finished cell)
            self.runner.stop()
            with self.qlock:
                self.qlock.notify_all()
            children.kill_all()
            deadline = time.monotonic() + 10.0
            for t in threads:
                t.join(max(0.0, deadline - time.monotonic()))
            raise
        finally:
            self.adapter.close()  # the adapter's long-lived engines (warm drivers) end with the matrix
        if self.fatal:
            children.kill_all()
            raise self.fatal[0]
