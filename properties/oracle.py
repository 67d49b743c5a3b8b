"""A brute-force oracle: enumerate every global checkpoint of a small pattern.

Nothing here shares code with :mod:`pyimpl` beyond the pattern model itself: orphans are tested
from their definition and Z-paths from the transitive closure of the one-step Z relation, so the
oracle is an independent witness for the theorems of ``specs/theorems.md``.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator

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
]

MAX_CUTS = 200_000


def global_checkpoints(p: Pattern, upper: Iterable[int] | None = None) -> Iterator[tuple[int, ...]]:
    """Every cut with 0 ≤ cut[i] ≤ upper[i] (default: up to the volatile index)."""
    ub = list(upper) if upper is not None else [p.volatile_index(i) for i in range(p.n)]
    return itertools.product(*[range(u + 1) for u in ub])


def is_orphan_free(p: Pattern, cut: tuple[int, ...]) -> bool:
    """No message sent at or after the sender's chosen checkpoint and delivered before the receiver's."""
    for m in p.messages:
        d = m.deliver_interval
        if d is not None and m.send_interval >= cut[m.sender] and d < cut[m.receiver]:
            return False
    return True


def consistent_cuts(p: Pattern, upper: Iterable[int] | None = None) -> list[tuple[int, ...]]:
    return [c for c in global_checkpoints(p, upper) if is_orphan_free(p, c)]


def brute_useless(p: Pattern) -> set[tuple[int, int]]:
    """Real checkpoints (index ≥ 1) that belong to no consistent cut (V allowed)."""
    used: set[tuple[int, int]] = set()
    for c in consistent_cuts(p):
        used.update(enumerate(c))
    return {(i, x) for i in range(p.n) for x in range(1, p.last_index(i) + 1) if (i, x) not in used}


def _upper(p: Pattern, failed: Iterable[int], virtual: bool) -> list[int]:
    f = set(failed)
    return [p.volatile_index(i) if (virtual and i not in f) else p.last_index(i) for i in range(p.n)]


def brute_max_consistent(p: Pattern, members: dict[int, int], upper: list[int]) -> tuple[int, ...] | None:
    """Componentwise max of the consistent cuts that contain ``members`` under ``upper``."""
    sel = [c for c in consistent_cuts(p, upper) if all(c[i] == x for i, x in members.items())]
    if not sel:
        return None
    return tuple(max(c[i] for c in sel) for i in range(p.n))


def brute_min_consistent(p: Pattern, members: dict[int, int], upper: list[int]) -> tuple[int, ...] | None:
    sel = [c for c in consistent_cuts(p, upper) if all(c[i] == x for i, x in members.items())]
    if not sel:
        return None
    return tuple(min(c[i] for c in sel) for i in range(p.n))


def brute_recovery_line(p: Pattern, failed: Iterable[int], virtual: bool) -> tuple[int, ...]:
    line = brute_max_consistent(p, {}, _upper(p, failed, virtual))
    assert line is not None  # the initial cut is always consistent
    return line


def zpath_closure(p: Pattern) -> set[tuple[int, int]]:
    """Pairs (a, b) of message positions such that a Z-path starts with a and ends with b."""
    ms = [m for m in p.messages if m.deliver_interval is not None]
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
    return {(p.messages.index(ms[a]), p.messages.index(ms[b])) for a, b in reach}


def brute_zpath_exists(
    p: Pattern, src: tuple[int, int], dst: tuple[int, int], closure: set[tuple[int, int]] | None = None
) -> bool:
    """Z-path existence from the definition (first message after src, last delivered before dst)."""
    closure = zpath_closure(p) if closure is None else closure
    (i, x), (j, y) = src, dst
    ms = p.messages
    for a, b in closure:
        if ms[a].sender == i and ms[a].send_interval >= x:
            d = ms[b].deliver_interval
            if ms[b].receiver == j and d is not None and d < y:
                return True
    return False
