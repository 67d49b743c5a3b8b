"""A deterministic dataflow simulator for comparing checkpointing protocols (FERDiS-style).

Quick reference (``specs/simulate.md``)::

    from rollcheck.pyimpl.simulate import SimConfig, simulate
    r = simulate(SimConfig("wordcount", "hmnr", interval=5.0, fail="count.1", fail_at=30.0, seed=7))
    r.pattern            # the checkpoint-and-communication pattern up to the failure
    r.metrics            # regular/forced checkpoints, rollback distance, lost messages, verdict, ...
    r.deadlock           # set when aligned barriers deadlock (cyclic topologies)

Modules, one concept each; imports only go down this list:

- :mod:`~rollcheck.pyimpl.simulate.topology` — operators, pipeline/shuffle connections, the jobs;
- :mod:`~rollcheck.pyimpl.simulate.config` — the parameters of one run (:class:`SimConfig`);
- :mod:`~rollcheck.pyimpl.simulate.state` — channel items, process state, checkpoints, results;
- :mod:`~rollcheck.pyimpl.simulate.workloads` — what sources emit and operators compute;
- :mod:`~rollcheck.pyimpl.simulate.recovery` — recovery line, channel clearing, log replay;
- :mod:`~rollcheck.pyimpl.simulate.metrics` — FERDiS metrics and the processing-semantics verdict;
- :mod:`~rollcheck.pyimpl.simulate.engine` — the event loop, :func:`simulate`;
- :mod:`~rollcheck.pyimpl.simulate.sweep` — comparison tables.

The protocol of a run is a built-in name or a user's protocol class (``MODULE:CLASS`` or
``path/to/file.py:CLASS``).
"""

from rollcheck.pyimpl.simulate.config import (
    CL_PROTOCOLS,
    PROTOCOL_NAMES,
    SimConfig,
    Variant,
    make_protocol,
)
from rollcheck.pyimpl.simulate.engine import run_engine, simulate
from rollcheck.pyimpl.simulate.metrics import VERDICTS, compute_metrics, semantics
from rollcheck.pyimpl.simulate.recovery import Recovery, lost_from_pattern
from rollcheck.pyimpl.simulate.state import Deadlock, SimResult, SnapshotRecord
from rollcheck.pyimpl.simulate.topology import (
    WORKLOADS,
    Channel,
    Connection,
    Operator,
    Topology,
    workload,
)

__all__ = [
    "CL_PROTOCOLS",
    "PROTOCOL_NAMES",
    "Deadlock",
    "SimConfig",
    "SimResult",
    "SnapshotRecord",
    "Variant",
    "make_protocol",
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
