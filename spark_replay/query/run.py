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
watermark in force per batch) and, for a task failure, the physical plan. The ``foreachBatch``
sink and what one start knows are :class:`~rollcheck.spark_replay.query.attempt.Attempt`.
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
from rollcheck.spark_replay.faults.killpoints import SECOND_KILL, recovery_kill_filter
from rollcheck.spark_replay.faults.retry import RETRY_EXHAUSTED, retry_input_filter, strike_armed
from rollcheck.spark_replay.query.attempt import Attempt
from rollcheck.spark_replay.query.config import KILLED, QueryConfig
from rollcheck.spark_replay.query.failures import (
    OVERLOAD_SIGNS,
    engine_code_raised,
    engine_failure,
    reference_failure_is_engines,
)
from rollcheck.spark_replay.query.files import WorkPaths, feed_inputs
from rollcheck.spark_replay.query.module import SINGLE_SOURCE, UserQuery
from rollcheck.spark_replay.query.upgrade import (
    begin_first_start,
    end_first_start,
    ensure_checked,
    record_upgrade,
    restart_query,
    upgraded,
)
from rollcheck.spark_replay.supervise import give_up_on_user_code
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


def run_once(spark: Any, uq: UserQuery, cfg: QueryConfig, paths: WorkPaths, *, ref: bool,
             writer: TraceWriter | None, watcher: CheckpointWatcher | None,
             notes: dict[str, Any] | None = None) -> str:
    """One start of the query until it ends ("done") or fails with the injected failure ("failed").

    Any other failure of the query is the user's and ends the recording.
    """
    from pyspark.sql import functions as F

    # the upgrade (upgrade.py): query runs to batch K and stops; query_next restarts on its checkpoint
    upgrading = not ref and cfg.failure == "upgrade"
    which = restart_query(paths.markers) if upgrading else "query"
    att = Attempt(spark, uq, cfg, paths, ref, writer, watcher, which=which,
                  first_start=upgrading and not upgraded(paths.markers))
    committed = sorted(CheckpointDir(att.ck).commits()) if att.ck.is_dir() else []
    if writer is not None:
        writer.emit(PREFIX + "attempt_start", pid=os.getpid(), committed=committed)
    feed_inputs(paths, ref, (committed[-1] + 1) if committed else 0)  # several sources: batch by batch
    dfs = _sources(spark, uq, paths, ref)
    # a change Spark's guide forbids is refused before any query of the recording starts (exit 2)
    upgrade_info = ensure_checked(uq, dfs, paths.markers) if cfg.failure == "upgrade" else {}
    result = _user_result(uq, _inject_failures(att, dfs, F), which)
    _note_stream_plan(notes, result, which)
    if watcher is not None:
        watcher.poll_now()
        watcher.start()
    q, no_data = _start(att, result)
    outcome, error, error_text = _await_end(att, q, no_data)
    if outcome == "done" and att.first_start:  # query ended after batch K committed: query_next restarts
        record_upgrade(paths.markers, None if writer is None else writer.emit, att.fail_at,
                       sorted(CheckpointDir(att.ck).commits()), upgrade_info)
        outcome = "failed"
    _record_end(att, q, outcome, notes)
    if outcome == "error":
        return _after_error(att, str(error), error_text, notes)
    return outcome


def _inject_failures(att: Attempt, dfs: dict[str, Any], F: Any) -> dict[str, Any]:
    """Every source with the filters of the injected failure: it strikes in whichever reads batch K."""
    cfg, paths = att.cfg, att.paths
    out: dict[str, Any] = {}
    for name, df in dfs.items():
        if att.failing and cfg.failure == "task":
            df = _with_task_failure(df, F, att.marker, att.fail_at)
        if att.failing and cfg.failure == "retry" and att.sched.stage == "input" \
                and strike_armed(paths.markers, att.sched, att.fail_at):
            # the retry in the input stage: a filter's UDF fails the tasks reading batch K's file
            keep = retry_input_filter(paths.markers, att.ck, att.fail_at, att.sched)
            df = df.where(F.udf(keep, "boolean").asNondeterministic()(F.input_file_name()))
        if att.failing and cfg.failure == "during-recovery" and att.marker.exists() \
                and not (paths.markers / SECOND_KILL).exists():
            # the restarted driver: killed in batch K's first stage, before its stateful stage loads any state
            hold = recovery_kill_filter(paths.markers, att.fail_at)
            df = df.where(F.udf(hold, "boolean").asNondeterministic()(F.input_file_name()))
        out[name] = df
    return out


