"""One start of the user's query in a Spark session, with the injected failure: :func:`run_once`.

The query reads rollcheck's file source (``maxFilesPerTrigger=1``) and writes through a
``foreachBatch`` sink that records the rows handed to it (``spark.sink_written``), runs the user's
sink or the default one, and injects the requested failure: ``task`` (a non-deterministic UDF in a
filter raises in a task of batch K), ``sink`` (raises after the sink wrote batch K), ``executor``
(one executor JVM SIGKILLed after batch K's state committed), ``kill``/``twice``/
``during-recovery`` (the supervising parent SIGKILLs the driver) and ``retry`` (a task of batch K
fails once after its state committed, Spark retries it; the driver is restarted after the next
batch) (:mod:`rollcheck.spark_replay.faults.killpoints`). At the first sink call of a restarted attempt it records
``spark.restart``; a restart that fails with the engine's exception before that records a
``spark.restart`` marked ``failed`` (with the exception's name) and ``spark.recovery_failed`` (the
exception, its root cause, the checkpoint). It also records Spark's progress reports (the
watermark in force per batch) and, for a task failure, the physical plan.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import threading
import time
from pathlib import Path
from typing import Any

from rollcheck.pyimpl.errors import InvalidInputError, UserCodeTimeout, environment_fault
from rollcheck.spark_replay.checkpoint.reader import CheckpointDir
from rollcheck.spark_replay.checkpoint.watcher import PREFIX, CheckpointWatcher
from rollcheck.spark_replay.cluster import strike_executor
from rollcheck.spark_replay.faults.killpoints import (
    SECOND_FAILURES,
    SECOND_KILL,
    checkpoint_logs,
    recovery_kill_filter,
    state_files_of_version,
)
from rollcheck.spark_replay.faults.retry import (
    RETRY_EXHAUSTED,
    RETRY_FAILED,
    RETRY_RESTART,
    collect_struck,
    restart_before,
    retry_input_filter,
    retry_restart_batch,
    strike_armed,
)
from rollcheck.spark_replay.query.config import KILLED, QueryConfig
from rollcheck.spark_replay.query.failures import (
    OVERLOAD_SIGNS,
    engine_code_raised,
    engine_failure,
    reference_failure_is_engines,
    user_exception,
)
from rollcheck.spark_replay.query.files import WorkPaths, default_sink, feed_inputs, plain
from rollcheck.spark_replay.query.module import SINGLE_SOURCE, UserQuery
from rollcheck.spark_replay.query.upgrade import (
    begin_first_start,
    end_first_start,
    ensure_checked,
    record_upgrade,
    restart_query,
    upgraded,
)
from rollcheck.spark_replay.supervise import claim_once, give_up_on_user_code, request_kill
from rollcheck.spark_replay.trace import TraceWriter

__all__ = ["run_once"]

#: Seconds a sink past its limit gets to stop before the recording gives up on it.
_SINK_GRACE_S = 10.0


def _read(spark: Any, ddl: str, folder: Path) -> Any:
    return (spark.readStream.schema(ddl).option("maxFilesPerTrigger", 1)
            .option("timestampFormat", "yyyy-MM-dd'T'HH:mm:ss.SSSSSS").option("mode", "FAILFAST")
            .json(str(folder)))


def _sources(spark: Any, uq: UserQuery, paths: WorkPaths, ref: bool) -> dict[str, Any]:
    """One streaming DataFrame per source.

    A one-source query reads ``in``, a query of several sources one folder per source of its run's
    input folder (fed batch by batch).
    """
    if not uq.multi:
        return {SINGLE_SOURCE: _read(spark, uq.sources[SINGLE_SOURCE], paths.inputs)}
    return {name: _read(spark, ddl, paths.inputs_of(ref) / name) for name, ddl in uq.sources.items()}


def _run_to_end(q: Any) -> threading.Thread:
    """A query of several sources runs on Spark's default trigger.

    Its input is fed batch by batch, which ``availableNow`` would not see. Stop it once Spark has
    processed everything available, the last data-less batch included (``processAllAvailable``).
    """

    def wait() -> None:
        try:
            q.processAllAvailable()
            q.stop()
        except Exception:  # the query failed: the caller's awaitTermination raises it
            pass

    t = threading.Thread(target=wait, name="rollcheck-run-to-end", daemon=True)
    t.start()
    return t


def _with_task_failure(df: Any, F: Any, marker: Path, batch: int) -> Any:
    """The input with a filter whose UDF raises in a task reading batch ``batch``'s file.

    Once: the marker file is created exclusively.
    """
    target = f"batch-{batch:05d}.json"
    mpath = str(marker)

    def inject(path):  # no type hints: PySpark 4 would read them as a pandas UDF
        if path and path.endswith(target):
            try:
                fd = os.open(mpath, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                return True
            os.write(fd, str(batch).encode())
            os.close(fd)
            raise RuntimeError(f"rollcheck: injected task failure in batch {batch}")
        return True

    return df.where(F.udf(inject, "boolean").asNondeterministic()(F.input_file_name()))


class _InjectedSinkFailure(RuntimeError):
    pass


def _request_kill(paths: WorkPaths) -> None:
    """Ask the supervising parent to SIGKILL this driver now (once per recording) and wait."""
    if claim_once(paths.markers / "failed"):
        request_kill(paths.markers)  # the parent SIGKILLs this driver and its JVM now


def run_once(spark: Any, uq: UserQuery, cfg: QueryConfig, paths: WorkPaths, *, ref: bool,
              writer: TraceWriter | None, watcher: CheckpointWatcher | None,
              notes: dict[str, Any] | None = None) -> str:
    """One start of the query until it ends ("done") or fails with the injected failure ("failed").

    Any other failure of the query is the user's and ends the recording.
    """
    from pyspark.errors import StreamingQueryException
    from pyspark.sql import functions as F

    attempt = writer.attempt if writer is not None else 0
    failing = not ref and cfg.failure is not None
    sched = cfg.retry_schedule()  # the retry failure's schedule (faults/retry.py)
    marker = paths.markers / "failed"
    first_sink = [True]
    expired: list[UserCodeTimeout] = []
    expired_at: list[float] = []
    sink_raised: list[str] = []  # the user's sink raised: what, where (Spark's message loses it)
    # the upgrade (upgrade.py): query runs to batch K and stops; query_next restarts on its checkpoint
    upgrading = failing and cfg.failure == "upgrade"
    which = restart_query(paths.markers) if upgrading else "query"
    first_start = upgrading and not upgraded(paths.markers)

    def sink_expired() -> None:  # from the limit's timer: unblock a Spark action in the sink
        expired_at.append(time.monotonic())
        spark.sparkContext.cancelAllJobs()
    out_dir = paths.out(ref)
    ck = paths.checkpoint(ref)
    committed = sorted(CheckpointDir(ck).commits()) if ck.is_dir() else []
    if writer is not None:
        writer.emit(PREFIX + "attempt_start", pid=os.getpid(), committed=committed)
    feed_inputs(paths, ref, (committed[-1] + 1) if committed else 0)  # several sources: batch by batch
    dfs = _sources(spark, uq, paths, ref)
    # a change Spark's guide forbids is refused before any query of the recording starts (exit 2)
    upgrade_info = ensure_checked(uq, dfs, paths.markers) if cfg.failure == "upgrade" else {}
    for name, df in dfs.items():  # every source: the failure strikes in whichever reads batch K
        if failing and cfg.failure == "task":
            df = _with_task_failure(df, F, marker, int(cfg.fail_at_batch))  # type: ignore[arg-type]
        if failing and cfg.failure == "retry" and sched.stage == "input" \
                and strike_armed(paths.markers, sched, int(cfg.fail_at_batch or 0)):
            # the retry in the input stage: a filter's UDF fails the tasks reading batch K's file
            keep = retry_input_filter(paths.markers, ck, int(cfg.fail_at_batch or 0), sched)
            df = df.where(F.udf(keep, "boolean").asNondeterministic()(F.input_file_name()))
        if failing and cfg.failure == "during-recovery" and marker.exists() \
                and not (paths.markers / SECOND_KILL).exists():
            # the restarted driver: killed in batch K's first stage, before its stateful stage loads any state
            hold = recovery_kill_filter(paths.markers, int(cfg.fail_at_batch))  # type: ignore[arg-type]
            df = df.where(F.udf(hold, "boolean").asNondeterministic()(F.input_file_name()))
        dfs[name] = df
    call = f"{which}({', '.join(dfs) if uq.multi else 'df'})"
    try:
        result = uq.run_query(dfs, which=which)
    except UserCodeTimeout:
        raise
    except Exception as e:
        raise InvalidInputError(f"{call} raised {type(e).__name__}: {e}", source=uq.spec,
                                location="query") from None
    if not getattr(result, "isStreaming", False):
        raise InvalidInputError(f"{call} must return a streaming DataFrame", source=uq.spec,
                                location="query")
    if notes is not None and "stream_plan" not in notes:
        try:  # what the oracles read: event-time column, operators (oracles.analyse_plan)
            notes["stream_plan"] = str(result._jdf.queryExecution().analyzed().toString())
            notes["stream_fields"] = [{"name": f.name, "type": f.dataType.simpleString(),
                                       "metadata": dict(f.metadata or {})} for f in result.schema.fields]
        except Exception:
            notes["stream_plan"] = ""
    if notes is not None and which == "query_next":  # the batch evaluation of the combined run reads it
        notes["stream_plan_next"] = str(result._jdf.queryExecution().analyzed().toString())
    if watcher is not None:
        watcher.poll_now()
        watcher.start()

    def sink(bdf: Any, bid: int) -> None:
        # several sources: the next batch's files, before this one commits (query of an upgrade: to batch K)
        feed_inputs(paths, ref, min(bid + 1, int(cfg.fail_at_batch or 0)) if first_start else bid + 1)
        # the retry failure collects batch K through a task that fails once after its state store
        # committed (killpoints.retry_task); uncached, so that Spark's retry runs the stateful operator again
        if failing and cfg.failure == "retry":  # load=first: a new driver runs batch K first (faults/retry.py)
            restart_before(paths.markers, sched, bid, int(cfg.fail_at_batch or 0))
        retrying = (failing and cfg.failure == "retry" and cfg.fail_at_batch == bid
                    and strike_armed(paths.markers, sched, bid))
        # The recorder keeps the rows handed to the sink; the default sink writes the same rows
        # (one Spark action). Only a user's sink next to the recorder reads the batch twice: cache it.
        twice = writer is not None and uq.has_sink and not retrying
        if twice:
            bdf.persist()
        try:
            # collecting runs the batch: its state stores commit their new versions now
            if retrying:  # the failed attempts and the attempts that ran to their end, in the failure event
                # (then=continue: no process of the trace's model fails, an engine-level spark.failure)
                rows = collect_struck(bdf, paths.markers, ck, bid, sched, plain, lambda **facts: None if writer is None
                                      else writer.emit("failure", processes=["driver"], batch=bid, mode="retry", **facts)
                                      if sched.then == "restart" else
                                      writer.emit(PREFIX + "failure", batch=bid, mode="retry", **facts))
            else:
                rows = [plain(r) for r in bdf.collect()] if (writer is not None or not uq.has_sink) else []
            if failing and cfg.failure == "executor" and cfg.fail_at_batch == bid and not marker.exists():
                marker.write_text(str(bid), encoding="utf-8")  # once: the state stores of batch K committed
                struck = strike_executor(spark)  # cluster.py: one executor JVM SIGKILLed, seen removed
                if writer is not None:  # an engine-level failure: no process of the trace's model (the driver) failed
                    writer.emit(PREFIX + "failure", batch=bid, mode="executor", kill_point="state",
                                checkpoint_logs=checkpoint_logs(ck), state_files=state_files_of_version(ck, bid + 1),
                                **struck)
            if watcher is not None:
                watcher.poll_now()
            if writer is not None and first_sink[0] and attempt > 1:
                writer.emit(PREFIX + "restart", resume_batch=bid,
                            restored_versions=watcher.restored_versions() if watcher else {})
            first_sink[0] = False
            if failing and cfg.failure == "kill" and cfg.kill_point == "state" and cfg.fail_at_batch == bid:
                _request_kill(paths)  # kill point "state": the batch ran (state committed), sink not yet
            if uq.has_sink:
                try:
                    uq.call("sink", bdf, bid, str(out_dir), on_expire=sink_expired)
                except UserCodeTimeout as e:
                    expired.append(e)  # Spark reports the sink's failure as the query's: say why
                    raise
                except Exception as e:
                    if not sink_raised:
                        sink_raised.append(user_exception("sink", bid, e, uq.spec))
                    raise
            else:
                default_sink(rows, bid, str(out_dir))
        finally:
            if twice:
                bdf.unpersist()
        if writer is not None and upgrading:  # which query ran the batch
            writer.emit(PREFIX + "batch_query", batch=bid, query=which)
        if writer is not None:
            writer.emit(PREFIX + "sink_written", batch=bid, rows=rows)
        if failing and cfg.fail_at_batch == bid and cfg.failure == "kill" and cfg.kill_point in (None, "sink"):
            _request_kill(paths)  # kill point "sink" (the default): the parent records the kill
        if failing and cfg.fail_at_batch == bid and cfg.failure in SECOND_FAILURES:
            if cfg.failure == "twice" and marker.exists() and claim_once(paths.markers / SECOND_KILL):
                request_kill(paths.markers)  # the restarted driver wrote batch K again: once more
            _request_kill(paths)  # the first kill, after the sink wrote batch K (once: the marker)
        if failing and cfg.failure == "retry" and (paths.markers / RETRY_FAILED).exists() \
                and sched.then == "restart" and not (paths.markers / RETRY_EXHAUSTED).exists() \
                and bid == retry_restart_batch(int(cfg.fail_at_batch or 0), paths.n_batches):
            if claim_once(paths.markers / RETRY_RESTART):
                # after the next batch: a new driver restarts from the checkpoint (the retried state reloads)
                request_kill(paths.markers)
        if failing and cfg.fail_at_batch == bid and cfg.failure == "sink":
            if not claim_once(marker):
                return
            if writer is not None:
                writer.emit("failure", processes=["driver"], batch=bid, mode=cfg.failure)
            raise _InjectedSinkFailure(f"rollcheck: injected sink failure in batch {bid}")

    writer_ = (result.writeStream.outputMode(uq.output_mode).option("checkpointLocation", str(ck))
               .foreachBatch(sink))
    if not uq.multi:  # one source: every file is there from the start
        writer_ = writer_.trigger(availableNow=True)
    no_data = (begin_first_start(spark, paths.inputs_of(ref), int(cfg.fail_at_batch or 0), uq.multi)
               if first_start else None)
    try:
        q = writer_.start()
    except Exception as e:
        if no_data is not None:
            end_first_start(spark, paths.inputs_of(ref), no_data)
        if watcher is not None:
            watcher.stop()
        fault = environment_fault(e, str(paths.root))
        if fault is not None:
            raise fault from None
        raise InvalidInputError(f"Spark refused the query: {type(e).__name__}: {str(e).splitlines()[0]}",
                                source=uq.spec, location="query") from None
    if uq.multi:
        _run_to_end(q)
    outcome = "done"
    error: str | None = None
    error_text = ""
    try:
        # a sink past its limit normally fails the query at once; one stuck in C code cannot be
        # stopped in this process: give up on it after a grace period (a driver child is killed)
        while not q.awaitTermination(0.5):
            if expired_at and time.monotonic() - expired_at[0] > _SINK_GRACE_S:
                give_up_on_user_code(UserCodeTimeout(uq.spec, "sink", uq.call_timeout))
    except StreamingQueryException as e:
        if expired:
            raise expired[0] from None
        # the injected task or sink failure fails the query once; a killed driver's failure is the
        # SIGKILL, so a query failing in a driver of a kill mode is never the injected failure (a
        # restarted driver failing there is a failed restart, recorded below)
        injected = (failing and (cfg.failure not in KILLED and marker.exists()  # or every retry of batch K failed
                                 or cfg.failure == "retry" and (paths.markers / RETRY_EXHAUSTED).exists())
                    and not (paths.markers / "recovered").exists())
        if injected:
            outcome = "failed"
            (paths.markers / "recovered").write_text("1", encoding="utf-8")
        else:
            fault = environment_fault(e, str(paths.root))
            if fault is not None:  # a full disk is the machine's, not the query's
                raise fault from None
            outcome = "error"
            error = str(e).splitlines()[0] if str(e) else type(e).__name__
            error_text = str(e)
    finally:
        if no_data is not None:
            end_first_start(spark, paths.inputs_of(ref), no_data)
        if watcher is not None:
            watcher.stop()
    if outcome == "done" and first_start:  # query ended after batch K committed: query_next restarts
        record_upgrade(paths.markers, None if writer is None else writer.emit, int(cfg.fail_at_batch or 0),
                       sorted(CheckpointDir(ck).commits()), upgrade_info)
        outcome = "failed"
    progress = _progress_of(q)
    if notes is not None:
        notes.setdefault("progress", []).extend(progress)
    if writer is not None:
        for p in progress:  # the watermark Spark reported in force per batch (the oracles read it)
            writer.emit(PREFIX + "progress", **p)
    if writer is not None and failing and cfg.failure == "task" and notes is not None \
            and not notes.get("plan"):
        try:  # the physical plan that ran: the injection is in it (evidence, not a requirement)
            notes["plan"] = q._jsq.explainInternal(False)
            writer.emit(PREFIX + "plan", physical=notes["plan"])
        except Exception:
            pass
    if outcome == "failed" and cfg.failure == "task" and writer is not None:
        # the batch Spark was running: the first planned batch that did not commit
        c = CheckpointDir(ck)
        pending = sorted(set(c.offsets()) - set(c.commits()))
        writer.emit("failure", processes=["driver"], batch=pending[0] if pending else None, mode="task")
    if outcome == "done" and writer is not None and attempt > 1 and first_sink[0]:
        writer.emit(PREFIX + "restart", resume_batch=None, restored_versions={})
    if outcome == "error":
        restarted = failing and ((paths.markers / "recovered").exists()
                                 or (cfg.failure in KILLED and attempt > 1) or which == "query_next")
        overloaded = any(sign in str(error) for sign in OVERLOAD_SIGNS)  # the machine's, not the engine's
        # the restart from the engine's own checkpoint failed with the engine's exception: a
        # finding against the engine (oracles.recovery_succeeded), not the query's fault
        failed = (engine_failure(error_text, str(ck))  # the specific exception and its root cause
                  if writer is not None and restarted and not sink_raised and not overloaded
                  and engine_code_raised(error_text, uq) else None)
        if writer is not None and failed is not None and attempt > 1 and first_sink[0]:
            # the restart itself failed, before a batch reached the sink: it was started, and it
            # failed with the engine's exception (nothing restored to observe)
            writer.emit(PREFIX + "restart", resume_batch=None,
                        restored_versions=watcher.restored_versions() if watcher else {}, failed=True,
                        exception=failed["exception"])
        if writer is not None:
            writer.emit(PREFIX + "query_error", message=error)
        if writer is not None and failed is not None:
            writer.emit(PREFIX + "recovery_failed", checkpoint=str(ck), message=failed["message"],
                        exception=failed["exception"], cause=failed["cause"], user_code=False)
            return "recovery_failed"
        if ref and notes is not None and reference_failure_is_engines(
                error_text, uq, release_ok=bool(notes.get("release_ok")), sink_raised=bool(sink_raised),
                overloaded=overloaded):
            # fails on the release under test, ran on the reference release: the engine's
            # (oracles.release_differential), not the module's
            notes["reference_failed"] = engine_failure(error_text, str(ck))
            return "reference_failed"
        if sink_raised:
            raise InvalidInputError(sink_raised[0], source=uq.spec, location="sink")
        if any(sign in str(error) for sign in OVERLOAD_SIGNS):
            raise InvalidInputError(f"not the query's failure: Spark's Python worker did not connect back within "
                                    f"Spark's fixed 10 s (the machine is overloaded; run fewer jobs at once): "
                                    f"{error}", source=uq.spec, location="environment")
        raise InvalidInputError(f"the query failed on its own (not an injected failure): {error}",
                                source=uq.spec, location=which)
    return outcome


def _progress_of(q: Any) -> list[dict[str, Any]]:
    """The query's progress reports.

    Spark's ``recentProgress``, read from the JVM: the same on every release. Per batch the input
    rows, the watermark in force, the rows dropped as late and the names of the stateful operators
    it ran.
    """
    out: list[dict[str, Any]] = []
    try:
        items = [json.loads(p.json()) for p in q._jsq.recentProgress()]
    except Exception:
        return out
    for d in items:
        et = d.get("eventTime") or {}
        wm = et.get("watermark")
        out.append({"batch": int(d.get("batchId", -1)), "input_rows": int(d.get("numInputRows") or 0),
                    "watermark": wm, "watermark_ms": _iso_ms(wm),
                    "late_rows_dropped": sum(int(op.get("numRowsDroppedByWatermark") or 0)
                                             for op in d.get("stateOperators") or []),
                    # the stateful operators this batch ran (plan_checks.plan_stable)
                    "state_operators": [str(op.get("operatorName") or "?") for op in d.get("stateOperators") or []]})
    return out


def _iso_ms(v: Any) -> int | None:
    """``"2024-05-01T12:00:10.000Z"`` -> epoch milliseconds.

    Examples
    --------
    >>> _iso_ms("1970-01-01T00:00:02.500Z"), _iso_ms(None)
    (2500, None)
    """
    if not isinstance(v, str) or not v:
        return None
    try:
        t = dt.datetime.fromisoformat(v.replace("Z", "+00:00"))
    except ValueError:
        return None
    if t.tzinfo is None:
        t = t.replace(tzinfo=dt.UTC)
    return int(round(t.timestamp() * 1000))
