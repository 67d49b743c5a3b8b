"""Running a protocol over a pattern: the basic checkpoints are given, the forced ones decided.

The input pattern's ``checkpoint`` events are the basic checkpoints (their ``forced`` flags are
ignored); its sends and deliveries are the communication, in the given global order. At each
delivery the protocol decides, before merging the piggyback, whether a forced checkpoint is
inserted immediately before it.

References
----------
``specs/protocols.md#run``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rollcheck.pyimpl.errors import InvalidInputError
from rollcheck.pyimpl.pattern import CHECKPOINT, DELIVER, SEND, Event, Pattern
from rollcheck.pyimpl.protocols.base import Protocol, checkpoint_function
from rollcheck.pyimpl.protocols.catalog import get_protocol

__all__ = ["ProtocolRun", "run_protocol", "strip_forced"]


@dataclass(frozen=True)
class ProtocolRun:
    """The outcome of :func:`run_protocol`.

    Attributes
    ----------
    protocol : str
        Name of the protocol.
    pattern : Pattern
        The resulting pattern: the input with forced checkpoints (``forced=True``) inserted.
    forced_messages : tuple of str
        Ids of the messages whose delivery was preceded by a forced checkpoint, in event order.
    basic_checkpoints, forced_checkpoints : int
        Counts of each kind of checkpoint (initial checkpoints not counted).
    piggybacks : dict
        Message id -> the piggyback it carried.
    final_states : tuple
        Each process's protocol state after its last event.
    """

    protocol: str
    pattern: Pattern
    forced_messages: tuple[str, ...]
    basic_checkpoints: int
    forced_checkpoints: int
    piggybacks: dict[str, Any] = field(repr=False)
    final_states: tuple[Any, ...] = field(repr=False)


def run_protocol(protocol: str | Protocol, pattern: Pattern) -> ProtocolRun:
    """Run ``protocol`` over ``pattern``'s communication with its checkpoints as the basic ones.

    Parameters
    ----------
    protocol : str or Protocol
        A name from :data:`rollcheck.pyimpl.protocols.PROTOCOLS` (or a variant) or a protocol object.
    pattern : Pattern
        The basic schedule.

    Returns
    -------
    ProtocolRun

    Raises
    ------
    InvalidInputError
        If the protocol name is unknown.

    Examples
    --------
    A causal Z-cycle (m0 delivered before C[0,1], m1 sent after it, m0 sent in the interval that
    delivers m1): HMNR's C2 forces a checkpoint before delivering m1, UC does not.

    >>> from rollcheck.pyimpl.pattern import PatternBuilder
    >>> b = PatternBuilder(2)
    >>> m0 = b.send(1, 0)
    >>> b.deliver(0, m0)
    >>> _ = b.checkpoint(0)
    >>> m1 = b.send(0, 1)
    >>> b.deliver(1, m1)
    >>> run = run_protocol("hmnr", b.build())
    >>> run.forced_messages, run.basic_checkpoints, run.forced_checkpoints
    (('m1',), 1, 1)
    >>> run_protocol("uc", b.build()).forced_messages
    ()
    """
    proto = get_protocol(protocol) if isinstance(protocol, str) else protocol
    if not isinstance(proto, Protocol):
        raise InvalidInputError(f"not a protocol: {protocol!r}")
    n = pattern.n
    states = [proto.initial(i, n) for i in range(n)]
    on_send = proto.on_send
    on_deliver = proto.on_deliver
    on_checkpoint = checkpoint_function(proto)
    must_force = proto.must_force
    sender = {m.id: m.sender for m in pattern.messages}
    piggybacks: dict[str, Any] = {}
    events: list[Event] = []
    append = events.append
    forced: list[str] = []
    basic = 0
    for ev in pattern.events:
        i = ev.process
        kind = ev.kind
        if kind == SEND:
            states[i], piggybacks[ev.message] = on_send(states[i], ev.to)  # type: ignore[index, arg-type]
            append(ev)
        elif kind == DELIVER:
            mid = ev.message
            src = sender[mid]  # type: ignore[index]
            pb = piggybacks[mid]  # type: ignore[index]
            st = states[i]
            if must_force(st, src, pb):
                st = on_checkpoint(st, True)
                append(Event(i, CHECKPOINT, None, None, True))
                forced.append(mid)  # type: ignore[arg-type]
            states[i] = on_deliver(st, src, pb)
            append(ev)
        else:
            assert kind == CHECKPOINT
            states[i] = on_checkpoint(states[i], False)
            basic += 1
            append(ev if not ev.forced else Event(i, CHECKPOINT))
    out = Pattern(pattern.processes, tuple(events))
    return ProtocolRun(proto.name, out, tuple(forced), basic, len(forced), piggybacks, tuple(states))


def strip_forced(pattern: Pattern) -> Pattern:
    """The pattern without its forced checkpoints (the basic schedule a protocol run started from).

    Examples
    --------
    >>> from rollcheck.pyimpl.pattern import PatternBuilder
    >>> b = PatternBuilder(2)
    >>> _ = b.checkpoint(0, forced=True)
    >>> strip_forced(b.build()).events
    ()
    """
    return Pattern(pattern.processes, tuple(e for e in pattern.events if not (e.kind == CHECKPOINT and e.forced)))
