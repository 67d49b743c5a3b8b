"""Properties of the Falkirk Wheel span algorithm (theorems in ``specs/spans.md``).

Implementations under test are keyword arguments so that mutants can be substituted:
``solver(system) -> {name: level}`` for the fixed point, ``update(system, old, p)`` for the
incremental watermark, and ``recovery`` (solver and ⊤ flavour) for the end-to-end executor.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping
from typing import Any

from hypothesis import assume, given
from hypothesis import strategies as st

from rollcheck.properties.registry import interesting, prop
from rollcheck.properties.spans_strategies import mixed_span_docs, span_docs, truncate
from rollcheck.pyimpl.errors import PropertyViolation
from rollcheck.pyimpl.spans.executor import EXAMPLES, Run, failure_experiment, run_to_end
from rollcheck.pyimpl.spans.fixpoint import compile_system, run_rounds, run_worklist, solve_literal
from rollcheck.pyimpl.spans.system import SpanSystem, system_from_dict, system_to_dict
from rollcheck.pyimpl.spans.watermark import low_watermark, update_watermark

__all__ = [
    "reference_solver", "downstream_only_solver", "drops_inflight_solver", "brute_force", "greatest_by_z3",
    "definition_violations",
    "feasible", "greatest_brute", "greatest_z3", "orders_agree", "watermark_props", "end_to_end",
]

Solver = Callable[[SpanSystem], Mapping[str, int]]


def reference_solver(s: SpanSystem, order: str = "fifo", seed: int = 0) -> dict[str, int]:
    """The greatest consistent spans of ``s`` by the reference worklist (or rounds) solver.

    ``order`` is the worklist order (``"rounds"`` for round-based solving), ``seed`` its seed.

    Parameters
    ----------
    s : SpanSystem
        The span system.
    order : str, optional
        ``fifo``, ``lifo``, ``random`` or ``rounds``.
    seed : int, optional
        Seed of the random order.

    Returns
    -------
    dict of str to int
        The level of each processor.
    """
    c = compile_system(s)
    r = run_rounds(c) if order == "rounds" else run_worklist(c, order, seed)
    return dict(zip(c.names, r.levels, strict=True))


def downstream_only_solver(s: SpanSystem, order: str = "fifo", seed: int = 0) -> dict[str, int]:
    """WRONG on purpose: after a change, re-examines only the receivers of the changed processor.

    Parameters
    ----------
    s : SpanSystem
        The span system.
    order : str, optional
        ``fifo``, ``lifo``, ``random`` or ``rounds``.
    seed : int, optional
        Seed of the random order.

    Returns
    -------
    dict of str to int
        The level of each processor.
    """
    c = compile_system(s)
    r = run_worklist(c, order, seed, watchers=c.downstream)
    return dict(zip(c.names, r.levels, strict=True))


def drops_inflight_solver(s: SpanSystem, order: str = "fifo", seed: int = 0) -> dict[str, int]:
    """WRONG on purpose: C1 at a live sender's ⊤ uses the T_D of its last checkpoint.

    The fixed point of a system that uses it instead of ``T_D(⊤)``, so an unlogged message sent
    after that checkpoint and still in flight is dropped from the constraint (the receiver may
    roll back past it).

    Parameters
    ----------
    s : SpanSystem
        The span system.
    order : str, optional
        ``fifo``, ``lifo``, ``random`` or ``rounds``.
    seed : int, optional
        Seed of the random order.

    Returns
    -------
    dict of str to int
        The level of each processor.
    """

    class _DropsInflight(SpanSystem):
        def c1_holds(self, e: Any, src_level: int, dst_level: int) -> bool:
            ps = self.proc(e.src)
            if ps.is_top(src_level) and not self.proc(e.dst).is_top(dst_level):
                return e.discarded[-1] <= self.proc(e.dst).span(dst_level)
            return SpanSystem.c1_holds(self, e, src_level, dst_level)

    return reference_solver(_DropsInflight(s.processors, s.edges, s.phi_monotone), order, seed)


# ------------------------------------------------------------------------------------------------
# The independent oracle: the constraints of specs/spans.md#constraints written from the
# definitions on the raw sets of the system (no SpanSystem.c1_holds / c2_holds / violations).
# ------------------------------------------------------------------------------------------------
def _level_set(p: Any, level: int) -> frozenset:
    """The span of processor ``p`` at ``level``: chain element, or ⊤ at ``len(chain)`` (live only)."""
    return p.chain[level] if level < len(p.chain) else p.top


def _levels(p: Any) -> range:
    return range(len(p.chain) + (1 if p.top is not None else 0))


def definition_violations(s: SpanSystem, lv: Mapping[str, int]) -> list[str]:
    """Every constraint C1/C2 of ``specs/spans.md#constraints`` that ``lv`` violates, from the sets.

    C1 of ``e = (p, q)``: ``T_D(s(p)) ⊆ s(q)`` unless both are at ⊤; C2: ``T_M ∩ s(q) ⊆ φ(s(p))``
    with ``φ(⊤)`` = all times.

    Parameters
    ----------
    s : SpanSystem
        The span system.
    lv : Mapping of str to int
        A level per processor.

    Returns
    -------
    list of str
        One line per violated constraint (empty: feasible).
    """
    procs = {p.name: p for p in s.processors}
    bad = []
    for e in s.edges:
        p, q = procs[e.src], procs[e.dst]
        x, y = lv[e.src], lv[e.dst]
        p_top, q_top = x == len(p.chain), y == len(q.chain)
        sent = e.discarded_top if p_top else e.discarded[x]
        if not (p_top and q_top) and not set(sent or ()) <= set(_level_set(q, y)):
            bad.append(f"C1 on edge {e.name} ({e.src}->{e.dst}): {sorted(map(str, set(sent or ()) - _level_set(q, y)))} lost")
        if not p_top:
            dup = (set(e.processed) & set(_level_set(q, y))) - set(e.phi[x])
            if dup:
                bad.append(f"C2 on edge {e.name} ({e.src}->{e.dst}): {sorted(map(str, dup))} duplicated")
    return bad


def _edge_holds(p: Any, q: Any, e: Any, x: int, y: int) -> bool:
    """C1 and C2 of ``e = (p, q)`` at source level ``x`` and destination level ``y``.

    From the sets (the same definitions as :func:`definition_violations`).
    """
    p_top, q_top = x == len(p.chain), y == len(q.chain)
    sent = e.discarded_top if p_top else e.discarded[x]
    if not (p_top and q_top) and not set(sent or ()) <= set(_level_set(q, y)):
        return False
    return p_top or not (set(e.processed) & set(_level_set(q, y))) - set(e.phi[x])


def brute_force(s: SpanSystem) -> list[dict[str, int]]:
    """Every feasible assignment (small systems only), feasibility from the definitions.

    Each edge's constraints are decided once per pair of its endpoints' levels; an assignment is
    feasible iff every edge holds at its endpoints' levels.
    """
    names = s.names
    procs = {p.name: p for p in s.processors}
    ranges = [_levels(p) for p in s.processors]
    pos = {n: i for i, n in enumerate(names)}
    checks = []
    for e in s.edges:
        p, q = procs[e.src], procs[e.dst]
        ok = {(x, y) for x in _levels(p) for y in _levels(q) if _edge_holds(p, q, e, x, y)}
        checks.append((pos[e.src], pos[e.dst], ok))
    out = []
    for combo in itertools.product(*ranges):
        if all((combo[a], combo[b]) in ok for a, b, ok in checks):
            out.append(dict(zip(names, combo, strict=True)))
    return out


def greatest_by_z3(s: SpanSystem, result: Mapping[str, int]) -> tuple[bool, bool]:
    """(result feasible under the Z3 encoding, some feasible assignment has a processor above it).

    A second encoding of the definitions: one integer level per processor and, for every time t
    of a processor's spans, the Boolean "t ∈ s(p)" ⇔ level ≥ the first level whose span holds t
    (spans grow along the chain and ⊤ contains the last one). C1 of an edge at source level x is
    "every t of T_D(x) is in s(dst)" (waived when both are at ⊤); C2 at source level x below ⊤ is
    "no t of T_M outside φ(x) is in s(dst)".

    Parameters
    ----------
    s : SpanSystem
        The span system.
    result : Mapping of str to int
        The level per processor to check.

    Returns
    -------
    tuple of (bool, bool)
        Feasible, and something above it.
    """
    import z3

    v = {p.name: z3.Int(p.name) for p in s.processors}
    procs = {p.name: p for p in s.processors}
    base = []
    for p in s.processors:
        base += [v[p.name] >= 0, v[p.name] < len(_levels(p))]

    members: dict[tuple[str, Any], Any] = {}

    def member(name: str, t: Any) -> Any:
        key = (name, t)
        if key not in members:  # one term per processor and time, shared by every constraint using it
            p = procs[name]
            first = next((lvl for lvl in _levels(p) if t in _level_set(p, lvl)), None)
            members[key] = z3.BoolVal(False) if first is None else v[name] >= first
        return members[key]

    for e in s.edges:
        p, q = procs[e.src], procs[e.dst]
        for x in _levels(p):
            p_top = x == len(p.chain)
            sent = e.discarded_top if p_top else e.discarded[x]
            at_x = v[e.src] == x
            need = [member(e.dst, t) for t in sorted(sent or (), key=str)]
            if need:
                waive = v[e.dst] == len(q.chain) if (p_top and q.top is not None) else z3.BoolVal(False)
                base.append(z3.Implies(z3.And(at_x, z3.Not(waive)), z3.And(*need)))
            if not p_top:
                forbidden = [z3.Not(member(e.dst, t)) for t in sorted(set(e.processed) - set(e.phi[x]), key=str)]
                if forbidden:
                    base.append(z3.Implies(at_x, z3.And(*forbidden)))
    sol = z3.Solver()
    sol.add(*base)
    sol.push()
    sol.add(*[v[n] == result[n] for n in v])
    feas = sol.check() == z3.sat
    sol.pop()
    sol.add(z3.Or(*[v[n] > result[n] for n in v]))
    above = sol.check() == z3.sat
    return feas, above


def _report_between(s: SpanSystem, lv: Mapping[str, int]) -> None:
    interesting(any(0 < lv[p.name] < p.top_level for p in s.processors), _BETWEEN)


_BETWEEN = "a processor strictly between its first span and ⊤"


def _fail(msg: str, s: SpanSystem) -> None:
    raise PropertyViolation(msg, counterexample=system_to_dict(s))


@prop("spans-feasible", target="spans", theorem="specs/spans.md#maximality", area="spans",
      interesting=_BETWEEN, floor=0.3)
@given(doc=mixed_span_docs(max_procs=5, max_chain=4, max_edges=8))
def feasible(doc: dict[str, Any], solver: Callable[..., Mapping[str, int]] = reference_solver) -> None:
    """The result satisfies every constraint (checked from the definitions), in four orders.

    Parameters
    ----------
    doc : dict
        A span-system document (drawn by Hypothesis).
    solver : callable, optional
        ``solver(s, order, seed)``, the solver checked.
    """
    s = system_from_dict(doc)
    for order, seed in (("fifo", 0), ("lifo", 0), ("random", 1), ("random", 2)):
        lv = solver(s, order, seed)
        if order == "fifo":
            _report_between(s, lv)
        bad = definition_violations(s, lv)
        if bad:
            _fail(f"result {s.labels(lv)} ({order} order) violates {bad}", s)


@prop("spans-greatest-brute", target="spans", theorem="specs/spans.md#maximality", area="spans",
      interesting=_BETWEEN, floor=0.3)
@given(doc=mixed_span_docs(max_procs=4, max_chain=3, max_edges=6))
def greatest_brute(doc: dict[str, Any], solver: Solver = reference_solver) -> None:
    """No feasible assignment has a processor above the result, and the result is feasible.

    Assignments are enumerated, their feasibility taken from the definitions.

    Parameters
    ----------
    doc : dict
        A span-system document (drawn by Hypothesis).
    solver : callable, optional
        ``solver(s)``, the solver checked.
    """
    s = system_from_dict(doc)
    lv = solver(s)
    _report_between(s, lv)
    bad = definition_violations(s, lv)
    if bad:
        _fail(f"result {s.labels(lv)} is infeasible: {bad}", s)
    for other in brute_force(s):
        if any(other[n] > lv[n] for n in lv):
            _fail(f"feasible {s.labels(other)} has a processor above the result {s.labels(lv)}", s)


@prop("spans-greatest-z3", target="spans", theorem="specs/spans.md#maximality", area="spans",
      interesting=_BETWEEN, floor=0.3)
@given(doc=mixed_span_docs(max_procs=8, max_chain=4, max_edges=14))
def greatest_z3(doc: dict[str, Any], solver: Solver = reference_solver) -> None:
    """Z3 (a second encoding of the definitions) finds the result feasible and nothing above it.

    Parameters
    ----------
    doc : dict
        A span-system document (drawn by Hypothesis).
    solver : callable, optional
        ``solver(s)``, the solver checked.
    """
    s = system_from_dict(doc)
    lv = solver(s)
    _report_between(s, lv)
    feas, above = greatest_by_z3(s, lv)
    if not feas:
        _fail(f"Z3: result {s.labels(lv)} is infeasible", s)
    if above:
        _fail(f"Z3: some feasible assignment has a processor above {s.labels(lv)}", s)


@prop("spans-orders-agree", target="spans", theorem="specs/spans.md#orders", area="spans",
      interesting=_BETWEEN, floor=0.3)
@given(doc=mixed_span_docs(max_procs=6, max_chain=4, max_edges=10), seed=st.integers(0, 2**16))
def orders_agree(doc: dict[str, Any], seed: int,
                 solver: Callable[..., Mapping[str, int]] = reference_solver) -> None:
    """FIFO, LIFO, random worklists, whole-graph rounds and the literal set algorithm agree.

    Parameters
    ----------
    doc : dict
        A span-system document (drawn by Hypothesis).
    seed : int
        Seed of the random orders.
    solver : callable, optional
        ``solver(s, order, seed)``, the solver checked.
    """
    s = system_from_dict(doc)
    results = {o: dict(solver(s, o, seed)) for o in ("fifo", "lifo", "random", "rounds")}
    _report_between(s, results["rounds"])
    results["literal"] = solve_literal(s, "random", seed)
    if len({tuple(sorted(r.items())) for r in results.values()}) != 1:
        _fail(f"orders disagree: { {k: s.labels(v) for k, v in results.items()} }", s)


@prop("spans-watermark", target="spans", theorem="specs/spans.md#watermark")
@given(doc=span_docs(max_procs=5, max_chain=5, max_edges=8, dense=True, min_procs=3, min_edges=4),
       data=st.data())
def watermark_props(doc: dict[str, Any], data: Any,
                    update: Callable[[SpanSystem, Mapping[str, int], str], Mapping[str, int]] = update_watermark
                    ) -> None:
    """The low watermark is updated incrementally, never decreases, and no failure goes below it.

    Checkpoints arrive one at a time in drawn orders; then a drawn failure set is solved.

    Parameters
    ----------
    doc : dict
        A span-system document (drawn by Hypothesis).
    data : hypothesis data
        Draws the arrival orders and failure set.
    update : callable, optional
        ``update(s, old, p)``, the incremental watermark checked.
    """
    full = system_from_dict(doc)
    target = {p.name: len(p.chain) for p in full.processors}
    for _history in range(3):  # three drawn orders in which the checkpoints arrive
        lengths = dict.fromkeys(target, 1)
        wm = low_watermark(system_from_dict(truncate(doc, lengths)))
        while lengths != target:
            p = data.draw(st.sampled_from(sorted(n for n in target if lengths[n] < target[n])))
            lengths[p] += 1
            s = system_from_dict(truncate(doc, lengths))
            fresh = low_watermark(s)
            inc = dict(update(s, wm, p))
            if inc != fresh:
                _fail(f"incremental watermark {inc} != recomputed {fresh} after {p} checkpointed", s)
            if any(fresh[n] < wm[n] for n in wm):
                _fail(f"watermark decreased: {wm} -> {fresh}", s)
            wm = fresh
    failed = data.draw(st.sets(st.sampled_from(sorted(target))))
    d2 = {**doc, "processors": {n: ({"chain": d["chain"]} if n in failed else d)
                                for n, d in doc["processors"].items()}}
    d2["edges"] = [({k: v for k, v in e.items() if k != "discarded_top"} if e["src"] in failed else e)
                   for e in doc["edges"]]
    s = system_from_dict(d2)
    lv = reference_solver(s)
    if any(lv[n] < wm[n] for n in wm):
        _fail(f"failure of {sorted(failed)} rolls below the watermark: {s.labels(lv)} < {wm}", s)


@prop("spans-end-to-end", target="spans", theorem="specs/spans.md#exactly-once")
@given(name=st.sampled_from(sorted(EXAMPLES)), seed=st.integers(0, 10_000),
       frac=st.floats(0, 1), data=st.data())
def end_to_end(name: str, seed: int, frac: float, data: Any,
               solver: Solver | None = None, top_all: bool = False) -> None:
    """A failure and its recovery by the spans leave the same final state as the failure-free run.

    Examples, seeds, failure points and 1–2 failed operators are drawn (Theorem E).

    Parameters
    ----------
    name : str
        The example dataflow.
    seed : int
        Its seed.
    frac : float
        Failure point as a fraction of the run's deliveries.
    data : hypothesis data
        Draws the failed operators.
    solver : callable, optional
        The recovery's solver (None: the reference).
    top_all : bool, optional
        Build ⊤ as all times (a wrong variant) instead of the concrete sets.
    """
    make = EXAMPLES[name]
    df = make(seed)
    ref = run_to_end(Run.start(df, seed))  # the failure-free run, also the one compared with
    n = ref.steps
    assume(n > 0)
    failed = data.draw(st.sets(st.sampled_from(sorted(df.ops)), min_size=1, max_size=2))
    fail_at = int(frac * n)
    out = failure_experiment(lambda: make(seed), seed, fail_at, set(failed), solver=solver, top_all=top_all,
                             ref=ref)
    if not out.ok:
        raise PropertyViolation(
            f"{name} seed={seed} fail {sorted(failed)} after {fail_at} deliveries: spans {out.levels}: "
            f"{out.detail}", counterexample=system_to_dict(out.system) if out.system else None)


@prop("spans-frontier-equals-sets", target="spans", theorem="specs/spans.md#frontiers")
@given(seed=st.integers(0, 2**20), cyclic=st.booleans(), jitter=st.sampled_from([0.0, 0.5, 0.9]),
       procs=st.integers(2, 6), edges=st.integers(1, 16))
def frontier_equals_sets(seed: int, cyclic: bool, jitter: float, procs: int, edges: int,
                         compile_fn: Callable[..., Any] | None = None) -> None:
    """The flat frontier form gives the same spans as the explicit-set system.

    Need tables from per-edge arrays, in the Python worklist and in bulk steps.

    Parameters
    ----------
    seed : int
        Seed of the random system.
    cyclic : bool
        Whether it has cycles.
    jitter : float
        Spread of the checkpoint times (0: aligned).
    procs : int
        Processors.
    edges : int
        Edges.
    compile_fn : callable, optional
        The frontier compiler checked (None: the reference).
    """
    from rollcheck.pyimpl.spans.frontier import compile_seq, random_seq_system, run_bulk, run_flat

    s = random_seq_system(edges, cyclic=cyclic, seed=seed, K=3, failed=0.3, n_procs=procs, jitter=jitter)
    sys_ = s.to_span_system()
    ref = reference_solver(sys_)
    want = [ref[n] for n in sys_.names]
    fc = (compile_fn or compile_seq)(s)
    got_flat, got_bulk = run_flat(fc)[0], run_bulk(fc)[0].tolist()
    if got_flat != want or got_bulk != want:
        _fail(f"frontier form {got_flat} / bulk {got_bulk} != explicit sets {want}", sys_)


def _register_measures() -> None:
    from rollcheck.properties.registry import measure

    measure("spans-watermark", "two or more processors with three or more checkpoints",
            lambda doc, **_: sum(len(d["chain"]) >= 3 for d in doc["processors"].values()) >= 2)
    measure("spans-end-to-end", "the failure strikes in the second half of the run",
            lambda frac, **_: frac >= 0.5)
    measure("spans-frontier-equals-sets", "a cyclic system", lambda cyclic, **_: cyclic)


_register_measures()
