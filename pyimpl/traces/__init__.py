"""Traces from any engine: the engine-neutral ``rollcheck.trace/1`` vocabulary and its checks.

Quick reference::

    report, _ = check_trace_file("run.jsonl", protocol="hmnr", reference=[...])
    report.conformant, report.first_offending_seq, [c.to_json() for c in report.checks]
    pattern = trace_to_pattern("run.jsonl")          # the run before the first failure

Modules: :mod:`~rollcheck.pyimpl.traces.reader` (the one streaming, truncation-tolerant reader),
:mod:`~rollcheck.pyimpl.traces.view` (the one pass: core vocabulary validated, effective execution
kept, plug-ins fed), :mod:`~rollcheck.pyimpl.traces.plugin` (the check plug-in interface),
:mod:`~rollcheck.pyimpl.traces.checks` (the generic checks, one module each),
:mod:`~rollcheck.pyimpl.traces.checker` (generic + engine plug-ins around one view),
:mod:`~rollcheck.pyimpl.traces.schema` (the JSON Schema, strict mode),
:mod:`~rollcheck.pyimpl.traces.api` (files in, report out). The verdict is
:class:`rollcheck.pyimpl.verdict.Report`.

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
from rollcheck.pyimpl.traces.plugin import Recovery, TraceCheck
from rollcheck.pyimpl.traces.reader import TRACE_FORMAT, TraceLines, read_events, trace_error
from rollcheck.pyimpl.traces.view import RunView

__all__ = [
    "CORE_KINDS",
    "TRACE_FORMAT",
    "Recovery",
    "RunView",
    "Segment",
    "TraceCheck",
    "TraceChecker",
    "TraceLines",
    "check_trace_file",
    "load_reference",
    "read_events",
    "reference_from_list",
    "resolve_trace_protocol",
    "trace_error",
    "trace_to_pattern",
]
