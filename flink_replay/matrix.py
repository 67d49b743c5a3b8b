"""A chaos matrix on Flink: :class:`FlinkAdapter`, Flink's adapter to the engine-neutral core.

It crosses jobs × state backends × checkpoint modes × failures × rescalings on restore, records
and replays each cell, minimises a finding and writes its pyflink-only reproducer; the design is
in ``docs/internals/flink-matrix.md``.

References
----------
Apache Flink documentation: "Fault Tolerance Guarantees of Data Sources and Sinks",
"Checkpointing", "State Backends", "Task Failure Recovery".
"""

from __future__ import annotations

import json
import random
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from itertools import product
from pathlib import Path
from typing import Any

from rollcheck.flink_replay.checks.oracles import RELEASE
from rollcheck.flink_replay.checks.user_replay import GUARANTEES_DOC
from rollcheck.flink_replay.recording.record import BACKENDS, RecordConfig
from rollcheck.flink_replay.recording.release_reference import (
    config_key,
    needs_release_reference,
    record_job,
    release_reference,
)
from rollcheck.flink_replay.releases import PINNED
from rollcheck.infra.matrix import (
    ChildRunner,
    EngineAdapter,
    GenericCell,
    Minimised,
    Prepared,
    Recording,
    Replayed,
    attempt,
    bisect_fewest,
    classify,
    run_on_releases,
    run_reproducer,
    summarize,
)
from rollcheck.infra.matrix import run_matrix as _run_core
from rollcheck.infra.matrix import write_html as _write_html
from rollcheck.infra.matrix.run import decide_cell
from rollcheck.pyimpl.errors import InconclusiveError
from rollcheck.pyimpl.verdict import Report, Status

__all__ = ["Cell", "FlinkAdapter", "cells", "classify", "run_cell", "run_matrix", "shrink_finding", "write_html",
           "GUARANTEES_DOC", "summarise", "summarize", "ROW_HEADER", "RELEASE_ROW_HEADER", "row_header"]

#: The header of the table's first column.
ROW_HEADER = "job | backend | checkpoints | rescale"
#: The header of the table's first column when the matrix names releases (``--engine-version``).
RELEASE_ROW_HEADER = "release | " + ROW_HEADER


def row_header(planned: Sequence[Any]) -> str:
    """:data:`RELEASE_ROW_HEADER` when a planned cell names its release, else :data:`ROW_HEADER`."""
    return RELEASE_ROW_HEADER if any(getattr(c, "engine_version", None) for c in planned) else ROW_HEADER
#: The core's summary (the name this module gave it before the core existed).
summarise = summarize


@dataclass(frozen=True)
class Cell:
    """One configuration and failure of the matrix.

    A :class:`~rollcheck.infra.matrix.cells.MatrixCell`: ``row``, ``column``, ``ident``.
    """

    module: str  # "wordcount" or a job file
    backend: str
    checkpoints: str
    failure: str
    rescale: tuple[int, int] | None
    #: the apache-flink release (``--engine-version``); None: the pinned one (``.venv-flink``)
    engine_version: str | None = None

    @property
    def job(self) -> str:
        """The job's name: ``wordcount`` or the module file's stem."""
        return "wordcount" if self.module == "wordcount" else Path(self.module).stem

    @property
    def ident(self) -> str:
        """The cell's file stem inside the output folder."""
        r = f"rescale{self.rescale[0]}-{self.rescale[1]}" if self.rescale else "same"
        v = f"flink{self.engine_version}-" if self.engine_version else ""
        return f"{v}{self.job}-{self.backend}-{self.checkpoints}-{self.failure}-{r}"

    @property
    def row(self) -> str:
        """The table row (everything but the failure)."""
        return _row(self.job, self.backend, self.checkpoints, self.rescale, self.engine_version)

    @property
    def column(self) -> str:
        """The table column: the failure."""
        return self.failure

    def config(self) -> dict[str, Any]:
        """The entry's ``config``: backend, checkpoints, rescaling and release."""
        return {"backend": self.backend, "checkpoints": self.checkpoints,
                "rescale": list(self.rescale) if self.rescale else None,
                "engine_version": self.engine_version or PINNED}


