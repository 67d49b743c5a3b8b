"""Recovery of the example executor and the exactly-once check.

Fail processors, solve the span system, restore every processor to its span (selective replay),
reset the queues from the logs, finish the run and compare it with the failure-free run.

References
----------
.. [1] I. Gog, M. Isard, M. Abadi. "Falkirk Wheel: Rollback Recovery for Dataflow Systems",
   SoCC 2021, §3.3 (the fixed point), §3.4 (selective rollback), §4.1 (recovery), §4.3 (acknowledged
   inputs and released outputs are never rolled back).
"""

from __future__ import annotations

import copy
from collections import Counter, deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rollcheck.pyimpl.errors import InternalError, InvalidInputError
from rollcheck.pyimpl.spans.executor.graph import Dataflow
from rollcheck.pyimpl.spans.executor.operators import Source
from rollcheck.pyimpl.spans.executor.recording import build_system
from rollcheck.pyimpl.spans.executor.run import Msg, Run, run_to_end
from rollcheck.pyimpl.spans.fixpoint import solve_levels, solve_literal
from rollcheck.pyimpl.spans.system import SpanSystem

__all__ = ['Outcome', 'recover', 'exactly_once', 'failure_experiment', 'failure_sweep']

@dataclass
class Outcome:
    """The outcome of one failure experiment.

    Attributes
    ----------
    levels : dict of str to int or str
        The level each processor was restored to (``"top"``: kept).
    lost : list of tuple
        The unlogged messages lost, as ``(edge, time)``.
    ok : bool
        Whether the run was exactly once.
    detail : str
        ``"exactly once"``, else the lost messages or the first difference from the
        failure-free run.
    system : SpanSystem or None
        The span system solved.
    """

    levels: dict[str, int | str]
    lost: list[tuple[str, Any]]
    ok: bool
    detail: str
    system: SpanSystem | None = None


def recover(r: Run, failed: set[str], solver: Callable[[SpanSystem], Mapping[str, int]] | None = None,
            top_all: bool = False) -> tuple[Mapping[str, int], list[tuple[str, Any]], SpanSystem]:
    """Fail ``failed`` now, compute the spans, restore every processor, reset the queues.

    Parameters
    ----------
    r : Run
        The run, changed in place.
    failed : set of str
        The processors that fail.
    solver : callable, optional
        Takes the span system, gives the level per processor (None: the fixed point).
    top_all : bool, optional
        Use the wrong variant whose ⊤ is all times (:func:`build_system`).

    Returns
    -------
    levels : Mapping of str to int
        The level of every processor.
    lost : list of tuple
        The lost messages, as ``(edge, time)``.
    system : SpanSystem
        The span system solved.
    """
    built = build_system(r, failed, top_all=top_all, phi="keep" if top_all else "normalise")
    s = built.system
    if solver is None:
        if s.phi_monotone:
            res = solve_levels(s)
            levels = {p.name: res.levels[i] for i, p in enumerate(s.processors)}
        else:
            levels = solve_literal(s)
    else:
        levels = dict(solver(s))
    df = r.df
    at_top = {p.name: p.is_top(levels[p.name]) for p in s.processors}
    keep_span = {p: built.spans[p][levels[p]] for p in df.ops}
    for p in df.ops:
        gone = sorted((t for t in r.released[p] if t not in keep_span[p]), key=repr)
        if gone:
            raise InternalError(f"{p}: released output(s) at {gone[:3]} would be rolled back")
    kept_events: set[int] = set()
    for p in df.ops:
        if at_top[p]:
            kept_events |= {ev.uid for ev in r.history[p]}
            continue
        span = keep_span[p]
        hist = [ev for ev in r.history[p] if ev.time in span]
        r.history[p] = hist
        st: dict = {}
        for ev in hist:
            df.ops[p].process(st, df.outs[p], ev.time, ev.payload)
        r.state[p] = st
        kept_events |= {ev.uid for ev in hist}
        for e in df.outs[p]:
            kept = [m for m in r.sent[e] if m.cause in kept_events]
            if df.edge[e].seq:
                nums = sorted(m.time[1] for m in kept)
                if nums != list(range(1, len(nums) + 1)):
                    raise InternalError(f"{p}: kept sends on {e} are not a prefix; cannot renumber")
                r.seqno[e] = len(nums)
        if f"in:{p}" in r.chan:
            op = df.ops[p]
            assert isinstance(op, Source)
            done = {ev.msg for ev in hist}
            redo: deque[Any] = deque()
            for t in sorted(op.batches):
                if t in span:
                    continue
                if t in r.acked[p]:
                    raise InternalError(f"source {p}: batch {t} was acknowledged but must be re-read")
                for m in _input_msgs(r, p, t):
                    if m.uid not in done:
                        redo.append(m)
            r.chan[f"in:{p}"] = redo
        r.pending_ckpt[p] = []
        r.chain[p] = list(built.spans[p][: levels[p] + 1])  # spans above the restored one are gone
    lost: list[tuple[str, Any]] = []
    for ed in df.edges:
        if at_top[ed.src] and at_top[ed.dst]:
            continue
        got = {ev.msg for ev in r.history[ed.dst] if ev.edge == ed.name}
        q: deque = deque()
        for m in r.sent[ed.name]:
            if m.cause not in kept_events or m.uid in got:
                continue
            if ed.logged:
                q.append(m)
            else:
                lost.append((ed.name, m.time))
        r.chan[ed.name] = q
        r.sent[ed.name] = [m for m in r.sent[ed.name] if m.cause in kept_events]
    for p in df.ops:
        r.state.setdefault(p, {})
    return levels, lost, s


