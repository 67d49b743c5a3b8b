"""Checkpointing protocols as pure state machines: UC, BCS, HMNR (+ variants), Chandy–Lamport.

Quick reference (``specs/protocols.md``)::

    proto = get_protocol("hmnr")
    st = proto.initial(i, n)                 # after the initial checkpoint C[i,0]
    st = proto.on_checkpoint(st)             # basic or forced
    st, pb = proto.on_send(st, dst)          # pb: piggyback captured at send time
    if proto.must_force(st, src, pb):        # decided before merging
        st = proto.on_checkpoint(st)         # forced checkpoint
    st = proto.on_deliver(st, src, pb)       # merge + deliver
    run = run_protocol("hmnr", pattern)      # ProtocolRun(pattern, forced_messages, ...)

Snapshots for operator graphs: ``get_snapshot_protocol("cl-aligned" | "cl-unaligned")``.
Basic-checkpoint policy: :class:`BasicTimer` (restarts after any checkpoint).
"""

from rollcheck.pyimpl.protocols.base import Protocol
from rollcheck.pyimpl.protocols.bcs import BCS, BCSState
from rollcheck.pyimpl.protocols.catalog import PROTOCOLS, VARIANTS, get_protocol
from rollcheck.pyimpl.protocols.chandy_lamport import (
    SNAPSHOT_PROTOCOLS,
    AlignedNoBlock,
    AlignedSnapshot,
    CLAction,
    CLState,
    SnapshotProtocol,
    UnalignedSnapshot,
    get_snapshot_protocol,
)
from rollcheck.pyimpl.protocols.hmnr import HMNR, HMNRPiggyback, HMNRState
from rollcheck.pyimpl.protocols.loader import is_builtin_spec, protocol_label, resolve_protocol
from rollcheck.pyimpl.protocols.run import ProtocolRun, run_protocol, strip_forced
from rollcheck.pyimpl.protocols.timer import BasicTimer, count_schedule
from rollcheck.pyimpl.protocols.uc import UC, UCState

__all__ = [
    "Protocol",
    "PROTOCOLS",
    "VARIANTS",
    "get_protocol",
    "resolve_protocol",
    "is_builtin_spec",
    "protocol_label",
    "run_protocol",
    "strip_forced",
    "ProtocolRun",
    "UC",
    "UCState",
    "BCS",
    "BCSState",
    "HMNR",
    "HMNRState",
    "HMNRPiggyback",
    "BasicTimer",
    "count_schedule",
    "SNAPSHOT_PROTOCOLS",
    "SnapshotProtocol",
    "AlignedSnapshot",
    "UnalignedSnapshot",
    "AlignedNoBlock",
    "CLAction",
    "CLState",
    "get_snapshot_protocol",
]
