"""The Spark chaos matrix: query modules × state store providers × failures × kill points.

Details: ``docs/internals/spark-matrix.md`` (section ``run``).

References
----------
Spark Structured Streaming Programming Guide ("Fault Tolerance Semantics", "Using Foreach and
ForeachBatch", "State Store"); ``specs/spark.md``; ``specs/verdicts.md``.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from rollcheck.infra.matrix import (
    ChildRunner,
    EngineAdapter,
    Prepared,
    Recording,
    Replayed,
    summarize,
)
from rollcheck.infra.matrix import (
    render_html as _render_html,
)
from rollcheck.infra.matrix import run_matrix as _run_core
from rollcheck.infra.matrix.run import entry_of
from rollcheck.pyimpl.errors import InvalidInputError
from rollcheck.spark_replay.cluster import on_cluster
from rollcheck.spark_replay.faults.killpoints import FAILURE_CHECKS
from rollcheck.spark_replay.matrix.cell import CellConfig, cell_argv, cell_config
from rollcheck.spark_replay.matrix.plan import (
    FAILURES,
    PROVIDERS,
    Cell,
    MatrixOptions,
    columns,
    library_modules,
    plan_cells,
    row_header,
    supported_providers,
)
from rollcheck.spark_replay.matrix.versions import prepare_releases, reproducer_on_releases
from rollcheck.spark_replay.matrix.warm import WARM_FAILURES, WarmPool
from rollcheck.spark_replay.matrix.witness import (
    FOREACHBATCH_DOC,
    expected_by_engine,
    protocol_step,
    report_of,
    witness,
)
from rollcheck.spark_replay.query.record import OVERLOAD_SIGNS
from rollcheck.spark_replay.shared_reference import (
    add_release_reference,
    reference_key,
    shared_reference,
    store_reference,
    stored_reference,
    write_shared_reference,
)

__all__ = [
    "PROVIDERS",
    "FAILURES",
    "Cell",
    "MatrixOptions",
    "SparkAdapter",
    "plan_cells",
    "library_modules",
    "supported_providers",
    "columns",
    "report_of",
    "witness",
    "protocol_step",
    "expected_by_engine",
    "cell_result",
    "summarize",
    "render_html",
    "run_matrix",
    "FOREACHBATCH_DOC",
    "overloaded",
    "shared_reference",
    "write_shared_reference",
    "prepare_releases",
    "reproducer_on_releases",
]

#: The core's child-process runner (the name the tests of the Spark matrix knew it by).
_Runner = ChildRunner

_LEGEND = ("Columns: task — a task of the batch raises; sink — the sink raises after it wrote; kill:P — the "
           "driver is SIGKILLed at kill point P (offsets: after the offset log entry; state: after the state "
           "store commit; sink: after the sink wrote; commit: just before the commit log entry); executor — an "
           "executor JVM of the cluster is SIGKILLed after the state store commit, the driver goes on; retry — a "
           "task fails after its state store committed, Spark retries it, the driver restarts after the next "
           "batch; retry:S — the retry under schedule S (tasks one|all, stage stateful|input, attempts N, load "
           "first|later, then restart|continue).")


def _last_line(path: Path) -> str:
    try:
        lines = [ln for ln in path.read_text(errors="replace").splitlines() if ln.strip()
                 and not ln.startswith(("Picked up", "WARNING", "Setting default", "To adjust"))]
    except OSError:
        return ""
    return lines[-1][:400] if lines else ""


def _cell_file(cfg: CellConfig) -> Path:
    """Write a recording's configuration beside its trace (``<stem>.cell.json``) and return the file."""
    trace = Path(cfg.trace)
    return cfg.write(trace.with_name(trace.name.removesuffix(".jsonl") + ".cell.json"))


def _record_argv(cell: Cell | None, module: str, provider: str, opts: MatrixOptions, trace: Path,
                 reference: Path | None, engine_version: str | None = None) -> list[str]:
    """The command of a fresh child recording ``cell`` (None: the configuration's reference).

    Its configuration (:func:`rollcheck.spark_replay.matrix.cell.cell_config`) written beside the
    trace.
    """
    cfg = cell_config(cell, opts, trace, reference, module=module, provider=provider, engine_version=engine_version)
    return cell_argv(_cell_file(cfg))


def _shrink_argv(cell: Cell, module: str, opts: MatrixOptions, trace: Path, fail_at: int) -> list[str]:
    """A minimiser's re-recording of ``cell`` on another module file (its shrunk input).

    The failure at batch ``fail_at``: the matrix's own settings otherwise (seed, master, call
    timeout), all of the module's batches, no shared reference.
    """
    return _record_argv(cell, module, cell.provider, replace(opts, batches=None, fail_at_batch=fail_at), trace, None)


