"""The runtime objects of the elastic simulator: a task, a message, and what a run produced.

A task holds its keys, its running status (state, the IST/OST records, the output queue) and its
ACK bookkeeping; a message carries a data slice or an L0/L1 ACK (SPATE §5.1.1).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rollcheck.pyimpl.elastic.config import Config
from rollcheck.pyimpl.elastic.rules import Checkpoint
from rollcheck.pyimpl.elastic.slices import Event, OutputQueue, SliceRecord

__all__ = ["Task", "Message", "RunResult"]


@dataclass
class Task:
    """One task: its keys, running status (state, IST/OST records, queue) and ACK bookkeeping."""

    id: str
    level: int
    keys: frozenset[int]
    stateful: bool
    incarnation: int = 0
    state: dict[int, int] = field(default_factory=dict)
    in_wm: dict[int, int] = field(default_factory=dict)  # last input seq accepted, per key
    received: dict[int, int] = field(default_factory=dict)  # last input seq received (L0 content)
    inbox: list[Event] = field(default_factory=list)
    queue: OutputQueue = field(default_factory=OutputQueue)
    records: list[SliceRecord] = field(default_factory=list)
    succ_l0: dict[int, int] = field(default_factory=dict)  # successors' L0 watermarks, per key
    l1_sent: dict[int, int] = field(default_factory=dict)  # L1 watermarks sent upstream, per key
    pending_l1: list[dict[int, int]] = field(default_factory=list)  # held back (Rules.l1_delay)
    checkpoint: Checkpoint | None = None


@dataclass
class Message:
    """A message between tasks: ``data`` (a ``Slice``) or an ``l0``/``l1`` ACK (key -> seq)."""

    kind: str  # "data" | "l0" | "l1"
    src: str
    dst: str
    payload: Any  # Slice for data, dict[key, seq] for acks


@dataclass
class RunResult:
    """What a run produced: the sink's accepted events, queue maxima, recoveries, step count."""

    config: Config
    steps: int
    rounds_run: int
    sink: list[Event]
    duplicates_dropped: int
    max_queue: dict[int, int]  # per level (0 = source .. n), max events in one task's queue
    recoveries: list[dict[str, Any]]
    scalings: list[dict[str, Any]]
    violations: list[str]  # trim-safety violations found (only with check_trim=True)
    checkpoint_events: int = 0  # output events stored in checkpoints (the data buffers), summed

    def output_by_key(self) -> dict[int, list[tuple[int, int]]]:
        """The sink's ``(seq, value)`` pairs per key, keys in order."""
        out: dict[int, list[tuple[int, int]]] = {}
        for e in self.sink:
            out.setdefault(e.key, []).append((e.seq, e.value))
        return dict(sorted(out.items()))

    def to_dict(self) -> dict[str, Any]:
        """The run's counters as a JSON-ready dict."""
        return {
            "steps": self.steps,
            "rounds_run": self.rounds_run,
            "sink_events": len(self.sink),
            "duplicates_dropped": self.duplicates_dropped,
            "max_queue": {str(k): v for k, v in sorted(self.max_queue.items())},
            "recoveries": self.recoveries,
            "scalings": self.scalings,
            "trim_violations": self.violations[:10],
            "checkpoint_buffer_events": self.checkpoint_events,
        }

