"""Protocols whose code breaks the rules of ``rollcheck.testing.Protocol`` in ways a verdict must not
hide: ``rollcheck check protocol`` refuses each with exit 2 naming the method (or, for a false
``symmetric`` claim, does not use the reduction and finds the flaw)."""

import random
import threading
from typing import NamedTuple

from rollcheck.testing import Protocol


class Index(NamedTuple):
    lc: int = 0


class _Indexed(Protocol):
    """BCS-like, correct: force before a delivery that carries a larger index, adopt it."""

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
        return Index(max(st.lc, pb))


class LockedState:
    """A mutable state holding a lock: it cannot be pickled, so it cannot be copied."""

    def __init__(self):
        self.lc = 0
        self.lock = threading.Lock()

    def __repr__(self):
        return f"LockedState(lc={self.lc})"


class Unpicklable(_Indexed):
    """Keeps a lock in its state and changes the state in place."""

    name = "unpicklable"

    def initial(self, i, n):
        return LockedState()

    def on_checkpoint(self, st):
        with st.lock:
            st.lc += 1
        return st

    def on_deliver(self, st, src, pb):
        st.lc = max(st.lc, pb)
        return st


class ClassCounter(_Indexed):
    """Keeps a counter on the class: every third decision is 'force', whatever the schedule."""

    name = "class-counter"
    decisions = 0

    def must_force(self, st, src, pb):
        ClassCounter.decisions += 1
        return pb > st.lc or ClassCounter.decisions % 3 == 0


class Dice(_Indexed):
    """Adds a random piggyback: the same schedule gives other piggybacks on every run."""

    name = "dice"

    def on_send(self, st, dst):
        return st, st.lc + random.choice([0, 0, 1])


class FifthApart(_Indexed):
    """Claims symmetry, but the fifth process (P4) never forces: no schedule of 2-4 processes shows
    the asymmetry, and with the reduction (P4 acts only after P0-P3 have) no schedule of 5 processes
    and 5 events shows the Z-cycle that P4 leaves."""

    name = "fifth-apart"
    symmetric = True

    def initial(self, i, n):
        return (i, Index())

    def on_checkpoint(self, st):
        return (st[0], Index(st[1].lc + 1))

    def on_send(self, st, dst):
        return st, st[1].lc

    def must_force(self, st, src, pb):
        return st[0] != 4 and pb > st[1].lc

    def on_deliver(self, st, src, pb):
        return (st[0], Index(max(st[1].lc, pb)))
