"""The recording in one Spark session: the reference run, the attempts, the end-of-run records.

:func:`drive` runs in one Spark session (the caller's, or a new one in a driver child): the
failure-free reference run on its own checkpoint (:func:`reference_run`: its output, its state
read with Spark's state reader, the query evaluated as a batch job), then the attempts of the run
with the failure (:func:`~rollcheck.spark_replay.query.run.run_once`), and at the end
:func:`finish_run` (``spark.output_final``, ``spark.state_final``, the batch evaluation, ``end``)
or, when the engine could not restart, the output so far and ``end`` with status
``recovery-failed``. :func:`child_run` is a driver child's entry
(:mod:`rollcheck.spark_replay.supervise`); :func:`release_run` the failure-free run on another
release (no trace).
"""

from __future__ import annotations

import contextlib
import sys
import time
from pathlib import Path
from typing import Any

from rollcheck.pyimpl.errors import InvalidInputError
from rollcheck.spark_replay.checkpoint.reader import CheckpointDir
from rollcheck.spark_replay.checkpoint.watcher import PREFIX, CheckpointWatcher
from rollcheck.spark_replay.cluster import cluster_conf
from rollcheck.spark_replay.query.config import QueryConfig, driver_master, session_conf
from rollcheck.spark_replay.query.failures import release_ran
from rollcheck.spark_replay.query.files import WorkPaths, plain, read_output
from rollcheck.spark_replay.query.module import UserQuery, load_query
from rollcheck.spark_replay.query.run import run_once
from rollcheck.spark_replay.query.state import state_or_reason
from rollcheck.spark_replay.supervise import environment_guard
from rollcheck.spark_replay.trace import TraceWriter

__all__ = ["drive", "reference_run", "batch_evaluation", "finish_run", "check_release", "register_by_value",
           "quiet_logs", "release_run", "child_run"]

def reference_run(spark: Any, uq: UserQuery, cfg: QueryConfig, paths: WorkPaths, writer: TraceWriter) -> float | None:
    """The failure-free run on this release.

    None when it failed with the engine's exception while the reference release ran it to its end
    (``spark.reference_failed``, a finding).

    Parameters
    ----------
    spark : SparkSession
        The driver's session.
    uq : UserQuery
        The loaded query module.
    cfg : QueryConfig
        The recording's configuration.
    paths : WorkPaths
        The recording's folders.
    writer : TraceWriter
        The trace being written.

    Returns
    -------
    float or None
        The run's seconds.
    """
    import pyspark

    t0 = time.perf_counter()
    notes: dict[str, Any] = {"release_ok": release_ran(writer.previous)}
    outcome = run_once(spark, uq, cfg, paths, ref=True, writer=None, watcher=None, notes=notes)
    seconds = time.perf_counter() - t0
    ck = CheckpointDir(paths.checkpoint(True))
    if outcome == "reference_failed":
        writer.emit(PREFIX + "reference_failed", engine_version=pyspark.__version__,
                    batches=sorted(ck.commits()) if paths.checkpoint(True).is_dir() else [],
                    seconds=round(seconds, 3), **notes["reference_failed"])
        writer.emit("end", status="reference-failed")
        return None
    state, unreadable, read_failed = state_or_reason(spark, paths.checkpoint(True))
    if read_failed is not None:
        writer.emit(PREFIX + "state_read_failed", run="reference", engine_version=pyspark.__version__,
                    **read_failed)
    writer.emit(PREFIX + "reference", output=read_output(uq, paths.out(True)), state=state,
                batches=sorted(ck.commits()), seconds=round(seconds, 3),
                **({"state_unreadable": unreadable} if unreadable else {}))
    writer.emit(PREFIX + "batch_evaluation", run="reference",
                **batch_evaluation(spark, uq, cfg, paths.checkpoint(True), notes.get("progress", []),
                                    notes.get("stream_plan", ""), notes.get("stream_fields")))
    return seconds


