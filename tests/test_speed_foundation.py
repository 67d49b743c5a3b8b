"""The foundation section's speed-ups keep the same answers: the compact R-graph has the networkx
R-graph's edges, the cached per-process sends are the definition's, a shared R-graph gives the same
networkx results, and a pattern's deep copy is the (immutable) pattern itself."""

from __future__ import annotations

import copy
import itertools

import pytest

from rollcheck.pyimpl.generate import random_pattern
from rollcheck.pyimpl.recovery import recovery_line, recovery_line_networkx
from rollcheck.pyimpl.rgraph import checkpoint_graph, node_offsets, rgraph, rgraph_csr
from rollcheck.pyimpl.zpaths import useless_checkpoints, useless_checkpoints_networkx

PATTERNS = [random_pattern(n, steps, seed) for n in (2, 3, 5) for steps in (6, 40, 200) for seed in range(4)]


def _edges_of_csr(p, shift):
    off = node_offsets(p)
    node = {int(off[i]) + x: (i, x) for i in range(p.n) for x in range(p.volatile_index(i) + 1)}
    g = rgraph_csr(p, shift=shift).tocoo()
    return {(node[int(a)], node[int(b)]) for a, b in zip(g.row, g.col, strict=True)}


@pytest.mark.parametrize("shift", [0, 1])
def test_compact_graph_has_the_networkx_edges(shift):
    for p in PATTERNS:
        g = rgraph(p) if shift == 1 else checkpoint_graph(p)
        assert _edges_of_csr(p, shift) == set(g.edges()), p


def test_extra_source_points_at_the_given_nodes():
    p = PATTERNS[-1]
    g = rgraph_csr(p, extra_sources=[0, 3, 5])
    total = int(node_offsets(p)[-1])
    assert g.shape == (total + 1, total + 1)
    assert sorted(g.getrow(total).indices.tolist()) == [0, 3, 5]


def test_parallel_message_edges_keep_every_message():
    from rollcheck.pyimpl.pattern import PatternBuilder

    b = PatternBuilder(2)
    m0, m1 = b.send(0, 1), b.send(0, 1)
    b.deliver(1, m0)
    b.deliver(1, m1)
    g = rgraph(b.build())
    assert g.edges[(0, 1), (1, 1)] == {"kind": "message", "messages": (m0, m1)}
    assert g.edges[(1, 0), (1, 1)] == {"kind": "local", "messages": ()}


def test_delivered_sends_follow_the_definition():
    for p in PATTERNS:
        sends, ivals = p.delivered_sends
        for i in range(p.n):
            mine = [k for k, m in enumerate(p.messages) if m.sender == i and m.deliver_interval is not None]
            assert list(sends[i]) == mine
            assert list(ivals[i]) == [p.messages[k].send_interval for k in mine]


def test_shared_rgraph_gives_the_same_networkx_answers():
    for p in PATTERNS[::3]:
        g = rgraph(p)
        edges = set(g.edges())
        assert set(useless_checkpoints_networkx(p, g)) == set(useless_checkpoints_networkx(p))
        assert set(useless_checkpoints_networkx(p, g)) == set(useless_checkpoints(p))
        for k in range(1, p.n + 1):
            for failed in itertools.combinations(range(p.n), k):
                for virtual in (True, False):
                    shared = recovery_line_networkx(p, failed, virtual, graph=g)
                    assert shared == recovery_line_networkx(p, failed, virtual)
                    assert shared == recovery_line(p, failed, virtual)
        assert set(g.edges()) == edges  # the searches did not modify the shared graph


def test_deep_copy_of_a_pattern_is_the_pattern():
    p = PATTERNS[5]
    drawn = {"p": p, "k": [1, 2]}
    c = copy.deepcopy(drawn)
    assert c["p"] is p and c["k"] == [1, 2] and c["k"] is not drawn["k"]
