from typing import NamedTuple

from rollcheck.testing import Protocol


class Index(NamedTuple):
    lc: int = 0          # the logical index of the process's latest checkpoint


class MyIndexProtocol(Protocol):
    """Force a checkpoint before delivering a message that carries a higher index."""

    name = "my-index"
    zcycle_free = True    # the claim rollcheck will check

    def initial(self, i, n):
        return Index()

    def on_checkpoint(self, st):
        return Index(st.lc + 1)

    def on_send(self, st, dst):
        return st, st.lc                  # piggyback the index

    def must_force(self, st, src, pb):
        return pb > st.lc

    def on_deliver(self, st, src, pb):
        return Index(max(st.lc, pb))      # adopt the larger index