def batch_evaluation(spark: Any, uq: UserQuery, cfg: QueryConfig, checkpoint: Path,
                      progress: list[dict[str, Any]], plan: str,
                      stream_fields: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The query as a batch job over the run's on-time input (:func:`oracles.evaluate_batch`).

    In this session: the watermark in force per batch as Spark reported it in its progress, else as
    its offset log holds it (a killed driver's progress is lost with it).

    Parameters
    ----------
    spark : SparkSession
        The driver's session.
    uq : UserQuery
        The loaded query module.
    cfg : QueryConfig
        The recording's configuration.
    checkpoint : Path
        The run's checkpoint folder (its offset log).
    progress : list of dict
        The run's progress events.
    plan : str
        The analysed streaming plan's text.
    stream_fields : list of dict, optional
        The streaming output's fields.

    Returns
    -------
    dict
        The ``batch_evaluation`` event's fields.
    """
    from rollcheck.spark_replay.oracles.checks import evaluate_batch

    t0 = time.perf_counter()
    rows = uq.batches(cfg.seed)
    if cfg.batches is not None:
        rows = rows[: cfg.batches]
    wm: dict[int, int] = {}
    source: dict[str, str] = {}
    for b, entry in CheckpointDir(checkpoint).offsets().items():
        w = (entry.get("metadata") or {}).get("batchWatermarkMs")
        if w is not None:
            wm[b], source[str(b)] = int(w), "offset-log"
    for p in progress:
        if p.get("watermark_ms") is not None and p.get("batch", -1) >= 0:
            wm[int(p["batch"])], source[str(p["batch"])] = int(p["watermark_ms"]), "progress"
    res = evaluate_batch(uq.run_query, spark, uq.sources, rows, wm, plan, plain, output_mode=uq.output_mode)
    return {**res, "stream_fields": stream_fields or [], "watermark_source": source,
            "seconds": round(time.perf_counter() - t0, 3)}


def finish_run(spark: Any, uq: UserQuery, cfg: QueryConfig, paths: WorkPaths, writer: TraceWriter,
            notes: dict[str, Any]) -> None:
    """Write the end-of-run records: the final output, the state, the reference and ``end``.

    Parameters
    ----------
    spark : SparkSession
        The driver's session.
    uq : UserQuery
        The loaded query module.
    cfg : QueryConfig
        The recording's configuration.
    paths : WorkPaths
        The recording's folders.
    writer : TraceWriter
        The trace being written.
    notes : dict
        What the attempts noted (progress, plan, fields).
    """
    from rollcheck.spark_replay.query.input_files import files_per_batch

    # what each micro-batch read, per source, from the checkpoint's file-source logs (input-batches)
    writer.emit(PREFIX + "input_files", batches={str(b): per for b, per in files_per_batch(paths.checkpoint()).items()})
    writer.emit(PREFIX + "output_final", rows=read_output(uq, paths.out()))
    stores, unreadable, read_failed = state_or_reason(spark, paths.checkpoint())
    if read_failed is not None:
        import pyspark

        writer.emit(PREFIX + "state_read_failed", run="final", engine_version=pyspark.__version__, **read_failed)
    writer.emit(PREFIX + "state_final", stores=stores, **({"unreadable": unreadable} if unreadable else {}))
    progress = [e for e in writer.previous if e.get("kind") == PREFIX + "progress"] + notes.get("progress", [])
    if cfg.failure == "upgrade":  # each input row evaluated by the query that read it (oracles/upgrade_eval.py)
        from rollcheck.spark_replay.oracles.upgrade_eval import combined_evaluation

        writer.emit(PREFIX + "batch_evaluation", run="final",
                    **combined_evaluation(spark, uq, cfg, paths.checkpoint(), progress, notes, plain))
    else:
        writer.emit(PREFIX + "batch_evaluation", run="final",
                    **batch_evaluation(spark, uq, cfg, paths.checkpoint(), progress, notes.get("stream_plan", ""),
                                        notes.get("stream_fields")))
    from rollcheck.spark_replay.query.sink_envelope import record_envelope

    # an at-least-once sink whose read_output aggregates: the tables its re-deliveries may give
    record_envelope(spark, uq, paths.root, writer.path, writer.emit, notes.get("stream_fields"), read_output)
    writer.emit("end", status="done")


def drive(cfg: QueryConfig, paths: WorkPaths, trace: Path, header: dict[str, Any], *, single_attempt: bool,
           with_reference: bool, enabled: bool = True, spark: Any = None) -> dict[str, Any]:
    """Run (reference and) attempts in one Spark session (``spark``, or a new one).

    Return the status and timings.

    Parameters
    ----------
    cfg : QueryConfig
        The recording's configuration.
    paths : WorkPaths
        The recording's folders.
    trace : Path
        The trace file.
    header : dict
        The trace's header.
    single_attempt : bool
        Run one attempt only.
    with_reference : bool
        Run the failure-free run first.
    enabled : bool, optional
        Write the trace (False: run without recording).
    spark : SparkSession, optional
        A warm session to use; None starts one.

    Returns
    -------
    dict
        The status and timings.
    """
    from rollcheck.spark_replay.session import spark_session

    uq = load_query(cfg.module, cfg.call_timeout)
    register_by_value(uq)
    check_release(header)
    writer = TraceWriter(trace, header, enabled=enabled)
    status, ref_s, attempts_s = "failed", None, []
    try:
        with contextlib.ExitStack() as stack:
            if spark is None:
                spark = stack.enter_context(spark_session(
                    driver_master(cfg), app_name="rollcheck-query", shuffle_partitions=cfg.shuffle_partitions,
                    conf={**session_conf(cfg.state_store), **cluster_conf(cfg.master)}))
            else:
                for k, v in session_conf(cfg.state_store).items():
                    spark.conf.set(k, str(v))
                spark.conf.set("spark.sql.shuffle.partitions", str(cfg.shuffle_partitions))
            quiet_logs(spark)
            if with_reference:
                t_ref = time.perf_counter()
                ref_s = reference_run(spark, uq, cfg, paths, writer)
                if ref_s is None:  # failed on this release only: the engine's (spark.reference_failed)
                    return {"status": "reference-failed", "reference_seconds": round(time.perf_counter() - t_ref, 3),
                            "attempt_seconds": []}
            watcher = (CheckpointWatcher(paths.checkpoint(), writer, writer.previous, provider=cfg.state_store)
                       if enabled else None)
            notes: dict[str, Any] = {}
            for n in range(1 if single_attempt else cfg.max_attempts):
                if n > 0:
                    writer.attempt += 1
                    if watcher is not None:
                        watcher.new_attempt()
                t0 = time.perf_counter()
                outcome = run_once(spark, uq, cfg, paths, ref=False, writer=writer if enabled else None,
                                    watcher=watcher, notes=notes)
                attempts_s.append(time.perf_counter() - t0)
                if outcome == "done":
                    if enabled:
                        finish_run(spark, uq, cfg, paths, writer, notes)
                    status = "done"
                    break
                if outcome == "recovery_failed":  # the engine could not restart (oracles/checks.py)
                    writer.emit(PREFIX + "output_final", rows=read_output(uq, paths.out()))
                    writer.emit("end", status="recovery-failed")
                    status = "recovery-failed"
                    break
    finally:
        writer.close()
    return {"status": status, "reference_seconds": None if ref_s is None else round(ref_s, 3),
            "attempt_seconds": [round(x, 3) for x in attempts_s]}


def check_release(header: dict[str, Any]) -> None:
    """The driver runs the release the trace header names (else the environment is broken)."""
    import pyspark

    want = header.get("engine_version")
    if want is not None and pyspark.__version__ != want:
        raise InvalidInputError(f"this driver runs pyspark {pyspark.__version__}, the recording asked for "
                                f"{want} ({sys.executable})", location="--engine-version")


def register_by_value(uq: UserQuery) -> None:
    """Ship the user's functions to the Python workers by value.

    A file module is not importable there.
    """
    from pyspark import cloudpickle

    try:
        cloudpickle.register_pickle_by_value(uq.module)
    except ValueError:  # a module of the standard library or already registered
        pass


def quiet_logs(spark: Any) -> None:
    """Turn Spark's logging down to errors for the session."""
    import logging

    logging.getLogger("py4j").setLevel(logging.CRITICAL)
    spark.sparkContext.setLogLevel("OFF")


def release_run(spec: dict[str, Any]) -> dict[str, Any]:
    """In a driver child: one failure-free run (no trace), its output in the reply."""
    import pyspark

    from rollcheck.spark_replay.session import spark_session

    cfg = QueryConfig(**spec["cfg"])
    uq = load_query(cfg.module, cfg.call_timeout)
    register_by_value(uq)
    paths = WorkPaths(Path(spec["root"]))
    t0 = time.perf_counter()
    with environment_guard(spec["root"]), spark_session(
            cfg.master, app_name="rollcheck-release-reference", shuffle_partitions=cfg.shuffle_partitions,
            conf=session_conf(cfg.state_store)) as spark:
        quiet_logs(spark)
        run_once(spark, uq, cfg, paths, ref=True, writer=None, watcher=None)
        output = read_output(uq, paths.out(True))
    return {"status": "done", "output": output, "engine_version": pyspark.__version__,
            "seconds": round(time.perf_counter() - t0, 3)}


def child_run(spec: dict[str, Any]) -> dict[str, Any]:
    """The child side of a killed run: drive the recording from ``spec`` and return its summary."""
    if spec.get("release_only"):
        return release_run(spec)
    cfg = QueryConfig(**spec["cfg"])
    with environment_guard(spec["root"]):
        return drive(cfg, WorkPaths(Path(spec["root"])), Path(spec["trace"]), spec["header"],
                      single_attempt=spec.get("single_attempt", True), with_reference=spec["reference"],
                      enabled=spec["enabled"])
