"""Broken protocols a user might plausibly write, each wrong in a different way.

All of them claim ``zcycle_free = True``; ``rollcheck check protocol`` must find a useless
checkpoint in each under the default profile.
"""

from typing import NamedTuple

from rollcheck.testing import Protocol


class Index(NamedTuple):
    lc: int = 0


class LazyIndex(Protocol):
    """Index-based, off by one: forces only when the piggybacked index is ahead by two or more.
    Fails on two processes (the classic Z-cycle)."""

    name = "lazy-index"
    zcycle_free = True

    def initial(self, i, n):
        return Index()

    def on_checkpoint(self, st):
        return Index(st.lc + 1)

    def on_send(self, st, dst):
        return st, st.lc

    def must_force(self, st, src, pb):
        return pb > st.lc + 1

    def on_deliver(self, st, src, pb):
        return Index(max(st.lc, pb))


class ForgetfulIndex(Protocol):
    """Index-based, but forgets to adopt the piggybacked index after a forced checkpoint, so
    indices stop growing along causal chains. Needs three processes and several checkpoints."""

    name = "forgetful-index"
    zcycle_free = True

    def initial(self, i, n):
        return Index()

    def on_checkpoint(self, st):
        return Index(st.lc + 1)

    def on_send(self, st, dst):
        return st, st.lc

    def must_force(self, st, src, pb):
        return pb > st.lc

    def on_deliver(self, st, src, pb):
        return st  # bug: should be Index(max(st.lc, pb))


class Sent(NamedTuple):
    to: frozenset = frozenset()


class PairwiseNRAS(Protocol):
    """NRAS that only remembers *whom* it sent to: forces before a delivery from ``src`` only if
    it sent to ``src`` since its last checkpoint. Equal to NRAS on two processes; on three a
    Z-cycle slips through."""

    name = "pairwise-nras"
    zcycle_free = True

    def initial(self, i, n):
        return Sent()

    def on_checkpoint(self, st):
        return Sent()

    def on_send(self, st, dst):
        return Sent(st.to | {dst}), None

    def must_force(self, st, src, pb):
        return src in st.to

    def on_deliver(self, st, src, pb):
        return st


class SaturatingIndex(Protocol):
    """BCS with a 2-bit index: correct until some process has taken three checkpoints, after
    which indices stop growing and nothing is forced any more."""

    name = "saturating-index"
    zcycle_free = True

    def initial(self, i, n):
        return Index()

    def on_checkpoint(self, st):
        return Index(min(st.lc + 1, 3))

    def on_send(self, st, dst):
        return st, st.lc

    def must_force(self, st, src, pb):
        return pb > st.lc

    def on_deliver(self, st, src, pb):
        return Index(max(st.lc, pb))


class Crashes(Protocol):
    """A protocol with a bug that raises: it indexes a table by the sender's piggyback."""

    name = "crashes"
    zcycle_free = True

    def initial(self, i, n):
        return {}

    def on_checkpoint(self, st):
        return st

    def on_send(self, st, dst):
        return st, dst

    def must_force(self, st, src, pb):
        return st[src] > 0  # KeyError on the first delivery

    def on_deliver(self, st, src, pb):
        return st


class Moody(Protocol):
    """Keeps state on the class instead of in the per-process state: not a function of its input."""

    name = "moody"
    zcycle_free = True
    calls = 0

    def initial(self, i, n):
        return None

    def on_checkpoint(self, st):
        return st

    def on_send(self, st, dst):
        return st, None

    def must_force(self, st, src, pb):
        type(self).calls += 1
        return type(self).calls % 3 == 0

    def on_deliver(self, st, src, pb):
        return st
