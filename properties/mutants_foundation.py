"""Deliberately broken variants of the pattern algorithms, and the properties that catch them.

Each function below is a plausible mistake (the ones found by brute force when the algorithms were
written); each is declared in the mutation catalogue (:class:`~rollcheck.properties.mutation.MutantSpec`)
with the property that must kill it and the implementation slot it replaces. The reference
implementations live in :mod:`pyimpl`; nothing here is used outside tests and the catalogue.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import networkx as nx

from rollcheck.properties.mutation import MutantSpec, register
from rollcheck.pyimpl.pattern import Checkpoint, Pattern
from rollcheck.pyimpl.patternio import pattern_from_dict, pattern_to_dict
from rollcheck.pyimpl.recovery import RecoveryLine, _finish
from rollcheck.pyimpl.rgraph import rgraph
from rollcheck.pyimpl.zpaths import _sends_by_process

__all__ = ["BROKEN", "SPECS"]


# --------------------------------------------------------------------------- broken variants
def useless_without_volatile(p: Pattern) -> list[Checkpoint]:
    """SCC test on an R-graph without the V nodes (misses useless checkpoints)."""
    g = rgraph(p)
    g.remove_nodes_from([(i, p.volatile_index(i)) for i in range(p.n)])
    comp = {v: k for k, scc in enumerate(nx.strongly_connected_components(g)) for v in scc}
    return [Checkpoint(i, x) for i in range(p.n) for x in range(1, p.last_index(i))
            if comp[(i, x)] == comp[(i, x + 1)]]


def useless_scc_off_by_one(p: Pattern) -> list[Checkpoint]:
    """Compares C[i,x-1] with C[i,x] instead of C[i,x] with C[i,x+1]."""
    g = rgraph(p)
    comp = {v: k for k, scc in enumerate(nx.strongly_connected_components(g)) for v in scc}
    return [Checkpoint(i, x) for i in range(p.n) for x in range(1, p.last_index(i) + 1)
            if comp[(i, x - 1)] == comp[(i, x)]]


def recovery_without_volatile(p: Pattern, failed: Iterable[int], virtual: bool = True) -> RecoveryLine:
    """R-graph marking without V nodes.

    A failed process marks only from its last checkpoint's successors, so messages sent in its
    last interval are forgotten.
    """
    g = rgraph(p)
    fail = set(failed)
    marked: set[tuple[int, int]] = set()
    for i in range(p.n):
        if i in fail or not virtual:
            v = (i, p.volatile_index(i))
            marked.add(v)
            g.remove_edges_from([(v, w) for w in list(g.successors(v))])
            marked |= nx.descendants(g, v)
    line = []
    for i in range(p.n):
        x = p.volatile_index(i)
        while (i, x) in marked:
            x -= 1
        line.append(x)
    return _finish(p, line)


def _propagation(p: Pattern, failed: Iterable[int], virtual: bool, local: bool = True,
                 single_pass: bool = False, shift: int = 1) -> RecoveryLine:
    fail = set(failed)
    g = nx.DiGraph()
    for i in range(p.n):
        g.add_nodes_from((i, x) for x in range(p.volatile_index(i) + 1))
        if local:
            g.add_edges_from(((i, x), (i, x + 1)) for x in range(p.volatile_index(i)))
    for m in p.messages:
        if m.deliver_interval is not None:
            g.add_edge((m.sender, m.send_interval), (m.receiver, m.deliver_interval + shift))
    for i in range(p.n):
        if i in fail or not virtual:
            g.remove_node((i, p.volatile_index(i)))
    roots = [p.volatile_index(i) if (i not in fail and virtual) else p.last_index(i) for i in range(p.n)]
    while True:
        marked: set[tuple[int, int]] = set()
        for i in range(p.n):
            for s in g.successors((i, roots[i])):
                marked.add(s)
                marked |= nx.descendants(g, s)
        changed = False
        for i in range(p.n):
            if (i, roots[i]) in marked:
                x = roots[i] - 1
                while (i, x) in marked:
                    x -= 1
                if max(x, 0) != roots[i]:
                    roots[i] = max(x, 0)
                    changed = True
        if not changed or single_pass:
            return _finish(p, roots)


def cgraph_no_local_edges(p: Pattern, failed: Iterable[int], virtual: bool = True) -> RecoveryLine:
    return _propagation(p, failed, virtual, local=False)


def cgraph_single_pass(p: Pattern, failed: Iterable[int], virtual: bool = True) -> RecoveryLine:
    return _propagation(p, failed, virtual, single_pass=True)


def cgraph_receiver_off_by_one(p: Pattern, failed: Iterable[int], virtual: bool = True) -> RecoveryLine:
    return _propagation(p, failed, virtual, shift=0)


def wang_plain_reachability(p: Pattern, src: tuple[int, int], dst: tuple[int, int], graph: Any = None) -> bool:
    """Wang's test without the 'at least one message edge' condition."""
    g = rgraph(p)
    (i, x), (j, y) = src, dst
    return nx.has_path(g, (i, x + 1), (j, y))


