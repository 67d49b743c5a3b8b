"""Chaos-test a user's own Structured Streaming query: record it with a real injected failure.

Details: ``docs/internals/spark-query.md`` (section ``record``).

Examples
--------
>>> from rollcheck.spark_replay.query import config
>>> QueryConfig is config.QueryConfig and "during-recovery" in FAILURES
True

References
----------
Spark Structured Streaming programming guide (foreachBatch, checkpointing, watermarks, the
``statestore`` data source); the conformance rules are in ``specs/spark.md``.
"""

from __future__ import annotations

import contextlib
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from rollcheck.infra.partialfile import partial_output
from rollcheck.pyimpl.errors import InvalidInputError
from rollcheck.spark_replay.checkpoint.watcher import PREFIX
from rollcheck.spark_replay.faults.killpoints import (
    SECOND_FAILURES,
    SECOND_KILL,
    KillSupervisor,
    record_kill,
    retry_restart_batch,
)
from rollcheck.spark_replay.query.config import (
    FAILURES,
    KILLED,
    QueryConfig,
    session_conf,
)
from rollcheck.spark_replay.query.config import driver_master as _master  # noqa: F401
from rollcheck.spark_replay.query.drive import child_run, drive
from rollcheck.spark_replay.query.failures import (
    OVERLOAD_SIGNS,
    engine_code_raised,
    engine_failure,
    raising_frame,
    reference_failure_is_engines,
    release_ran,
)
from rollcheck.spark_replay.query.files import WORK_MARKER, WorkPaths, prepare_workdir
from rollcheck.spark_replay.query.module import (
    OUTPUT_MODES,
    Batch,
    UserQuery,
    ddl_columns,
    load_query,
    total_rows,
)
from rollcheck.spark_replay.query.run import run_once as _run_once  # noqa: F401
from rollcheck.spark_replay.query.state import (
    STATE_READER_SINCE,
    StateUnreadable,
    has_state_reader,
    read_state_stores,
)
from rollcheck.spark_replay.query.state import state_or_reason as _state_or_reason  # noqa: F401
from rollcheck.spark_replay.releases import child_environment, pinned_release, spark_environment
from rollcheck.spark_replay.supervise import child_main, environment_guard, run_driver
from rollcheck.spark_replay.trace import TraceWriter

__all__ = [
    "FAILURES",
    "OUTPUT_MODES",
    "QueryConfig",
    "UserQuery",
    "load_query",
    "ddl_columns",
    "record_query",
    "session_conf",
    "read_state_stores",
    "WORK_MARKER",
    "OVERLOAD_SIGNS",
    "has_state_reader",
    "raising_frame",
    "engine_code_raised",
    "engine_failure",
    "release_ran",
    "reference_failure_is_engines",
    "StateUnreadable",
    "STATE_READER_SINCE",
]


@contextlib.contextmanager
def _cluster(cfg: QueryConfig, root: Path) -> Any:
    """The recording's cluster: yields the configuration the drivers run with.

    ``--cluster local-standalone``: started here, stopped at the end, its JVMs dying with rollcheck.
    """
    if cfg.cluster is None:
        yield cfg
        return
    from rollcheck.spark_replay.cluster import LocalStandaloneCluster

    with LocalStandaloneCluster(root=root / "cluster") as c:
        yield replace(cfg, master=c.master_url, cluster=None)