def overloaded(log: Path) -> bool:
    """Whether a recording's log shows a Python worker that did not connect back in time.

    :data:`rollcheck.spark_replay.query.record.OVERLOAD_SIGNS`. The machine's fault, not the
    query's; the matrix records such a cell once more, and if it happens again the cell is
    inconclusive.
    """
    try:
        text = log.read_text(errors="replace")
    except OSError:
        return False
    return any(s in text for s in OVERLOAD_SIGNS)


_OVERLOAD_WHY = ("the machine was too loaded for Spark: a Python worker it started did not connect back "
                 "within Spark's fixed 10 s (\"Python worker failed to connect back\") on every try; the query did "
                 "not fail on its own")


def _missed_kill(entry: Mapping[str, Any]) -> bool:
    try:
        doc = json.loads(Path(entry["checks"]).read_text())
    except (OSError, TypeError, ValueError):
        return False
    # where a failure struck is a race with Spark: the kill point, the executor, the retried task, the second kill
    struck = {"kill-point", *(name for name, _fn in FAILURE_CHECKS.values())}
    return any(c.get("name") in struck and c.get("status") == "unchecked" for c in doc.get("checks", []))


class SparkAdapter(EngineAdapter):
    """Spark's part of the matrix (module docstring), for the cells ``planned`` under ``opts``."""

    engine = "spark"
    title = "spark matrix"
    row_header = "query · state store"
    legend = _LEGEND
    preparing_word = "reference"

    def __init__(self, opts: MatrixOptions, planned: Sequence[Cell], skipped: list[dict[str, Any]] | None = None,
                 warm_pool: WarmPool | None = None):
        self.opts = opts
        self.retries = opts.retries
        self.minimise = opts.minimise
        self.skipped = list(skipped or [])
        sizes: dict[str, int] = {}
        for c in planned:
            sizes[c.config_id] = sizes.get(c.config_id, 0) + 1
        self._shared = {k for k, n in sizes.items() if n > 1}
        #: where the cells run: ``local-standalone`` (a cluster the matrix started) or the user's
        #: ``spark://`` master; None in local mode
        self.cluster = opts.cluster or (opts.master if on_cluster(opts.master) else None)
        #: "release · query · state store" when the cells name their releases
        self.row_header = row_header(planned)
        #: the warm drivers, lent to the workers a cell at a time (warm.py): the caller's pool, kept
        #: open after the matrix, or one of the matrix's own, closed with it
        self._own_pool = warm_pool is None
        releases = {c.engine_version or "" for c in planned} | ({"R"} if opts.engine_versions else set())
        self._warm = warm_pool if warm_pool is not None else WarmPool(
            opts.out / "warm", opts.master, limit=opts.jobs * min(4, len(releases)))  # a driver per release
        #: per configuration: its reference "reused" (kept from an earlier run) or "recorded" (this run)
        self._how: dict[str, str] = {}

    def describe(self, cell: Cell) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
        """The cell's descriptions as the core's table and JSON show them."""
        o = self.opts
        where = {"cluster": self.cluster} if self.cluster else {}
        release = {"engine_version": cell.engine_version or _pinned()}
        if cell.engine_version:
            release["reference_version"] = o.reference_version or _pinned()
        return ({"state_store": cell.provider, "batches": o.batches, "seed": o.seed, **where, **release},
                {"mode": cell.failure, "batch": o.fail_at_batch,
                 **({"kill_point": cell.kill_point} if cell.kill_point else {}),
                 **({"schedule": cell.schedule} if cell.schedule else {})},
                {"name": cell.name})

    def group(self, cell: Cell) -> str | None:
        # a kept reference serves every configuration, a single cell's too (shared_reference.py)
        """The cell's configuration when its reference is shared, else None."""
        return cell.config_id if cell.config_id in self._shared or self.opts.reuse_reference else None

    def prepare(self, group: str, cells: Sequence[Cell], runner: ChildRunner, out: Path) -> Prepared:
        """Prepare a group: its releases' environments and its shared reference."""
        c0 = cells[0]
        trace = out / c0.config_id / "reference.jsonl"
        log = out / c0.config_id / "reference.log"
        trace.parent.mkdir(parents=True, exist_ok=True)
        cfg = cell_config(None, self.opts, trace, None, module=c0.module, provider=c0.provider,
                          engine_version=c0.engine_version)
        key = reference_key(cfg.query) if self.opts.reuse_reference else None
        kept = stored_reference(key)
        if kept is not None:  # recorded by an earlier run: the output folder keeps its own copy
            shutil.copyfile(kept, trace)
            if self._release_reference(cfg, trace, c0, runner):
                store_reference(key, trace)
            self._how[c0.config_id] = "reused"
            runner.charge(0.0, runs=0, reference="reused")
            return Prepared(context=trace)
        rc: int | None = None
        for attempt in range(1 + self.opts.retries):
            rc, _ = self._run(cfg, self._warm_for(None), runner, log)
            if rc == 0 or not overloaded(log) or attempt == self.opts.retries:
                break
        if rc == 0 and trace.exists():
            self._release_reference(cfg, trace, c0, runner)
            store_reference(key, trace)
            self._how[c0.config_id] = "recorded"
            runner.charge(0.0, runs=0, reference="recorded")
            return Prepared(context=trace)
        why = _OVERLOAD_WHY if overloaded(log) else (_last_line(log) or f"exit {rc}")
        return Prepared(error=f"the failure-free reference run of this configuration did not finish: {why}")

    def _release_reference(self, cfg: CellConfig, trace: Path, c0: Cell, runner: ChildRunner) -> bool:
        """On release V with a reference release R.

        R's failure-free run of the configuration, once (a failure-free recording on R, in R's warm
        driver, itself kept in the reference cache), added to the shared reference ``trace``
        (:func:`add_release_reference`), so the cells do not each run the query on R again. Whether
        ``trace`` changed; when R's run does not finish, each cell runs it as before.
        """
        other, mine = cfg.query.reference_version, cfg.query.engine_version
        if not mine or not other or other == mine:
            return False
        rtrace = trace.with_name(f"release-reference-{other}.jsonl")
        rcfg = cell_config(None, self.opts, rtrace, None, module=c0.module, provider=c0.provider,
                           engine_version=None if other == _pinned() else other)
        rkey = reference_key(rcfg.query) if self.opts.reuse_reference else None
        src = stored_reference(rkey)
        if src is None:
            rc, _ = self._run(rcfg, self._warm_for(None), runner, rtrace.with_suffix(".log"))
            if rc != 0 or not rtrace.is_file():
                return False
            src = store_reference(rkey, rtrace) or rtrace
        try:
            ref = shared_reference(src)
        except (InvalidInputError, OSError, ValueError):
            return False
        return add_release_reference(trace, other, ref["output"], workdir=f"{rtrace}.work", shared_from=str(src))

    def record(self, cell: Cell, context: Any, runner: ChildRunner, out: Path) -> Recording:
        """Record ``cell`` in a warm driver or a fresh child."""
        trace, log = out / f"{cell.stem}.jsonl", out / f"{cell.stem}.log"
        trace.parent.mkdir(parents=True, exist_ok=True)
        cfg = cell_config(cell, self.opts, trace, context)
        runner.charge(0.0, runs=0, reference=self._how.get(cell.config_id, "recorded") if context else "recorded")
        rc, stdout = self._run(cfg, self._warm_for(cell.failure), runner, log)
        if rc == 3 and trace.is_file():
            # a recording that ended without "done" (the restart failed with the engine's exception,
            # the failure-free run failed on this release): its trace is whole, and the replay judges it
            return Recording(trace, log=log)
        if rc is None or rc not in (0, 1):
            why = stdout.strip() if rc is None else (_last_line(log) or f"exit {rc}")
            return Recording(trace, error=f"the recording did not finish: {why}", log=log)
        return Recording(trace, log=log)

    # ------------------------------------------------------------------ where a recording runs
    def _warm_for(self, failure: str | None) -> bool:
        """Whether a recording with ``failure`` (None: the reference) runs in a warm driver.

        A task or sink failure or none, on any release (a driver of that release's environment),
        unless the options turned warm drivers off.
        """
        return self.opts.warm and (failure is None or failure in WARM_FAILURES)

    def _run(self, cfg: CellConfig, warm: bool, runner: ChildRunner, log: Path) -> tuple[int | None, str]:
        """Record ``cfg`` in this worker's warm driver (``warm``) or in a fresh child: (exit, stdout)."""
        path = _cell_file(cfg)
        if warm and not runner.stopping:
            done = self._warm.run(path, runner, log, self.opts.cell_timeout, release=cfg.query.engine_version,
                                  master=self.opts.master)
            if done is not None:
                return done
        return runner.run(cell_argv(path), self.opts.cell_timeout, log)

    def close(self) -> None:
        """Stop the warm drivers."""
        if self._own_pool:  # a caller's pool outlives the matrix
            self._warm.close()

    def replay(self, cell: Cell, recording: Recording) -> Replayed:
        """Replay the cell's recording."""
        from rollcheck.spark_replay.replay.conformance import replay_file
        from rollcheck.spark_replay.trace import read_trace

        tr = read_trace(recording.trace)
        return Replayed(report_of(replay_file(recording.trace)), tr.header, tr.events)

    def witness(self, cell: Cell, replayed: Replayed) -> dict[str, Any] | None:
        """The witness of the cell's verdict, if any."""
        w = witness(replayed.header, replayed.events)
        return {"state_store": cell.provider, **(w or {})}

    def retry(self, cell: Cell, entry: Mapping[str, Any], recording: Recording) -> bool:
        # the kill struck off its point (a race with Spark), or the machine was overloaded
        """Whether the cell is recorded once more (the machine's overload, not the query's fault)."""
        return _missed_kill(entry) or (recording.log is not None and overloaded(recording.log))

    def explain(self, cell: Cell, entry: Mapping[str, Any], recording: Recording) -> str | None:
        """Why the cell is inconclusive, read from its recording's log, if known."""
        return _OVERLOAD_WHY if recording.log is not None and overloaded(recording.log) else None

    def finding(self, cell: Cell, entry: Mapping[str, Any], replayed: Replayed, runner: ChildRunner,
                out: Path) -> dict[str, Any]:
        """Minimise a violated cell and write its standalone reproducer."""
        from rollcheck.spark_replay.matrix.reproducer import minimise_and_write

        if cell.failure in FAILURE_CHECKS:  # the standalone script strikes only task, sink and kill
            return {"reproducer": None, "reproducer_note": f"no standalone reproducer for the {cell.failure} "
                    "failure: record the cell again with the command of its trace header"}

        def argv_for(module: str, trace: Path, fail_at: int) -> list[str]:
            return _shrink_argv(cell, module, self.opts, trace, fail_at)

        def root_cause(trace: Path) -> str | None:
            from rollcheck.spark_replay.replay.conformance import replay_file

            rc_ = report_of(replay_file(trace)).root_cause
            return rc_.name if rc_ is not None else None

        if not cell.engine_version:
            return minimise_and_write(cell, self.opts, dict(entry), runner.run, argv_for, root_cause)
        # --engine-version: the reproducer runs on the cell's release V and on the reference release R
        fields = minimise_and_write(cell, replace(self.opts, run_reproducer=False), dict(entry), runner.run,
                                    argv_for, root_cause)
        if self.opts.run_reproducer and fields.get("reproducer"):
            fields["reproducer_run"] = reproducer_on_releases(cell, self.opts, Path(fields["reproducer"]), runner.run)
        return fields

    def caption(self) -> str:
        """The caption of the matrix's table."""
        return _caption({"seed": self.opts.seed, "fail_at_batch": self.opts.fail_at_batch,
                         "engine_versions": self.opts.engine_versions,
                         "reference_version": self.opts.reference_version})

    def meta(self) -> dict[str, Any]:
        """Spark's facts in the matrix's JSON: seed, batches, failure batch, skipped cells, releases."""
        releases = ({"engine_versions": list(self.opts.engine_versions),
                     "reference_version": self.opts.reference_version or _pinned()}
                    if self.opts.engine_versions else {})
        return {"seed": self.opts.seed, "fail_at_batch": self.opts.fail_at_batch, "batches": self.opts.batches,
                "skipped": self.skipped, **releases}


