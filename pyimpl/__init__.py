"""Reference implementations of rollback recovery: patterns, Z-paths, recovery lines, protocols.

The foundation is re-exported here, as networkx's subpackages do, so that user code reads
``from rollcheck.pyimpl import Pattern, PatternBuilder, useless_checkpoints``. The submodules stay
the home of each concept (``pattern``, ``patternio``, ``zpaths``, ``recovery``, ``consistency``,
``clocks``, ``rgraph``, ``render``, ``protocols``, ...).

Examples
--------
>>> from rollcheck.pyimpl import PatternBuilder, recovery_line, useless_checkpoints, zpath
>>> b = PatternBuilder(2)
>>> m0 = b.send(1, 0); b.deliver(0, m0)
>>> _ = b.checkpoint(0)
>>> m1 = b.send(0, 1); b.deliver(1, m1)
>>> p = b.build()
>>> [p.checkpoint_name(c) for c in useless_checkpoints(p)]   # C[0,1] lies on a Z-cycle
['P0:1']
>>> zpath(p, (0, 1), (0, 1))
['m1', 'm0']
>>> recovery_line(p, [0]).line
(0, 0)

References
----------
FERDiS paper §5.3 (Z-paths, useless checkpoints, recovery lines).
"""

from rollcheck.pyimpl.clocks import happened_before, vector_clocks
from rollcheck.pyimpl.consistency import in_transit, is_consistent, orphans
from rollcheck.pyimpl.errors import (
    InconclusiveError,
    InternalError,
    InvalidInputError,
    PropertyViolation,
    RollcheckError,
)
from rollcheck.pyimpl.pattern import (
    CHECKPOINT,
    DELIVER,
    SEND,
    Checkpoint,
    Event,
    Message,
    Pattern,
    PatternBuilder,
)
from rollcheck.pyimpl.patternio import (
    dump_pattern,
    load_pattern,
    loads_pattern,
    pattern_from_dict,
    pattern_to_dict,
)
from rollcheck.pyimpl.protocols import (
    Protocol,
    ProtocolRun,
    get_protocol,
    resolve_protocol,
    run_protocol,
)
from rollcheck.pyimpl.recovery import (
    RecoveryLine,
    max_consistent_containing,
    min_consistent_containing,
    recovery_line,
    rollback_distance,
)
from rollcheck.pyimpl.render import render_pattern
from rollcheck.pyimpl.rgraph import checkpoint_graph, rgraph
from rollcheck.pyimpl.zpaths import is_zpath, useless_checkpoints, zcycle, zcycle_checkpoints, zpath

__all__ = [
    # model
    "Pattern",
    "PatternBuilder",
    "Event",
    "Message",
    "Checkpoint",
    "SEND",
    "DELIVER",
    "CHECKPOINT",
    # files
    "load_pattern",
    "loads_pattern",
    "dump_pattern",
    "pattern_from_dict",
    "pattern_to_dict",
    # analyses
    "useless_checkpoints",
    "zcycle_checkpoints",
    "zpath",
    "zcycle",
    "is_zpath",
    "recovery_line",
    "RecoveryLine",
    "rollback_distance",
    "max_consistent_containing",
    "min_consistent_containing",
    "is_consistent",
    "orphans",
    "in_transit",
    "vector_clocks",
    "happened_before",
    "rgraph",
    "checkpoint_graph",
    "render_pattern",
    # protocols
    "Protocol",
    "ProtocolRun",
    "run_protocol",
    "get_protocol",
    "resolve_protocol",
    # errors
    "RollcheckError",
    "InvalidInputError",
    "PropertyViolation",
    "InconclusiveError",
    "InternalError",
]