def _input_msgs(r: Run, p: str, t: int) -> list[Msg]:
    if not hasattr(r, "_inputs"):
        r._inputs = {}  # type: ignore[attr-defined]
    key = (p, t)
    if key not in r._inputs:  # type: ignore[attr-defined]
        op = r.df.ops[p]
        assert isinstance(op, Source)
        r._inputs[key] = [Msg(-(1 + i) - 1000 * t, f"in:{p}", t, x, 0)  # type: ignore[attr-defined]
                          for i, x in enumerate(op.batches[t])]
    return r._inputs[key]  # type: ignore[attr-defined]


def _canon(x: Any) -> Any:
    if isinstance(x, dict):
        return sorted((repr(k), _canon(v)) for k, v in x.items())
    if isinstance(x, list):
        return sorted(map(repr, x))
    return x


def exactly_once(a: Run, b: Run) -> str | None:
    """None when ``a`` and ``b`` agree, else the first difference.

    They agree when they end in the same processor states and every edge delivered the same
    multiset of (time, payload).

    Parameters
    ----------
    a, b : Run
        The two runs (of the same dataflow).
    """
    for p in a.df.ops:
        if _canon(a.state[p]) != _canon(b.state[p]):
            return f"processor {p}: final state differs"
        for ch in sorted({ev.edge for ev in a.history[p]} | {ev.edge for ev in b.history[p]}):
            ca = Counter((repr(ev.time), repr(ev.payload)) for ev in a.history[p] if ev.edge == ch)
            cb = Counter((repr(ev.time), repr(ev.payload)) for ev in b.history[p] if ev.edge == ch)
            if ca != cb:
                extra, missing = ca - cb, cb - ca
                return (f"edge {ch} into {p}: duplicated {sorted(extra)[:3]} missing {sorted(missing)[:3]}")
    return None


