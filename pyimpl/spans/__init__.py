"""Falkirk Wheel spans: logical times, span systems, the fixed point, the low watermark.

Public API: :class:`SpanSystem`, :func:`load_system`, :func:`system_from_dict`, :func:`solve`,
:func:`epoch_system`; dataflow descriptions (``rollcheck.dataflow/1``) in
:mod:`rollcheck.pyimpl.spans.description`; the command path (a document straight into flat need
tables) in :mod:`rollcheck.pyimpl.spans.tables`; the end-to-end executor in
:mod:`rollcheck.pyimpl.spans.executor`.
See ``specs/spans.md`` and ``docs/spans.md``.
"""

from rollcheck.pyimpl.spans.builder import (
    EpochEdge,
    EpochProcessor,
    build_system,
    epoch_system,
    resume_epoch,
)
from rollcheck.pyimpl.spans.fixpoint import compile_system, solve, solve_levels, solve_literal
from rollcheck.pyimpl.spans.system import (
    TOP,
    EdgeSpec,
    ProcessorSpec,
    SpanSystem,
    load_system,
    system_from_dict,
    system_to_dict,
)
from rollcheck.pyimpl.spans.watermark import low_watermark, update_watermark

__all__ = [
    "TOP",
    "EpochEdge",
    "EpochProcessor",
    "build_system",
    "epoch_system",
    "low_watermark",
    "resume_epoch",
    "update_watermark",
    "EdgeSpec",
    "ProcessorSpec",
    "SpanSystem",
    "compile_system",
    "load_system",
    "solve",
    "solve_levels",
    "solve_literal",
    "system_from_dict",
    "system_to_dict",
]
