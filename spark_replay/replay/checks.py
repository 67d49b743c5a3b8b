"""The streaming conformance checks of ``rollcheck spark replay``, one function per named check.

Details: ``docs/internals/spark-replay.md`` (section ``checks``).

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
