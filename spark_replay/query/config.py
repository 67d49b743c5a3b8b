"""The parameters of one query recording: :class:`QueryConfig`, the failures, Spark's settings.

:class:`QueryConfig` holds the flags of ``rollcheck spark record query`` (all of them go into the
trace header) and checks them (:meth:`QueryConfig.validate`); :data:`FAILURES` are the failures a
recording can inject, :data:`KILLED` those whose drivers a supervising parent SIGKILLs and
restarts; :func:`session_conf` is the Spark settings every recording runs with and
:func:`driver_master` the driver's master (the ``retry`` failure needs task retries in local mode).
"""

from __future__ import annotations

import os
import re
from dataclasses import asdict, dataclass
from typing import Any

from rollcheck.infra.calllimit import DEFAULT_QUERY_CALL_TIMEOUT, check_limit
from rollcheck.pyimpl.errors import InvalidInputError
from rollcheck.spark_replay.cluster import on_cluster, validate_cluster
from rollcheck.spark_replay.faults.killpoints import state_store_conf, validate_options
from rollcheck.spark_replay.faults.retry import SCHEDULE_FLAGS, RetrySchedule

__all__ = ["FAILURES", "KILLED", "QueryConfig", "session_conf", "driver_master"]

FAILURES = ("task", "sink", "kill", "executor", "retry", "twice", "during-recovery", "upgrade")
#: The failures whose drivers are SIGKILLed and restarted by a supervising parent.
KILLED = ("kill", "retry", "twice", "during-recovery")


@dataclass(frozen=True)
class QueryConfig:
    """Parameters of one recording (all of them go into the trace header)."""

    module: str
    batches: int | None = None
    seed: int = 0
    fail_at_batch: int | None = None
    failure: str | None = None
    master: str | None = None
    shuffle_partitions: int = 2
    max_attempts: int = 4
    reference: bool = True
    call_timeout: float = DEFAULT_QUERY_CALL_TIMEOUT
    state_store: str = "hdfs"  # killpoints.STATE_STORES
    kill_point: str | None = None  # killpoints.KILL_POINTS (with failure "kill")
    #: the pyspark release to record on (``releases.spark_environment``); None: the running one
    engine_version: str | None = None
    #: the release whose failure-free run the ``release-differential`` oracle compares with (with
    #: ``engine_version``; None: the pinned release)
    reference_version: str | None = None
    #: a cluster rollcheck starts for the recording (``cluster.CLUSTERS``: ``local-standalone``)
    cluster: str | None = None
    #: the ``retry`` failure's schedule (``faults_retry.RetrySchedule``; None: the default of each)
    fail_tasks: str | None = None
    fail_stage: str | None = None
    fail_where: str | None = None
    fail_attempts: int | None = None
    fail_load: str | None = None
    after_failure: str | None = None

    def retry_schedule(self) -> RetrySchedule:
        """The ``retry`` failure's schedule these flags ask for (defaults where not given)."""
        return RetrySchedule.of_config(asdict(self))

    def validate(self, n_input: int | None = None) -> None:
        """Check the flags; with ``n_input`` (the number of input batches) also the batch."""
        check_limit(self.call_timeout)
        if self.batches is not None and self.batches < 1:
            raise InvalidInputError(f"need at least one batch, got {self.batches}", location="--batches")
        if (self.failure is None) != (self.fail_at_batch is None):
            raise InvalidInputError("give --fail-at-batch and --failure together", location="--failure")
        if self.failure is not None and self.failure not in FAILURES:
            raise InvalidInputError(f"unknown failure {self.failure!r}; use one of {FAILURES}",
                                    location="--failure")
        validate_options(self.failure, self.kill_point, self.state_store)  # faults/killpoints.py
        self._validate_schedule()
        validate_cluster(self.cluster, self.master)  # cluster.py
        if self.failure == "executor" and self.cluster is None and not on_cluster(self.master):
            raise InvalidInputError("the executor failure needs a cluster whose executors run on this machine: "
                                    "give --cluster local-standalone (or --master spark://HOST:PORT)",
                                    location="--cluster")
        if self.engine_version is not None:
            from rollcheck.spark_replay.releases import parse_release

            parse_release(self.engine_version)
        if self.reference_version is not None:
            from rollcheck.spark_replay.releases import parse_release

            try:
                parse_release(self.reference_version)
            except InvalidInputError as e:
                raise InvalidInputError(e.reason, location="--reference-version") from None
        if self.fail_at_batch is not None and self.fail_at_batch < 0:
            raise InvalidInputError("--fail-at-batch must be >= 0", location="--fail-at-batch")
        if n_input is not None and self.failure == "upgrade" and int(self.fail_at_batch or 0) >= n_input - 1:
            raise InvalidInputError(f"--fail-at-batch {self.fail_at_batch} leaves query_next no input batch to read "
                                    f"(the input has {n_input} batches, ids 0..{n_input - 1}): the upgrade needs "
                                    f"K < {n_input - 1}", location="--fail-at-batch")
        if n_input is not None and self.fail_at_batch is not None and self.fail_at_batch > n_input:
            # batch n_input may exist (a data-less batch that advances the watermark); beyond: never
            raise InvalidInputError(f"--fail-at-batch {self.fail_at_batch} is beyond the input: it has "
                                    f"{n_input} batches (ids 0..{n_input - 1}, plus at most one data-less "
                                    f"batch {n_input})", location="--fail-at-batch")


    def _validate_schedule(self) -> None:
        """The retry schedule's flags: only with ``--failure retry``, each among its values."""
        given = [flag for key, flag in SCHEDULE_FLAGS.items()
                 if getattr(self, flag[2:].replace("-", "_")) is not None]
        if given and self.failure != "retry":
            raise InvalidInputError(f"a failure schedule needs --failure retry (got {self.failure})", location=given[0])
        if given:
            self.retry_schedule().validate(self.fail_at_batch)


def session_conf(state_store: str = "hdfs") -> dict[str, Any]:
    """The Spark settings a recording needs.

    UTC session time zone, frequent state maintenance, the state store provider.
    """
    return {"spark.sql.session.timeZone": "UTC",
            "spark.sql.streaming.stateStore.maintenanceInterval": "1s", **state_store_conf(state_store)}


def driver_master(cfg: QueryConfig) -> str | None:
    """The driver's master: the retry failure needs task retries.

    Which local mode allows only when asked (``local[N,F]``: F attempts per task; a cluster allows
    4, ``spark.task.maxFailures``).

    >>> driver_master(QueryConfig("q.py", failure="retry", fail_at_batch=1)), driver_master(QueryConfig("q.py"))
    ('local[2,4]', None)
    """
    if cfg.failure != "retry" or on_cluster(cfg.master):
        return cfg.master
    from rollcheck.spark_replay.session import DEFAULT_MASTER

    m = cfg.master or os.environ.get("ROLLCHECK_SPARK_MASTER") or DEFAULT_MASTER
    hit = re.fullmatch(r"local(?:\[(\d+|\*)\])?", m)
    return f"local[{hit.group(1) or 1},4]" if hit else m
