"""Conformance of recorded Spark runs (``rollcheck spark replay``).

The shared trace checker plus Spark's plug-ins.

Every Spark trace is checked by the one trace checker of :mod:`rollcheck.pyimpl.traces`: the
generic checks on the core vocabulary, and Spark's own checks as plug-ins reading Spark's events
in the same pass. The verdict is a :class:`~rollcheck.pyimpl.verdict.Report` (one rule for every
command): violated if a check is; inconclusive if a check the trace calls for could not run (a
requested failure that did not happen, a recording stopped before its end) or nothing was
examined; conformant otherwise. ``first_offending_seq`` is the root cause's.

Dispatch on the header (:func:`~rollcheck.spark_replay.replay.adapter.spark_job`):

- streaming jobs (``source: spark`` with ``job: wordcount | query``; older traces: ``spark-wordcount``,
  ``spark-query``): the :class:`~rollcheck.spark_replay.replay.adapter.SparkAdapter` maps them onto the
  core vocabulary; plug-ins :func:`~rollcheck.spark_replay.replay.checks.wordcount_plugins` or
  :func:`~rollcheck.spark_replay.replay.checks.query_plugins`;
- ``spark-nhop`` (message passing, already the core vocabulary): the header's protocol, the
  failure-free outputs as reference, and :func:`~rollcheck.spark_replay.jobs.nhop_replay.nhop_setup`'s
  plug-ins;
- any other engine-neutral trace (``processes`` in the header): the generic checks.

``specs/spark.md#streaming-conformance`` defines every check.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from rollcheck.pyimpl.errors import InvalidInputError
from rollcheck.pyimpl.traces.api import check_trace_lines
from rollcheck.pyimpl.traces.reader import TraceLines
from rollcheck.pyimpl.verdict import Report
from rollcheck.spark_replay.replay.adapter import SparkAdapter, spark_job
from rollcheck.spark_replay.replay.checks import (
    query_plugins,
    streaming_span_system,
    wordcount_plugins,
)
from rollcheck.spark_replay.trace import Trace

__all__ = ["replay_trace", "replay_file", "replay_lines", "streaming_span_system", "SOURCES"]

#: The trace sources this module replays (plus any engine-neutral trace).
SOURCES = ("spark", "spark-wordcount", "spark-query", "spark-nhop")


class _Events:
    """A parsed :class:`Trace` as the checker reads a file (header, pairs, truncation)."""

    def __init__(self, trace: Trace):
        self.header = trace.header
        self.source = trace.source or "<trace>"
        self.trace = trace
        self.truncated = trace.truncated
        self.truncated_after_seq = trace.truncated_after_seq

    def __iter__(self) -> Iterator[tuple[int, dict[str, Any]]]:
        for e in self.trace.events:
            yield e.get("_line", 0), e


def replay_lines(lines: Any, *, tlc: Callable[[str], Any] | None = None) -> Report:
    r"""Check an opened trace (``lines`` as :class:`~rollcheck.pyimpl.traces.reader.TraceLines`).

    ``tlc(protocol)``, when given, returns the checker's ``tlc`` option for a message-passing trace
    of that protocol (:func:`rollcheck.spark_replay.replay.tlc.tlc_option`).

    Parameters
    ----------
    lines : TraceLines
        The opened trace.
    tlc : callable, optional
        ``tlc(protocol)`` -> the checker's ``tlc`` option; None runs no model checker.

    Returns
    -------
    Report
        The checks' verdicts.

    Examples
    --------
    >>> from rollcheck.spark_replay.trace import parse_trace_text
    >>> replay_trace(parse_trace_text(b'{"format":"rollcheck.trace/1","source":"other"}\n'))
    Traceback (most recent call last):
    ...
    rollcheck.pyimpl.errors.InvalidInputError: line 1: unknown trace source 'other' (expected spark with a job, spark-wordcount, spark-query, spark-nhop, or an engine-neutral trace with "processes")
    """
    header, source = lines.header, lines.source
    job = spark_job(header)
    protocol = reference = tlc_opt = adapter = None
    extra: list[Any] = []
    if job in ("wordcount", "query"):
        adapter = SparkAdapter()
        h = adapter.header(header)
        extra = wordcount_plugins(h, source) if job == "wordcount" else query_plugins(h, source)
    elif job == "nhop":
        from rollcheck.spark_replay.jobs.nhop_replay import nhop_setup

        protocol, reference, extra = nhop_setup(header, source)
        if tlc is not None:
            tlc_opt = tlc(protocol)
    elif isinstance(header.get("processes"), list):  # any engine's core vocabulary
        pass
    else:
        raise InvalidInputError(f"unknown trace source {header.get('source', '')!r} (expected spark with a job, "
                                "spark-wordcount, spark-query, spark-nhop, or an engine-neutral trace with "
                                "\"processes\")", source=None if source == "<trace>" else source,
                                location="line 1")
    report, _ = check_trace_lines(lines, protocol=protocol, reference=reference, extra=extra, adapter=adapter,
                                  tlc=tlc_opt, reference_source="the failure-free run")
    report.extra["job"] = job
    report.extra["inconclusive"] = report.verdict.value == "inconclusive"
    return report


def replay_trace(trace: Trace, *, tlc: Callable[[str], Any] | None = None) -> Report:
    """Check a parsed trace (see :func:`replay_lines`).

    Parameters
    ----------
    trace : Trace
        The parsed trace.
    tlc : callable, optional
        As in :func:`replay_lines`.

    Returns
    -------
    Report
        The checks' verdicts.
    """
    return replay_lines(_Events(trace), tlc=tlc)


def replay_file(path: str | Path, *, tlc: Callable[[str], Any] | None = None) -> Report:
    """Read and check a trace file, streaming it (see :func:`replay_lines`).

    Parameters
    ----------
    path : str or Path
        The trace file.
    tlc : callable, optional
        As in :func:`replay_lines`.

    Returns
    -------
    Report
        The checks' verdicts.
    """
    return replay_lines(TraceLines(path), tlc=tlc)
