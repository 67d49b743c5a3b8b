"""Bounded-exhaustive exploration of a checkpointing protocol.

Seams, each usable and testable alone:

- :mod:`~rollcheck.properties.explore.engine`: the walk over canonical schedules (partial-order
  and symmetry reduction, incremental protocol run, pruning at the first violation);
- :mod:`~rollcheck.properties.explore.zcycle`: does the newest delivery close a Z-cycle?
- :mod:`~rollcheck.properties.explore.calls`: the user's methods, guarded (types, mutation,
  time limit);
- :mod:`~rollcheck.properties.explore.symmetry`: verifying a ``symmetric`` claim;
- :mod:`~rollcheck.properties.explore.explorer`: bounds, calibration, workers, smallest violation;
- :mod:`~rollcheck.properties.explore.words`: explorer words as patterns.

References
----------
``specs/protocols.md#exhaustive``.
"""

from rollcheck.properties.explore.calls import (
    DEFAULT_CALL_TIMEOUT,
    CallTimeout,
    ProtocolCalls,
    ProtocolCodeError,
    Watchdog,
)
from rollcheck.properties.explore.engine import CKPT, DELIVER, SEND, Violation, WalkResult, walk
from rollcheck.properties.explore.explorer import (
    DEFAULT_BOUNDS,
    Bound,
    BoundResult,
    Exploration,
    explore,
    parse_bounds,
)
from rollcheck.properties.explore.words import drop_idle, word_to_pattern
from rollcheck.properties.explore.zcycle import useless_from_delivered, zcycle_through_last

__all__ = [
    "CKPT", "SEND", "DELIVER", "walk", "Violation", "WalkResult",
    "zcycle_through_last", "useless_from_delivered",
    "ProtocolCalls", "ProtocolCodeError", "CallTimeout", "Watchdog", "DEFAULT_CALL_TIMEOUT",
    "Bound", "BoundResult", "Exploration", "DEFAULT_BOUNDS", "explore", "parse_bounds",
    "word_to_pattern", "drop_idle",
]
