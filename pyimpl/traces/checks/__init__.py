"""The generic trace checks, one plug-in per module, and the registry that assembles them.

======================= ============================================ ===========================
check                   module                                       runs when
======================= ============================================ ===========================
pattern-valid           :mod:`.pattern_valid`                        always
forced-checkpoints      :mod:`.forced`                               a protocol is given
no-useless-checkpoints  :mod:`.useless`                              the protocol claims it
recovery-line           :mod:`.recovery_line`                        always (n/a without failure)
log-replay              :mod:`.log_replay`                           always (n/a without recovery)
outputs-exactly-once    :mod:`.outputs`                              a reference is given
checkpoint-indices      :mod:`.indices`                              the trace has ``index`` fields
tlc-trace               :mod:`.tlc`                                  a TLC validator is given
======================= ============================================ ===========================

An engine adds its own plug-ins after these (:func:`generic_checks` returns a list; append to it).

References
----------
``specs/formats.md#trace-checks``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

from rollcheck.pyimpl.traces.checks.forced import ForcedCheckpoints
from rollcheck.pyimpl.traces.checks.indices import CheckpointIndices
from rollcheck.pyimpl.traces.checks.log_replay import LogReplay
from rollcheck.pyimpl.traces.checks.outputs import (
    OutputsExactlyOnce,
    canon_output,
    load_reference,
    reference_from_list,
)
from rollcheck.pyimpl.traces.checks.pattern_valid import PatternValid
from rollcheck.pyimpl.traces.checks.recovery_line import RecoveryLine
from rollcheck.pyimpl.traces.checks.tlc import Segment, SegmentKeeper, TlcTrace
from rollcheck.pyimpl.traces.checks.useless import NoUselessCheckpoints
from rollcheck.pyimpl.traces.plugin import TraceCheck

__all__ = [
    "CheckpointIndices",
    "ForcedCheckpoints",
    "LogReplay",
    "NoUselessCheckpoints",
    "OutputsExactlyOnce",
    "PatternValid",
    "RecoveryLine",
    "Segment",
    "SegmentKeeper",
    "TlcTrace",
    "canon_output",
    "generic_checks",
    "load_reference",
    "reference_from_list",
]


def generic_checks(*, protocol: Any = None, n: int | None = None, reference: Counter[str] | None = None,
                   virtual: bool = True, keeper: SegmentKeeper | None = None,
                   tlc: tuple[Callable[..., Any] | None, str | None, str, bool] | None = None) -> list[TraceCheck]:
    """The generic plug-ins for the given options, in reporting order.

    Parameters
    ----------
    protocol : Protocol, optional
        Adds ``forced-checkpoints`` (needs ``n``, the number of processes) and, when the protocol
        claims ``zcycle_free``, ``no-useless-checkpoints``.
    reference : Counter, optional
        Adds ``outputs-exactly-once`` (:func:`reference_from_list`).
    keeper : SegmentKeeper, optional
        Keeps the executions between failures (for TLC or other validators).
    tlc : tuple, optional
        ``(validate, model protocol name or None, why not, requested)``: adds ``tlc-trace``
        (needs ``keeper``).

    Examples
    --------
    >>> [c.name for c in generic_checks()]
    ['pattern-valid', 'recovery-line', 'log-replay', 'checkpoint-indices']
    """
    checks: list[TraceCheck] = [PatternValid()]
    if protocol is not None:
        if n is None:
            raise ValueError("forced-checkpoints needs the number of processes")
        checks.append(ForcedCheckpoints(protocol, n))
        if getattr(protocol, "zcycle_free", False):
            checks.append(NoUselessCheckpoints())
    checks += [RecoveryLine(virtual), LogReplay()]
    if reference is not None:
        checks.append(OutputsExactlyOnce(reference))
    checks.append(CheckpointIndices())
    if keeper is not None:
        checks.append(keeper)
    if tlc is not None:
        if keeper is None:
            raise ValueError("tlc-trace needs a SegmentKeeper")
        validate, model, why_not, requested = tlc
        checks.append(TlcTrace(keeper, validate, model, why_not=why_not, requested=requested))
    return checks