def failure_experiment(df_factory: Callable[[], Dataflow], seed: int, fail_at: int, failed: set[str],
                       solver: Callable[[SpanSystem], Mapping[str, int]] | None = None,
                       top_all: bool = False, track_watermark: bool = False, ref: Run | None = None) -> Outcome:
    """Run ``df`` with ``seed``, fail ``failed`` after ``fail_at`` deliveries, recover and compare.

    The comparison is with the failure-free run of the same dataflow and seed (``ref``: that run,
    when the caller already made it with ``run_to_end(Run.start(df_factory(), seed))``).

    Parameters
    ----------
    df_factory : callable
        Makes a fresh dataflow.
    seed : int
        The seed of the run's schedule.
    fail_at : int
        Deliveries made before the failure.
    failed : set of str
        The processors that fail.
    solver : callable, optional
        Takes the span system, gives the level per processor (None: the fixed point).
    top_all : bool, optional
        Use the wrong variant whose ⊤ is all times (:func:`build_system`).
    track_watermark : bool, optional
        Advance the low watermark (acknowledge and release) during the run.
    ref : Run, optional
        The failure-free run (None: made here).

    Returns
    -------
    Outcome
        The levels, lost messages and the comparison.
    """
    if ref is None:
        ref = run_to_end(Run.start(df_factory(), seed))
    r = Run.start(df_factory(), seed)
    r.track_watermark = track_watermark
    while r.steps < fail_at and r.step():
        pass
    return _fail_and_compare(r, ref, failed, solver, top_all)


def failure_sweep(df_factory: Callable[[], Dataflow], seed: int, fail_ats: Sequence[int],
                  failed_sets: Sequence[set[str]], solver: Callable[[SpanSystem], Mapping[str, int]] | None = None,
                  top_all: bool = False, track_watermark: bool = False
                  ) -> Iterator[tuple[int, set[str], Outcome]]:
    """:func:`failure_experiment` for every ``fail_at`` of ``fail_ats`` and set of ``failed_sets``.

    Yields ``(fail_at, failed, outcome)``, the same outcomes computed once per dataflow and seed:
    the failure-free run is made once, and one recorded run is advanced from failure point to
    failure point and copied (``copy.deepcopy``) for each failure.

    >>> from rollcheck.pyimpl.spans.executor.examples import EXAMPLES
    >>> make = EXAMPLES["selective"]
    >>> [o.ok for _t, _f, o in failure_sweep(lambda: make(0), 0, [0, 5], [{"sum"}, {"src"}])]
    [True, True, True, True]

    Parameters
    ----------
    df_factory : callable
        Makes a fresh dataflow.
    seed : int
        The seed of the run's schedule.
    fail_ats : sequence of int
        The failure points (deliveries made before the failure).
    failed_sets : sequence of set of str
        The processor sets to fail.
    solver, top_all, track_watermark
        As for :func:`failure_experiment`.

    Yields
    ------
    tuple
        ``(fail_at, failed, outcome)``.
    """
    ref = run_to_end(Run.start(df_factory(), seed))
    base = Run.start(df_factory(), seed)
    base.track_watermark = track_watermark
    for fail_at in fail_ats:
        while base.steps < fail_at and base.step():
            pass
        for failed in failed_sets:
            yield fail_at, failed, _fail_and_compare(copy.deepcopy(base), ref, failed, solver, top_all)


def _fail_and_compare(r: Run, ref: Run, failed: set[str], solver: Callable[[SpanSystem], Mapping[str, int]] | None,
                      top_all: bool) -> Outcome:
    """Fail ``failed`` in ``r`` now, recover, run to the end and compare with ``ref``."""
    r.checkpointing = False
    for p in failed:
        if p not in r.df.ops:
            raise InvalidInputError(f"unknown processor {p!r}", location="failed")
    levels, lost, s = recover(r, failed, solver=solver, top_all=top_all)
    run_to_end(r)
    diff = exactly_once(r, ref)
    labels = s.labels(levels)
    if lost:
        return Outcome(labels, lost, False, f"lost in-flight unlogged message(s) {lost[:3]}", s)
    return Outcome(labels, lost, diff is None, diff or "exactly once", s)

