"""HMNR, the "fully informed" communication-induced checkpointing protocol.

By Hélary, Mostefaoui, Netzer and Raynal. Process P_i keeps five vectors of length n: ``clock``
(the logical clocks it knows), ``ckpt`` (the checkpoint indices it knows), ``taken`` (whether a
checkpoint of P_k is known to lie on a causal Z-path ending here), ``sent_to`` and ``min_to`` (sent
to P_k in the current interval, and its own clock at the first such send). A delivery is preceded
by a forced checkpoint iff condition C1 (a non-causal Z-path the clocks do not order) or C2 (a
causal Z-cycle back into the current interval) holds, decided *before* the merge. ``ckpt[i] - 1``
is the pattern index of P_i's latest checkpoint (the initial checkpoint procedure starts it at 1).

Guarantee: no checkpoint of the resulting pattern is useless
(``specs/protocols.md#thm-cic-no-useless``); HMNR does *not* guarantee rollback-dependency
trackability. The rules step by step: ``specs/protocols.md#hmnr``.

References
----------
FERDiS paper §5.3 and §7.2.2 (the "FI" protocol);
``specs/protocols.md#hmnr``.
"""

from __future__ import annotations

import sys
from typing import NamedTuple

from typing_extensions import override

from rollcheck.pyimpl.errors import InvalidInputError
from rollcheck.pyimpl.protocols.base import Protocol

__all__ = ["INF", "HMNRState", "HMNRPiggyback", "HMNR"]

#: "No send in this interval" value of ``min_to`` (larger than any clock).
INF = sys.maxsize


class HMNRState(NamedTuple):
    """Immutable state of one process (every vector a tuple of length n)."""

    i: int
    clock: tuple[int, ...]
    ckpt: tuple[int, ...]
    taken: tuple[bool, ...]
    sent_to: tuple[bool, ...]
    min_to: tuple[int, ...]


class HMNRPiggyback(NamedTuple):
    """The sender's (clock, ckpt, taken) captured at send time."""

    clock: tuple[int, ...]
    ckpt: tuple[int, ...]
    taken: tuple[bool, ...]


class HMNR(Protocol):
    """The HMNR protocol, exactly as stated in ``specs/protocols.md#hmnr``.

    Examples
    --------
    P1 sends to P2; then P0 takes a checkpoint and sends to P1. The delivery at P1 would close the
    non-causal Z-path C[0,1] -> P1 -> P2 that no clock orders, so C1 forces:

    >>> h = HMNR()
    >>> p0, p1, p2 = (h.initial(i, 3) for i in range(3))
    >>> p0.clock, p0.ckpt, p0.taken
    ((1, 0, 0), (1, 0, 0), (False, True, True))
    >>> p1, pb12 = h.on_send(p1, 2)
    >>> p0 = h.on_checkpoint(p0)
    >>> p0, pb01 = h.on_send(p0, 1)
    >>> h.c1(p1, 0, pb01), h.c2(p1, 0, pb01)
    (True, False)
    >>> h.must_force(p1, 0, pb01)
    True
    """

    name = "hmnr"
    zcycle_free = True
    description = "fully informed CIC (C1 non-causal Z-paths, C2 causal Z-cycles)"

    @override
    def initial(self, i: int, n: int) -> HMNRState:
        if not 0 <= i < n:
            raise InvalidInputError(f"process index {i} out of range 0..{n - 1}")
        zero = (0,) * n
        st = HMNRState(i, zero, zero, (False,) * n, (False,) * n, (INF,) * n)
        return self.on_checkpoint(st)

    @override
    def on_checkpoint(self, st: HMNRState, forced: bool = False) -> HMNRState:
        i = st.i
        n = len(st.clock)
        clock = list(st.clock)
        clock[i] += 1
        ckpt = list(st.ckpt)
        ckpt[i] += 1
        taken = [True] * n
        taken[i] = False
        return HMNRState(i, tuple(clock), tuple(ckpt), tuple(taken), (False,) * n, (INF,) * n)

    @override
    def on_send(self, st: HMNRState, dst: int) -> tuple[HMNRState, HMNRPiggyback]:
        pb = HMNRPiggyback(st.clock, st.ckpt, st.taken)  # tuples: an immutable copy
        if st.sent_to[dst]:
            return st, pb
        sent_to = list(st.sent_to)
        sent_to[dst] = True
        min_to = list(st.min_to)
        min_to[dst] = st.clock[st.i]
        return st._replace(sent_to=tuple(sent_to), min_to=tuple(min_to)), pb

    # The two conditions are separate methods so that variants can drop or change one.
    def c1(self, st: HMNRState, src: int, pb: HMNRPiggyback) -> bool:
        """Condition C1: a non-causal Z-path that the clocks do not order.

        Some k has ``sent_to[k]``, ``m.clock[j] > min_to[k]`` and ``m.clock[j] > max(clock[k],
        m.clock[k])``; a separate method so that variants can drop or change it.

        Parameters
        ----------
        st : HMNRState
            The receiver's state.
        src : int
            The sending process.
        pb : HMNRPiggyback
            The message's piggyback.
        """
        mj = pb.clock[src]
        clock = st.clock
        mclock = pb.clock
        min_to = st.min_to
        for k, sent in enumerate(st.sent_to):
            if sent and mj > min_to[k] and mj > clock[k] and mj > mclock[k]:
                return True
        return False

    def c2(self, st: HMNRState, src: int, pb: HMNRPiggyback) -> bool:
        """Condition C2: a causal Z-cycle back into the current interval.

        ``m.ckpt[i] == ckpt[i]`` and ``m.taken[i]``; a separate method so that variants can drop it.

        Parameters
        ----------
        st : HMNRState
            The receiver's state.
        src : int
            The sending process.
        pb : HMNRPiggyback
            The message's piggyback.
        """
        i = st.i
        return pb.ckpt[i] == st.ckpt[i] and pb.taken[i]

    @override
    def must_force(self, st: HMNRState, src: int, pb: HMNRPiggyback) -> bool:
        return self.c2(st, src, pb) or self.c1(st, src, pb)

    def merge_skips(self, st: HMNRState, src: int) -> tuple[int, ...]:
        """Indices the merge loop leaves alone (only i itself in the reference).

        Parameters
        ----------
        st : HMNRState
            The receiver's state.
        src : int
            The sending process.
        """
        return (st.i,)

    @override
    def on_deliver(self, st: HMNRState, src: int, pb: HMNRPiggyback) -> HMNRState:
        i = st.i
        mclock, mckpt, mtaken = pb.clock, pb.ckpt, pb.taken
        clock = list(map(max, st.clock, mclock))
        ckpt = list(st.ckpt)
        taken = list(st.taken)
        for k, (a, b) in enumerate(zip(st.ckpt, mckpt, strict=True)):
            if b > a:
                ckpt[k] = b
                taken[k] = mtaken[k]
            elif b == a and mtaken[k]:
                taken[k] = True
        skips = self.merge_skips(st, src)
        for k in skips:
            if k != i:
                clock[k] = st.clock[k]
            ckpt[k] = st.ckpt[k]
            taken[k] = st.taken[k]
        mi = mclock[src]
        ci = st.clock[i]
        clock[i] = mi if mi > ci else ci
        return HMNRState(i, tuple(clock), tuple(ckpt), tuple(taken), st.sent_to, st.min_to)
