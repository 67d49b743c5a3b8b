"""Deliberately changed protocols: the mutation catalogue's variants of HMNR and BCS.

Each variant is a real :class:`~rollcheck.pyimpl.protocols.base.Protocol` (usable by ``run_protocol``, the
simulator and ``rollcheck protocol``). Two kinds:

*Unsafe* (``zcycle_free = False``; useless checkpoints appear on some schedule):

- ``hmnr-no-c1``: never forces on C1 (misses non-causal Z-paths);
- ``hmnr-no-c2``: never forces on C2 (misses causal Z-cycles);
- ``hmnr-merge-skip-sender``: the merge loop skips the sender j as well as i;
- ``hmnr-merge-own-index``: the own clock is merged with ``m.clock[i]`` instead of ``m.clock[j]``;
- ``hmnr-taken-overwrite``: when ``m.ckpt[k] == ckpt[k]`` the merge sets ``taken[k] = m.taken[k]``
  instead of OR-ing it in;
- ``hmnr-piggyback-at-delivery``: the piggyback is read from the sender's state at *delivery* time
  instead of being copied at send time;
- ``bcs-no-force``: BCS that adopts a larger index but never takes the forced checkpoint.

*Safe but costlier* (``zcycle_free = True``; more forced checkpoints than HMNR):

- ``hmnr-no-minto``: C1 without the ``m.clock[j] > min_to[k]`` conjunct;
- ``hmnr-minto-every-send``: ``min_to[k] = min(clock[k], clock[i])`` recomputed at every send;
- ``bcs-geq``: BCS forcing iff ``m.lc >= lc``.

References
----------
``specs/protocols.md`` ("variants that look harmless but are not");
``specs/protocols.md#variants``.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from rollcheck.pyimpl.protocols.base import Protocol
from rollcheck.pyimpl.protocols.bcs import BCS, BCSState
from rollcheck.pyimpl.protocols.hmnr import HMNR, HMNRPiggyback, HMNRState

__all__ = [
    "HMNRNoC1",
    "HMNRNoC2",
    "HMNRMergeSkipSender",
    "HMNRMergeOwnIndex",
    "HMNRTakenOverwrite",
    "HMNRPiggybackAtDelivery",
    "HMNRNoMinTo",
    "HMNRMinToEverySend",
    "BCSNoForce",
    "BCSGeq",
    "UNSAFE_VARIANTS",
    "SAFE_VARIANTS",
]


class HMNRNoC1(HMNR):
    name = "hmnr-no-c1"
    zcycle_free = False
    description = "HMNR without condition C1"

    def c1(self, st: HMNRState, src: int, pb: HMNRPiggyback) -> bool:
        return False


class HMNRNoC2(HMNR):
    name = "hmnr-no-c2"
    zcycle_free = False
    description = "HMNR without condition C2"

    def c2(self, st: HMNRState, src: int, pb: HMNRPiggyback) -> bool:
        return False


class HMNRMergeSkipSender(HMNR):
    name = "hmnr-merge-skip-sender"
    zcycle_free = False
    description = "HMNR whose merge loop skips the sender j (k != i, j)"

    def merge_skips(self, st: HMNRState, src: int) -> tuple[int, ...]:
        return (st.i, src)


class HMNRMergeOwnIndex(HMNR):
    name = "hmnr-merge-own-index"
    zcycle_free = False
    description = "HMNR merging its own clock with m.clock[i] instead of m.clock[j]"

    def on_deliver(self, st: HMNRState, src: int, pb: HMNRPiggyback) -> HMNRState:
        out = super().on_deliver(st, src, pb)
        i = st.i
        clock = list(out.clock)
        clock[i] = max(st.clock[i], pb.clock[i])
        return out._replace(clock=tuple(clock))


class HMNRTakenOverwrite(HMNR):
    name = "hmnr-taken-overwrite"
    zcycle_free = False
    description = "HMNR whose merge overwrites taken[k] with m.taken[k] on equal ckpt[k] (no OR)"

    def on_deliver(self, st: HMNRState, src: int, pb: HMNRPiggyback) -> HMNRState:
        out = super().on_deliver(st, src, pb)
        taken = list(out.taken)
        for k in range(len(taken)):
            if k != st.i and pb.ckpt[k] == st.ckpt[k]:
                taken[k] = pb.taken[k]
        return out._replace(taken=tuple(taken))


class HMNRNoMinTo(HMNR):
    name = "hmnr-no-minto"
    zcycle_free = True
    description = "HMNR without the min_to conjunct of C1 (safe, forces more)"

    def c1(self, st: HMNRState, src: int, pb: HMNRPiggyback) -> bool:
        mj = pb.clock[src]
        for k, sent in enumerate(st.sent_to):
            if sent and mj > st.clock[k] and mj > pb.clock[k]:
                return True
        return False


class HMNRMinToEverySend(HMNR):
    name = "hmnr-minto-every-send"
    zcycle_free = True
    description = "HMNR with min_to[k] = min(clock[k], clock[i]) at every send (safe, forces more)"

    def on_send(self, st: HMNRState, dst: int) -> tuple[HMNRState, HMNRPiggyback]:
        pb = HMNRPiggyback(st.clock, st.ckpt, st.taken)
        sent_to = list(st.sent_to)
        sent_to[dst] = True
        min_to = list(st.min_to)
        min_to[dst] = min(st.clock[dst], st.clock[st.i])
        return st._replace(sent_to=tuple(sent_to), min_to=tuple(min_to)), pb


class _Cell:
    """A mutable box holding a process's current HMNR state (what a pointer would see)."""

    __slots__ = ("state",)

    def __init__(self, state: HMNRState):
        self.state = state


