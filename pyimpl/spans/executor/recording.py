"""From a recorded execution to the span system of a failure.

The universe of times per processor, the chain restricted to it, the concrete ⊤ of every live
processor, and T_D, T_M and φ per edge.

References
----------
.. [1] I. Gog, M. Isard, M. Abadi. "Falkirk Wheel: Rollback Recovery for Dataflow Systems",
   SoCC 2021, §3.2 (transformers), §3.3 (T_D, T_M), §4.1 (the concrete ⊤ of a live processor).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rollcheck.pyimpl.errors import InvalidInputError
from rollcheck.pyimpl.spans import times as T
from rollcheck.pyimpl.spans.executor.graph import Edge
from rollcheck.pyimpl.spans.system import (
    EdgeSpec,
    ProcessorSpec,
    SpanSystem,
    system_from_dict,
    system_to_dict,
)

if TYPE_CHECKING:  # the run is only annotated here; run.py imports this module lazily
    from rollcheck.pyimpl.spans.executor.run import Run

__all__ = ['Built', 'build_system']

def _universe(r: Run, p: str) -> set:
    u = set()
    for ch in [*r.df.ins[p], *( [f"in:{p}"] if f"in:{p}" in r.chan else [])]:
        if ch.startswith("in:"):
            u |= {m.time for m in r.chan[ch]}
        else:
            u |= {m.time for m in r.sent[ch]}
    u |= {ev.time for ev in r.history[p]}
    return u


def _transformer(r: Run, e: Edge) -> T.Transformer | None:
    if e.phi == "identity":
        return T.Identity()
    if e.phi == "conservative":
        return T.Conservative()
    if e.phi == "entry":
        return T.LoopEntry()
    if e.phi == "feedback":
        return T.LoopFeedback()
    if e.phi == "exit":
        return T.LoopExit()
    if e.phi in ("bridge", "bridge-per-epoch"):
        cnt: Counter = Counter(r.cause_time[m.cause][1] for m in r.sent[e.name])
        top = max(cnt, default=-1)
        counts = tuple(cnt[t] for t in range(top + 1))
        return (T.Bridge if e.phi == "bridge" else T.BridgePerEpoch)(e.name, counts)
    if e.phi == "recorded":
        return None
    raise InvalidInputError(f"edge {e.name}: unknown transformer {e.phi!r}")


@dataclass
class Built:
    """A span system and, per processor, the span objects of its levels (chain, then ⊤ if live)."""

    system: SpanSystem
    spans: dict[str, list[T.Span]]  # per processor: chain spans (+ ⊤ last when live)


def build_system(r: Run, failed: set[str], top_all: bool = False, phi: str = "reject") -> Built:
    """Derive the span system of the recording ``r`` when ``failed`` processors fail now.

    ``top_all=True`` builds the WRONG variant in which ⊤ is "all times" instead of the concrete
    ⊤ (kept to show that it loses an in-flight unlogged message).

    Parameters
    ----------
    r : Run
        The recorded run.
    failed : set of str
        The processors that fail.
    top_all : bool, optional
        Build the wrong variant whose ⊤ is all times.
    phi : str, optional
        ``"reject"``, ``"normalise"`` or ``"keep"`` a non-monotone φ, as in :func:`system_from_dict`.

    Returns
    -------
    Built
        The system and the span objects behind every level.
    """
    df = r.df
    procs: list[ProcessorSpec] = []
    spans: dict[str, list[T.Span]] = {}
    for p in df.ops:
        u = _universe(r, p)
        chain_sets: list[frozenset] = []
        chain_spans: list[T.Span] = []
        for s in r.chain[p]:
            fs = s.restrict(u)
            if chain_sets and fs == chain_sets[-1]:
                chain_spans[-1] = s
                continue
            chain_sets.append(fs)
            chain_spans.append(s)
        top = None
        if p not in failed:
            tspan: T.Span = T.concrete_top(chain_spans[-1], [ev.time for ev in r.history[p]])
            if top_all:
                tspan = T.TimeSet(frozenset(u))
            top = tspan.restrict(u)
            chain_spans.append(tspan)
        procs.append(ProcessorSpec(p, tuple(chain_sets), top))
        spans[p] = chain_spans
    edges: list[EdgeSpec] = []
    live_top = {p.name: p.top is not None for p in procs}
    for e in df.edges:
        universe = {m.time for m in r.sent[e.name]}
        sp = spans[e.src]
        k = len(sp) - (1 if live_top[e.src] else 0)
        tr = _transformer(r, e)
        # (time of the message, time of the event that sent it), once per edge; many messages
        # share a cause time, so each span is asked about each distinct cause time once
        sends = [(m.time, r.cause_time[m.cause][1]) for m in r.sent[e.name]]
        causes = {c for _t, c in sends}

        def disc(s: T.Span, e: Edge = e, sends: list = sends, causes: set = causes) -> frozenset:
            if e.logged:
                return frozenset()
            inside = {c for c in causes if c in s}
            return frozenset(t for t, c in sends if c in inside)

        def fixed(s: T.Span, tr: T.Transformer | None = tr, universe: set = universe, sends: list = sends,
                  causes: set = causes) -> frozenset:
            if tr is not None:
                return tr(s, universe)
            inside = {c for c in causes if c in s}
            outside = {t for t, c in sends if c not in inside}
            return frozenset(universe - outside)

        processed = frozenset(ev.time for ev in r.history[e.dst] if ev.edge == e.name)
        edges.append(EdgeSpec(e.name, e.src, e.dst, tuple(disc(sp[i]) for i in range(k)),
                              disc(sp[k]) if live_top[e.src] else None, processed,
                              tuple(fixed(sp[i]) for i in range(k))))
    raw = SpanSystem(tuple(procs), tuple(edges))
    return Built(system_from_dict(system_to_dict(raw), phi=phi), spans)

