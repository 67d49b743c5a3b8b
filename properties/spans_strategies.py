"""Hypothesis strategies for span systems (``rollcheck.spans/1`` documents).

Systems have a few processors, random edges (cycles and self-loops allowed), small universes of
times per processor, strictly increasing chains, live processors with a concrete ⊤, and per
edge nested T_D, a processed set and φ (monotone unless ``monotone=False``).
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

__all__ = ["span_docs", "truncate"]


def _nested(draw: Any, universe: list[str], k: int, first_empty: bool) -> list[list[str]]:
    """``k`` nested subsets of ``universe`` (the first one empty when asked)."""
    out: list[list[str]] = []
    cur: set[str] = set()
    for i in range(k):
        if not (i == 0 and first_empty):
            cur = cur | set(draw(st.lists(st.sampled_from(universe), max_size=3))) if universe else cur
        out.append(sorted(cur))
    return out


@st.composite
def span_docs(draw: Any, max_procs: int = 4, max_chain: int = 3, max_edges: int = 6,
              monotone: bool = True, live_p: float = 0.6,
              dense: bool = False, min_procs: int = 1, min_edges: int = 0) -> dict[str, Any]:
    n = draw(st.integers(min_procs, max_procs))
    names = [f"p{i}" for i in range(n)]
    nedges = draw(st.integers(min_edges, max_edges))
    pairs = [draw(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1))) for _ in range(nedges)]
    # times on edge j belong to the destination; name them "<edge>:<n>"
    uni: dict[str, list[str]] = {p: [] for p in names}
    for j, (_a, b) in enumerate(pairs):
        uni[names[b]] += [f"e{j}:{k}" for k in range(1, 4)]
    procs: dict[str, Any] = {}
    for p in names:
        u = uni[p] or [f"{p}:x", f"{p}:y"]
        k = draw(st.integers(1, max_chain))
        chain: list[list[str]] = [[]]
        cur: set[str] = set()
        for _ in range(k - 1):
            extra = set(draw(st.lists(st.sampled_from(u), min_size=1, max_size=3))) - cur
            if not extra:
                left = [t for t in u if t not in cur]
                if not left:
                    break
                extra = {left[0]}
            cur = cur | extra
            chain.append(sorted(cur))
        d: dict[str, Any] = {"chain": chain}
        if draw(st.floats(0, 1)) < live_p:
            d["top"] = sorted(cur | set(draw(st.lists(st.sampled_from(u), max_size=3))))
        procs[p] = d
    edges = []
    for j, (a, b) in enumerate(pairs):
        src, dst = names[a], names[b]
        u = [f"e{j}:{k}" for k in range(1, 4)]
        k = len(procs[src]["chain"])
        disc = _nested(draw, u, k, True)
        e: dict[str, Any] = {"name": f"e{j}", "src": src, "dst": dst, "discarded": disc}
        if "top" in procs[src]:
            e["discarded_top"] = sorted(set(disc[-1]) | set(draw(st.lists(st.sampled_from(u), max_size=2))))
        if dense:  # everything processed, little discarded: receivers are limited by φ alone
            e["discarded"] = [[] for _ in disc]
            e.pop("discarded_top", None)
            if "top" in procs[src]:
                e["discarded_top"] = []
            e["processed"] = list(u)
        else:
            e["processed"] = sorted(set(draw(st.lists(st.sampled_from(u), max_size=3))))
        if monotone:
            e["phi"] = _nested(draw, u, k, False)
        else:
            e["phi"] = [sorted(set(draw(st.lists(st.sampled_from(u), max_size=3)))) for _ in range(k)]
        edges.append(e)
    return {"format": "rollcheck.spans/1", "processors": procs, "edges": edges}


def truncate(doc: dict[str, Any], lengths: dict[str, int], tops: bool = False) -> dict[str, Any]:
    """The document with chain of ``p`` cut to ``lengths[p]`` entries (and no ⊤ unless ``tops``)."""
    procs = {}
    for p, d in doc["processors"].items():
        nd: dict[str, Any] = {"chain": d["chain"][: lengths[p]]}
        if tops and "top" in d:
            nd["top"] = d["top"]
        procs[p] = nd
    edges = []
    for e in doc["edges"]:
        k = lengths[e["src"]]
        ne = dict(e, discarded=e["discarded"][:k], phi=e["phi"][:k])
        if not (tops and "top" in doc["processors"][e["src"]]):
            ne.pop("discarded_top", None)
        edges.append(ne)
    return {"format": doc["format"], "processors": procs, "edges": edges}
