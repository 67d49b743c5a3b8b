"""A brute-force oracle: enumerate every global checkpoint of a small pattern.

Nothing here shares code with :mod:`pyimpl`: the checkpoint intervals of sends and deliveries and
the last checkpoint index of every process are derived from the raw event list itself
(:func:`raw_messages`, :func:`raw_last`: the k-th ``checkpoint`` event of a process ends interval
k-1 and starts interval k), orphans are tested from their definition and Z-paths from the
transitive closure of the one-step Z relation, so the oracle is an independent witness for the
theorems of ``specs/theorems.md``.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator
from typing import NamedTuple

from rollcheck.pyimpl.pattern import Pattern

__all__ = [
    "MAX_CUTS",
    "global_checkpoints",
    "is_orphan_free",
    "consistent_cuts",
    "brute_useless",
    "brute_max_consistent",
    "brute_min_consistent",
    "brute_recovery_line",
    "zpath_closure",
    "brute_zpath_exists",
    "raw_messages",
    "raw_last",
]

MAX_CUTS = 200_000


class RawMessage(NamedTuple):
    """A message as read off the event list.

    Its position among the sends, sender, interval of the send, receiver, interval of the
    delivery (None while in transit).
    """

    position: int
    sender: int
    send_interval: int
    receiver: int
    deliver_interval: int | None


def raw_messages(p: Pattern) -> list[RawMessage]:
    """Every message of ``p`` in the order of its send event, intervals counted from the events.

    Examples
    --------
    >>> from rollcheck.pyimpl.pattern import PatternBuilder
    >>> b = PatternBuilder(2); c = b.checkpoint(0); m = b.send(0, 1); b.deliver(1, m)
    >>> raw_messages(b.build())
    [RawMessage(position=0, sender=0, send_interval=1, receiver=1, deliver_interval=0)]
    """
    interval = [0] * p.n
    sends: dict[str, list] = {}
    order: list[str] = []
    for ev in p.events:
        if ev.kind == "checkpoint":
            interval[ev.process] += 1
        elif ev.kind == "send":
            sends[str(ev.message)] = [ev.process, interval[ev.process], ev.to, None]
            order.append(str(ev.message))
        elif ev.kind == "deliver":
            sends[str(ev.message)][3] = interval[ev.process]
    return [RawMessage(k, *sends[mid]) for k, mid in enumerate(order)]


def raw_last(p: Pattern) -> list[int]:
    """The index of the last real checkpoint of every process (its number of checkpoint events)."""
    last = [0] * p.n
    for ev in p.events:
        if ev.kind == "checkpoint":
            last[ev.process] += 1
    return last


def global_checkpoints(p: Pattern, upper: Iterable[int] | None = None) -> Iterator[tuple[int, ...]]:
    """Every cut with 0 ≤ cut[i] ≤ upper[i] (default: up to the volatile index).

    Parameters
    ----------
    p : Pattern
        A small pattern.
    upper : iterable of int, optional
        The highest checkpoint index of each process (None: its volatile index).

    Returns
    -------
    iterator of tuple of int
        The cuts, in lexicographic order.
    """
    ub = list(upper) if upper is not None else [x + 1 for x in raw_last(p)]
    return itertools.product(*[range(u + 1) for u in ub])


def is_orphan_free(p: Pattern, cut: tuple[int, ...], msgs: list[RawMessage] | None = None) -> bool:
    """No message sent at or after the sender's chosen checkpoint and delivered before the receiver's.

    Parameters
    ----------
    p : Pattern
        A small pattern.
    cut : tuple of int
        A checkpoint index per process.
    msgs : list of RawMessage, optional
        The messages tested (None: all of ``p``'s).

    Returns
    -------
    bool
        Whether ``cut`` has no orphan message.
    """
    for m in raw_messages(p) if msgs is None else msgs:
        d = m.deliver_interval
        if d is not None and m.send_interval >= cut[m.sender] and d < cut[m.receiver]:
            return False
    return True


def consistent_cuts(p: Pattern, upper: Iterable[int] | None = None) -> list[tuple[int, ...]]:
    """The orphan-free global checkpoints of ``p`` (each process at most ``upper``), by brute force.

    Parameters
    ----------
    p : Pattern
        A small pattern.
    upper : iterable of int, optional
        The highest checkpoint index of each process (None: its volatile index).

    Returns
    -------
    list of tuple of int
        The consistent cuts, in lexicographic order.
    """
    msgs = [m for m in raw_messages(p) if m.deliver_interval is not None]
    return [c for c in global_checkpoints(p, upper) if is_orphan_free(p, c, msgs)]


def brute_useless(p: Pattern) -> set[tuple[int, int]]:
    """Real checkpoints (index ≥ 1) that belong to no consistent cut (V allowed)."""
    used: set[tuple[int, int]] = set()
    for c in consistent_cuts(p):
        used.update(enumerate(c))
    last = raw_last(p)
    return {(i, x) for i in range(p.n) for x in range(1, last[i] + 1) if (i, x) not in used}


def _upper(p: Pattern, failed: Iterable[int], virtual: bool) -> list[int]:
    f = set(failed)
    return [x + 1 if (virtual and i not in f) else x for i, x in enumerate(raw_last(p))]


def brute_max_consistent(p: Pattern, members: dict[int, int], upper: list[int]) -> tuple[int, ...] | None:
    """Componentwise max of the consistent cuts that contain ``members`` under ``upper``.

    Parameters
    ----------
    p : Pattern
        A small pattern.
    members : dict of int to int
        Checkpoint index required of some processes.
    upper : list of int
        The highest index of each process.

    Returns
    -------
    tuple of int or None
        None when no consistent cut contains ``members``.
    """
    sel = [c for c in consistent_cuts(p, upper) if all(c[i] == x for i, x in members.items())]
    if not sel:
        return None
    return tuple(max(c[i] for c in sel) for i in range(p.n))


def brute_min_consistent(p: Pattern, members: dict[int, int], upper: list[int]) -> tuple[int, ...] | None:
    """Componentwise min of the consistent cuts that contain ``members`` under ``upper``.

    Parameters
    ----------
    p : Pattern
        A small pattern.
    members : dict of int to int
        Checkpoint index required of some processes.
    upper : list of int
        The highest index of each process.

    Returns
    -------
    tuple of int or None
        None when no consistent cut contains ``members``.
    """
    sel = [c for c in consistent_cuts(p, upper) if all(c[i] == x for i, x in members.items())]
    if not sel:
        return None
    return tuple(min(c[i] for c in sel) for i in range(p.n))


def brute_recovery_line(p: Pattern, failed: Iterable[int], virtual: bool) -> tuple[int, ...]:
    """The recovery line by brute force: the maximum consistent cut after ``failed`` fail.

    With ``virtual`` a live process may keep its volatile state (index ``last + 1``).

    Parameters
    ----------
    p : Pattern
        A small pattern.
    failed : iterable of int
        Indices of the failed processes.
    virtual : bool
        Whether a live process may keep its volatile state.

    Returns
    -------
    tuple of int
        A checkpoint index per process.
    """
    line = brute_max_consistent(p, {}, _upper(p, failed, virtual))
    assert line is not None  # the initial cut is always consistent
    return line


def zpath_closure(p: Pattern) -> set[tuple[int, int]]:
    """Pairs (a, b) of message positions such that a Z-path starts with a and ends with b."""
    ms = [m for m in raw_messages(p) if m.deliver_interval is not None]
    idx = list(range(len(ms)))
    reach = {(a, a) for a in idx}
    step = {
        (a, b)
        for a in idx
        for b in idx
        if ms[a].receiver == ms[b].sender and ms[b].send_interval >= ms[a].deliver_interval  # type: ignore[operator]
    }
    reach |= step
    changed = True
    while changed:
        new = {(a, c) for (a, b) in reach for (b2, c) in step if b == b2} - reach
        changed = bool(new)
        reach |= new
    return {(ms[a].position, ms[b].position) for a, b in reach}


def brute_zpath_exists(
    p: Pattern, src: tuple[int, int], dst: tuple[int, int], closure: set[tuple[int, int]] | None = None
) -> bool:
    """Z-path existence from the definition (first message after src, last delivered before dst).

    Parameters
    ----------
    p : Pattern
        A small pattern.
    src : tuple of (int, int)
        ``(process, index)`` of the start checkpoint.
    dst : tuple of (int, int)
        ``(process, index)`` of the end checkpoint.
    closure : set of (int, int), optional
        :func:`zpath_closure` of ``p`` (None: computed).

    Returns
    -------
    bool
        Whether a Z-path leads from ``src`` to ``dst``.
    """
    closure = zpath_closure(p) if closure is None else closure
    (i, x), (j, y) = src, dst
    ms = raw_messages(p)
    for a, b in closure:
        if ms[a].sender == i and ms[a].send_interval >= x:
            d = ms[b].deliver_interval
            if ms[b].receiver == j and d is not None and d < y:
                return True
    return False