def zpath_causal_only(p: Pattern, src: tuple[int, int], dst: tuple[int, int]) -> list[str] | None:
    """Follows only causal chains.

    The next message must be sent after the delivery (strictly later interval), so non-causal
    Z-paths inside one interval are missed.
    """
    sends, _ = _sends_by_process(p)
    msgs = p.messages
    (i, x), (j, y) = src, dst
    frontier: list[tuple[int, int | None]] = [(k, None) for k in sends[i] if msgs[k].send_interval >= x]
    parent: dict[int, int | None] = {}
    while frontier:
        nxt: list[tuple[int, int | None]] = []
        for k, via in frontier:
            if k in parent:
                continue
            parent[k] = via
            m = msgs[k]
            if m.receiver == j and m.deliver_interval < y:  # type: ignore[operator]
                out: list[str] = []
                cur: int | None = k
                while cur is not None:
                    out.append(msgs[cur].id)
                    cur = parent[cur]
                return out[::-1]
            nxt += [(k2, k) for k2 in sends[m.receiver] if msgs[k2].send_interval > m.deliver_interval]  # type: ignore[operator]
        frontier = nxt
    return None


def zcycles_to_next(p: Pattern) -> list[Checkpoint]:
    """Looks for a Z-path from C[i,x] to C[i,x+1] instead of back to C[i,x]."""
    from rollcheck.pyimpl.zpaths import zpath

    return [c for c in p.checkpoints() if zpath(p, c, (c.process, c.index + 1)) is not None]


def consistent_off_by_one(p: Pattern, cut: Any) -> bool:
    """Counts a message delivered in the receiver's chosen interval as an orphan."""
    return not any(m.deliver_interval is not None and m.send_interval >= cut[m.sender]
                   and m.deliver_interval <= cut[m.receiver] for m in p.messages)


def clocks_without_merge(p: Pattern) -> list[tuple[int, ...]]:
    """Vector clocks that never merge the sender's clock on delivery."""
    cur = [[0] * p.n for _ in range(p.n)]
    out = []
    for ev in p.events:
        cur[ev.process][ev.process] += 1
        out.append(tuple(cur[ev.process]))
    return out


def wang_max_without_zpath_check(p: Pattern, members: Any, allow_volatile: bool = True) -> Any:
    """Wang's max without first checking that no Z-path links the members."""
    from rollcheck.pyimpl.recovery import ConsistentCheckpoint

    s = dict(members)
    g = rgraph(p)
    starts = [(i, x + 1) for i, x in s.items()]
    if not allow_volatile:
        starts += [(i, p.volatile_index(i)) for i in range(p.n)]
    marked = set(starts)
    for st in starts:
        marked |= nx.descendants(g, st)
    cut = []
    for i in range(p.n):
        if i in s:
            cut.append(s[i])
            continue
        x = p.volatile_index(i)
        while (i, x) in marked:
            x -= 1
        cut.append(x)
    return ConsistentCheckpoint(tuple(cut))


