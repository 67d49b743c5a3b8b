"""Shared piece of the dependency-vector protocols of this corpus (FDAS, FDI, NRAS, CASBR, CBR and
their broken variants): each process keeps a transitive dependency vector ``tdv`` — ``tdv[i]`` its
own checkpoint-interval index, ``tdv[k]`` the latest interval of P_k it depends on — and whether it
has sent since its latest checkpoint. Every message piggybacks the sender's ``tdv``.

References
----------
Y.-M. Wang, "Consistent global checkpoints that contain a given set of local checkpoints",
IEEE Transactions on Computers 46(4), 1997 (the FDAS, FDI, CASBR, NRAS and CBR protocols).
"""

from typing import NamedTuple

from rollcheck.testing import Protocol


class TDVState(NamedTuple):
    i: int
    tdv: tuple
    sent: bool = False


class TDVProtocol(Protocol):
    """The common transitions; subclasses decide ``must_force``."""

    zcycle_free = True
    symmetric = True

    def initial(self, i, n):
        return TDVState(i, (0,) * n)

    def on_checkpoint(self, st, forced=False):
        tdv = list(st.tdv)
        tdv[st.i] += 1
        return TDVState(st.i, tuple(tdv), False)

    def on_send(self, st, dst):
        return st._replace(sent=True), st.tdv

    def new_dependency(self, st, pb):
        return any(a > b for a, b in zip(pb, st.tdv, strict=True))

    def on_deliver(self, st, src, pb):
        return st._replace(tdv=tuple(map(max, st.tdv, pb)))