def _user_result(uq: UserQuery, dfs: dict[str, Any], which: str) -> Any:
    """The user's ``query`` (or ``query_next``) on the sources: a streaming DataFrame, else exit 2."""
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
    return result


def _note_stream_plan(notes: dict[str, Any] | None, result: Any, which: str) -> None:
    """Keep the query's analysed plan and output fields in ``notes`` (what the oracles read)."""
    if notes is not None and "stream_plan" not in notes:
        try:  # the event-time column, the operators (oracles.analyse_plan)
            notes["stream_plan"] = str(result._jdf.queryExecution().analyzed().toString())
            notes["stream_fields"] = [{"name": f.name, "type": f.dataType.simpleString(),
                                       "metadata": dict(f.metadata or {})} for f in result.schema.fields]
        except Exception:
            notes["stream_plan"] = ""
    if notes is not None and which == "query_next":  # the batch evaluation of the combined run reads it
        notes["stream_plan_next"] = str(result._jdf.queryExecution().analyzed().toString())


def _start(att: Attempt, result: Any) -> tuple[Any, Any]:
    """Start the streaming query through the attempt's sink: ``(query, input held by an upgrade)``."""
    uq, paths = att.uq, att.paths
    writer_ = (result.writeStream.outputMode(uq.output_mode).option("checkpointLocation", str(att.ck))
               .foreachBatch(att.sink))
    if not uq.multi:  # one source: every file is there from the start
        writer_ = writer_.trigger(availableNow=True)
    no_data = (begin_first_start(att.spark, paths.inputs_of(att.ref), att.fail_at, uq.multi)
               if att.first_start else None)
    try:
        q = writer_.start()
    except Exception as e:
        if no_data is not None:
            end_first_start(att.spark, paths.inputs_of(att.ref), no_data)
        if att.watcher is not None:
            att.watcher.stop()
        fault = environment_fault(e, str(paths.root))
        if fault is not None:
            raise fault from None
        raise InvalidInputError(f"Spark refused the query: {type(e).__name__}: {str(e).splitlines()[0]}",
                                source=uq.spec, location="query") from None
    if uq.multi:
        _run_to_end(q)
    return q, no_data


