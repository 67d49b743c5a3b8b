"""One start of the user's query as its ``foreachBatch`` sink sees it: :class:`Attempt`.

:func:`~rollcheck.spark_replay.query.run.run_once` makes one :class:`Attempt` per start of the
query. It holds the start's settings (the injected failure, the checkpoint, the output folder) and
what its sink observed: whether a batch reached the sink yet, a call of the user's sink past its
limit, the user's sink raising. :meth:`Attempt.sink` is the ``foreachBatch`` function: it feeds
the next input (several sources), collects the batch (through the retry failure's struck task when
it is armed), strikes an executor, records ``spark.restart`` at the first batch of a restarted
attempt and ``spark.sink_written``, runs the user's sink or the default one, and then asks for the
kill, the second kill, the retry's restart or raises the injected sink failure of the failure modes
(:mod:`rollcheck.spark_replay.faults.killpoints`, :mod:`rollcheck.spark_replay.faults.retry`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rollcheck.pyimpl.errors import UserCodeTimeout
from rollcheck.spark_replay.checkpoint.watcher import PREFIX, CheckpointWatcher
from rollcheck.spark_replay.cluster import strike_executor
from rollcheck.spark_replay.faults.killpoints import (
    SECOND_FAILURES,
    SECOND_KILL,
    checkpoint_logs,
    state_files_of_version,
)
from rollcheck.spark_replay.faults.retry import (
    RETRY_EXHAUSTED,
    RETRY_FAILED,
    RETRY_RESTART,
    RetrySchedule,
    collect_struck,
    restart_before,
    retry_restart_batch,
    strike_armed,
)
from rollcheck.spark_replay.query.config import QueryConfig
from rollcheck.spark_replay.query.failures import user_exception
from rollcheck.spark_replay.query.files import WorkPaths, default_sink, feed_inputs, plain
from rollcheck.spark_replay.query.module import UserQuery
from rollcheck.spark_replay.supervise import claim_once, request_kill
from rollcheck.spark_replay.trace import TraceWriter

__all__ = ["Attempt", "InjectedSinkFailure"]


class InjectedSinkFailure(RuntimeError):
    """The injected ``sink`` failure, raised in the sink after it wrote batch K."""


def _request_kill(paths: WorkPaths) -> None:
    """Ask the supervising parent to SIGKILL this driver now (once per recording) and wait."""
    if claim_once(paths.markers / "failed"):
        request_kill(paths.markers)  # the parent SIGKILLs this driver and its JVM now


@dataclass
class Attempt:
    """One start of the query: its settings, its injected failure and what its sink observed."""

    spark: Any
    uq: UserQuery
    cfg: QueryConfig
    paths: WorkPaths
    ref: bool
    writer: TraceWriter | None
    watcher: CheckpointWatcher | None
    #: the module's function this start runs (``query``, or ``query_next`` after an upgrade)
    which: str = "query"
    #: the first start of an upgrade's recording: it runs to batch K and stops
    first_start: bool = False
    attempt: int = field(init=False)
    failing: bool = field(init=False)
    upgrading: bool = field(init=False)
    sched: RetrySchedule = field(init=False)
    marker: Path = field(init=False)
    ck: Path = field(init=False)
    out_dir: Path = field(init=False)
    #: no batch reached the sink yet in this start
    first_sink: bool = field(init=False, default=True)
    expired: list[UserCodeTimeout] = field(init=False, default_factory=list)
    expired_at: list[float] = field(init=False, default_factory=list)
    #: the user's sink raised: what, where (Spark's message loses it)
    sink_raised: list[str] = field(init=False, default_factory=list)

    def __post_init__(self) -> None:
        """Derive the start's number, the failure's flags and its folders."""
        self.attempt = self.writer.attempt if self.writer is not None else 0
        self.failing = not self.ref and self.cfg.failure is not None
        self.upgrading = self.failing and self.cfg.failure == "upgrade"
        self.sched = self.cfg.retry_schedule()  # the retry failure's schedule (faults/retry.py)
        self.marker = self.paths.markers / "failed"
        self.ck = self.paths.checkpoint(self.ref)
        self.out_dir = self.paths.out(self.ref)

    @property
    def fail_at(self) -> int:
        """The batch K of the injected failure (0 without one)."""
        return int(self.cfg.fail_at_batch or 0)

    def sink_expired(self) -> None:
        """From the user sink's limit timer: unblock a Spark action in the sink."""
        self.expired_at.append(time.monotonic())
        self.spark.sparkContext.cancelAllJobs()

    def sink(self, bdf: Any, bid: int) -> None:
        """The ``foreachBatch`` function: batch ``bid`` through the recorder, the sink and the failure."""
        cfg, paths, writer = self.cfg, self.paths, self.writer
        # several sources: the next batch's files, before this one commits (query of an upgrade: to batch K)
        feed_inputs(paths, self.ref, min(bid + 1, self.fail_at) if self.first_start else bid + 1)
        # the retry failure collects batch K through a task that fails once after its state store
        # committed (killpoints.retry_task); uncached, so that Spark's retry runs the stateful operator again
        if self.failing and cfg.failure == "retry":  # load=first: a new driver runs batch K first (faults/retry.py)
            restart_before(paths.markers, self.sched, bid, self.fail_at)
        retrying = (self.failing and cfg.failure == "retry" and cfg.fail_at_batch == bid
                    and strike_armed(paths.markers, self.sched, bid))
        # The recorder keeps the rows handed to the sink; the default sink writes the same rows
        # (one Spark action). Only a user's sink next to the recorder reads the batch twice: cache it.
        twice = writer is not None and self.uq.has_sink and not retrying
        if twice:
            bdf.persist()
        try:
            rows = self._collect(bdf, bid, retrying)
            self._strike_executor(bid)
            if self.watcher is not None:
                self.watcher.poll_now()
            self._note_restart(bid)
            if self.failing and cfg.failure == "kill" and cfg.kill_point == "state" and cfg.fail_at_batch == bid:
                _request_kill(paths)  # kill point "state": the batch ran (state committed), sink not yet
            self._write(bdf, bid, rows)
        finally:
            if twice:
                bdf.unpersist()
        if writer is not None and self.upgrading:  # which query ran the batch
            writer.emit(PREFIX + "batch_query", batch=bid, query=self.which)
        if writer is not None:
            writer.emit(PREFIX + "sink_written", batch=bid, rows=rows)
        self._fail_after_write(bid)

    def _collect(self, bdf: Any, bid: int, retrying: bool) -> list[Any]:
        """The batch's rows for the recorder; collecting runs the batch (its state stores commit now)."""
        writer, sched = self.writer, self.sched
        if retrying:  # the failed attempts and the attempts that ran to their end, in the failure event
            # (then=continue: no process of the trace's model fails, an engine-level spark.failure)
            return collect_struck(bdf, self.paths.markers, self.ck, bid, sched, plain, lambda **facts: None
                                  if writer is None else
                                  writer.emit("failure", processes=["driver"], batch=bid, mode="retry", **facts)
                                  if sched.then == "restart" else
                                  writer.emit(PREFIX + "failure", batch=bid, mode="retry", **facts))
        return [plain(r) for r in bdf.collect()] if (writer is not None or not self.uq.has_sink) else []

    def _strike_executor(self, bid: int) -> None:
        """The ``executor`` failure: once batch K's state stores committed, SIGKILL one executor JVM."""
        if not (self.failing and self.cfg.failure == "executor" and self.cfg.fail_at_batch == bid
                and not self.marker.exists()):
            return
        self.marker.write_text(str(bid), encoding="utf-8")  # once: the state stores of batch K committed
        struck = strike_executor(self.spark)  # cluster.py: one executor JVM SIGKILLed, seen removed
        if self.writer is not None:  # an engine-level failure: no process of the trace's model (the driver) failed
            self.writer.emit(PREFIX + "failure", batch=bid, mode="executor", kill_point="state",
                             checkpoint_logs=checkpoint_logs(self.ck),
                             state_files=state_files_of_version(self.ck, bid + 1), **struck)

    def _note_restart(self, bid: int) -> None:
        """At the first batch of a restarted attempt: ``spark.restart`` with the state it restored."""
        if self.writer is not None and self.first_sink and self.attempt > 1:
            self.writer.emit(PREFIX + "restart", resume_batch=bid,
                             restored_versions=self.watcher.restored_versions() if self.watcher else {})
        self.first_sink = False

    def _write(self, bdf: Any, bid: int, rows: list[Any]) -> None:
        """Run the user's sink (its time limit and exception noted) or write ``rows`` by the default one."""
        uq = self.uq
        if not uq.has_sink:
            default_sink(rows, bid, str(self.out_dir))
            return
        try:
            uq.call("sink", bdf, bid, str(self.out_dir), on_expire=self.sink_expired)
        except UserCodeTimeout as e:
            self.expired.append(e)  # Spark reports the sink's failure as the query's: say why
            raise
        except Exception as e:
            if not self.sink_raised:
                self.sink_raised.append(user_exception("sink", bid, e, uq.spec))
            raise

    def _fail_after_write(self, bid: int) -> None:
        """After the sink wrote batch ``bid``: the kills, the retry's restart or the injected sink failure."""
        cfg, paths = self.cfg, self.paths
        if not self.failing:
            return
        if cfg.fail_at_batch == bid and cfg.failure == "kill" and cfg.kill_point in (None, "sink"):
            _request_kill(paths)  # kill point "sink" (the default): the parent records the kill
        if cfg.fail_at_batch == bid and cfg.failure in SECOND_FAILURES:
            if cfg.failure == "twice" and self.marker.exists() and claim_once(paths.markers / SECOND_KILL):
                request_kill(paths.markers)  # the restarted driver wrote batch K again: once more
            _request_kill(paths)  # the first kill, after the sink wrote batch K (once: the marker)
        if cfg.failure == "retry" and (paths.markers / RETRY_FAILED).exists() \
                and self.sched.then == "restart" and not (paths.markers / RETRY_EXHAUSTED).exists() \
                and bid == retry_restart_batch(self.fail_at, paths.n_batches):
            if claim_once(paths.markers / RETRY_RESTART):
                # after the next batch: a new driver restarts from the checkpoint (the retried state reloads)
                request_kill(paths.markers)
        if cfg.fail_at_batch == bid and cfg.failure == "sink":
            if not claim_once(self.marker):
                return
            if self.writer is not None:
                self.writer.emit("failure", processes=["driver"], batch=bid, mode=cfg.failure)
            raise InjectedSinkFailure(f"rollcheck: injected sink failure in batch {bid}")