def record_query(cfg: QueryConfig, out: str | Path, *, workdir: str | Path | None = None,
                 enabled: bool = True, spark: Any = None,
                 reference_from: str | Path | None = None) -> dict[str, Any]:
    """Record the user's query: a failure-free reference run, then the run with the failure.

    Parameters
    ----------
    cfg : QueryConfig
        The module, the failure and the Spark settings.
    out : path
        The trace file (``rollcheck.trace/1``) to write: recorded as ``OUT.partial`` and renamed
        when the run ends (an interrupted run leaves an existing ``OUT`` as it was).
    workdir : path, optional
        The folder for the input files, checkpoints and outputs (default: ``<out>.work`` next to
        the trace); kept afterwards. An existing folder is replaced only if it is rollcheck's.
    enabled : bool
        False runs the same query without recording (the overhead baseline of the benchmark).
    spark : SparkSession, optional
        Run in this session (``task`` and ``sink`` failures only; ``kill`` always starts its own
        driver processes). Several recordings can so share one JVM. Without it every driver is a
        child process (:mod:`rollcheck.spark_replay.supervise`) whose process group dies with
        rollcheck, and a call into the user's code past ``cfg.call_timeout`` that cannot be
        stopped in place ends with that group; in the caller's session it is stopped as far as
        Python allows (an exception in the calling thread, the running Spark jobs cancelled).
    reference_from : path, optional
        A failure-free recording of the same query (module, seed, batches, state store) whose
        final output and state serve as this run's reference instead of a reference run of its
        own (:func:`rollcheck.spark_replay.shared_reference.shared_reference`; the matrix runs it once per
        configuration).

    Returns
    -------
    dict
        ``trace``, ``checkpoint`` (the kept checkpoint folder), ``seconds`` (the whole recording),
        ``reference_seconds``, ``attempt_seconds``, ``status``, ``batches``, ``children``.

    Examples
    --------
    See ``docs/your-query.md``; the library of queries in ``tests/queries`` is recorded by
    ``tests/test_spark_query.py``.
    """
    cfg.validate()
    if reference_from is not None:
        cfg = replace(cfg, reference=False)
    uq, rows = _user_module(cfg)
    out = Path(out)
    root = Path(workdir) if workdir is not None else out.with_name(out.name + ".work")
    # the release: made once into rollcheck's cache (releases.py); the pinned one runs here
    python = spark_environment(cfg.engine_version)
    release = cfg.engine_version or pinned_release()
    other = cfg.reference_version or pinned_release()
    event_time = _event_time(uq)
    paths = prepare_workdir(root, rows, uq)
    release_ref = None
    if enabled and cfg.engine_version is not None and other != release:
        release_ref = _release_reference_of(cfg, other, root, rows, uq, reference_from)
    header = _header(cfg, uq, rows, release, other, event_time)
    # OUT.partial until the run ends (then renamed); a refused query leaves no fragment, an
    # interrupted run leaves OUT as it was (pyimpl.partialfile)
    with partial_output(out) as partial, environment_guard(root):
        if reference_from is not None and enabled:  # matrix/run.py: the configuration's shared reference
            from rollcheck.spark_replay.shared_reference import write_shared_reference

            write_shared_reference(reference_from, partial, header)
        if release_ref is not None:  # before the recording's own attempts (as attempt 0)
            w = TraceWriter(partial, header)
            try:
                w.attempt = 0
                w.emit(PREFIX + "release_reference", **release_ref)
            finally:
                w.close()
        with _cluster(cfg, root) as run_cfg:  # cluster.py
            res = _record(run_cfg, partial, root, paths, header, enabled, spark, len(rows), python)
    return {**res, "trace": str(out), "engine_version": release}


def _user_module(cfg: QueryConfig) -> tuple[UserQuery, list[Batch]]:
    """The user's module and its input batches (cut to ``cfg.batches``), checked against ``cfg``."""
    uq = load_query(cfg.module, cfg.call_timeout)
    if cfg.failure == "upgrade" and not uq.has_next:  # upgrade.py: the changed query restarts on the checkpoint
        raise InvalidInputError("--failure upgrade needs query_next (an allowed change of query, run from its "
                                "checkpoint)", source=uq.spec, location="query_next")
    rows = uq.batches(cfg.seed)
    if cfg.batches is not None:
        rows = rows[: cfg.batches]
    cfg.validate(len(rows))
    return uq, rows


def _event_time(uq: UserQuery) -> str | None:
    """The module's ``EVENT_TIME`` (the append oracle's event-time bound): an output column's name or None."""
    event_time = getattr(uq.module, "EVENT_TIME", None)
    if event_time is not None and (not isinstance(event_time, str) or not event_time.strip()):
        raise InvalidInputError("EVENT_TIME must name the output column that carries a row's event-time bound",
                                source=uq.spec, location="EVENT_TIME")
    return event_time


def _release_reference_of(cfg: QueryConfig, other: str, root: Path, rows: list[Batch], uq: UserQuery,
                          reference_from: str | Path | None) -> dict[str, Any] | None:
    """The failure-free run on the reference release ``other``: the shared reference's, else run here."""
    release_ref = None
    if reference_from is not None:
        from rollcheck.spark_replay.trace import read_trace

        # a shared reference recorded with the same releases carries R's run: reuse it (the matrix)
        release_ref = next((dict(e) for e in read_trace(reference_from).of_kind(PREFIX + "release_reference")
                            if e.get("engine_version") == other), None)
        if release_ref is not None:
            for k in ("seq", "kind", "run", "attempt", "t", "_line"):
                release_ref.pop(k, None)
    if release_ref is None and (cfg.reference or reference_from is not None):
        with environment_guard(root):  # oracles.release_differential: the failure-free run on R
            release_ref = _release_reference(cfg, other, root / f"release-{other}", rows, uq)
    return release_ref


def _header(cfg: QueryConfig, uq: UserQuery, rows: list[Batch], release: str, other: str,
            event_time: str | None) -> dict[str, Any]:
    """The trace header: the job, the releases and the configuration the oracles read."""
    return {"source": "spark", "job": "query", "seed": cfg.seed, "processes": ["driver"],
            "engine_version": release,
            "config": {**asdict(cfg), "engine_version": release,
                       "reference_version": other if cfg.engine_version is not None else None,
                       "event_time": event_time, "key": uq.key, "output_mode": uq.output_mode, "schema": uq.schema,
                       **({"sources": uq.sources} if uq.multi else {}),
                       "user_sink": uq.has_sink, "sink_guarantee": uq.sink_guarantee, "input_batches": len(rows),
                       "input_rows": total_rows(rows),
                       "batch_rows": [{n: len(r) for n, r in b.items()} for b in rows]}}


