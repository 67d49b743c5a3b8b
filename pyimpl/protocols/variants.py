"""Deliberately changed protocols: the mutation catalogue's variants of HMNR and BCS.

Each variant is a real :class:`~rollcheck.pyimpl.protocols.base.Protocol` (usable by
``run_protocol``, the simulator and ``rollcheck protocol``); its class docstring says what changed.
:data:`UNSAFE_VARIANTS` (``zcycle_free = False``) make useless checkpoints on some schedule;
:data:`SAFE_VARIANTS` (``zcycle_free = True``) stay safe but force more checkpoints than HMNR.

References
----------
``specs/protocols.md`` ("variants that look harmless but are not");
``specs/protocols.md#variants``.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from typing_extensions import override

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
    """Unsafe ``hmnr-no-c1``: never forces on C1 (misses non-causal Z-paths)."""

    name = "hmnr-no-c1"
    zcycle_free = False
    description = "HMNR without condition C1"

    @override
    def c1(self, st: HMNRState, src: int, pb: HMNRPiggyback) -> bool:
        return False


class HMNRNoC2(HMNR):
    """Unsafe ``hmnr-no-c2``: never forces on C2 (misses causal Z-cycles)."""

    name = "hmnr-no-c2"
    zcycle_free = False
    description = "HMNR without condition C2"

    @override
    def c2(self, st: HMNRState, src: int, pb: HMNRPiggyback) -> bool:
        return False


class HMNRMergeSkipSender(HMNR):
    """Unsafe ``hmnr-merge-skip-sender``: the merge loop skips the sender j as well as i."""

    name = "hmnr-merge-skip-sender"
    zcycle_free = False
    description = "HMNR whose merge loop skips the sender j (k != i, j)"

    @override
    def merge_skips(self, st: HMNRState, src: int) -> tuple[int, ...]:
        return (st.i, src)


class HMNRMergeOwnIndex(HMNR):
    """Unsafe ``hmnr-merge-own-index``: the own clock is merged with ``m.clock[i]``.

    The reference merges it with the sender's entry ``m.clock[j]``.
    """

    name = "hmnr-merge-own-index"
    zcycle_free = False
    description = "HMNR merging its own clock with m.clock[i] instead of m.clock[j]"

    @override
    def on_deliver(self, st: HMNRState, src: int, pb: HMNRPiggyback) -> HMNRState:
        out = super().on_deliver(st, src, pb)
        i = st.i
        clock = list(out.clock)
        clock[i] = max(st.clock[i], pb.clock[i])
        return out._replace(clock=tuple(clock))


class HMNRTakenOverwrite(HMNR):
    """Unsafe ``hmnr-taken-overwrite``: on ``m.ckpt[k] == ckpt[k]`` the merge sets ``taken[k]``.

    It sets ``taken[k] = m.taken[k]`` instead of OR-ing it in.
    """

    name = "hmnr-taken-overwrite"
    zcycle_free = False
    description = "HMNR whose merge overwrites taken[k] with m.taken[k] on equal ckpt[k] (no OR)"

    @override
    def on_deliver(self, st: HMNRState, src: int, pb: HMNRPiggyback) -> HMNRState:
        out = super().on_deliver(st, src, pb)
        taken = list(out.taken)
        for k in range(len(taken)):
            if k != st.i and pb.ckpt[k] == st.ckpt[k]:
                taken[k] = pb.taken[k]
        return out._replace(taken=tuple(taken))


class HMNRNoMinTo(HMNR):
    """Safe ``hmnr-no-minto``: C1 without the ``m.clock[j] > min_to[k]`` conjunct (forces more)."""

    name = "hmnr-no-minto"
    zcycle_free = True
    description = "HMNR without the min_to conjunct of C1 (safe, forces more)"

    @override
    def c1(self, st: HMNRState, src: int, pb: HMNRPiggyback) -> bool:
        mj = pb.clock[src]
        for k, sent in enumerate(st.sent_to):
            if sent and mj > st.clock[k] and mj > pb.clock[k]:
                return True
        return False


class HMNRMinToEverySend(HMNR):
    """Safe ``hmnr-minto-every-send``: ``min_to[k] = min(clock[k], clock[i])`` at every send."""

    name = "hmnr-minto-every-send"
    zcycle_free = True
    description = "HMNR with min_to[k] = min(clock[k], clock[i]) at every send (safe, forces more)"

    @override
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
        """The process index."""
        return self.inner.i


class _LivePiggyback:
    """A piggyback that reads the sender's vectors when it is *used*, not when it was sent."""

    __slots__ = ("cell",)

    def __init__(self, cell: _Cell):
        self.cell = cell

    @property
    def clock(self) -> tuple[int, ...]:
        """The sender's clock vector now."""
        return self.cell.state.clock

    @property
    def ckpt(self) -> tuple[int, ...]:
        """The sender's checkpoint vector now."""
        return self.cell.state.ckpt

    @property
    def taken(self) -> tuple[bool, ...]:
        """The sender's taken vector now."""
        return self.cell.state.taken

    def __repr__(self) -> str:
        return f"<live piggyback of P{self.cell.state.i}>"


class HMNRPiggybackAtDelivery(Protocol):
    """Unsafe ``hmnr-piggyback-at-delivery``: the piggyback is read at *delivery* time.

    It is the sender's state when the message is delivered; the reference copies it at send time.
    """

    name = "hmnr-piggyback-at-delivery"
    zcycle_free = False
    description = "HMNR reading the piggyback from the sender's state at delivery time"

    def __init__(self) -> None:
        self._h = HMNR()

    def _wrap(self, st: LiveState, inner: HMNRState) -> LiveState:
        st.cell.state = inner
        return LiveState(inner, st.cell)

    @override
    def initial(self, i: int, n: int) -> LiveState:
        inner = self._h.initial(i, n)
        return LiveState(inner, _Cell(inner))

    @override
    def on_checkpoint(self, st: LiveState, forced: bool = False) -> LiveState:
        return self._wrap(st, self._h.on_checkpoint(st.inner))

    @override
    def on_send(self, st: LiveState, dst: int) -> tuple[LiveState, Any]:
        inner, _ = self._h.on_send(st.inner, dst)
        return self._wrap(st, inner), _LivePiggyback(st.cell)

    @override
    def must_force(self, st: LiveState, src: int, pb: Any) -> bool:
        return self._h.must_force(st.inner, src, pb)

    @override
    def on_deliver(self, st: LiveState, src: int, pb: Any) -> LiveState:
        return self._wrap(st, self._h.on_deliver(st.inner, src, pb))


class BCSNoForce(BCS):
    """Unsafe ``bcs-no-force``: BCS adopting a larger index without the forced checkpoint."""

    name = "bcs-no-force"
    zcycle_free = False
    description = "BCS adopting m.lc without the forced checkpoint"

    @override
    def must_force(self, st: BCSState, src: int, pb: int) -> bool:
        return False


class BCSGeq(BCS):
    """Safe ``bcs-geq``: BCS forcing iff ``m.lc >= lc`` (forces more)."""

    name = "bcs-geq"
    zcycle_free = True
    description = "BCS forcing iff m.lc >= lc (safe, forces more)"

    @override
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
