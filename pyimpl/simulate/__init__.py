"""A deterministic dataflow simulator for comparing checkpointing protocols (FERDiS-style).

Quick reference (``specs/simulate.md``)::

    from pyimpl.simulate import SimConfig, simulate
    r = simulate(SimConfig("wordcount", "hmnr", interval=5.0, fail="count.1", fail_at=30.0, seed=7))
    r.pattern            # the checkpoint-and-communication pattern up to the failure
    r.metrics            # regular/forced checkpoints, rollback distance, lost messages, verdict, ...
    r.deadlock           # set when aligned barriers deadlock (cyclic topologies)

Modules: :mod:`~pyimpl.simulate.topology` (operators, pipeline/shuffle connections, workloads),
:mod:`~pyimpl.simulate.engine` (event loop), :mod:`~pyimpl.simulate.recovery` (recovery line,
channel clearing, log replay), :mod:`~pyimpl.simulate.metrics` (FERDiS metrics, verdict),
:mod:`~pyimpl.simulate.sweep` (comparison tables).
"""

from pyimpl.simulate.engine import (
    CL_PROTOCOLS,
    PROTOCOL_NAMES,
    Deadlock,
    SimConfig,
    SimResult,
    SnapshotRecord,
    Variant,
    run_engine,
    simulate,
)
from pyimpl.simulate.metrics import VERDICTS, compute_metrics, semantics
from pyimpl.simulate.recovery import Recovery, lost_from_pattern
from pyimpl.simulate.topology import WORKLOADS, Channel, Connection, Operator, Topology, workload

__all__ = [
    "CL_PROTOCOLS",
    "PROTOCOL_NAMES",
    "Deadlock",
    "SimConfig",
    "SimResult",
    "SnapshotRecord",
    "Variant",
    "run_engine",
    "simulate",
    "VERDICTS",
    "compute_metrics",
    "semantics",
    "Recovery",
    "lost_from_pattern",
    "WORKLOADS",
    "Channel",
    "Connection",
    "Operator",
    "Topology",
    "workload",
]