def _await_end(att: Attempt, q: Any, no_data: Any) -> tuple[str, str | None, str]:
    """Wait for the query's end: ``(outcome, first line of its error, the error's text)``."""
    from pyspark.errors import StreamingQueryException

    cfg, paths = att.cfg, att.paths
    outcome = "done"
    error: str | None = None
    error_text = ""
    try:
        # a sink past its limit normally fails the query at once; one stuck in C code cannot be
        # stopped in this process: give up on it after a grace period (a driver child is killed)
        while not q.awaitTermination(0.5):
            if att.expired_at and time.monotonic() - att.expired_at[0] > _SINK_GRACE_S:
                give_up_on_user_code(UserCodeTimeout(att.uq.spec, "sink", att.uq.call_timeout))
    except StreamingQueryException as e:
        if att.expired:
            raise att.expired[0] from None
        # the injected task or sink failure fails the query once; a killed driver's failure is the
        # SIGKILL, so a query failing in a driver of a kill mode is never the injected failure (a
        # restarted driver failing there is a failed restart, recorded by _after_error)
        injected = (att.failing and (cfg.failure not in KILLED and att.marker.exists()  # or every retry of K failed
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
            end_first_start(att.spark, paths.inputs_of(att.ref), no_data)
        if att.watcher is not None:
            att.watcher.stop()
    return outcome, error, error_text


def _record_end(att: Attempt, q: Any, outcome: str, notes: dict[str, Any] | None) -> None:
    """Record what the ended start left: its progress, a task failure's plan and batch, a quiet restart."""
    writer = att.writer
    progress = _progress_of(q)
    if notes is not None:
        notes.setdefault("progress", []).extend(progress)
    if writer is not None:
        for p in progress:  # the watermark Spark reported in force per batch (the oracles read it)
            writer.emit(PREFIX + "progress", **p)
    if writer is not None and att.failing and att.cfg.failure == "task" and notes is not None \
            and not notes.get("plan"):
        try:  # the physical plan that ran: the injection is in it (evidence, not a requirement)
            notes["plan"] = q._jsq.explainInternal(False)
            writer.emit(PREFIX + "plan", physical=notes["plan"])
        except Exception:
            pass
    if outcome == "failed" and att.cfg.failure == "task" and writer is not None:
        # the batch Spark was running: the first planned batch that did not commit
        c = CheckpointDir(att.ck)
        pending = sorted(set(c.offsets()) - set(c.commits()))
        writer.emit("failure", processes=["driver"], batch=pending[0] if pending else None, mode="task")
    if outcome == "done" and writer is not None and att.attempt > 1 and att.first_sink:
        writer.emit(PREFIX + "restart", resume_batch=None, restored_versions={})


def _after_error(att: Attempt, error: str, error_text: str, notes: dict[str, Any] | None) -> str:
    """A query that failed on its own: the engine's failed restart or reference run, else raise the user's."""
    cfg, uq, writer, ck = att.cfg, att.uq, att.writer, str(att.ck)
    restarted = att.failing and ((att.paths.markers / "recovered").exists()
                                 or (cfg.failure in KILLED and att.attempt > 1) or att.which == "query_next")
    overloaded = any(sign in error for sign in OVERLOAD_SIGNS)  # the machine's, not the engine's
    # the restart from the engine's own checkpoint failed with the engine's exception: a
    # finding against the engine (oracles.recovery_succeeded), not the query's fault
    failed = (engine_failure(error_text, ck)  # the specific exception and its root cause
              if writer is not None and restarted and not att.sink_raised and not overloaded
              and engine_code_raised(error_text, uq) else None)
    if writer is not None and failed is not None and att.attempt > 1 and att.first_sink:
        # the restart itself failed, before a batch reached the sink: it was started, and it
        # failed with the engine's exception (nothing restored to observe)
        writer.emit(PREFIX + "restart", resume_batch=None,
                    restored_versions=att.watcher.restored_versions() if att.watcher else {}, failed=True,
                    exception=failed["exception"])
    if writer is not None:
        writer.emit(PREFIX + "query_error", message=error)
    if writer is not None and failed is not None:
        writer.emit(PREFIX + "recovery_failed", checkpoint=ck, message=failed["message"],
                    exception=failed["exception"], cause=failed["cause"], user_code=False)
        return "recovery_failed"
    if att.ref and notes is not None and reference_failure_is_engines(
            error_text, uq, release_ok=bool(notes.get("release_ok")), sink_raised=bool(att.sink_raised),
            overloaded=overloaded):
        # fails on the release under test, ran on the reference release: the engine's
        # (oracles.release_differential), not the module's
        notes["reference_failed"] = engine_failure(error_text, ck)
        return "reference_failed"
    if att.sink_raised:
        raise InvalidInputError(att.sink_raised[0], source=uq.spec, location="sink")
    if overloaded:
        raise InvalidInputError(f"not the query's failure: Spark's Python worker did not connect back within "
                                f"Spark's fixed 10 s (the machine is overloaded; run fewer jobs at once): "
                                f"{error}", source=uq.spec, location="environment")
    raise InvalidInputError(f"the query failed on its own (not an injected failure): {error}",
                            source=uq.spec, location=att.which)


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
