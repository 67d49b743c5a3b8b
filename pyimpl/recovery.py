"""Recovery lines: R-graph marking, rollback propagation, and Wang's min/max consistent checkpoints.

Conventions (``specs/conventions.md`` §Recovery line): a line gives each process a checkpoint
index, or its volatile index last+1 when it keeps its current state ("volatile"). The failed
processes lose V; with ``virtual=False`` every process loses V (no virtual checkpoints). C[i,0]
is never marked, so a line always exists (the domino effect ends at the initial state).
Theorem checked by the properties: ``specs/theorems.md#t4-recovery-line`` and ``#t5-cgraph``.

References
----------
.. [1] Y.-M. Wang, "Consistent global checkpoints that contain a given set of local checkpoints",
   IEEE Trans. Computers 46(4), 1997 — R-graph marking, min/max algorithms. FERDiS §6.1.
.. [2] E. N. Elnozahy et al., survey of rollback-recovery protocols, §2.3 (rollback propagation on
   the checkpoint graph), FERDiS §6.1 and Fig. 7; FERDiS §7.2.5 (virtual checkpoints).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import networkx as nx

from rollcheck.pyimpl.consistency import in_transit
from rollcheck.pyimpl.errors import InvalidInputError
from rollcheck.pyimpl.pattern import Pattern
from rollcheck.pyimpl.rgraph import checkpoint_graph, node_offsets, rgraph, rgraph_csr

__all__ = [
    "RecoveryLine",
    "recovery_line",
    "recovery_line_networkx",
    "rollback_propagation",
    "rollback_distance",
    "ConsistentCheckpoint",
    "max_consistent_containing",
    "min_consistent_containing",
]


@dataclass(frozen=True)
class RecoveryLine:
    """The outcome of a recovery: per process the restored index (last+1 = volatile).

    Attributes
    ----------
    line : tuple of int
        Restored checkpoint index per process; ``volatile_index(i)`` means the process keeps V[i].
    volatile : tuple of bool
        True where the process keeps its volatile state.
    rolled_back : tuple of int
        Processes whose entry is a checkpoint (not volatile).
    in_transit : tuple of str
        Ids of messages whose send is kept and whose delivery is not: the channel state to replay.
    distance : tuple of int
        Intervals lost per process (0 when volatile).
    """

    line: tuple[int, ...]
    volatile: tuple[bool, ...]
    rolled_back: tuple[int, ...]
    in_transit: tuple[str, ...]
    distance: tuple[int, ...]

    def to_json(self, p: Pattern) -> dict[str, object]:
        """The ``rollcheck recovery-line --json`` document."""
        return {
            "line": {
                p.processes[i]: ("volatile" if self.volatile[i] else self.line[i]) for i in range(p.n)
            },
            "in_transit": list(self.in_transit),
            "rolled_back": [p.processes[i] for i in self.rolled_back],
            "rollback_distance": {p.processes[i]: self.distance[i] for i in range(p.n)},
        }


def _check_failed(p: Pattern, failed: Iterable[int]) -> frozenset[int]:
    out = frozenset(failed)
    for f in out:
        if not isinstance(f, int) or not 0 <= f < p.n:
            raise InvalidInputError(f"unknown failed process {f!r}", location="failed")
    return out


def _in_transit_ids(p: Pattern, line: tuple[int, ...]) -> tuple[str, ...]:
    """Ids of the messages in transit for ``line`` (vectorised for large patterns)."""
    if p.num_messages < 2000:
        return tuple(m.id for m in in_transit(p, line))
    import numpy as np

    a = p.arrays
    cut = np.asarray(line, dtype=np.int64)
    d = a.deliver_interval
    keep = (a.send_interval < cut[a.sender]) & ((d < 0) | (d >= cut[a.receiver]))
    ids = p._msg_ids
    return tuple(ids[k] for k in np.nonzero(keep)[0])


def _finish(p: Pattern, line: Sequence[int]) -> RecoveryLine:
    line = tuple(int(x) for x in line)
    vol = tuple(line[i] == p.volatile_index(i) for i in range(p.n))
    return RecoveryLine(
        line=line,
        volatile=vol,
        rolled_back=tuple(i for i in range(p.n) if not vol[i]),
        in_transit=_in_transit_ids(p, line),
        distance=tuple(p.volatile_index(i) - line[i] for i in range(p.n)),
    )


def rollback_distance(p: Pattern, line: Sequence[int]) -> tuple[int, ...]:
    """Intervals lost per process when restoring ``line`` (0 for a volatile entry).

    Parameters
    ----------
    p : Pattern
        The checkpoint and communication pattern.
    line : sequence of int
        A checkpoint index per process (``volatile_index(i)``: volatile).

    Returns
    -------
    tuple of int
        Per process, the checkpoint intervals rolled back.
    """
    return tuple(p.volatile_index(i) - x for i, x in enumerate(line))


def recovery_line(p: Pattern, failed: Iterable[int], virtual: bool = True) -> RecoveryLine:
    """The recovery line after the processes in ``failed`` crash (fast: scipy BFS, O(V + E)).

    Parameters
    ----------
    p : Pattern
    failed : iterable of int
        Indices of the failed processes (they lose their volatile state).
    virtual : bool
        Virtual checkpoints: survivors may keep their volatile state. With False, every process
        restores a real checkpoint.

    Examples
    --------
    >>> from rollcheck.pyimpl.pattern import PatternBuilder
    >>> b = PatternBuilder(2); b.checkpoint(0); b.deliver(1, b.send(0, 1))
    1
    >>> recovery_line(b.build(), [0]).line     # P1 depends on m0, sent after C[0,1]
    (1, 0)
    """
    import numpy as np
    from scipy.sparse.csgraph import breadth_first_order

    fail = _check_failed(p, failed)
    off = node_offsets(p)
    total = int(off[-1])
    roots = [int(off[i + 1]) - 1 for i in range(p.n) if (i in fail or not virtual)]
    if not roots:
        return _finish(p, [p.volatile_index(i) for i in range(p.n)])
    g = rgraph_csr(p, extra_sources=roots)
    reached = breadth_first_order(g, total, directed=True, return_predecessors=False)
    marked = np.zeros(total + 1, dtype=bool)
    marked[reached] = True
    marked = marked[:total]
    # marks of a process form a suffix (local edges); the line is just below the first mark
    pos = np.arange(total, dtype=np.int64)
    first = np.where(marked, pos, total)
    first_marked = np.minimum.reduceat(first, off[:-1])
    line = np.where(first_marked < off[1:], first_marked - off[:-1] - 1, off[1:] - off[:-1] - 1)
    return _finish(p, line.tolist())


def recovery_line_networkx(p: Pattern, failed: Iterable[int], virtual: bool = True,
                           graph: nx.DiGraph | None = None) -> RecoveryLine:
    """The readable R-graph algorithm: mark what is reachable from lost volatile states.

    ``graph`` defaults to :func:`rollcheck.pyimpl.rgraph.rgraph` of ``p`` (pass it to reuse one
    R-graph for several failed sets; it is not modified).

    Parameters
    ----------
    p : Pattern
        The checkpoint and communication pattern.
    failed : iterable of int
        The failed processes.
    virtual : bool, optional
        The survivors keep their volatile states (False: every process restarts from a checkpoint).
    graph : networkx.DiGraph, optional
        The R-graph of ``p`` (None: built here).

    Returns
    -------
    RecoveryLine
        The restored line.
    """
    fail = _check_failed(p, failed)
    g = rgraph(p) if graph is None else graph
    marked: set[tuple[int, int]] = set()
    for i in range(p.n):
        if i in fail or not virtual:
            v = (i, p.volatile_index(i))
            marked.add(v)
            marked |= nx.descendants(g, v)
    line = []
    for i in range(p.n):
        x = p.volatile_index(i)
        while (i, x) in marked:
            x -= 1
        line.append(x)
    return _finish(p, line)


def rollback_propagation(p: Pattern, failed: Iterable[int], virtual: bool = True) -> RecoveryLine:
    """Rollback propagation on the checkpoint graph, iterated to a fixed point.

    Delete V of the failed processes (of all, without virtual checkpoints); the roots are V of the
    survivors, else each process's last checkpoint; mark every node reachable from a root by at
    least one edge; replace each marked root by the latest unmarked checkpoint of its process;
    repeat until nothing changes. Gives the same line as :func:`recovery_line` (specs T5).

    Parameters
    ----------
    p : Pattern
        The checkpoint and communication pattern.
    failed : iterable of int
        The failed processes.
    virtual : bool, optional
        The survivors keep their volatile states (False: every process restarts from a checkpoint).

    Returns
    -------
    RecoveryLine
        The restored line.
    """
    fail = _check_failed(p, failed)
    g = checkpoint_graph(p)
    for i in range(p.n):
        if i in fail or not virtual:
            g.remove_node((i, p.volatile_index(i)))
    roots = [
        p.volatile_index(i) if (i not in fail and virtual) else p.last_index(i) for i in range(p.n)
    ]
    while True:
        marked: set[tuple[int, int]] = set()
        for i in range(p.n):
            for succ in g.successors((i, roots[i])):
                marked.add(succ)
                marked |= nx.descendants(g, succ)
        changed = False
        for i in range(p.n):
            if (i, roots[i]) in marked:
                x = roots[i] - 1
                while (i, x) in marked:
                    x -= 1
                roots[i] = x
                changed = True
        if not changed:
            return _finish(p, roots)


@dataclass(frozen=True)
class ConsistentCheckpoint:
    """Result of Wang's algorithms: a cut, or None with the reason and a witness Z-path."""

    cut: tuple[int, ...] | None
    reason: str = ""
    witness: tuple[str, ...] = ()

    @property
    def exists(self) -> bool:
        """Whether a consistent global checkpoint exists."""
        return self.cut is not None


