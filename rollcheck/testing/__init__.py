"""Testing your own checkpointing protocol with rollcheck: the public, curated namespace.

Like :mod:`hypothesis.strategies`, this module is the stable face of rollcheck's machinery;
everything here is documented and kept; the modules behind it are private: ``_check`` (the
runner), ``_properties`` (the properties on one pattern), ``_guard`` (the user's code on
pattern-level runs), ``_random`` (the random phase), ``_report`` (the report and its verdict
line), ``_evidence`` (counterexample files), ``_strategies`` (the Hypothesis strategies).

- :class:`Protocol`: the base class of a protocol (pure transition functions over a per-process
  state; the class attribute ``zcycle_free`` claims that no checkpoint is ever useless,
  ``rollback_bound`` optionally bounds how many checkpoints a failure can cost a process,
  ``symmetric`` lets the explorer check one schedule per renaming of the processes).
- :func:`check_protocol`: run every property the protocol claims on every schedule up to the
  bounds (default 2x11, 3x9, 4x6), then on random ones steered at the protocol, and return a
  :class:`ProtocolReport` (verdict and what it covered, smallest counterexample file and picture,
  forced checkpoints per delivery next to HMNR's and BCS's).
- :func:`assert_protocol_safe`: the same, raising :class:`AssertionError` for pytest.
- :func:`check_query` / :func:`assert_query_exactly_once` (Spark) and :func:`check_job` /
  :func:`assert_job_exactly_once` (Flink): a slice of the engine's chaos matrix on your query or job
  module, an :class:`EngineReport` (files in ``--rollcheck-out``).
- Strategies: :func:`patterns`, :func:`schedules`, :func:`zigzag_schedules`,
  :func:`basic_schedules`, :func:`span_systems`, :func:`elastic_configs`.

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
