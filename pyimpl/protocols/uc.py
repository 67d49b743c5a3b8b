"""Uncoordinated checkpointing (UC): basic checkpoints only, never a forced one.

Every process checkpoints by its own local policy (a timer or an event count, see
:class:`rollcheck.pyimpl.protocols.timer.BasicTimer`); nothing is piggybacked. Cyclic communication can make
every checkpoint useless (the domino effect, FERDiS Fig. 7), so UC is *not* Z-cycle free.

References
----------
FERDiS paper §5.2 and Fig. 7; ``specs/protocols.md#uc``.
"""

from __future__ import annotations

from typing import NamedTuple

from typing_extensions import override

from rollcheck.pyimpl.errors import InvalidInputError
from rollcheck.pyimpl.protocols.base import Protocol

__all__ = ["UCState", "UC"]


class UCState(NamedTuple):
    """Process index and the number of checkpoints taken after the initial one."""

    i: int
    checkpoints: int = 0


class UC(Protocol):
    """Uncoordinated checkpointing.

    Examples
    --------
    >>> uc = UC()
    >>> st = uc.on_checkpoint(uc.initial(0, 2))
    >>> st, pb = uc.on_send(st, 1)
    >>> uc.must_force(uc.initial(1, 2), 0, pb)
    False
    """

    name = "uc"
    zcycle_free = False
    description = "uncoordinated: basic checkpoints only"

    @override
    def initial(self, i: int, n: int) -> UCState:
        if not 0 <= i < n:
            raise InvalidInputError(f"process index {i} out of range 0..{n - 1}")
        return UCState(i, 0)

    @override
    def on_checkpoint(self, st: UCState, forced: bool = False) -> UCState:
        return UCState(st.i, st.checkpoints + 1)

    @override
    def on_send(self, st: UCState, dst: int) -> tuple[UCState, None]:
        return st, None

    @override
    def must_force(self, st: UCState, src: int, pb: None) -> bool:
        return False

    @override
    def on_deliver(self, st: UCState, src: int, pb: None) -> UCState:
        return st
