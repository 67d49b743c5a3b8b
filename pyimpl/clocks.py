"""Happened-before and vector clocks (Lamport's relation, Mattern/Fidge clocks).

Every event increments its process's own entry; a delivery first merges the clock the sender had
at the send. ``clock[e][i]`` counts the events of P_i that happened before or at ``e``. The initial
checkpoint C[i,0] has the all-zero clock; V[i] is treated as a virtual checkpoint event after the
last event of P_i.

References
----------
.. [1] L. Lamport, "Time, clocks, and the ordering of events in a distributed system", CACM 1978.
.. [2] F. Mattern, "Virtual time and global states of distributed systems", 1989.
.. [3] FERDiS paper (``ferdis-…``), §4 (happened-before and consistent global states).
"""

from __future__ import annotations

from rollcheck.pyimpl.pattern import DELIVER, SEND, Pattern

__all__ = ["vector_clocks", "happened_before", "checkpoint_clock", "concurrent_checkpoints"]


def vector_clocks(p: Pattern) -> list[tuple[int, ...]]:
    """The vector clock of every event of ``p``, in event order.

    Examples
    --------
    >>> from rollcheck.pyimpl.pattern import PatternBuilder
    >>> b = PatternBuilder(2); b.deliver(1, b.send(0, 1))
    >>> vector_clocks(b.build())
    [(1, 0), (1, 1)]
    """
    n = p.n
    cur = [[0] * n for _ in range(n)]
    at_send: dict[str, tuple[int, ...]] = {}
    out: list[tuple[int, ...]] = []
    for ev in p.events:
        c = cur[ev.process]
        if ev.kind == DELIVER:
            sent = at_send[ev.message]  # type: ignore[index]
            for k in range(n):
                if sent[k] > c[k]:
                    c[k] = sent[k]
        c[ev.process] += 1
        t = tuple(c)
        if ev.kind == SEND:
            at_send[ev.message] = t  # type: ignore[index]
        out.append(t)
    return out


def happened_before(clocks: list[tuple[int, ...]], e: int, f: int) -> bool:
    """True iff event ``e`` happened before event ``f`` (e ≠ f).

    Parameters
    ----------
    clocks : list of tuple of int
        The vector clock of every event (:func:`vector_clocks`).
    e, f : int
        Positions of the two events.
    """
    a, b = clocks[e], clocks[f]
    return e != f and all(x <= y for x, y in zip(a, b, strict=True)) and a != b


def checkpoint_clock(p: Pattern, clocks: list[tuple[int, ...]], c: tuple[int, int]) -> tuple[int, ...]:
    """Vector clock of checkpoint ``c``; index last+1 is V (the process's last event).

    Parameters
    ----------
    p : Pattern
        The checkpoint and communication pattern.
    clocks : list of tuple of int
        The vector clock of every event.
    c : tuple of int
        The checkpoint ``(process, index)``.
    """
    i, x = c
    if x == 0:
        return (0,) * p.n
    if x <= p.last_index(i):
        return clocks[p.checkpoint_event(i, x)]
    # V[i] acts as one more (virtual) checkpoint event after the last event of P_i
    last = [k for k, ev in enumerate(p.events) if ev.process == i]
    base = list(clocks[last[-1]]) if last else [0] * p.n
    base[i] += 1
    return tuple(base)


def concurrent_checkpoints(p: Pattern, cut: tuple[int, ...], clocks: list[tuple[int, ...]] | None = None) -> bool:
    """True iff the chosen checkpoints are pairwise concurrent (no one happened before another).

    For a global checkpoint this is equivalent to having no orphan message.

    Parameters
    ----------
    p : Pattern
        The checkpoint and communication pattern.
    cut : tuple of int
        A checkpoint index per process.
    clocks : list of tuple of int, optional
        The event clocks (None: computed here).
    """
    clocks = vector_clocks(p) if clocks is None else clocks
    cl = [checkpoint_clock(p, clocks, (i, x)) for i, x in enumerate(cut)]
    for i in range(p.n):
        for j in range(p.n):
            # C[i] happened before C[j] iff C[j] knows an event of P_i after C[i]; the checkpoint
            # event itself is never sent on, so this is a strict comparison of P_i's entries.
            if i != j and cl[j][i] > cl[i][i]:
                return False
    return True