def _row(job: str, backend: str, checkpoints: str, rescale: Sequence[int] | None,
         engine_version: str | None = None) -> str:
    r = f"{rescale[0]}:{rescale[1]}" if rescale else "-"
    v = f"apache-flink {engine_version} | " if engine_version else ""
    return f"{v}{job} | {backend} | {checkpoints} | rescale {r}"


def cells(modules: Sequence[str], backends: Sequence[str], checkpoints: Sequence[str],
          failures: Sequence[str], rescales: Sequence[tuple[int, int] | None],
          engine_versions: Sequence[str | None] = (None,)) -> list[Cell]:
    """Every combination, in table order (one group of rows per release, ``engine_versions``).

    Parameters
    ----------
    modules, backends, checkpoints, failures : sequence of str
        The job modules (``wordcount`` or a file), state backends, checkpoint modes and failures.
    rescales : sequence of (int, int) or None
        ``(P1, P2)`` rescalings; None: restored at the same parallelism.
    engine_versions : sequence of str or None, optional
        The releases; None: the pinned one.

    Examples
    --------
    >>> [c.ident for c in cells(["wordcount"], ["hashmap"], ["aligned"], ["task"], [None, (2, 1)])]
    ['wordcount-hashmap-aligned-task-same', 'wordcount-hashmap-aligned-task-rescale2-1']
    >>> [c.row for c in cells(["wordcount"], ["hashmap"], ["aligned"], ["task"], [None], ["1.20.5", "2.3.0"])]
    ['apache-flink 1.20.5 | wordcount | hashmap | aligned | rescale -', 'apache-flink 2.3.0 | wordcount | hashmap | aligned | rescale -']
    """
    for b in backends:
        if b not in BACKENDS:
            raise ValueError(f"unknown backend {b!r}")
    # a second failure restarts the job in place: no rescaled cells for "during-restore" and "twice"
    return [Cell(m, b, c, f, r, v) for v, m, b, c, r, f
            in product(engine_versions, modules, backends, checkpoints, rescales, failures)
            if r is None or f not in ("during-restore", "twice")]


def _report(trace: Path, module: str) -> Report:
    from rollcheck.flink_replay.checks.user_replay import replay_job, word_count_report

    return word_count_report(trace) if module == "wordcount" else replay_job(trace)


def _violated(rep: Report) -> set[str]:
    return {c.name for c in rep.checks if c.status is Status.VIOLATED}


def _header(trace: Path) -> dict[str, Any]:
    with open(trace) as f:
        return dict(json.loads(f.readline()))


