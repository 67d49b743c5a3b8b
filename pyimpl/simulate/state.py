"""The state of a simulated run: channel items, process state and checkpoints, results.

Everything the event loop (:mod:`~rollcheck.pyimpl.simulate.engine`) and the recovery
(:mod:`~rollcheck.pyimpl.simulate.recovery`) share is defined here, including
:class:`EngineView`, the part of the running engine that recovery works on, so that recovery
never imports the engine (``specs/simulate.md#engine``).

References
----------
.. [1] FERDiS paper, §7.2.1 (checkpointed state), §7.2.7–7.2.8 (sequence numbers, message logs).
"""

from __future__ import annotations

from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol

from rollcheck.pyimpl.pattern import Pattern, PatternBuilder
from rollcheck.pyimpl.protocols import BasicTimer
from rollcheck.pyimpl.simulate.config import SimConfig
from rollcheck.pyimpl.simulate.topology import Topology

__all__ = [
    "WAKE",
    "TIMER",
    "TICK",
    "FAIL",
    "Msg",
    "Saved",
    "Proc",
    "SnapshotRecord",
    "Deadlock",
    "SimResult",
    "EngineView",
]

#: Event kinds of the engine's queue.
WAKE, TIMER, TICK, FAIL = 0, 1, 2, 3


class Msg(NamedTuple):
    """An item on a channel: data (``seq`` >= 1) or a Chandy–Lamport marker (``seq`` == 0)."""

    channel: int
    seq: int
    payload: Any  # data: (key, units, value); marker: snapshot id
    pb: Any  # protocol piggyback (None for markers and replays)
    pid: str | None  # pattern message id (None after the failure)
    inc: int  # sender incarnation at send time
    arrival: float
    replayed: bool = False

    @property
    def is_marker(self) -> bool:
        """Whether the message is a Chandy–Lamport marker (sequence number 0)."""
        return self.seq == 0


@dataclass
class Saved:
    """A checkpoint of one process (all containers are private copies)."""

    time: float
    app: Any  # operator state (a sink saves the length of its append-only unit list)
    out_seq: dict[int, int]
    in_seq: dict[int, int]
    applied: dict[int, int]  # length of each append-only applied-sequence list (a prefix)
    proto: Any
    offset: int
    forced: bool
    recorded: dict[int, list[tuple[int, Any, Any]]] = field(default_factory=dict)


@dataclass
class Proc:
    """The live state of one process of the simulated job.

    Its operator state (``app``), per-channel sequence numbers, applied history, protocol state,
    source offset, timer, Chandy–Lamport state and recording, checkpoints (``saved``), incarnation
    (``inc``) and the sequence numbers to skip after a loss.
    """

    pid: int
    kind: str
    app: Any
    out_seq: dict[int, int]
    in_seq: dict[int, int]
    applied: dict[int, list[int]]
    proto: Any
    offset: int = 0
    busy_until: float = 0.0
    next_emit: float = 0.0
    timer: BasicTimer | None = None
    timer_gen: int = 0
    cl: Any = None
    recording: dict[int, list[tuple[int, Any, Any]]] = field(default_factory=dict)
    saved: list[Saved] = field(default_factory=list)
    inc: int = 0
    skip: dict[int, set[int]] = field(default_factory=dict)


class SnapshotRecord(NamedTuple):
    """A completed Chandy–Lamport snapshot.

    The checkpoint index per process and, per channel, the recorded channel state (pattern message
    ids).
    """

    snapshot: int
    cut: tuple[int, ...]
    recorded: dict[int, tuple[str, ...]]


class Deadlock(NamedTuple):
    """No progress possible: items wait on blocked inputs.

    ``stuck``: operator instances waiting for markers, with their blocked input channels.
    """

    time: float
    stuck: tuple[str, ...]
    waiting: dict[str, tuple[str, ...]]


@dataclass
class SimResult:
    """The outcome of one run (metrics are filled in by :mod:`rollcheck.pyimpl.simulate.metrics`)."""

    config: SimConfig
    topology: Topology
    pattern: Pattern
    checkpoints: dict[str, int]  # regular / forced over the whole run
    events: int
    end_time: float
    outputs: Counter
    snapshots: list[SnapshotRecord]
    deadlock: Deadlock | None
    recovery: Any = None  # rollcheck.pyimpl.simulate.recovery.Recovery
    orphans: int = 0  # deliveries of messages whose send the sender undid by rolling back
    duplicates: int = 0  # (channel, seq) applied more than once in a final state
    dropped: int = 0  # messages the receivers' deduplication discarded
    seconds: float = 0.0
    metrics: dict[str, Any] = field(default_factory=dict)



class EngineView(Protocol):
    """What :func:`rollcheck.pyimpl.simulate.recovery.recover` reads and changes in a running engine."""

    cfg: SimConfig
    topo: Topology
    now: float
    builder: PatternBuilder | None
    procs: list[Proc]
    chan: list[deque[Msg]]
    logs: list[dict[int, Any]]
    undone: dict[int, tuple[int, int]]
    cl: Any
    snapshot_id: int
    snap_pending: set[int]

    def push(self, t: float, kind: int, pid: int = -1, extra: int = 0) -> None:
        """Schedule an event of ``kind`` at time ``t``.

        Parameters
        ----------
        t : float
            The simulated time.
        kind : int
            The event kind (``WAKE``, ``TIMER``, ``TICK`` or ``FAIL``).
        pid : int, optional
            The process (-1: none).
        extra : int, optional
            For a ``TIMER``, the timer generation it belongs to.
        """

    def enqueue(self, m: Msg) -> None:
        """Put ``m`` on its channel with a fresh network delay (FIFO kept)."""

    def restart_timer(self, pr: Proc) -> None:
        """Restart the basic-checkpoint timer of ``pr`` at the current time."""
