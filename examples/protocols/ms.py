"""Manivannan–Singhal quasi-synchronous checkpointing (1996): basic checkpoints are taken at the
ticks of a local period and the k-th one carries index k (at least one more than the last); a
message carries the sender's index and a delivery carrying a larger one is preceded by a forced
checkpoint that adopts it. A basic checkpoint whose tick a forced checkpoint has already reached
would be skipped; in a schedule given to rollcheck the basic checkpoint is there, so it takes the
next index (``forced`` tells the two kinds apart: a forced checkpoint takes the message's index
in ``on_deliver``, a basic one takes the index of its tick).

References
----------
D. Manivannan, M. Singhal, "A low-overhead recovery technique using quasi-synchronous
checkpointing", 16th ICDCS, 1996.
"""

from typing import NamedTuple

from rollcheck.testing import Protocol


class MSState(NamedTuple):
    sn: int = 0        # index of the latest checkpoint
    ticks: int = 0     # basic checkpoints taken (the local period's ticks)


class ManivannanSinghal(Protocol):
    name = "manivannan-singhal"
    zcycle_free = True
    symmetric = True

    def initial(self, i, n):
        return MSState()

    def on_checkpoint(self, st, forced=False):
        if forced:
            return st               # the delivery right after adopts the message's index
        ticks = st.ticks + 1
        return MSState(max(st.sn + 1, ticks), ticks)

    def on_send(self, st, dst):
        return st, st.sn

    def must_force(self, st, src, pb):
        return pb > st.sn

    def on_deliver(self, st, src, pb):
        return st._replace(sn=max(st.sn, pb))
