"""Baldoni–Quaglia–Fornara index-based protocol (1999): BCS's indices, but a process that has not
sent anything since its latest checkpoint does not take a forced checkpoint when a larger index
arrives: it relabels its latest checkpoint with the larger index instead (nothing it did since that
checkpoint can be the start of a Z-path yet). Only a process that has sent in the current interval
must force.

References
----------
R. Baldoni, F. Quaglia, P. Fornara, "An index-based checkpointing algorithm for autonomous
distributed systems", IEEE Transactions on Parallel and Distributed Systems 10(2), 1999.
"""

from typing import NamedTuple

from rollcheck.testing import Protocol


class BQFState(NamedTuple):
    sn: int = 0
    sent: bool = False


class BQF(Protocol):
    name = "bqf"
    zcycle_free = True
    symmetric = True

    def initial(self, i, n):
        return BQFState()

    def on_checkpoint(self, st, forced=False):
        return BQFState(st.sn + 1, False)

    def on_send(self, st, dst):
        return st._replace(sent=True), st.sn

    def must_force(self, st, src, pb):
        return st.sent and pb > st.sn

    def on_deliver(self, st, src, pb):
        return st._replace(sn=max(st.sn, pb))
