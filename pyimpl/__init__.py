"""Reference implementations of rollback recovery: patterns, Z-paths, recovery lines, protocols.

The foundation is re-exported here (``from rollcheck.pyimpl import Pattern, PatternBuilder``);
each concept keeps its submodule as its home (``pattern``, ``patternio``, ``zpaths``,
``recovery``, ``consistency``, ``clocks``, ``rgraph``, ``render``, ``protocols``, ...).

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

# The names are loaded on first use (PEP 562), so that importing one submodule — or running
# ``rollcheck --help`` — does not import numpy, scipy, networkx or matplotlib.
_EXPORTS: dict[str, str] = {
    "happened_before": "rollcheck.pyimpl.clocks",
    "vector_clocks": "rollcheck.pyimpl.clocks",
    "in_transit": "rollcheck.pyimpl.consistency",
    "is_consistent": "rollcheck.pyimpl.consistency",
    "orphans": "rollcheck.pyimpl.consistency",
    "InconclusiveError": "rollcheck.pyimpl.errors",
    "InternalError": "rollcheck.pyimpl.errors",
    "InvalidInputError": "rollcheck.pyimpl.errors",
    "PropertyViolation": "rollcheck.pyimpl.errors",
    "RollcheckError": "rollcheck.pyimpl.errors",
    "CHECKPOINT": "rollcheck.pyimpl.pattern",
    "DELIVER": "rollcheck.pyimpl.pattern",
    "SEND": "rollcheck.pyimpl.pattern",
    "Checkpoint": "rollcheck.pyimpl.pattern",
    "Event": "rollcheck.pyimpl.pattern",
    "Message": "rollcheck.pyimpl.pattern",
    "Pattern": "rollcheck.pyimpl.pattern",
    "PatternBuilder": "rollcheck.pyimpl.pattern",
    "dump_pattern": "rollcheck.pyimpl.patternio",
    "load_pattern": "rollcheck.pyimpl.patternio",
    "loads_pattern": "rollcheck.pyimpl.patternio",
    "pattern_from_dict": "rollcheck.pyimpl.patternio",
    "pattern_to_dict": "rollcheck.pyimpl.patternio",
    "Protocol": "rollcheck.pyimpl.protocols",
    "ProtocolRun": "rollcheck.pyimpl.protocols",
    "get_protocol": "rollcheck.pyimpl.protocols",
    "resolve_protocol": "rollcheck.pyimpl.protocols",
    "run_protocol": "rollcheck.pyimpl.protocols",
    "RecoveryLine": "rollcheck.pyimpl.recovery",
    "max_consistent_containing": "rollcheck.pyimpl.recovery",
    "min_consistent_containing": "rollcheck.pyimpl.recovery",
    "recovery_line": "rollcheck.pyimpl.recovery",
    "rollback_distance": "rollcheck.pyimpl.recovery",
    "render_pattern": "rollcheck.pyimpl.render",
    "checkpoint_graph": "rollcheck.pyimpl.rgraph",
    "rgraph": "rollcheck.pyimpl.rgraph",
    "is_zpath": "rollcheck.pyimpl.zpaths",
    "useless_checkpoints": "rollcheck.pyimpl.zpaths",
    "zcycle": "rollcheck.pyimpl.zpaths",
    "zcycle_checkpoints": "rollcheck.pyimpl.zpaths",
    "zpath": "rollcheck.pyimpl.zpaths",
}

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


def __getattr__(name: str) -> object:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