def shrink_finding(cell: Cell, cfg: dict[str, Any], out: Path, check: str, full: int, *, runs: int = 4,
                   run: Callable[[Path, dict[str, Any]], Report] | None = None,
                   sources: Mapping[str, Any] | None = None) -> Minimised:
    """Minimise a finding by re-running: the fewest first records that still violate ``check``.

    The core's bisection (:func:`rollcheck.infra.matrix.shrink.bisect_fewest`) between 1 and
    ``full``, at most ``runs`` real re-runs decided by the same replay (one that cannot be decided
    does not show it). With several input streams (``sources``) each source is first tried left
    out, the last first; one whose absence still shows the finding stays out (the recorder's
    ``drop_sources``), and the bisection runs over the sources kept, within the same ``runs``.

    Parameters
    ----------
    cell, cfg
        The cell and the recorder configuration that showed the finding.
    out
        Where the re-runs' traces go (``CELL.shrink-N.jsonl``).
    check
        The violated check (the root cause) that a smaller input must still violate.
    full
        The number of records of the run that showed it.
    runs
        The most re-runs.
    run
        ``run(trace, config) -> Report`` (default: record with Flink, then replay).

    Returns
    -------
    Minimised
        The core's :class:`~rollcheck.infra.matrix.finding.Minimised` (a cell's ``minimised``): ``kept``
        the fewest records that showed the finding (``full`` if none fewer did), ``of`` = ``full``,
        ``sources_dropped`` the sources left out, ``trace`` the smallest re-run's that showed it (None:
        none did), ``tries`` each re-run (its ``input``, ``sources_dropped``, ``shows``, ``verdict``,
        ``violated``); ``fail_at`` is left to the caller.

    Examples
    --------
    >>> from rollcheck.pyimpl.verdict import Check
    >>> fake = lambda trace, c: Report([Check.violated("x", "lost") if c["max_records"] >= 7
    ...                                 else Check.held("x", "ok", examined=1)])
    >>> r = shrink_finding(Cell("j.py", "hashmap", "aligned", "task", None), {}, Path("."), "x", 100, runs=6,
    ...                    run=fake)
    >>> r.kept, r.of, [x["input"] for x in r.tries]
    (7, 100, [50, 25, 12, 6, 9, 7])
    """
    if check != RELEASE:  # the failure-free run on the reference release only where it is the finding
        cfg = dict(cfg, reference_version=None)
    if run is None:
        def run(trace: Path, c: dict[str, Any]) -> Report:
            record_job(trace, RecordConfig(c))
            return _report(trace, cell.module)

    traces: dict[int, str] = {}
    dropped: list[str] = []

    def rerun(n: int, drop: list[str], tag: str) -> tuple[bool, dict[str, Any], str]:
        trace = out / f"{cell.ident}.shrink-{tag}.jsonl"
        c = dict(cfg, max_records=n, **({"drop_sources": drop} if drop else {}))
        try:
            rep = run(trace, c)
            bad = _violated(rep)
            verdict = classify(rep)["verdict"] if rep.checks else "inconclusive"
        except InconclusiveError as e:
            bad, verdict = set(), f"inconclusive ({e})"
        return check in bad, attempt(n, check in bad, drop, verdict=verdict, violated=sorted(bad)), str(trace)

    source_tries: list[dict[str, Any]] = []
    source_trace: str | None = None
    names = list((sources or {}).get("names") or [])
    counts = dict(zip(names, [int(x) for x in (sources or {}).get("records") or []], strict=False))
    for name in names[::-1]:
        kept = [n for n in names if n != name and n not in dropped and counts.get(n)]
        if len(source_tries) >= runs - 1 or not counts.get(name) or not kept:
            continue
        ok, entry, trace = rerun(sum(counts[n] for n in kept), [*dropped, name], "without-" + re.sub(r"[^A-Za-z0-9_.-]", "_", name))
        source_tries.append(entry)
        if ok:
            dropped.append(name)
            source_trace = trace
    whole = full
    full = sum(counts[n] for n in names if n not in dropped) if dropped else full

    def shows(n: int) -> tuple[bool, dict[str, Any]]:
        ok, entry, trace = rerun(n, dropped, str(n))
        if ok:
            traces[n] = trace
        return ok, entry

    best, tries = bisect_fewest(full, shows, runs - len(source_tries))
    return Minimised(check=check, unit="records", kept=best, of=max(whole, full), sources_dropped=tuple(dropped),
                     runs=len(source_tries) + len(tries), tries=tuple(source_tries + tries),
                     trace=traces.get(best, source_trace))