def _members(p: Pattern, members: Iterable[tuple[int, int]]) -> dict[int, int]:
    out: dict[int, int] = {}
    for i, x in members:
        if not 0 <= i < p.n:
            raise InvalidInputError(f"unknown process index {i}", location="checkpoints")
        if not 0 <= x <= p.last_index(i):
            raise InvalidInputError(f"{p.processes[i]} has checkpoints 0..{p.last_index(i)}, not {x}",
                                    location="checkpoints")
        if i in out and out[i] != x:
            raise InvalidInputError(f"two checkpoints of {p.processes[i]} in one set", location="checkpoints")
        out[i] = x
    return out


def _linked(p: Pattern, s: dict[int, int]) -> ConsistentCheckpoint | None:
    from rollcheck.pyimpl.zpaths import zpath

    for i, x in s.items():
        for j, y in s.items():
            w = zpath(p, (i, x), (j, y))
            if w is not None:
                a, b = p.checkpoint_name((i, x)), p.checkpoint_name((j, y))
                return ConsistentCheckpoint(None, f"Z-path from {a} to {b}", tuple(w))
    return None


def max_consistent_containing(
    p: Pattern, members: Iterable[tuple[int, int]], allow_volatile: bool = True
) -> ConsistentCheckpoint:
    """The maximum consistent global checkpoint that contains ``members`` (Wang 1997).

    Mark every R-graph node reachable from C[i,x+1] for each member C[i,x] (and from every V when
    volatile states are not allowed); non-members take their latest unmarked node. None (with a
    witness Z-path) when a Z-path links two members (Netzer–Xu; specs T2).

    Parameters
    ----------
    p : Pattern
        The checkpoint and communication pattern.
    members : iterable of tuple of int
        The checkpoints ``(process, index)`` the cut must contain.
    allow_volatile : bool, optional
        A process may take its volatile state.

    Returns
    -------
    ConsistentCheckpoint
        The cut, or None with the reason.
    """
    s = _members(p, members)
    bad = _linked(p, s)
    if bad is not None:
        return bad
    g = rgraph(p)
    starts = [(i, x + 1) for i, x in s.items()]
    if not allow_volatile:
        starts += [(i, p.volatile_index(i)) for i in range(p.n)]
    marked: set[tuple[int, int]] = set(starts)
    for st in starts:
        marked |= nx.descendants(g, st)
    cut = []
    for i in range(p.n):
        if i in s:
            if (i, s[i]) in marked:
                return ConsistentCheckpoint(None, f"{p.checkpoint_name((i, s[i]))} depends on a volatile state")
            cut.append(s[i])
            continue
        x = p.volatile_index(i)
        while (i, x) in marked:
            x -= 1
        cut.append(x)
    return ConsistentCheckpoint(tuple(cut))


