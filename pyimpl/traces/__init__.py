"""Traces from any engine: the engine-neutral ``rollcheck.trace/1`` vocabulary and its checks.

Quick reference::

    report, _ = check_trace_file("run.jsonl", protocol="hmnr", reference=[...])
    report.conformant, report.first_offending_seq, [c.to_json() for c in report.checks]
    pattern = trace_to_pattern("run.jsonl")          # the run before the first failure

Modules: :mod:`~rollcheck.pyimpl.traces.reader` (streaming, truncation-tolerant reader),
:mod:`~rollcheck.pyimpl.traces.checker` (one-pass validation and the checks),
:mod:`~rollcheck.pyimpl.traces.report` (the verdict), :mod:`~rollcheck.pyimpl.traces.schema`
(the JSON Schema, strict mode), :mod:`~rollcheck.pyimpl.traces.api` (files in, report out).

References
----------
``specs/formats.md#trace``; FERDiS paper §4, §5.3, §6.1, §7.2.5–7.2.8.
"""

from rollcheck.pyimpl.traces.api import check_trace_file, resolve_trace_protocol, trace_to_pattern
from rollcheck.pyimpl.traces.checker import (
    CORE_KINDS,
    Segment,
    TraceChecker,
    load_reference,
    reference_from_list,
)
from rollcheck.pyimpl.traces.reader import TRACE_FORMAT, TraceLines, trace_error
from rollcheck.pyimpl.traces.report import CheckResult, TraceReport

__all__ = [
    "CORE_KINDS",
    "TRACE_FORMAT",
    "CheckResult",
    "Segment",
    "TraceChecker",
    "TraceLines",
    "TraceReport",
    "check_trace_file",
    "load_reference",
    "reference_from_list",
    "resolve_trace_protocol",
    "trace_error",
    "trace_to_pattern",
]