def dump_without_forced(p: Pattern) -> dict[str, Any]:
    doc = pattern_to_dict(p)
    for e in doc["events"]:
        e.pop("forced", None)
    return doc


def load_accepting_duplicate_delivery(doc: Any, source: str | None = None) -> Pattern:
    """A loader that silently drops repeated deliveries instead of rejecting them."""
    import copy

    d = copy.deepcopy(doc)
    seen: set[str] = set()
    kept = []
    for e in d.get("events", []):
        if isinstance(e, dict) and e.get("kind") == "deliver" and e.get("message") in seen:
            continue
        if isinstance(e, dict) and e.get("kind") == "deliver":
            seen.add(e.get("message"))  # type: ignore[arg-type]
        kept.append(e)
    d["events"] = kept
    return pattern_from_dict(d, source)


# --------------------------------------------------------------------------- the catalogue
#: name -> (property, implementation slot, broken function, description)
BROKEN: dict[str, tuple[str, str, Callable[..., Any], str]] = {
    "rgraph-no-volatile": ("scc-useless", "useless", useless_without_volatile,
                           "SCC test on an R-graph without volatile nodes"),
    "scc-off-by-one": ("scc-useless", "useless", useless_scc_off_by_one,
                       "compares C[i,x-1] with C[i,x] instead of C[i,x] with C[i,x+1]"),
    "recovery-no-volatile": ("recovery-line-is-maximum", "line_fn", recovery_without_volatile,
                             "recovery line marking without volatile nodes"),
    "recovery-no-volatile-z3": ("z3-line-maximal", "line_fn", recovery_without_volatile,
                                "the same broken line, caught by the Z3 encoding"),
    "cgraph-no-local-edges": ("cgraph-equals-rgraph", "propagate", cgraph_no_local_edges,
                              "rollback propagation without the local edges"),
    "cgraph-single-pass": ("cgraph-equals-rgraph", "propagate", cgraph_single_pass,
                           "rollback propagation stopped after one pass"),
    "cgraph-receiver-off-by-one": ("cgraph-equals-rgraph", "propagate", cgraph_receiver_off_by_one,
                                   "message edge to C[j,y] instead of C[j,y+1]"),
    "wang-no-message-edge": ("wang-zpath-rgraph", "exists_fn", wang_plain_reachability,
                             "plain R-graph reachability without the message-edge condition"),
    "zpath-causal-only": ("zpath-witness", "zpath_fn", zpath_causal_only,
                          "Z-path search that needs the next send in a strictly later interval"),
    "zcycle-to-next-checkpoint": ("netzer-xu-useless-iff-zcycle", "zcycles", zcycles_to_next,
                                  "Z-cycle test that ends at C[i,x+1] instead of C[i,x]"),
    "useless-no-volatile-z3": ("z3-useless-agrees", "useless", useless_without_volatile,
                               "SCC test without volatile nodes, caught by the Z3 encoding"),
    "netzer-xu-causal-only": ("netzer-xu-sets", "zpath_fn", zpath_causal_only,
                              "consistency of a set judged with that strict-interval Z-path search"),
    "orphan-off-by-one": ("consistency-lattice", "consistent", consistent_off_by_one,
                          "delivery in the receiver's chosen interval counted as orphan"),
    "clocks-no-merge": ("consistency-lattice", "clocks", clocks_without_merge,
                        "vector clocks that do not merge on delivery"),
    "wang-max-no-zpath-check": ("wang-min-max-containing", "max_fn", wang_max_without_zpath_check,
                                "Wang's maximum without the Z-path check"),
    "format-drops-forced": ("pattern-json-roundtrip", "dump", dump_without_forced,
                            "writer that drops the forced flag"),
    "loader-accepts-duplicate-delivery": ("loader-rejects-invalid", "load", load_accepting_duplicate_delivery,
                                          "loader that ignores repeated deliveries"),
}


SPECS = tuple(
    MutantSpec(name, area="foundation", description=description, kills=(prop_name,), slots={slot: broken},
               target=prop_name.split("-")[0])
    for name, (prop_name, slot, broken, description) in BROKEN.items()
)
register(*SPECS)
