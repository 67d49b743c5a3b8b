"""Z-paths, Z-cycles and useless checkpoints.

Conventions (``specs/conventions.md`` §Z-paths): a Z-path from C[i,x] to C[j,y] is a sequence of
delivered messages m_1..m_q with m_1 sent by P_i in an interval ≥ x, each m_{a+1} sent by the
receiver of m_a in an interval ≥ the one in which m_a was delivered, and m_q delivered by P_j in an
interval < y. A checkpoint is useless iff it lies on a Z-cycle (Netzer–Xu, with volatile states),
iff C[i,x] and C[i,x+1] share a strongly connected component of the R-graph (Wang; specs T1–T3).

References
----------
.. [1] R. H. B. Netzer and J. Xu, "Necessary and sufficient conditions for consistent global
   snapshots", IEEE TPDS 6(2), 1995 (Z-paths), as presented in FERDiS §6.2.
.. [2] Y.-M. Wang, IEEE Trans. Computers 46(4), 1997 (R-graph characterisation), FERDiS §6.1.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import deque
from collections.abc import Sequence

import networkx as nx

from rollcheck.pyimpl.errors import InvalidInputError
from rollcheck.pyimpl.pattern import Checkpoint, Pattern
from rollcheck.pyimpl.rgraph import node_offsets, rgraph, rgraph_csr

__all__ = [
    "zpath",
    "zcycle",
    "is_zpath",
    "useless_checkpoints",
    "useless_checkpoints_networkx",
    "zcycle_checkpoints",
    "zpath_exists_rgraph",
]


def _check_checkpoint(p: Pattern, c: tuple[int, int], what: str, volatile_ok: bool = False) -> tuple[int, int]:
    i, x = c
    if not 0 <= i < p.n:
        raise InvalidInputError(f"unknown process index {i}", location=what)
    hi = p.volatile_index(i) if volatile_ok else p.last_index(i)
    if not 0 <= x <= hi:
        raise InvalidInputError(f"{p.processes[i]} has checkpoints 0..{hi}, not {x}", location=what)
    return i, x


def zpath(p: Pattern, src: tuple[int, int], dst: tuple[int, int]) -> list[str] | None:
    """One Z-path from ``src`` to ``dst`` with the fewest messages, or None if there is none.

    Runs in O(M + n) after grouping: every process is "entered" at an interval and the messages it
    sends from that interval on are enqueued once (the sends of a process are ordered by interval).
    ``dst`` may be the volatile state (index last+1): then any delivery counts.

    Parameters
    ----------
    p : Pattern
        The checkpoint and communication pattern.
    src, dst : tuple of int
        The checkpoints ``(process, index)`` the path leaves and reaches.

    Returns
    -------
    list of str or None
        The message ids in path order.

    Examples
    --------
    >>> from rollcheck.pyimpl.pattern import PatternBuilder
    >>> b = PatternBuilder(2)
    >>> b.deliver(1, b.send(0, 1)); b.checkpoint(1); b.deliver(0, b.send(1, 0))
    1
    >>> zpath(b.build(), (1, 1), (1, 1))
    ['m1', 'm0']
    """
    i, x = _check_checkpoint(p, src, "from")
    j, y = _check_checkpoint(p, dst, "to", volatile_ok=True)
    sends, ivals = _sends_by_process(p)
    msgs = p.messages
    ptr = [len(s) for s in sends]
    parent: dict[int, int | None] = {}
    queue: deque[int] = deque()

    def enter(k: int, z: int, via: int | None) -> None:
        pos = bisect_left(ivals[k], z)
        for idx in sends[k][pos : ptr[k]]:
            parent[idx] = via
            queue.append(idx)
        if pos < ptr[k]:
            ptr[k] = pos

    enter(i, x, None)
    while queue:
        idx = queue.popleft()
        m = msgs[idx]
        d = m.deliver_interval
        assert d is not None
        if m.receiver == j and d < y:
            path = []
            cur: int | None = idx
            while cur is not None:
                path.append(msgs[cur].id)
                cur = parent[cur]
            return path[::-1]
        enter(m.receiver, d, idx)
    return None


def _sends_by_process(p: Pattern) -> tuple[tuple[tuple[int, ...], ...], tuple[tuple[int, ...], ...]]:
    """Per process: its *delivered* messages in send order, and their send intervals.

    :attr:`Pattern.delivered_sends`, computed once per pattern.
    """
    return p.delivered_sends


def zcycle(p: Pattern, c: tuple[int, int]) -> list[str] | None:
    """A Z-cycle through checkpoint ``c`` (a Z-path from ``c`` to itself), or None.

    Parameters
    ----------
    p : Pattern
        The checkpoint and communication pattern.
    c : tuple of int
        The checkpoint ``(process, index)``.

    Returns
    -------
    list of str or None
        The message ids of the cycle.
    """
    return zpath(p, c, c)


def is_zpath(p: Pattern, messages: Sequence[str], src: tuple[int, int], dst: tuple[int, int]) -> bool:
    """Check, from the definition, that ``messages`` is a Z-path from ``src`` to ``dst``.

    Parameters
    ----------
    p : Pattern
        The checkpoint and communication pattern.
    messages : sequence of str
        Message ids in path order (empty: not a Z-path).
    src, dst : tuple of int
        The checkpoints ``(process, index)`` the path must leave and reach.
    """
    if not messages:
        return False
    by_id = p.message_by_id
    try:
        ms = [by_id[mid] for mid in messages]
    except KeyError:
        return False
    (i, x), (j, y) = src, dst
    if ms[0].sender != i or ms[0].send_interval < x:
        return False
    for a, b in zip(ms, ms[1:], strict=False):
        if a.deliver_interval is None or a.receiver != b.sender or b.send_interval < a.deliver_interval:
            return False
    last = ms[-1]
    return last.deliver_interval is not None and last.receiver == j and last.deliver_interval < y


def useless_checkpoints(p: Pattern) -> list[Checkpoint]:
    """All useless checkpoints, in O(V + E): one strongly-connected-components pass (scipy).

    C[i,x] is useless iff C[i,x] and C[i,x+1] lie in the same SCC of the R-graph with volatile
    nodes (``specs/theorems.md#t3-scc``). Sorted by process, then index.

    Examples
    --------
    >>> from rollcheck.pyimpl.pattern import PatternBuilder
    >>> b = PatternBuilder(2)
    >>> b.deliver(1, b.send(0, 1)); b.checkpoint(1); b.deliver(0, b.send(1, 0))
    1
    >>> useless_checkpoints(b.build())
    [Checkpoint(process=1, index=1)]
    """
    import numpy as np
    from scipy.sparse.csgraph import connected_components

    if p.num_messages == 0:
        return []
    g = rgraph_csr(p)
    _, labels = connected_components(g, directed=True, connection="strong")
    off = node_offsets(p)
    out: list[Checkpoint] = []
    last = np.asarray(p.last_indices)
    for i in np.nonzero(last > 0)[0]:
        lo = int(off[i]) + 1
        hi = lo + int(last[i])
        same = labels[lo:hi] == labels[lo + 1 : hi + 1]
        out.extend(Checkpoint(int(i), int(x) + 1) for x in np.nonzero(same)[0])
    return out


def useless_checkpoints_networkx(p: Pattern, graph: nx.DiGraph | None = None) -> list[Checkpoint]:
    """The readable version of :func:`useless_checkpoints`, on networkx's SCCs.

    ``graph`` defaults to :func:`rollcheck.pyimpl.rgraph.rgraph` of ``p`` (it is not modified).

    Parameters
    ----------
    p : Pattern
        The checkpoint and communication pattern.
    graph : networkx.DiGraph, optional
        The R-graph of ``p`` (None: built here).

    Returns
    -------
    list of Checkpoint
        The checkpoints on a Z-cycle, by process then index.
    """
    g = rgraph(p) if graph is None else graph
    comp: dict[tuple[int, int], int] = {}
    for k, scc in enumerate(nx.strongly_connected_components(g)):
        for node in scc:
            comp[node] = k
    return [
        Checkpoint(i, x)
        for i in range(p.n)
        for x in range(1, p.last_index(i) + 1)
        if comp[(i, x)] == comp[(i, x + 1)]
    ]


def zcycle_checkpoints(p: Pattern) -> list[Checkpoint]:
    """Checkpoints on a Z-cycle, by one Z-path search per checkpoint (the definition, no SCC)."""
    return [Checkpoint(i, x) for i, x in p.checkpoints(include_initial=True) if zcycle(p, (i, x))]


def zpath_exists_rgraph(p: Pattern, src: tuple[int, int], dst: tuple[int, int], graph: nx.DiGraph | None = None) -> bool:
    """Z-path existence through Wang's theorem (``specs/theorems.md#t3-wang``).

    An R-graph path from C[i,x+1] to C[j,y] that uses at least one message edge, found by a
    breadth-first search over (node, used-a-message-edge) states; ``graph`` defaults to
    :func:`rollcheck.pyimpl.rgraph.rgraph` of ``p``.

    Parameters
    ----------
    p : Pattern
        The checkpoint and communication pattern.
    src, dst : tuple of int
        The checkpoints ``(process, index)`` the path leaves and reaches.
    graph : networkx.DiGraph, optional
        The R-graph of ``p`` (None: built here).
    """
    i, x = _check_checkpoint(p, src, "from")
    j, y = _check_checkpoint(p, dst, "to", volatile_ok=True)
    g = rgraph(p) if graph is None else graph
    start = ((i, x + 1), False)
    seen = {start}
    queue = deque([start])
    while queue:
        node, used = queue.popleft()
        if used and node == (j, y):
            return True
        for succ, data in g[node].items():
            state = (succ, used or data.get("kind") == "message")
            if state not in seen:
                seen.add(state)
                queue.append(state)
    return False
