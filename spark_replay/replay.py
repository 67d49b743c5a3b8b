"""Conformance of recorded Spark runs against the reference models (``rollcheck spark replay``).

A trace is replayed event by event; each check is a small model that consumes the events in order
and, when the recording contradicts it, names the *first offending event* (its ``seq``). The
verdict (:class:`~rollcheck.spark_replay.verdict.ReplayResult`) is conformant iff every check holds,
not conformant when one is violated (``first_offending_seq`` is the smallest offending ``seq``) and
inconclusive when none is violated but one could not be checked - a requested failure that did
not happen is never a pass. A truncated trace (killed recorder) is replayed up to its last
complete event; checks that need the end of the run are then reported as not reached.

Dispatch on the header's ``source``:

- ``spark-wordcount`` (the built-in streaming word count) and ``spark-query`` (a user's own
  Structured Streaming query): :mod:`rollcheck.spark_replay.checks`;
- ``spark-nhop`` (message passing): :func:`rollcheck.spark_replay.nhop_replay.check_nhop`, plus
  ``failure-observed`` (:func:`rollcheck.spark_replay.checks.failure_observed_nhop`), added here.

``specs/spark.md#streaming-conformance`` defines every check.
"""

from __future__ import annotations

from pathlib import Path

from rollcheck.pyimpl.errors import InvalidInputError
from rollcheck.spark_replay.checks import (
    failure_observed_nhop,
    query_checks,
    streaming_span_system,
    wordcount_checks,
)
from rollcheck.spark_replay.trace import Trace, read_trace
from rollcheck.spark_replay.verdict import Check, ReplayResult

__all__ = ["Check", "ReplayResult", "replay_trace", "replay_file", "streaming_span_system", "SOURCES"]

#: The trace sources this module replays.
SOURCES = ("spark-wordcount", "spark-query", "spark-nhop")


def replay_trace(trace: Trace) -> ReplayResult:
    """Check a parsed trace; dispatch on the header's ``source`` (module docstring).

    Examples
    --------
    >>> from rollcheck.spark_replay.trace import parse_trace_text
    >>> replay_trace(parse_trace_text(b'{"format":"rollcheck.trace/1","source":"other"}\\n'))
    Traceback (most recent call last):
    ...
    rollcheck.pyimpl.errors.InvalidInputError: line 1: unknown trace source 'other' (expected spark-wordcount, spark-query, spark-nhop, or an engine-neutral trace with "processes")
    """
    src = trace.source_kind
    if src == "spark-wordcount":
        checks = wordcount_checks(trace)
    elif src == "spark-query":
        checks = query_checks(trace)
    elif src == "spark-nhop":
        from rollcheck.spark_replay.nhop_replay import check_nhop

        checks = [failure_observed_nhop(trace), *check_nhop(trace)]
    elif isinstance(trace.header.get("processes"), list):  # any engine's core vocabulary
        from rollcheck.spark_replay.nhop_replay import check_core

        checks = check_core(trace)
    else:
        raise InvalidInputError(f"unknown trace source {src!r} (expected spark-wordcount, spark-query, "
                                "spark-nhop, or an engine-neutral trace with \"processes\")",
                                source=trace.source, location="line 1")
    # A recording that stopped before its end event (killed recorder) is a truncated trace too.
    ended = any(e["kind"] == "end" for e in trace.events)
    truncated = trace.truncated or not ended
    after = trace.truncated_after_seq if trace.truncated else (
        None if ended else (trace.events[-1]["seq"] if trace.events else 0))
    return ReplayResult(src, checks, truncated, after, len(trace.events))


def replay_file(path: str | Path) -> ReplayResult:
    """Read and check a trace file (see :func:`replay_trace`)."""
    return replay_trace(read_trace(path))