class LiveState(NamedTuple):
    """HMNR state plus the shared cell that always holds the latest state of the process."""

    inner: HMNRState
    cell: _Cell

    @property
    def i(self) -> int:
        return self.inner.i


class _LivePiggyback:
    """A piggyback that reads the sender's vectors when it is *used*, not when it was sent."""

    __slots__ = ("cell",)

    def __init__(self, cell: _Cell):
        self.cell = cell

    @property
    def clock(self) -> tuple[int, ...]:
        return self.cell.state.clock

    @property
    def ckpt(self) -> tuple[int, ...]:
        return self.cell.state.ckpt

    @property
    def taken(self) -> tuple[bool, ...]:
        return self.cell.state.taken

    def __repr__(self) -> str:
        return f"<live piggyback of P{self.cell.state.i}>"


class HMNRPiggybackAtDelivery(Protocol):
    name = "hmnr-piggyback-at-delivery"
    zcycle_free = False
    description = "HMNR reading the piggyback from the sender's state at delivery time"

    def __init__(self) -> None:
        self._h = HMNR()

    def _wrap(self, st: LiveState, inner: HMNRState) -> LiveState:
        st.cell.state = inner
        return LiveState(inner, st.cell)

    def initial(self, i: int, n: int) -> LiveState:
        inner = self._h.initial(i, n)
        return LiveState(inner, _Cell(inner))

    def on_checkpoint(self, st: LiveState, forced: bool = False) -> LiveState:
        return self._wrap(st, self._h.on_checkpoint(st.inner))

    def on_send(self, st: LiveState, dst: int) -> tuple[LiveState, Any]:
        inner, _ = self._h.on_send(st.inner, dst)
        return self._wrap(st, inner), _LivePiggyback(st.cell)

    def must_force(self, st: LiveState, src: int, pb: Any) -> bool:
        return self._h.must_force(st.inner, src, pb)

    def on_deliver(self, st: LiveState, src: int, pb: Any) -> LiveState:
        return self._wrap(st, self._h.on_deliver(st.inner, src, pb))


class BCSNoForce(BCS):
    name = "bcs-no-force"
    zcycle_free = False
    description = "BCS adopting m.lc without the forced checkpoint"

    def must_force(self, st: BCSState, src: int, pb: int) -> bool:
        return False


class BCSGeq(BCS):
    name = "bcs-geq"
    zcycle_free = True
    description = "BCS forcing iff m.lc >= lc (safe, forces more)"

    def must_force(self, st: BCSState, src: int, pb: int) -> bool:
        return pb >= st.lc


UNSAFE_VARIANTS: tuple[type[Protocol], ...] = (
    HMNRNoC1,
    HMNRNoC2,
    HMNRMergeSkipSender,
    HMNRMergeOwnIndex,
    HMNRTakenOverwrite,
    HMNRPiggybackAtDelivery,
    BCSNoForce,
)
SAFE_VARIANTS: tuple[type[Protocol], ...] = (HMNRNoMinTo, HMNRMinToEverySend, BCSGeq)
