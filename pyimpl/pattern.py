"""Checkpoint-and-communication patterns: the immutable model every analysis works on.

Conventions (``specs/conventions.md``): processes are numbered 0..n-1 in the order of
``processes``; every process has an implicit initial checkpoint C[i,0]; its k-th ``checkpoint``
event creates C[i,k]. Interval I[i,x] holds the events after C[i,x] and before C[i,x+1]; the last
interval ends at the volatile state V[i] = C[i,last+1]. A message *sent in I[i,x]* has
``send_interval == x``: x is the number of checkpoints P_i took before the send.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, NamedTuple

from rollcheck.pyimpl.errors import InvalidInputError

__all__ = [
    "SEND",
    "DELIVER",
    "CHECKPOINT",
    "KINDS",
    "Event",
    "Message",
    "Checkpoint",
    "Pattern",
    "PatternBuilder",
]

SEND = "send"
DELIVER = "deliver"
CHECKPOINT = "checkpoint"
KINDS = (SEND, DELIVER, CHECKPOINT)


class Event(NamedTuple):
    """One event of the global order. ``process`` and ``to`` are process indices."""

    process: int
    kind: str
    message: str | None = None
    to: int | None = None
    forced: bool = False


class Message(NamedTuple):
    """A message with the intervals of its send and (if any) delivery.

    ``deliver_interval`` and ``deliver_event`` are ``None`` for a message in transit.
    """

    id: str
    sender: int
    receiver: int
    send_interval: int
    deliver_interval: int | None
    send_event: int
    deliver_event: int | None

    @property
    def delivered(self) -> bool:
        """Whether the message was delivered."""
        return self.deliver_interval is not None


class Checkpoint(NamedTuple):
    """C[process, index]; ``index == last + 1`` denotes the volatile state V[process]."""

    process: int
    index: int  # type: ignore[assignment]  # (shadows tuple.index on purpose: the JSON key)


@dataclass(frozen=True, eq=False)
class Pattern:
    """An immutable checkpoint-and-communication pattern.

    Parameters
    ----------
    processes : sequence of str
        Process names, in order; their positions are the process indices.
    events : sequence of Event
        One global order of all events that respects causality.

    Raises
    ------
    InvalidInputError
        Naming the offending ``events[k]`` (unknown process, delivery before send, delivery by the
        wrong process, self-send, duplicate message id, duplicate delivery, unknown kind).

    Examples
    --------
    >>> b = PatternBuilder(["P0", "P1"])
    >>> m = b.send(0, 1)
    >>> b.checkpoint(1)
    1
    >>> b.deliver(1, m)
    >>> p = b.build()
    >>> p.last_index(1), p.messages[0].send_interval, p.messages[0].deliver_interval
    (1, 0, 1)
    """

    processes: tuple[str, ...]
    events: tuple[Event, ...]
    # Derived, filled in by __post_init__ (or trusted from a loader that already validated).
    _msg_sender: list[int] = field(init=False, repr=False)
    _msg_receiver: list[int] = field(init=False, repr=False)
    _msg_send_interval: list[int] = field(init=False, repr=False)
    _msg_deliver_interval: list[int] = field(init=False, repr=False)
    _msg_send_event: list[int] = field(init=False, repr=False)
    _msg_deliver_event: list[int] = field(init=False, repr=False)
    _msg_ids: list[str] = field(init=False, repr=False)
    _checkpoint_events: tuple[tuple[int, ...], ...] = field(init=False, repr=False)
    _forced: tuple[tuple[bool, ...], ...] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "processes", tuple(self.processes))
        object.__setattr__(self, "events", tuple(self.events))
        _analyse(self)

    # ------------------------------------------------------------------ basic facts
    @property
    def n(self) -> int:
        """Number of processes."""
        return len(self.processes)

    def last_index(self, process: int) -> int:
        """Index of the last real checkpoint of ``process`` (0 if it only has the initial one)."""
        return len(self._checkpoint_events[process]) - 1

    @property
    def last_indices(self) -> tuple[int, ...]:
        """Per process, the index of its last checkpoint."""
        return tuple(len(c) - 1 for c in self._checkpoint_events)

    def volatile_index(self, process: int) -> int:
        """The index that stands for V[process]: last + 1."""
        return len(self._checkpoint_events[process])

    def is_forced(self, process: int, index: int) -> bool:
        """Whether checkpoint C[process, index] was forced by the protocol.

        Parameters
        ----------
        process : int
            The process.
        index : int
            The checkpoint's index on it (0: the initial one).
        """
        return self._forced[process][index]

    def checkpoint_event(self, process: int, index: int) -> int:
        """Position in ``events`` of the checkpoint (-1 for the initial one).

        Parameters
        ----------
        process : int
            The process.
        index : int
            The checkpoint's index on it (0: the initial one).
        """
        return self._checkpoint_events[process][index]

    def checkpoints(self, include_initial: bool = True) -> list[Checkpoint]:
        """All real checkpoints, in process order then index order."""
        start = 0 if include_initial else 1
        return [
            Checkpoint(i, x)
            for i in range(self.n)
            for x in range(start, len(self._checkpoint_events[i]))
        ]

    @property
    def num_messages(self) -> int:
        """Number of messages sent."""
        return len(self._msg_ids)

    @cached_property
    def messages(self) -> tuple[Message, ...]:
        """All messages in the order of their sends."""
        out = []
        for k in range(len(self._msg_ids)):
            d = self._msg_deliver_interval[k]
            out.append(
                Message(
                    self._msg_ids[k],
                    self._msg_sender[k],
                    self._msg_receiver[k],
                    self._msg_send_interval[k],
                    None if d < 0 else d,
                    self._msg_send_event[k],
                    None if d < 0 else self._msg_deliver_event[k],
                )
            )
        return tuple(out)

    @cached_property
    def delivered_sends(self) -> tuple[tuple[tuple[int, ...], ...], tuple[tuple[int, ...], ...]]:
        """Per process: the *delivered* messages it sent and their send intervals.

        Positions in :attr:`messages`, in send order; computed once, the Z-path searches share it.

        Examples
        --------
        >>> b = PatternBuilder(2); m = b.send(0, 1); c = b.checkpoint(0); k = b.send(0, 1); b.deliver(1, k)
        >>> b.build().delivered_sends
        (((1,), ()), ((1,), ()))
        """
        sends: list[list[int]] = [[] for _ in self.processes]
        ivals: list[list[int]] = [[] for _ in self.processes]
        for idx, d in enumerate(self._msg_deliver_interval):
            if d >= 0:
                s = self._msg_sender[idx]
                sends[s].append(idx)
                ivals[s].append(self._msg_send_interval[idx])
        return tuple(map(tuple, sends)), tuple(map(tuple, ivals))

    @cached_property
    def message_by_id(self) -> dict[str, Message]:
        """The messages by their id."""
        return {m.id: m for m in self.messages}

    @property
    def in_transit(self) -> list[Message]:
        """Messages sent and never delivered."""
        return [m for m in self.messages if m.deliver_interval is None]

    def process_index(self, name: str) -> int:
        """Index of the process called ``name``."""
        try:
            return self._process_pos[name]
        except KeyError:
            raise InvalidInputError(f"unknown process {name!r}") from None

    @cached_property
    def _process_pos(self) -> dict[str, int]:
        return {name: i for i, name in enumerate(self.processes)}

    def checkpoint_name(self, c: tuple[int, int]) -> str:
        """``P0:1`` style name of a checkpoint; V is written ``P0:V``."""
        i, x = c
        return f"{self.processes[i]}:{'V' if x == self.volatile_index(i) else x}"

    @cached_property
    def arrays(self) -> PatternArrays:
        """Compact integer-array view for the fast algorithms (numpy)."""
        import numpy as np

        return PatternArrays(
            sender=np.asarray(self._msg_sender, dtype=np.int64),
            receiver=np.asarray(self._msg_receiver, dtype=np.int64),
            send_interval=np.asarray(self._msg_send_interval, dtype=np.int64),
            deliver_interval=np.asarray(self._msg_deliver_interval, dtype=np.int64),
            last=np.asarray(self.last_indices, dtype=np.int64),
        )

    def __len__(self) -> int:
        return len(self.events)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Pattern):
            return NotImplemented
        return self.processes == other.processes and self.events == other.events

    def __hash__(self) -> int:
        return hash((self.processes, self.events))

    def __deepcopy__(self, memo: dict[int, Any]) -> Pattern:
        """A pattern is immutable: its deep copy is itself.

        The property runner deep-copies every drawn value; copying the derived arrays and
        caches each time was pure cost.
        """
        return self

    def __repr__(self) -> str:
        return (
            f"Pattern(processes={list(self.processes)}, events={len(self.events)}, "
            f"messages={self.num_messages}, checkpoints={list(self.last_indices)})"
        )


class PatternArrays(NamedTuple):
    """Per-message integer arrays (``deliver_interval`` is -1 for messages in transit)."""

    sender: Any
    receiver: Any
    send_interval: Any
    deliver_interval: Any
    last: Any


def _analyse(p: Pattern) -> None:
    """Validate ``p.events`` in one pass and fill in the derived per-message arrays."""
    n = len(p.processes)
    if len(set(p.processes)) != n:
        raise InvalidInputError("process names must be unique", location="processes")
    ids: list[str] = []
    sender: list[int] = []
    receiver: list[int] = []
    s_int: list[int] = []
    d_int: list[int] = []
    s_ev: list[int] = []
    d_ev: list[int] = []
    pos: dict[str, int] = {}
    ckpt_events: list[list[int]] = [[-1] for _ in range(n)]
    forced: list[list[bool]] = [[False] for _ in range(n)]
    count = [0] * n
    for k, ev in enumerate(p.events):
        proc = ev.process
        if type(proc) is not int or not 0 <= proc < n:
            raise InvalidInputError(f"unknown process {proc!r}", location=f"events[{k}]")
        kind = ev.kind
        if kind == SEND:
            mid = ev.message
            to = ev.to
            if not isinstance(mid, str):
                raise InvalidInputError("send without a message id", location=f"events[{k}]")
            if type(to) is not int or not 0 <= to < n:
                raise InvalidInputError(f"send of {mid!r} to unknown process {to!r}", location=f"events[{k}]")
            if to == proc:
                raise InvalidInputError(f"self-send of message {mid!r}", location=f"events[{k}]")
            if mid in pos:
                raise InvalidInputError(f"duplicate message id {mid!r}", location=f"events[{k}]")
            pos[mid] = len(ids)
            ids.append(mid)
            sender.append(proc)
            receiver.append(to)
            s_int.append(count[proc])
            d_int.append(-1)
            s_ev.append(k)
            d_ev.append(-1)
        elif kind == DELIVER:
            mid = ev.message
            j = pos.get(mid) if isinstance(mid, str) else None
            if j is None:
                raise InvalidInputError(f"delivery of message {mid!r} before its send", location=f"events[{k}]")
            if receiver[j] != proc:
                raise InvalidInputError(
                    f"message {mid!r} is addressed to {p.processes[receiver[j]]!r}, "
                    f"delivered by {p.processes[proc]!r}",
                    location=f"events[{k}]",
                )
            if d_int[j] >= 0:
                raise InvalidInputError(f"duplicate delivery of message {mid!r}", location=f"events[{k}]")
            d_int[j] = count[proc]
            d_ev[j] = k
        elif kind == CHECKPOINT:
            count[proc] += 1
            ckpt_events[proc].append(k)
            forced[proc].append(bool(ev.forced))
        else:
            raise InvalidInputError(f"unknown kind {kind!r}", location=f"events[{k}]")
    s = object.__setattr__
    s(p, "_msg_ids", ids)
    s(p, "_msg_sender", sender)
    s(p, "_msg_receiver", receiver)
    s(p, "_msg_send_interval", s_int)
    s(p, "_msg_deliver_interval", d_int)
    s(p, "_msg_send_event", s_ev)
    s(p, "_msg_deliver_event", d_ev)
    s(p, "_checkpoint_events", tuple(tuple(c) for c in ckpt_events))
    s(p, "_forced", tuple(tuple(f) for f in forced))


class PatternBuilder:
    """Build a pattern event by event (protocols, simulators and strategies use this).

    Message ids are generated as ``m0, m1, ...`` unless given.

    Examples
    --------
    >>> b = PatternBuilder(2)
    >>> b.deliver(1, b.send(0, 1))
    >>> b.build().processes
    ('P0', 'P1')
    """

    def __init__(self, processes: int | Sequence[str]):
        if isinstance(processes, int):
            processes = [f"P{i}" for i in range(processes)]
        self.processes = tuple(processes)
        self.events: list[Event] = []
        self._next_id = 0
        self._count = [0] * len(self.processes)

    def send(self, src: int, dst: int, message: str | None = None) -> str:
        """Append a send from ``src`` to ``dst``; return its message id (``m<k>`` unless given).

        Parameters
        ----------
        src, dst : int
            The sending and the receiving process.
        message : str, optional
            The message id (None: the next ``m<k>``).
        """
        if message is None:
            message = f"m{self._next_id}"
            self._next_id += 1
        self.events.append(Event(src, SEND, message, dst))
        return message

    def deliver(self, dst: int, message: str) -> None:
        """Append the delivery of ``message`` to ``dst``.

        Parameters
        ----------
        dst : int
            The receiving process.
        message : str
            The id of a message sent to it.
        """
        self.events.append(Event(dst, DELIVER, message))

    def checkpoint(self, process: int, forced: bool = False) -> int:
        """Append a checkpoint and return its index.

        Parameters
        ----------
        process : int
            The checkpointing process.
        forced : bool, optional
            The checkpoint was forced by the protocol.
        """
        self.events.append(Event(process, CHECKPOINT, forced=forced))
        self._count[process] += 1
        return self._count[process]

    def extend(self, events: Iterable[Event]) -> None:
        """Append ``events`` in order."""
        for ev in events:
            if ev.kind == CHECKPOINT:
                self._count[ev.process] += 1
            self.events.append(ev)

    def build(self) -> Pattern:
        """The :class:`Pattern` of the events appended so far."""
        return Pattern(self.processes, tuple(self.events))
