"""The rollback-dependency graph (R-graph) and the checkpoint graph, readable and compact.

Conventions (``specs/conventions.md`` §R-graph): nodes are C[i,x] for x = 0..last+1, where
C[i,last+1] is the volatile state V[i]. Edges: C[i,x] → C[i,x+1] (local), and for every delivered
message sent in I[i,x] and delivered in I[j,y]: C[i,x+1] → C[j,y+1] (R-graph) or
C[i,x] → C[j,y+1] (checkpoint graph). Nodes are written as ``(process, index)`` tuples.

References
----------
.. [1] Y.-M. Wang, "Consistent global checkpoints that contain a given set of local checkpoints",
   IEEE Trans. Computers 46(4), 1997 (R-graph), as used in FERDiS §6.
.. [2] FERDiS paper (``ferdis-…``), §6 (recovery lines, rollback-dependency and checkpoint graphs).
"""

from __future__ import annotations

from typing import Any

import networkx as nx

from rollcheck.pyimpl.pattern import Pattern

__all__ = ["rgraph", "checkpoint_graph", "node_offsets", "rgraph_csr"]


def rgraph(p: Pattern) -> nx.DiGraph:
    """The R-graph of ``p`` with volatile nodes, as a networkx DiGraph.

    Message edges carry ``kind="message"`` and the message ids in ``messages``; local edges carry
    ``kind="local"`` (a message edge parallel to a local edge keeps ``kind="message"``).

    Examples
    --------
    >>> from rollcheck.pyimpl.pattern import PatternBuilder
    >>> b = PatternBuilder(2); b.deliver(1, b.send(0, 1))
    >>> sorted(rgraph(b.build()).edges())
    [((0, 0), (0, 1)), ((0, 1), (1, 1)), ((1, 0), (1, 1))]
    """
    return _graph(p, shift=1)


def checkpoint_graph(p: Pattern) -> nx.DiGraph:
    """The checkpoint graph (rollback-propagation formulation): message edge C[i,x] → C[j,y+1]."""
    return _graph(p, shift=0)


def _graph(p: Pattern, shift: int) -> nx.DiGraph:
    g = nx.DiGraph()
    for i in range(p.n):
        v = p.volatile_index(i)
        g.add_nodes_from(((i, x) for x in range(v + 1)), process=i)
        g.add_edges_from((((i, x), (i, x + 1)) for x in range(v)), kind="local", messages=())
    # message edges grouped first (in the order of their first message), then added in one call
    grouped: dict[tuple[tuple[int, int], tuple[int, int]], list[str]] = {}
    for m in p.messages:
        if m.deliver_interval is None:
            continue
        key = ((m.sender, m.send_interval + shift), (m.receiver, m.deliver_interval + 1))
        ids = grouped.get(key)
        if ids is None:
            grouped[key] = [m.id]
        else:
            ids.append(m.id)
    g.add_edges_from((u, w, {"kind": "message", "messages": tuple(ids)}) for (u, w), ids in grouped.items())
    return g


def node_offsets(p: Pattern) -> Any:
    """``offsets[i]`` = integer id of C[i,0] in the compact graph; C[i,x] is ``offsets[i] + x``."""
    import numpy as np

    sizes = np.asarray(p.last_indices, dtype=np.int64) + 2
    offsets = np.zeros(p.n + 1, dtype=np.int64)
    np.cumsum(sizes, out=offsets[1:])
    return offsets


def rgraph_csr(p: Pattern, shift: int = 1, extra_sources: Any = None) -> Any:
    """The R-graph (``shift=1``) or checkpoint graph (``shift=0``) as a scipy CSR matrix.

    With ``extra_sources`` (an integer array of node ids), one more node (id = number of nodes) is
    added with an edge to each of them: a super-source for multi-source reachability.

    Parameters
    ----------
    p : Pattern
        The checkpoint and communication pattern.
    shift : int, optional
        1: the R-graph; 0: the checkpoint graph.
    extra_sources : numpy.ndarray, optional
        Node ids the super-source points to (None: no super-source).

    Returns
    -------
    scipy.sparse.csr_matrix
        The adjacency matrix (nodes numbered by :func:`node_offsets`).
    """
    import numpy as np
    from scipy.sparse import csr_matrix

    a = p.arrays
    off = node_offsets(p)
    total = int(off[-1])
    # local edges: every node except each process's V has an edge to the next node
    src_local = np.arange(total, dtype=np.int64)
    keep = np.ones(total, dtype=bool)
    keep[off[1:] - 1] = False
    src_local = src_local[keep]
    dst_local = src_local + 1
    d = a.deliver_interval
    delivered = d >= 0
    src_msg = off[a.sender[delivered]] + a.send_interval[delivered] + shift
    dst_msg = off[a.receiver[delivered]] + d[delivered] + 1
    parts_src = [src_local, src_msg]
    parts_dst = [dst_local, dst_msg]
    n_nodes = total
    if extra_sources is not None:
        extra = np.asarray(extra_sources, dtype=np.int64)
        parts_src.append(np.full(len(extra), total, dtype=np.int64))
        parts_dst.append(extra)
        n_nodes = total + 1
    rows = np.concatenate(parts_src)
    cols = np.concatenate(parts_dst)
    data = np.ones(len(rows), dtype=np.int8)
    return csr_matrix((data, (rows, cols)), shape=(n_nodes, n_nodes))
