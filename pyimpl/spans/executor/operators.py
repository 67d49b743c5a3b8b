"""Operators of the example executor: deterministic functions from one input message to messages.

Sources, maps, per-time sums, sinks, a bridge, and loop entry/body/exit.

References
----------
.. [1] I. Gog, M. Isard, M. Abadi. "Falkirk Wheel: Rollback Recovery for Dataflow Systems",
   SoCC 2021, §3.1 (time domains), §3.2 (transformers: bridge, loop entry/feedback/exit), §3.4 (state
   partitioned by time).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any

from typing_extensions import override

Time = Any

__all__ = ['Op', 'Source', 'Map', 'Counter_', 'SumPerTime', 'Sink', 'BridgeOp', 'LoopEntryOp', 'LoopBody', 'LoopExitOp']

class Op(ABC):
    """A deterministic operator of the example executor.

    ``process`` updates ``state`` and returns the messages to send as ``(edge, time | None,
    payload)``; ``None`` asks for the next sequence number on a seq edge.
    """

    domain = "epoch"  # "epoch" | "loop" | "seq": the domain of the times it receives

    @abstractmethod
    def process(self, state: dict, outs: list[str], time: Time, payload: Any) -> list[tuple[str, Any, Any]]:
        """Update ``state`` for one input message and return the messages to send.

        Parameters
        ----------
        state : dict
            The processor's state, updated in place.
        outs : list of str
            Its out-edges.
        time : Time
            The message's time.
        payload : object
            The message's payload.

        Returns
        -------
        list of tuple
            ``(edge, time, payload)`` per message to send (time None: the next sequence number).
        """


@dataclass
class Source(Op):
    """Reads input batches ``batches[epoch]`` and forwards each record on every out edge."""

    batches: dict[int, list[Any]] = field(default_factory=dict)
    seq_out: bool = False

    @override
    def process(self, state, outs, time, payload):
        return [(e, None if self.seq_out else time, payload) for e in outs]


@dataclass
class Map(Op):
    """Stateless: forwards ``f(payload)`` at the same time (``f`` is ``(a, b)``: ``a*x + b``)."""

    f: tuple[int, int] = (1, 0)
    domain: str = "epoch"

    @override
    def process(self, state, outs, time, payload):
        a, b = self.f
        return [(e, time, a * payload + b) for e in outs]


@dataclass
class Counter_(Op):
    """Sequence-number operator with state: numbers each record it sees.

    It forwards ``(count, payload)`` on its (seq) out edges.
    """

    domain: str = "seq"

    @override
    def process(self, state, outs, time, payload):
        state["n"] = state.get("n", 0) + 1
        return [(e, None, (state["n"], payload)) for e in outs]


@dataclass
class SumPerTime(Op):
    """Keeps a sum per logical time (state partitioned by time: selective rollback, Fig. 4)."""

    domain: str = "epoch"

    @override
    def process(self, state, outs, time, payload):
        v = payload if isinstance(payload, int) else payload[-1]
        state[time] = state.get(time, 0) + v
        return [(e, time, v) for e in outs]


@dataclass
class Sink(Op):
    """Records every received record per time (its state is the output)."""

    domain: str = "epoch"

    @override
    def process(self, state, outs, time, payload):
        state.setdefault(time, []).append(payload)
        return []


@dataclass
class BridgeOp(Op):
    """Epochs in, sequence numbers out (§3.2): forwards in epoch order (its input is FIFO)."""

    @override
    def process(self, state, outs, time, payload):
        return [(e, None, (time, payload)) for e in outs]


@dataclass
class LoopEntryOp(Op):
    """Epoch ``t`` in, loop time ``(t, 0)`` out."""

    @override
    def process(self, state, outs, time, payload):
        return [(e, (time, 0), payload) for e in outs]


@dataclass
class LoopBody(Op):
    """Halves a value each iteration.

    ``v > 1`` goes round the feedback edge at ``(t, c+1)``, otherwise leaves on the exit edge;
    ``outs[0]`` is the feedback edge, ``outs[1]`` the exit.
    """

    domain: str = "loop"

    @override
    def process(self, state, outs, time, payload):
        t, c = time
        state[time] = state.get(time, 0) + 1
        if payload > 1:
            return [(outs[0], (t, c + 1), payload // 2)]
        return [(outs[1], time, (c, payload))]


@dataclass
class LoopExitOp(Op):
    """Loop time ``(t, c)`` in, epoch ``t`` out."""

    domain: str = "loop"

    @override
    def process(self, state, outs, time, payload):
        return [(e, time[0], payload) for e in outs]