class FlinkAdapter(EngineAdapter):
    """Flink's part of the matrix (module docstring).

    Its settings: records of the word count, the source's rate, the checkpoint interval, the seed,
    the limit per recording and the finding's re-runs.
    """

    engine = "flink"
    title = "flink matrix"
    row_header = ROW_HEADER
    legend = ("Columns: task — a task fails (restarted from the latest completed checkpoint); taskmanager — the "
              "TaskManager process is killed; during-restore — a second task failure while the restarted job "
              "restores; twice — a second one right after the first recovery. A rescaled row fails at parallelism "
              "P1 and is restored at P2.")

    preparing_word = "reference"

    def __init__(self, *, records: int = 1200, rate: float = 400.0, interval_ms: int = 300, seed: int = 0,
                 timeout_s: float = 600.0, shrink_runs: int = 4, minimise: bool = True,
                 run_reproducer: bool = False, reference_version: str | None = None):
        self.records, self.rate, self.interval_ms, self.seed = records, rate, interval_ms, seed
        self.timeout_s, self.shrink_runs, self.minimise = timeout_s, shrink_runs, minimise
        self.run_reproducer = run_reproducer
        #: with cells that name a release: the release-differential check's reference release
        #: (``--reference-version``; None: the pinned one)
        self.reference_version = reference_version
        self._cfgs: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()
        self._shared: set[str] = set()
        self._releases: list[str] = []  # the releases the planned cells name (plan())

    def plan(self, planned: Sequence[Cell]) -> None:
        """Note which configurations share the failure-free run on the reference release.

        More than one cell of a job module whose release is not the reference: :meth:`group`
        names them.
        """
        sizes: dict[str, int] = {}
        for c in planned:
            g = self._release_group(c)
            if g is not None:
                sizes[g] = sizes.get(g, 0) + 1
        self._shared = {g for g, n in sizes.items() if n > 1}
        self._releases = list(dict.fromkeys(c.engine_version for c in planned if c.engine_version))

    def _release_group(self, cell: Cell) -> str | None:
        if cell.module == "wordcount" or not cell.engine_version:
            return None
        cfg = self._config(cell)
        return "release-reference " + config_key(cfg) if needs_release_reference(cfg) else None

    def group(self, cell: Cell) -> str | None:
        """The shared failure-free run on the reference release ``cell`` waits for, or None."""
        g = self._release_group(cell)
        return g if g in self._shared else None

    def prepare(self, group: str, cells: Sequence[Cell], runner: ChildRunner, out: Path) -> Prepared:
        """The failure-free run on the reference release of the configuration ``cells`` share (once).

        Its ``flink.release_reference`` event is every cell's context. A run that cannot be made
        (no result, a limit) is handed on as such: the cells still run, the check is unchecked.
        """
        import hashlib

        cfg = self._config(cells[0])
        tag = hashlib.sha256(group.encode()).hexdigest()[:10]
        run = out / "release-reference" / f"{cells[0].job}-{cfg['reference_version']}-{tag}"
        try:
            return Prepared(context=release_reference(cfg, run))
        except InconclusiveError as e:
            return Prepared(context={"kind": "flink.release_reference", "engine_version": cfg["reference_version"],
                                     "final_state": "NO_RESULT", "failure_cause": None, "reason": str(e),
                                     "lines": []})

    def describe(self, cell: Cell) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
        """The entry's ``config`` (with the reference release) and ``failure``."""
        config = cell.config()
        if cell.engine_version:
            config["reference_version"] = self.reference_version or PINNED
        return config, {"kind": cell.failure}, {}

    def _config(self, cell: Cell) -> dict[str, Any]:
        user = cell.module != "wordcount"
        par = cell.rescale[0] if cell.rescale else 2
        cfg = RecordConfig.make(checkpoints=cell.checkpoints, parallelism=par, interval_ms=self.interval_ms,
                                records=self.records, rate=self.rate,
                                fail_at_record=1 if user else max(2, self.records // 2), failure=cell.failure,
                                seed=self.seed, timeout_s=self.timeout_s, backend=cell.backend,
                                rescale=cell.rescale, module=cell.module if user else None,
                                engine_version=cell.engine_version,
                                reference_version=self.reference_version if cell.engine_version else None)
        if user:
            cfg["fail_at_fraction"] = 0.5  # half way through the module's own input
        return dict(cfg)

    def record(self, cell: Cell, context: Any, runner: ChildRunner, out: Path) -> Recording:
        """Record the cell's run with its failure (inconclusive when Flink gives no result)."""
        trace = out / f"{cell.ident}.jsonl"
        try:
            cfg = self._config(cell)
            with self._lock:
                self._cfgs[cell.ident] = cfg
            rec = record_job(trace, RecordConfig(cfg), shared=context)
        except InconclusiveError as e:
            return Recording(trace, error=f"not recorded: {e}")
        fail_at = _header(trace).get("config", {}).get("fail_at_record", cfg["fail_at_record"])
        return Recording(trace, extra={"failure": {"kind": cell.failure, "record": fail_at},
                                       "restored_checkpoint": rec.get("restored_checkpoint")})

    def replay(self, cell: Cell, recording: Recording) -> Replayed:
        """The same checks as a single ``flink replay``."""
        return Replayed(_report(recording.trace, cell.module), _header(recording.trace))

    def finding(self, cell: Cell, entry: Mapping[str, Any], replayed: Replayed, runner: ChildRunner,
                out: Path) -> dict[str, Any]:
        """Shrink a finding of a job module, write its reproducer, run it on request.

        Returns ``minimised`` (the core's :class:`~rollcheck.infra.matrix.finding.Minimised`: the
        word count and a finding not re-run keep their whole input), ``reproducer`` and, with
        ``run_reproducer``, ``reproducer_run``.
        """
        from rollcheck.flink_replay.reproducer import SHOWS, expected_of, write_reproducer

        rep = replayed.report
        cfg = self._cfgs.get(cell.ident) or self._config(cell)
        hdr = replayed.header.get("config", {})
        full = int(hdr.get("records") or self.records)
        fail_at = int(hdr.get("fail_at_record") or cfg.get("fail_at_record") or 1)
        extra: dict[str, Any] = {}
        if cell.module != "wordcount" and self.shrink_runs > 0 and rep.root_cause is not None:
            small = shrink_finding(cell, cfg, out, rep.root_cause.name, full, runs=self.shrink_runs,
                                   sources=replayed.header.get("sources"))
        else:  # nothing re-run: the reproducer runs the cell's whole input
            small = Minimised(check=rep.root_cause.name if rep.root_cause else None, unit="records", kept=full,
                              of=full)
        few = small.kept if small.smaller else None
        if few is not None:
            fail_at = max(1, int(few * float(cfg.get("fail_at_fraction", 0.5))))
        small = replace(small, fail_at={"record": fail_at})
        extra["minimised"] = small.to_json()
        shown_by = small.trace if few is not None else entry.get("trace")
        expected = expected_of(shown_by, {c.name for c in rep.checks if c.status is Status.VIOLATED})
        script = write_reproducer(cell, cfg, out / f"{cell.ident}.repro.py", rep, records=few, fail_at=fail_at,
                                  expected=expected, drop=list(small.sources_dropped))
        extra["reproducer"] = str(script)
        if self.run_reproducer:  # with the PyFlink environment's Python, as a user would (isolated mode)
            from rollcheck.flink_replay.environment import find_flink

            try:
                if cell.engine_version:  # on the cell's release and on the reference release, each its own Python
                    releases = [cell.engine_version, self.reference_version or PINNED]
                    pythons = {r: str(find_flink(r).python) for r in releases}
                else:
                    python = str(find_flink().python)
            except InconclusiveError as e:
                extra["reproducer_error"] = str(e)
            else:
                if cell.engine_version:
                    extra["reproducer_run"] = run_on_releases(
                        lambda r: [pythons[r], "-I", str(script)], releases, runner.run, self.timeout_s,
                        lambda r: out / f"{cell.ident}.repro.{r}.log", shows=SHOWS)
                else:
                    extra["reproducer_run"] = run_reproducer([python, "-I", str(script)], runner.run,
                                                             self.timeout_s, out / f"{cell.ident}.repro.log",
                                                             shows=SHOWS)
        return extra

    def caption(self) -> str:
        """The seed, the checkpoint interval and the releases."""
        text = f"Seed {self.seed}, {self.interval_ms} ms checkpoint interval."
        if self._releases:
            text += (f" Releases: apache-flink {', '.join(self._releases)} (release-differential against "
                     f"{self.reference_version or PINNED}).")
        return text

    def meta(self) -> dict[str, Any]:
        """Flink's facts in the matrix's JSON: seed, records, interval, releases."""
        releases = ({"engine_versions": list(self._releases), "reference_version": self.reference_version or PINNED}
                    if self._releases else {})
        return {"seed": self.seed, "records": self.records, "interval_ms": self.interval_ms, **releases}



def run_cell(cell: Cell, out: Path, *, records: int = 1200, rate: float = 400.0, interval_ms: int = 300,
             seed: int = 0, timeout_s: float = 600.0, shrink_runs: int = 4) -> dict[str, Any]:
    """Record and replay one cell; the contract's cell entry.

    A finding of a user's job is shrunk by up to ``shrink_runs`` re-runs (:func:`shrink_finding`).
    """
    adapter = FlinkAdapter(records=records, rate=rate, interval_ms=interval_ms, seed=seed, timeout_s=timeout_s,
                           shrink_runs=shrink_runs)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    return decide_cell(adapter, cell, None, ChildRunner(), out)


def run_matrix(all_cells: list[Cell], out: str | Path, *, jobs: int = 1,
               log: Callable[[str], None] = lambda m: None, spread_seed: int | None = None,
               on_update: Callable[[list[dict[str, Any]], list[Any], dict[tuple[str, str], str]], None] | None = None,
               **kw: Any) -> dict[str, Any]:
    """Run every cell (``jobs`` at a time) through the core.

    ``out/matrix.json`` and ``out/index.html`` are rewritten after each cell (the table keeps its
    order). ``spread_seed``: run the cells in an order shuffled with this seed, so that a matrix cut
    short has covered every dimension about evenly. ``kw``: the :class:`FlinkAdapter`'s settings.
    """
    order = list(range(len(all_cells)))
    if spread_seed is not None:
        random.Random(spread_seed).shuffle(order)
    adapter = FlinkAdapter(**kw)
    adapter.row_header = row_header(all_cells)  # "release | ..." when the cells name releases
    adapter.plan(all_cells)  # which configurations share the failure-free run on the reference release
    return _run_core(adapter, all_cells, out, jobs=jobs, on_update=on_update, order=order, log=log)


def write_html(doc: Mapping[str, Any], path: Path) -> Path:
    """The table of a matrix document (the core's HTML, :func:`rollcheck.infra.matrix.write_html`).

    One row per configuration, one column per failure, links relative to ``path``'s folder. Entries
    written before the core (no ``row``/``column``) are placed from their ``config`` and ``failure``.
    """
    entries = []
    for c in doc["cells"]:
        e = dict(c)
        if "row" not in e or "column" not in e:
            cfg = e["config"]
            job = "wordcount" if e["module"] == "wordcount" else Path(e["module"]).stem
            e["row"] = _row(job, cfg["backend"], cfg["checkpoints"], cfg.get("rescale"))
            e["column"] = e["failure"]["kind"]
        entries.append(e)
    planned = [GenericCell(e["module"], e["row"], e["column"]) for e in entries]
    return _write_html(entries, planned, path, title=FlinkAdapter.title,
                       row_header=RELEASE_ROW_HEADER if any(e["row"].startswith("apache-flink ") for e in entries)
                       else ROW_HEADER,
                       legend=FlinkAdapter.legend)
