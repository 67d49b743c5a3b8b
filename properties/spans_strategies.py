"""Hypothesis strategies for span systems (``rollcheck.spans/1`` documents).

Systems have a few processors, random edges (cycles and self-loops allowed), small universes of
times per processor, strictly increasing chains, live processors with a concrete ⊤, and per
edge nested T_D, a processed set and φ (monotone unless ``monotone=False``).
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

__all__ = ["span_docs", "truncate", "dataflow_span_docs", "mixed_span_docs"]


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
    """Span-system documents: processors with chains (live ones with a ⊤) and edges between them.

    ``dense`` makes every time processed and nothing discarded, so receivers are limited by φ
    alone; ``monotone`` draws nested φ sets.
    """
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


@st.composite
def dataflow_span_docs(draw: Any, max_product: int = 4000, attempts: int = 6) -> dict[str, Any]:
    """Span systems recorded from a simulated dataflow execution (``pyimpl/spans/executor/``).

    An example dataflow runs with a drawn seed; one (sometimes two) processors fail after a drawn
    number of deliveries (mostly late, when checkpoints exist) and the system is derived from the
    recording, so ⊤ is valid by construction (the concrete set of processed times). Up to
    ``attempts`` failure points are drawn and the first whose rollback is non-trivial (some
    processor lands strictly between its first span and ⊤ under the reference fixed point) is
    kept — the selection only steers the inputs, the properties judge with independent oracles.
    Systems whose assignment space exceeds ``max_product`` are skipped (brute force stays cheap).
    """
    from hypothesis import assume

    from rollcheck.pyimpl.spans.executor import EXAMPLES, Run, build_system, run_to_end
    from rollcheck.pyimpl.spans.fixpoint import compile_system, run_worklist
    from rollcheck.pyimpl.spans.system import system_to_dict

    name = draw(st.sampled_from(sorted(EXAMPLES)), label="dataflow")
    seed = draw(st.integers(0, 10_000), label="seed")
    make = EXAMPLES[name]
    n = run_to_end(Run.start(make(seed), seed)).steps
    assume(n > 1)
    s = None
    for _ in range(attempts):
        fail_at = int(n * (1.0 - draw(st.floats(0.0, 0.5), label="fail earlier by")))
        r = Run.start(make(seed), seed)
        while r.steps < fail_at and r.step():
            pass
        r.checkpointing = False
        two = draw(st.integers(0, 3), label="two failures") == 0
        failed = draw(st.sets(st.sampled_from(sorted(r.df.ops)), min_size=1, max_size=1 + int(two)), label="failed")
        s = build_system(r, set(failed)).system
        c = compile_system(s)
        levels = run_worklist(c).levels
        if any(0 < lv < p.top_level for lv, p in zip(levels, s.processors, strict=True)):
            break
    assert s is not None
    size = 1
    for p in s.processors:
        size *= p.top_level + 1
    assume(size <= max_product)
    return system_to_dict(s)


@st.composite
def mixed_span_docs(draw: Any, max_procs: int = 4, max_chain: int = 3, max_edges: int = 6) -> dict[str, Any]:
    """Five sixths recorded from dataflow executions, one sixth random systems (cycles, self-loops)."""
    if draw(st.integers(0, 5), label="random system") == 5:
        return draw(span_docs(max_procs=max_procs, max_chain=max_chain, max_edges=max_edges))
    return draw(dataflow_span_docs())