def min_consistent_containing(
    p: Pattern, members: Iterable[tuple[int, int]], allow_volatile: bool = True
) -> ConsistentCheckpoint:
    """The minimum consistent global checkpoint that contains ``members`` (Wang 1997).

    Mark every R-graph node from which some member node is reachable by a non-empty path; a
    non-member P_j takes the smallest y with C[j,y+1] unmarked (V[j] if every real successor is
    marked; None when volatile states are not allowed then).

    Parameters
    ----------
    p : Pattern
        The checkpoint and communication pattern.
    members : iterable of tuple of int
        The checkpoints ``(process, index)`` the cut must contain.
    allow_volatile : bool, optional
        A process may take its volatile state.

    Returns
    -------
    ConsistentCheckpoint
        The cut, or None with the reason.
    """
    s = _members(p, members)
    bad = _linked(p, s)
    if bad is not None:
        return bad
    g = rgraph(p)
    marked: set[tuple[int, int]] = set()
    for i, x in s.items():
        marked |= nx.ancestors(g, (i, x))
    cut = []
    for j in range(p.n):
        if j in s:
            cut.append(s[j])
            continue
        y = 0
        while (j, y + 1) in marked:
            y += 1
        if y == p.volatile_index(j) and not allow_volatile:
            return ConsistentCheckpoint(None, f"{p.processes[j]} would need its volatile state")
        cut.append(y)
    return ConsistentCheckpoint(tuple(cut))
