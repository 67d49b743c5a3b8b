"""The garbage-collection low watermark and input acknowledgement / output release.

The *low watermark* of a span system is the greatest consistent assignment over checkpoints
only (no ⊤ anywhere): the span each processor would roll back to in the worst case that every
processor failed at once (Falkirk Wheel §4.3). Since it is feasible in every failure scenario of
the same checkpoints, a real failure never rolls a processor below it; since adding a checkpoint
only adds options, it never decreases.

Incremental update when processor ``p`` adds a checkpoint: raise the connected group around
``p`` of processors below their chain top to their tops, keep the others at the old watermark,
and run the worklist from there (only the group is examined first). The result equals
recomputation (``specs/spans.md#watermark``).

Input acknowledgement and output release (§4.3): an input batch at time ``t`` is acknowledged,
and an output at time ``t`` is released, once ``t`` lies in the processor's watermark span.

References
----------
.. [1] I. Gog, M. Isard, M. Abadi. "Falkirk Wheel: Rollback Recovery for Dataflow Systems",
   SoCC 2021, §4.3 (garbage collection, inputs and outputs).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping

from rollcheck.pyimpl.spans.fixpoint import compile_system, run_worklist
from rollcheck.pyimpl.spans.system import EdgeSpec, ProcessorSpec, SpanSystem

__all__ = ["checkpoints_only", "low_watermark", "update_watermark", "released"]


def checkpoints_only(s: SpanSystem) -> SpanSystem:
    """The same system with every processor treated as failed (no ⊤)."""
    return SpanSystem(tuple(ProcessorSpec(p.name, p.chain, None) for p in s.processors),
                      tuple(EdgeSpec(e.name, e.src, e.dst, e.discarded, None, e.processed, e.phi) for e in s.edges),
                      s.phi_monotone)


def low_watermark(s: SpanSystem) -> dict[str, int]:
    """The low watermark: chain index per processor (greatest assignment without ⊤).

    Examples
    --------
    >>> from rollcheck.pyimpl.spans.system import system_from_dict
    >>> s = system_from_dict({"format": "rollcheck.spans/1", "processors": {
    ...   "p": {"chain": [[], [1], [1, 2]], "top": [1, 2, 3]}, "q": {"chain": [[], [1]], "top": [1]}},
    ...   "edges": [{"name": "e", "src": "p", "dst": "q", "discarded": [[], [1], [1, 2]],
    ...              "discarded_top": [1, 2, 3], "processed": [1], "phi": [[], [1], [1, 2]]}]})
    >>> low_watermark(s)
    {'p': 1, 'q': 1}
    """
    c = compile_system(checkpoints_only(s))
    r = run_worklist(c)
    return dict(zip(c.names, r.levels, strict=True))


def update_watermark(s_new: SpanSystem, old: Mapping[str, int], p: str) -> dict[str, int]:
    """Incremental watermark after ``p`` added checkpoint(s); ``s_new`` is the updated system.

    Only processors in the connected group of ``p`` (processors below their chain top, linked by
    edges in either direction) start at their chain tops and are examined first; the others keep
    ``old``.

    Parameters
    ----------
    s_new : SpanSystem
        The system with the new checkpoint(s).
    old : mapping of str to int
        The previous watermark levels.
    p : str
        The processor that checkpointed.

    Returns
    -------
    dict of str to int
        The new watermark levels.
    """
    base = checkpoints_only(s_new)
    c = compile_system(base)
    idx = {n: i for i, n in enumerate(c.names)}
    below = {n for n in c.names if n == p or old.get(n, 0) < c.top[idx[n]]}
    adj: dict[str, set[str]] = {n: set() for n in c.names}
    for e in base.edges:
        adj[e.src].add(e.dst)
        adj[e.dst].add(e.src)
    group, stack = {p}, [p]
    while stack:
        x = stack.pop()
        for y in adj[x]:
            if y in below and y not in group:
                group.add(y)
                stack.append(y)
    start = [c.top[idx[n]] if n in group else old.get(n, 0) for n in c.names]
    r = run_worklist(c, start=start, initial=sorted(idx[n] for n in group))
    return dict(zip(c.names, r.levels, strict=True))


def released(in_watermark: Callable[[Hashable], bool], times: Iterable[Hashable]) -> list[Hashable]:
    """The times among ``times`` that may be acknowledged (inputs) or released (outputs).

    Those in the processor's watermark span (``in_watermark(t)`` is True).

    >>> released(lambda t: t <= 1, [0, 1, 2])
    [0, 1]

    Parameters
    ----------
    in_watermark : callable
        ``in_watermark(t)``: True when ``t`` is in the watermark span.
    times : iterable of hashable
        The candidate times.
    """
    return [t for t in times if in_watermark(t)]
