"""Test your own checkpointing protocol, Spark query or Flink job: rollcheck's public testing API.

Protocols: :func:`check_protocol`, :func:`assert_protocol_safe`; engines: :func:`check_query`,
:func:`check_job` and their ``assert_*``; strategies: :func:`patterns`, :func:`schedules` and kin.

Examples
--------
>>> from rollcheck.testing import Protocol, check_protocol
>>> class CheckpointBeforeReceive(Protocol):
...     zcycle_free = True
...     def initial(self, i, n): return None
...     def on_checkpoint(self, st): return st
...     def on_send(self, st, dst): return st, None
...     def must_force(self, st, src, pb): return True
...     def on_deliver(self, st, src, pb): return st
>>> report = check_protocol(CheckpointBeforeReceive, bounds="2x6,3x5", max_examples=10)
>>> report.verdict, report.forced_per_delivery
('safe', 1.0)
>>> report.verdict_line()
'SAFE: exhaustive 2x6 (3020 schedules), 3x5 (14218); random 10 schedules up to 6x60'

References
----------
FERDiS paper §5.3; ``specs/protocols.md#your-protocol``; ``docs/your-protocol.md``.
"""

from rollcheck.pyimpl.errors import InconclusiveError, InvalidInputError, PropertyViolation
from rollcheck.pyimpl.pattern import Pattern, PatternBuilder
from rollcheck.pyimpl.protocols.base import Protocol
from rollcheck.pyimpl.protocols.loader import resolve_protocol
from rollcheck.testing._check import assert_protocol_safe, check_protocol
from rollcheck.testing._engines import (
    EngineReport,
    assert_job_exactly_once,
    assert_query_exactly_once,
    check_job,
    check_query,
)
from rollcheck.testing._guard import UserCodeError
from rollcheck.testing._properties import (
    PROTOCOL_PROPERTIES,
    ProtocolViolation,
    max_consistent_line,
)
from rollcheck.testing._report import ProtocolReport, forced_per_delivery
from rollcheck.testing._strategies import (
    basic_schedules,
    elastic_configs,
    patterns,
    schedules,
    span_systems,
    zigzag_schedules,
)

__all__ = [
    "Protocol",
    "check_protocol",
    "assert_protocol_safe",
    "check_query",
    "assert_query_exactly_once",
    "check_job",
    "assert_job_exactly_once",
    "EngineReport",
    "ProtocolReport",
    "PROTOCOL_PROPERTIES",
    "forced_per_delivery",
    "max_consistent_line",
    "resolve_protocol",
    "patterns",
    "schedules",
    "zigzag_schedules",
    "basic_schedules",
    "span_systems",
    "elastic_configs",
    "Pattern",
    "PatternBuilder",
    "ProtocolViolation",
    "PropertyViolation",
    "UserCodeError",
    "InvalidInputError",
    "InconclusiveError",
]