def _pinned() -> str:
    from rollcheck.spark_replay.releases import pinned_release

    return pinned_release()


def _caption(meta: Mapping[str, Any]) -> str:
    text = f"Seed {meta.get('seed')}, failure at batch {meta.get('fail_at_batch')}."
    if meta.get("engine_versions"):
        text += (f" Releases: pyspark {', '.join(meta['engine_versions'])} (release-differential against "
                 f"{meta.get('reference_version') or _pinned()}).")
    return text


def cell_result(cell: Cell, opts: MatrixOptions, trace: Path, *, error: str | None = None) -> dict[str, Any]:
    """Replay one recorded cell and build its entry of the matrix's JSON.

    The core's keys, :data:`rollcheck.infra.matrix.CELL_KEYS`. ``error``: the cell is inconclusive
    with it.
    """
    adapter = SparkAdapter(opts, [cell])
    err = error[len("inconclusive: "):] if error and error.startswith("inconclusive: ") else error
    entry, _ = entry_of(adapter, cell, Recording(Path(trace)), opts.out, error=err)
    return entry


def render_html(cells: list[dict[str, Any]], planned: list[Cell], out: Path, *, done: bool,
                meta: dict[str, Any], running: Mapping[tuple[str, str], str] | set[tuple[str, str]] | None = None,
                ) -> str:
    """The matrix's HTML table with Spark's title, legend and caption.

    The core's, :func:`rollcheck.infra.matrix.render_html`. ``running``: the table places ``(row,
    column)`` running now.
    """
    busy = {k: "running" for k in running} if isinstance(running, set) else dict(running or {})
    return _render_html(cells, planned, out, done=done, title=SparkAdapter.title, row_header=row_header(planned),
                        legend=_LEGEND, caption=_caption(meta),
                        running=busy, skipped=meta.get("skipped") or [])