def _record(cfg: QueryConfig, out: Path, root: Path, paths: WorkPaths, header: dict[str, Any], enabled: bool,
            spark: Any, n_rows: int, python: Path | None = None) -> dict[str, Any]:
    t0 = time.perf_counter()
    children = 0
    here = python is None or Path(python) == Path(sys.executable)  # the running release
    if cfg.failure not in KILLED and spark is not None and here:  # in the caller's session
        res = drive(cfg, paths, out, header, single_attempt=False, with_reference=cfg.reference,
                     enabled=enabled, spark=spark)
    else:
        # Driver children (spark_replay.supervise): a kill needs them, and without a session of
        # the caller's the user's code runs there too, so that a call past its limit that cannot
        # be stopped in place (a sink blocked in C code) ends with the child's process group.
        kill = cfg.failure in KILLED  # retry: the driver is restarted after the next batch
        res = {"status": "failed", "reference_seconds": None, "attempt_seconds": []}
        if enabled:
            TraceWriter(out, header).close()
        # a kill strikes only in kill mode (batch None: the supervisor only waits)
        at = cfg.fail_at_batch if kill else None
        if cfg.failure == "retry" and at is not None:
            at = retry_restart_batch(at, n_rows)
        supervisor = KillSupervisor(paths.checkpoint(), paths.markers, at, cfg.kill_point or "sink")
        for k in range(cfg.max_attempts if kill else 1):
            children += 1
            spec = {"cfg": asdict(cfg), "root": str(root), "trace": str(out), "header": header,
                    "reference": k == 0 and cfg.reference, "enabled": enabled, "single_attempt": kill}
            run = run_driver("rollcheck.spark_replay.query.record", spec, workdir=root, n=children,
                             markers=paths.markers, watch=supervisor.watch,  # faults/killpoints.py strikes
                             python=None if here else python,
                             env=None if here else child_environment(python or sys.executable))
            if run.killed:
                if not kill:
                    raise RuntimeError("the Spark driver was killed from outside")
                fired = supervisor.take()
                second = cfg.failure in SECOND_FAILURES and (paths.markers / SECOND_KILL).exists()
                if fired is not None and enabled:  # what the checkpoint logs held at the kill
                    if second and cfg.failure == "during-recovery":
                        fired = {**fired, "kill_point": "recovery"}
                    record_kill(out, paths.checkpoint(), fired, mode=str(cfg.failure) if second else "kill")
                res["attempt_seconds"].append(round(run.seconds, 3))
                continue
            child = run.reply
            res["status"] = child.get("status", "failed")
            if child.get("reference_seconds") is not None:
                res["reference_seconds"] = child["reference_seconds"]
            res["attempt_seconds"] += child.get("attempt_seconds", [])
            if res["status"] in ("done", "recovery-failed", "reference-failed"):
                break
    if res["reference_seconds"] is None and enabled and out.exists():
        from rollcheck.spark_replay.trace import read_trace

        ref = read_trace(out).of_kind(PREFIX + "reference")  # a killed first driver could not reply
        if ref:
            res["reference_seconds"] = ref[0].get("seconds")
    return {"trace": str(out), "checkpoint": str(paths.checkpoint()), "workdir": str(root),
            "seconds": round(time.perf_counter() - t0, 2), "status": res["status"],
            "reference_seconds": res["reference_seconds"], "attempt_seconds": res["attempt_seconds"],
            "batches": n_rows, "children": children, "seed": cfg.seed}


def _release_reference(cfg: QueryConfig, version: str, root: Path, rows: list[Batch],
                       uq: UserQuery) -> dict[str, Any]:
    """The failure-free run of the same query on pyspark ``version``.

    A driver child in that release's environment. ``{"engine_version", "output", "seconds"}``.
    """
    python = spark_environment(version)
    here = Path(python) == Path(sys.executable)
    paths = prepare_workdir(root, rows, uq)
    spec = {"cfg": asdict(replace(cfg, failure=None, fail_at_batch=None, kill_point=None)), "root": str(root),
            "release_only": True}
    run = run_driver("rollcheck.spark_replay.query.record", spec, workdir=root, n=1, markers=paths.markers,
                     python=None if here else python, env=None if here else child_environment(python))
    reply = run.reply
    if reply.get("status") != "done" or "output" not in reply:
        raise RuntimeError(f"the failure-free run on pyspark {version} did not finish: {reply}")
    return {"engine_version": reply.get("engine_version", version), "output": reply["output"],
            "seconds": reply.get("seconds"), "workdir": str(root)}


if __name__ == "__main__":  # the driver child of a kill-mode recording
    if sys.argv[1:] == ["--child"]:
        sys.exit(child_main(child_run))
