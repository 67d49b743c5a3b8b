"""The streaming conformance checks of ``rollcheck spark replay``, one function per named check.

A streaming trace feeds a :class:`StreamView` (one pass over the events, through the shared trace
checker: the :class:`SparkStream` plug-in reads Spark's events as they stream by — planned and
committed batches, state versions, sink writes, failures, restarts and the end-of-run records);
each check is then a plug-in (:class:`StreamCheck`) over the view returning one
:class:`~rollcheck.pyimpl.verdict.Check` (``specs/spark.md#streaming-conformance``):

- :func:`failure_observed`: the requested failure happened at the requested batch and the query
  restarted and finished; a requested failure that did not happen is *unchecked* (exit 3);
- :func:`end_of_run`: a recording that stopped before its end records leaves the end-of-run checks
  *unchecked*, never passed;
- :func:`commit_protocol`: batch N+1 is planned only after N committed; a batch commits after its
  sink write of the same attempt, in order; at the end every batch is committed;
- :func:`resume_prediction`: at every restart the Falkirk Wheel span model with batch ids as
  logical times (:func:`streaming_span_system`) predicts the resume batch and each state store's
  restored version; Spark's observed values must match;
- word count only: :func:`state_fold`, :func:`final_state_failure_free`, :func:`sink_exactly_once`,
  :func:`side_channel_duplicates`, :func:`listener_progress`, :func:`statestore_crosscheck`;
- user queries only: :func:`output_exactly_once` (the final output equals the failure-free
  run's; a duplicate is named with its batch and row; with the module's own sink it is judged
  against the module's ``SINK_GUARANTEE`` by :func:`user_output`, re-deliveries counted from the
  trace's handings by :func:`sink_handings`), :func:`state_failure_free` (the operator
  state read with Spark's own state reader equals the failure-free run's) and
  :func:`query_statestore_crosscheck`.

Event kinds are read with or without the ``spark.`` prefix (older traces have none).

The checks live in modules of one concept each; this module names them all (every name stays
importable from here):

- :mod:`~rollcheck.spark_replay.stream.spans`: the span model of a restart;
- :mod:`~rollcheck.spark_replay.stream.view`: the one pass over the trace (:class:`StreamView`);
- :mod:`~rollcheck.spark_replay.stream.plugins`: how checks plug into the trace checker
  (:class:`SparkStream`, :class:`StreamCheck`, :class:`EventListCheck`);
- :mod:`~rollcheck.spark_replay.stream.checks`: the checks every streaming trace gets;
- :mod:`~rollcheck.spark_replay.jobs.wordcount_checks`: the word count's checks and plug-ins;
- :mod:`~rollcheck.spark_replay.query.checks`: a user query's checks and plug-ins;
- :mod:`~rollcheck.spark_replay.query.user_sink`: a query's own sink against its ``SINK_GUARANTEE``.

References
----------
Falkirk Wheel paper §3 (spans, the resume point of a restart); Spark Structured Streaming
programming guide (micro-batch execution, checkpointing, foreachBatch).
"""

from __future__ import annotations

from rollcheck.spark_replay.jobs.wordcount_checks import (
    final_state_failure_free,
    listener_progress,
    side_channel_duplicates,
    sink_exactly_once,
    state_fold,
    statestore_crosscheck,
    wordcount_plugins,
)
from rollcheck.spark_replay.query.checks import (
    output_exactly_once,
    query_plugins,
    query_statestore_crosscheck,
    state_failure_free,
    user_output,
)
from rollcheck.spark_replay.query.user_sink import FOREACHBATCH_DOC, sink_handings
from rollcheck.spark_replay.stream.checks import (
    FailureObservedNhop,
    commit_protocol,
    end_of_run,
    failure_observed,
    resume_prediction,
)
from rollcheck.spark_replay.stream.checks import requested_failure as _requested  # noqa: F401
from rollcheck.spark_replay.stream.plugins import MALFORMED as _MALFORMED  # noqa: F401
from rollcheck.spark_replay.stream.plugins import EventListCheck, SparkStream, StreamCheck
from rollcheck.spark_replay.stream.spans import streaming_span_system
from rollcheck.spark_replay.stream.view import StreamView
from rollcheck.spark_replay.stream.view import canon_row as _canon  # noqa: F401
from rollcheck.spark_replay.stream.view import check_verdict as _verdict  # noqa: F401

__all__ = [
    "StreamView",
    "streaming_span_system",
    "failure_observed",
    "FailureObservedNhop",
    "SparkStream",
    "StreamCheck",
    "EventListCheck",
    "end_of_run",
    "commit_protocol",
    "resume_prediction",
    "state_fold",
    "final_state_failure_free",
    "sink_exactly_once",
    "side_channel_duplicates",
    "listener_progress",
    "statestore_crosscheck",
    "output_exactly_once",
    "user_output",
    "sink_handings",
    "FOREACHBATCH_DOC",
    "state_failure_free",
    "query_statestore_crosscheck",
    "wordcount_plugins",
    "query_plugins",
]
