"""BCS (Briatico, Ciuffoletti, Simoncini 1984): one integer index per process, incremented by every
checkpoint and piggybacked on every message; a delivery carrying a larger index is preceded by a
forced checkpoint that adopts it. Checkpoints with equal index form consistent global checkpoints.

References
----------
D. Briatico, A. Ciuffoletti, L. Simoncini, "A distributed domino-effect free recovery algorithm",
4th Symposium on Reliability in Distributed Software and Database Systems, 1984;
FERDiS paper §5.3.
"""

from typing import NamedTuple

from rollcheck.testing import Protocol


class Index(NamedTuple):
    lc: int = 0


class BCS(Protocol):
    name = "bcs"
    zcycle_free = True
    symmetric = True

    def initial(self, i, n):
        return Index()

    def on_checkpoint(self, st, forced=False):
        return Index(st.lc + 1)

    def on_send(self, st, dst):
        return st, st.lc

    def must_force(self, st, src, pb):
        return pb > st.lc

    def on_deliver(self, st, src, pb):
        return Index(max(st.lc, pb))