def run_matrix(opts: MatrixOptions, *, on_update: Callable[[list[dict[str, Any]], list[Any],
                                                              dict[tuple[str, str], str]], None] | None = None,
               cells: list[Cell] | None = None, warm_pool: WarmPool | None = None) -> dict[str, Any]:
    """Run every cell (module docstring); return the contract's JSON document.

    ``on_update(results, planned, running)`` is called whenever a cell starts or ends (the CLI's
    live table); ``DIR/index.html`` and ``DIR/matrix.json`` are rewritten after every cell.
    ``cells`` runs a chosen slice instead of the whole product of the options. A module is
    loaded (and refused with exit 2 when broken) before any Spark run. ``warm_pool``: a
    :class:`~rollcheck.spark_replay.matrix.warm.WarmPool` of the caller's (the hunt runs many small
    matrices in a row) that lends its warm drivers to this matrix and stays open after it (closing
    it is the caller's job; a matrix on a cluster of its own uses a pool of its own).
    """
    from rollcheck.spark_replay.query.record import load_query

    opts.validate()
    planned = (list(cells) if cells is not None
               else plan_cells(opts.modules, opts.providers, opts.failures, opts.kill_points,
                               opts.engine_versions or [None], opts.retry_schedules))
    if not planned:
        raise InvalidInputError("the matrix is empty: give at least one provider and one failure",
                                location="--failures")
    first_col = planned[0].column
    skipped: list[dict[str, Any]] = []
    for m in sorted({c.module for c in planned}):  # refuse a broken module before any Spark run
        uq = load_query(m)
        n = len(uq.batches(opts.seed)) if opts.batches is None else opts.batches
        if opts.fail_at_batch >= n:
            raise InvalidInputError(f"--fail-at-batch {opts.fail_at_batch} is beyond the {n} input batches of "
                                    f"this module", source=m, location="--fail-at-batch")
        upgrades = [c for c in planned if c.module == m and c.failure == "upgrade"]
        if upgrades and not uq.has_next:  # query/upgrade.py: the module's changed query restarts on the checkpoint
            if len({c.module for c in planned}) == 1:
                raise InvalidInputError("--failures upgrade needs query_next (an allowed change of query, run "
                                        "from its checkpoint)", source=m, location="query_next")
            for c in upgrades:  # several modules: not applicable to this one
                planned.remove(c)
                skipped.append({"module": m, "name": c.name, "state_store": c.provider, "row": f"{c.row} · upgrade",
                                "column": "upgrade", "reason": "not applicable: the module gives no query_next"})
        ok = supported_providers(m)
        if ok is not None:
            for c in [c for c in planned if c.module == m and c.provider not in ok]:
                planned.remove(c)
                if c.column == first_col:
                    skipped.append({"module": m, "name": c.name, "state_store": c.provider, "row": c.row,
                                    "reason": f"the module declares STATE_STORES = {ok}: it does not run on "
                                              f"{c.provider}"})
    if not planned:
        raise InvalidInputError("no cell left to run (every provider is excluded by the modules' "
                                "STATE_STORES)", location="--providers")
    # every release made once before any cell runs (an uninstallable one: exit 2, nothing run)
    prepare_releases(replace(opts, engine_versions=list(dict.fromkeys(
        [c.engine_version for c in planned if c.engine_version] + list(opts.engine_versions)))))
    if opts.cluster is not None:  # one cluster for every cell, stopped at the end (cluster.py)
        from rollcheck.spark_replay.cluster import LocalStandaloneCluster

        opts.out.mkdir(parents=True, exist_ok=True)
        with LocalStandaloneCluster(root=opts.out / "cluster") as cluster:
            adapter = SparkAdapter(replace(opts, master=cluster.master_url), planned, skipped)
            return _run_core(adapter, planned, opts.out, jobs=opts.jobs, on_update=on_update)
    adapter = SparkAdapter(opts, planned, skipped, warm_pool=warm_pool)
    return _run_core(adapter, planned, opts.out, jobs=opts.jobs, on_update=on_update)
