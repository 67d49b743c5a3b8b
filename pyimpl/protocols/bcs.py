"""BCS, the index-based communication-induced checkpointing protocol (Briatico–Ciuffoletti–Simoncini).

Each process keeps one integer ``lc`` (its logical checkpoint index). Every checkpoint, basic or
forced, increments it; every message piggybacks the sender's ``lc``; before delivering a message
whose piggybacked index is *greater* than the receiver's, the receiver takes a forced checkpoint
and adopts the message's index. Checkpoints with equal ``lc`` then form consistent global
checkpoints, hence no checkpoint is useless (``specs/protocols.md#thm-cic-no-useless``).

Index conventions: ``lc`` is 0 for the initial checkpoint C[i,0]; it is not the pattern index
of the checkpoint (a forced checkpoint can jump several values).

References
----------
FERDiS paper §5.3 and §7.2.2; ``specs/protocols.md#bcs``.
"""

from __future__ import annotations

from typing import NamedTuple

from typing_extensions import override

from rollcheck.pyimpl.errors import InvalidInputError
from rollcheck.pyimpl.protocols.base import Protocol

__all__ = ["BCSState", "BCS"]


class BCSState(NamedTuple):
    """Process index and its logical checkpoint index ``lc``."""

    i: int
    lc: int = 0


class BCS(Protocol):
    """The BCS protocol (force iff ``m.lc > lc``).

    Examples
    --------
    >>> bcs = BCS()
    >>> p0, p1 = bcs.initial(0, 2), bcs.initial(1, 2)
    >>> p0 = bcs.on_checkpoint(p0)          # basic checkpoint: lc 0 -> 1
    >>> p0, pb = bcs.on_send(p0, 1)
    >>> pb, bcs.must_force(p1, 0, pb)
    (1, True)
    >>> bcs.on_deliver(bcs.on_checkpoint(p1), 0, pb)
    BCSState(i=1, lc=1)
    """

    name = "bcs"
    zcycle_free = True
    description = "index-based CIC: force iff m.lc > lc"

    @override
    def initial(self, i: int, n: int) -> BCSState:
        if not 0 <= i < n:
            raise InvalidInputError(f"process index {i} out of range 0..{n - 1}")
        return BCSState(i, 0)

    @override
    def on_checkpoint(self, st: BCSState, forced: bool = False) -> BCSState:
        return BCSState(st.i, st.lc + 1)

    @override
    def on_send(self, st: BCSState, dst: int) -> tuple[BCSState, int]:
        return st, st.lc

    @override
    def must_force(self, st: BCSState, src: int, pb: int) -> bool:
        return pb > st.lc

    @override
    def on_deliver(self, st: BCSState, src: int, pb: int) -> BCSState:
        return BCSState(st.i, pb) if pb > st.lc else st
