"""Builders of span systems: the epoch domain in a few lines, and from a recorded execution.

:func:`epoch_system` builds a system in which every time is an epoch (an integer batch id) and
every checkpoint covers the epochs ``0..E``, the shape of a micro-batch engine such as Spark
Structured Streaming: a restored span ``{0..E}`` means "resume at batch ``E + 1``"
(:func:`resume_epoch`). :func:`rollcheck.pyimpl.spans.executor.build_system` derives a system from a run of
the example executor (sequence numbers, epochs, loops, bridges).

Index conventions: chain index 0 is the empty span; chain index ``k >= 1`` is the ``k``-th
checkpoint given, covering epochs ``0..checkpoints[k-1]``.

References
----------
.. [1] I. Gog, M. Isard, M. Abadi. "Falkirk Wheel: Rollback Recovery for Dataflow Systems",
   SoCC 2021, §3.1 (epochs), §3.3 (T_D, T_M), §4.2 (batch and lazy checkpointing regimes).

Definitions: ``specs/spans.md#epoch-systems``.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rollcheck.pyimpl.errors import InvalidInputError
from rollcheck.pyimpl.spans.system import TOP, EdgeSpec, ProcessorSpec, SpanSystem

__all__ = ["EpochProcessor", "EpochEdge", "epoch_system", "resume_epoch", "build_system", "random_epoch_document"]


@dataclass(frozen=True)
class EpochProcessor:
    """A processor of an epoch system: its checkpoints and the last epoch it processed.

    ``checkpoints``: the last epoch of each checkpoint, strictly increasing; ``processed``: the last
    epoch the processor has processed (``None`` if failed, which drops its ⊤).
    """

    checkpoints: tuple[int, ...] = ()
    processed: int | None = None


@dataclass(frozen=True)
class EpochEdge:
    """An edge carrying epochs ``0..sent`` (``sent = -1``: nothing yet).

    ``logged`` edges keep their messages (no T_D).
    """

    name: str
    src: str
    dst: str
    sent: int = -1
    logged: bool = False
    received: int = -1  # last epoch the destination processed on this edge


def _upto(e: int) -> frozenset:
    return frozenset(range(e + 1))


def epoch_system(processors: Mapping[str, EpochProcessor], edges: Sequence[EpochEdge]) -> SpanSystem:
    """A span system over epochs with identity transformers.

    Parameters
    ----------
    processors : mapping of str to EpochProcessor
        Per processor, its checkpoint epochs and the epochs it processed (None: failed).
    edges : sequence of EpochEdge
        The edges with the epochs sent, received and whether they are logged.

    Examples
    --------
    >>> from rollcheck.pyimpl.spans.fixpoint import solve
    >>> s = epoch_system(
    ...     {"source": EpochProcessor((1, 3), processed=4),
    ...      "agg": EpochProcessor((1, 2), processed=None),   # failed
    ...      "sink": EpochProcessor((0, 2), processed=3)},
    ...     [EpochEdge("a", "source", "agg", sent=4, logged=True, received=3),
    ...      EpochEdge("b", "agg", "sink", sent=3, received=3)])
    >>> spans = solve(s); spans
    {'source': 'top', 'agg': 2, 'sink': 2}
    >>> resume_epoch(s, spans, "agg")
    3
    """
    procs = []
    for name, p in processors.items():
        prev = -1
        for e in p.checkpoints:
            if e <= prev:
                raise InvalidInputError(f"processor {name}: checkpoint epochs must strictly increase",
                                        location=f"processors.{name}.checkpoints")
            prev = e
        chain = (frozenset(), *(_upto(e) for e in p.checkpoints))
        top = None
        if p.processed is not None:
            if p.processed < prev:
                raise InvalidInputError(f"processor {name}: processed {p.processed} < last checkpoint {prev}",
                                        location=f"processors.{name}.processed")
            top = _upto(p.processed)
        procs.append(ProcessorSpec(name, chain, top))
    by = {p.name: p for p in procs}
    out = []
    for ed in edges:
        for end in (ed.src, ed.dst):
            if end not in by:
                raise InvalidInputError(f"edge {ed.name}: unknown processor {end!r}", location=f"edges.{ed.name}")
        ps = by[ed.src]
        universe = _upto(ed.sent)
        disc = tuple(frozenset() if ed.logged else c & universe for c in ps.chain)
        dtop = None if ps.top is None else (frozenset() if ed.logged else ps.top & universe)
        phi = tuple(c & universe for c in ps.chain)
        out.append(EdgeSpec(ed.name, ed.src, ed.dst, disc, dtop, _upto(ed.received) & universe, phi))
    return SpanSystem(tuple(procs), tuple(out))


def build_system(run: Any, failed: set[str], top_all: bool = False, phi: str = "reject") -> Any:
    """The span system of a recorded execution of the example executor when ``failed`` fail now.

    See :func:`rollcheck.pyimpl.spans.executor.build_system`; returns its ``Built``: the system and
    the span objects behind every level.

    Parameters
    ----------
    run : Run
        The executor's recorded run.
    failed : set of str
        The processors that fail.
    top_all : bool, optional
        Build the wrong variant whose ⊤ is all times, not the concrete ⊤.
    phi : str, optional
        What to do with a non-monotone φ (``"reject"``, ``"normalise"``, ``"keep"``).
    """
    from rollcheck.pyimpl.spans.executor import build_system as _build

    return _build(run, failed, top_all=top_all, phi=phi)


def resume_epoch(s: SpanSystem, spans: Mapping[str, int | str], name: str) -> int | None:
    """The first epoch not in ``name``'s restored span (``None`` if it stays at ⊤).

    Parameters
    ----------
    s : SpanSystem
        An epoch system (:func:`epoch_system`).
    spans : mapping of str to int or str
        The solved level per processor (``"top"``: kept).
    name : str
        The processor.
    """
    p = s.proc(name)
    v = spans[name]
    if v == TOP:
        return None
    c = p.chain[int(v)]
    return max(c) + 1 if c else 0


def random_epoch_document(seed: int, n_procs: int, n_edges: int, *, checkpoints: int = 3, epochs: int = 8,
                          failed: float = 0.3, logged: float = 0.5) -> dict[str, Any]:
    """A random ``rollcheck.spans/1`` document over epochs that an execution could produce.

    Every processor checkpoints up to ``checkpoints`` times (epochs ``0..ck``) and has processed up
    to a later epoch (failed ones lose ⊤); a sender sends every epoch it processed, unlogged with
    probability ``1 - logged``; a receiver processed the prefix its ⊤ reaches; φ is the identity.
    The same ``seed`` gives the same document.

    >>> d = random_epoch_document(1, 3, 4)
    >>> d["format"], len(d["edges"])
    ('rollcheck.spans/1', 4)

    Parameters
    ----------
    seed : int
        The seed of the draw.
    n_procs : int
        The number of processors (>= 1).
    n_edges : int
        The number of edges (>= 0).
    checkpoints : int, optional
        The most checkpoints of a processor (below ``epochs``).
    epochs : int, optional
        The number of epochs.
    failed : float, optional
        The probability that a processor failed.
    logged : float, optional
        The probability that an edge is logged.
    """
    if n_procs < 1 or n_edges < 0 or not 0 < epochs or checkpoints >= epochs:
        raise InvalidInputError("need n_procs >= 1, n_edges >= 0 and checkpoints < epochs", location="arguments")
    rng = random.Random(seed)
    ck = [sorted(rng.sample(range(epochs - 1), rng.randint(0, checkpoints))) for _ in range(n_procs)]
    done = [(c[-1] if c else 0) + rng.randrange(0, 3) for c in ck]
    dead = [rng.random() < failed for _ in range(n_procs)]
    procs: dict[str, Any] = {}
    for p in range(n_procs):
        d: dict[str, Any] = {"chain": [[]] + [list(range(e + 1)) for e in ck[p]]}
        if not dead[p]:
            d["top"] = list(range(done[p] + 1))
        procs[f"p{p}"] = d
    edges = []
    for j in range(n_edges):
        a, b = rng.randrange(n_procs), rng.randrange(n_procs)
        sent = done[a]
        unlogged = rng.random() >= logged
        e: dict[str, Any] = {"name": f"e{j}", "src": f"p{a}", "dst": f"p{b}",
                             "discarded": [[]] + [list(range(min(c, sent) + 1)) if unlogged else [] for c in ck[a]]}
        if not dead[a]:
            e["discarded_top"] = list(range(sent + 1)) if unlogged else []
        upto = min(sent, done[b]) if not dead[b] else sent
        e["processed"] = list(range(upto + 1))
        e["phi"] = [[]] + [list(range(min(c, sent) + 1)) for c in ck[a]]
        edges.append(e)
    return {"format": "rollcheck.spans/1", "processors": procs, "edges": edges}
