"""CBR, Checkpoint-Before-Receive (Wang 1997; Russell 1980 for the pattern): a forced checkpoint
before every delivery. Every checkpoint interval then starts with its only delivery, so no Z-path
is non-causal and no checkpoint is useless.

References
----------
Y.-M. Wang, IEEE Transactions on Computers 46(4), 1997, §4.
"""

from typing import NamedTuple

from rollcheck.testing import Protocol


class Nothing(NamedTuple):
    pass


class CBR(Protocol):
    name = "cbr"
    zcycle_free = True
    symmetric = True

    def initial(self, i, n):
        return Nothing()

    def on_checkpoint(self, st, forced=False):
        return st

    def on_send(self, st, dst):
        return st, None

    def must_force(self, st, src, pb):
        return True

    def on_deliver(self, st, src, pb):
        return st
