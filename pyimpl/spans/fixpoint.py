"""The Falkirk Wheel fixed-point algorithm for globally consistent rollback spans.

Every processor starts at its largest level (⊤ when live) and is repeatedly lowered to the
largest level not above its current one at which every constraint it *owns* holds, given the
current levels of its neighbours: C1 of an out-edge (owned by the sender, neighbour = receiver)
and C2 of an in-edge (owned by the receiver, neighbour = sender). With a worklist, after a
processor ``p`` is lowered every owner of a constraint whose neighbour is ``p`` is re-examined:
the senders of ``p``'s in-edges, the receivers of its out-edges, and ``p`` itself on a self-loop.

For speed each constraint is compiled once into a *need table*: ``need[x]`` is the smallest
level of the neighbour at which the constraint holds when the owner is at level ``x`` (or
``INF``). Because every constraint only gets easier as the neighbour's level grows (C1 always;
C2 iff φ is monotone along the sender's chain), "holds" is exactly ``level[nbr] >= need[x]``, an
O(1) check.

Index conventions: levels as in :mod:`rollcheck.pyimpl.spans.system` (chain index, ``len(chain)`` = ⊤).

References
----------
.. [1] I. Gog, M. Isard, M. Abadi. "Falkirk Wheel: Rollback Recovery for Dataflow Systems",
   SoCC 2021, §3.3 (the fixed point), §4.1 (⊤ for live processors).

The theorem the properties check is ``specs/spans.md#maximality``.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from rollcheck.pyimpl.errors import InvalidInputError
from rollcheck.pyimpl.spans.system import EdgeSpec, SpanSystem

__all__ = [
    "INF",
    "ORDERS",
    "Compiled",
    "SolveResult",
    "compile_system",
    "domino_chain",
    "run_worklist",
    "run_rounds",
    "solve",
    "solve_levels",
    "solve_literal",
]

INF = 1 << 30
ORDERS = ("fifo", "lifo", "random", "rounds")


@dataclass
class Compiled:
    """Constraints grouped by owner, with need tables; processors are numbered ``0..n-1``.

    ``cons[p]`` lists ``(nbr, need)`` pairs for the constraints ``p`` owns; ``watchers[p]`` lists
    the owners to re-examine when ``p`` changes; ``top[p]`` is ``p``'s largest level.
    """

    names: list[str]
    top: list[int]
    cons: list[list[tuple[int, Sequence[int]]]]
    watchers: list[list[int]]
    downstream: list[list[int]] = field(default_factory=list)


@dataclass
class SolveResult:
    """The greatest fixed point found, with the work it took.

    Attributes
    ----------
    levels : list of int
        The level of every processor.
    examinations : int
        Constraint examinations.
    decreases : int
        The sum of all level decreases.
    rounds : int
        Whole-graph rounds (:func:`run_rounds` only; 0 otherwise).
    """

    levels: list[int]
    examinations: int
    decreases: int
    rounds: int = 0


def compile_system(s: SpanSystem) -> Compiled:
    """Compile the constraints of ``s`` into need tables (requires monotone φ).

    >>> from rollcheck.pyimpl.spans.system import system_from_dict
    >>> s = system_from_dict({"format": "rollcheck.spans/1", "processors": {
    ...   "p": {"chain": [[], ["a"]], "top": ["a", "b"]}, "q": {"chain": [[]]}},
    ...   "edges": [{"name": "e", "src": "p", "dst": "q", "discarded": [[], ["x"]],
    ...              "discarded_top": ["x"], "processed": [], "phi": [[], []]}]})
    >>> c = compile_system(s)
    >>> c.cons[0]   # p owns C1 of e: at levels 0,1,2 it needs q at 0, INF, INF
    [(1, [0, 1073741824, 1073741824])]
    """
    if not s.phi_monotone:
        raise InvalidInputError("φ is not monotone along a chain: the fixed point is not the greatest "
                                "solution; normalise φ first", location="edges")
    n = len(s.processors)
    names = s.names
    top = [p.top_level for p in s.processors]
    cons: list[list[tuple[int, Sequence[int]]]] = [[] for _ in range(n)]
    watch: list[set[int]] = [set() for _ in range(n)]
    down: list[set[int]] = [set() for _ in range(n)]
    # the constraints as SpanSystem defines them (not a subclass that redefines them): decided on
    # the sets directly, each span looked up once
    plain = type(s).c1_holds is SpanSystem.c1_holds and type(s).c2_holds is SpanSystem.c2_holds
    spans = [[p.span(lvl) for lvl in range(p.top_level + 1)] for p in s.processors] if plain else []
    for e in s.edges:
        a, b = s.index(e.src), s.index(e.dst)
        if plain:
            need1, need2 = _need_tables(s, e, a, b, spans[b])
        else:
            # C1 owned by a, neighbour b
            need1 = []
            for x in range(top[a] + 1):
                need1.append(next((y for y in range(top[b] + 1) if s.c1_holds(e, x, y)), INF))
            # C2 owned by b, neighbour a
            need2 = []
            for y in range(top[b] + 1):
                need2.append(next((x for x in range(top[a] + 1) if s.c2_holds(e, y, x)), INF))
        cons[a].append((b, need1))
        cons[b].append((a, need2))
        watch[b].add(a)   # a owns C1 whose neighbour is b
        watch[a].add(b)   # b owns C2 whose neighbour is a
        down[a].add(b)
    return Compiled(names, top, cons, [sorted(w) for w in watch], [sorted(d) for d in down])


def _need_tables(s: SpanSystem, e: EdgeSpec, a: int, b: int, spans_b: list[frozenset]) -> tuple[list[int], list[int]]:
    """The need tables of C1 and C2 of ``e = (a, b)``, as :class:`SpanSystem` decides them.

    Exactly as :meth:`SpanSystem.c1_holds` and :meth:`SpanSystem.c2_holds`, with ``spans_b[y]`` the
    span of ``b`` at level ``y``. C1 at sender level ``x``: the least ``y`` with
    ``T_D(x) ⊆ s_y(b)``, any ``y`` at ⊤ of ``b`` when ``x`` is ⊤ of ``a``; C2 at receiver level
    ``y``: the least ``x`` with ``T_M ∩ s_y(b) ⊆ φ(x)``, or ``x`` = ⊤ of ``a`` (φ(⊤) is all times).
    """
    pa, pb = s.processors[a], s.processors[b]
    top_b = pb.top_level
    top_lvl_a = len(pa.chain) if pa.top is not None else -1  # the level of ⊤ (none when failed)
    top_lvl_b = len(pb.chain) if pb.top is not None else -1
    need1 = []
    for x in range(pa.top_level + 1):
        if x == top_lvl_a:
            d = e.discarded_top
            assert d is not None
            need1.append(next((y for y in range(top_b + 1) if y == top_lvl_b or d <= spans_b[y]), INF))
        else:
            d = e.discarded[x]
            need1.append(next((y for y in range(top_b + 1) if d <= spans_b[y]), INF))
    need2 = []
    phi, processed = e.phi, e.processed
    for y in range(top_b + 1):
        m = processed & spans_b[y]
        need2.append(next((x for x in range(pa.top_level + 1) if x == top_lvl_a or m <= phi[x]), INF))
    return need1, need2


def _best(c: Compiled, lvl: list[int], p: int) -> int:
    x = lvl[p]
    cs = c.cons[p]
    while x > 0:
        for nbr, need in cs:
            if need[x] > lvl[nbr]:
                break
        else:
            return x
        x -= 1
    return 0


def run_worklist(c: Compiled, order: str = "fifo", seed: int = 0,
                 watchers: list[list[int]] | None = None,
                 start: list[int] | None = None, initial: Sequence[int] | None = None) -> SolveResult:
    """Run the worklist fixed point on compiled constraints.

    Parameters
    ----------
    order : {"fifo", "lifo", "random"}
        Which pending processor to examine next (``random`` draws with ``seed``).
    watchers : list of lists, optional
        Who to re-examine after a change (default: ``c.watchers``, senders and receivers).
    start : list of int, optional
        Starting levels (default: every processor at its top).
    initial : sequence of int, optional
        The processors on the worklist at the start (default: all).
    """
    w = c.watchers if watchers is None else watchers
    lvl = list(c.top) if start is None else list(start)
    n = len(lvl)
    todo = list(range(n)) if initial is None else list(initial)
    inq = [False] * n
    for p in todo:
        inq[p] = True
    exams = decs = 0
    if order == "random":
        rng = random.Random(seed)
        pool = todo
        while pool:
            i = rng.randrange(len(pool))
            pool[i], pool[-1] = pool[-1], pool[i]
            p = pool.pop()
            inq[p] = False
            exams += 1
            x = _best(c, lvl, p)
            if x != lvl[p]:
                decs += lvl[p] - x
                lvl[p] = x
                for r in w[p]:
                    if not inq[r]:
                        inq[r] = True
                        pool.append(r)
        return SolveResult(lvl, exams, decs)
    if order not in ("fifo", "lifo"):
        raise InvalidInputError(f"unknown order {order!r}; use one of {ORDERS}", location="order")
    dq = deque(todo)
    pop = dq.popleft if order == "fifo" else dq.pop
    push = dq.append
    cons = c.cons
    while dq:
        p = pop()
        inq[p] = False
        exams += 1
        x = lvl[p]
        cs = cons[p]
        while x > 0:
            for nbr, need in cs:
                if need[x] > lvl[nbr]:
                    break
            else:
                break
            x -= 1
        if x != lvl[p]:
            decs += lvl[p] - x
            lvl[p] = x
            for r in w[p]:
                if not inq[r]:
                    inq[r] = True
                    push(r)
    return SolveResult(lvl, exams, decs)


def run_rounds(c: Compiled, start: list[int] | None = None) -> SolveResult:
    """Whole-graph rounds: examine every processor in index order until a round changes nothing.

    Parameters
    ----------
    c : Compiled
        The compiled constraints.
    start : list of int, optional
        Starting levels (default: every processor at its top).
    """
    lvl = list(c.top) if start is None else list(start)
    exams = decs = rounds = 0
    changed = True
    while changed:
        changed = False
        rounds += 1
        for p in range(len(lvl)):
            exams += 1
            x = _best(c, lvl, p)
            if x != lvl[p]:
                decs += lvl[p] - x
                lvl[p] = x
                changed = True
    return SolveResult(lvl, exams, decs, rounds)


def solve_levels(s: SpanSystem, order: str = "fifo", seed: int = 0) -> SolveResult:
    """Levels (indexed like ``s.processors``) of the greatest consistent assignment, with counts.

    Parameters
    ----------
    s : SpanSystem
        The system (monotone φ).
    order : str, optional
        ``"fifo"``, ``"lifo"``, ``"random"`` or ``"rounds"`` (:func:`run_rounds`).
    seed : int, optional
        The seed of the ``"random"`` order.
    """
    c = compile_system(s)
    if order == "rounds":
        return run_rounds(c)
    return run_worklist(c, order, seed)


def solve(s: SpanSystem, order: str = "fifo", seed: int = 0) -> dict[str, int | str]:
    """The rollback span of every processor: its chain index, or ``"top"``.

    Parameters
    ----------
    s : SpanSystem
        A validated system with monotone φ.
    order : {"fifo", "lifo", "random", "rounds"}
        Evaluation order; every order gives the same answer (``specs/spans.md#orders``).
    seed : int
        Seed of the ``random`` order.

    Examples
    --------
    >>> from rollcheck.pyimpl.spans.system import system_from_dict
    >>> s = system_from_dict({"format": "rollcheck.spans/1", "processors": {
    ...   "p": {"chain": [[], ["e1:1"], ["e1:1", "e1:2"]], "top": ["e1:1", "e1:2", "e1:3"]},
    ...   "q": {"chain": [[], ["e2:1"]]}},
    ...   "edges": [{"name": "e2", "src": "p", "dst": "q",
    ...     "discarded": [[], ["e2:1"], ["e2:1", "e2:2"]], "discarded_top": ["e2:1", "e2:2", "e2:3"],
    ...     "processed": ["e2:1", "e2:2"], "phi": [[], ["e2:1"], ["e2:1", "e2:2"]]}]})
    >>> solve(s)
    {'p': 1, 'q': 1}
    """
    r = solve_levels(s, order, seed)
    return {p.name: p.label(r.levels[i]) for i, p in enumerate(s.processors)}


def _c1_check(s: SpanSystem, e: object, lv: dict[str, int]) -> Callable[[int], bool]:
    """C1 of edge ``e`` as a function of the sender's level (receiver's level read at call time)."""
    return lambda x: s.c1_holds(e, x, lv[e.dst])  # type: ignore[attr-defined,arg-type]


def _c2_check(s: SpanSystem, e: object, lv: dict[str, int]) -> Callable[[int], bool]:
    """C2 of edge ``e`` as a function of the receiver's level (sender's level read at call time)."""
    return lambda y: s.c2_holds(e, y, lv[e.src])  # type: ignore[attr-defined,arg-type]


def solve_literal(s: SpanSystem, order: str = "fifo", seed: int = 0,
                  pick: Callable[[list[int]], int] | None = None) -> dict[str, int]:
    """The paper's algorithm evaluated literally on the explicit sets (no need tables).

    Works on any system, including ones with non-monotone φ (``phi="keep"``); returns levels.
    Re-examines senders and receivers of a changed processor.

    Parameters
    ----------
    s : SpanSystem
        The system.
    order : str, optional
        ``"fifo"``, ``"lifo"`` or ``"random"``.
    seed : int, optional
        The seed of the ``"random"`` order.
    pick : callable, optional
        Ignored.
    """
    lv = s.top_levels()
    owned: dict[str, list[tuple[str, Callable[[int], bool]]]] = {p.name: [] for p in s.processors}
    watch: dict[str, set[str]] = {p.name: set() for p in s.processors}
    for e in s.edges:
        owned[e.src].append(("C1", _c1_check(s, e, lv)))
        owned[e.dst].append(("C2", _c2_check(s, e, lv)))
        watch[e.dst].add(e.src)
        watch[e.src].add(e.dst)
    todo = list(s.names)
    rng = random.Random(seed)
    while todo:
        if order == "lifo":
            p = todo.pop()
        elif order == "random":
            p = todo.pop(rng.randrange(len(todo)))
        else:
            p = todo.pop(0)
        x = lv[p]
        while x > 0 and not all(ok(x) for _, ok in owned[p]):
            x -= 1
        if x != lv[p]:
            lv[p] = x
            for r in sorted(watch[p]):
                if r not in todo:
                    todo.append(r)
    return lv


def domino_chain(n: int, k: int = 3) -> Compiled:
    """Compiled constraints of a chain ``P0 -> … -> P(n-1)`` of unlogged edges, the last one failed.

    The last processor failed with no checkpoint; every C1 needs the receiver at least as high as
    the sender (⊤ needs ``k - 1``), so the rollback cascades back one processor at a time, against
    the index order: the worst case of whole-graph rounds (``n`` rounds of ``n`` examinations).

    >>> r = run_worklist(domino_chain(5)); r.levels, r.examinations
    ([0, 0, 0, 0, 0], 11)

    Parameters
    ----------
    n : int
        The number of processors.
    k : int, optional
        The top level of every processor but the last.
    """
    tops = [k] * (n - 1) + [0]
    cons: list[list[tuple[int, Sequence[int]]]] = [[] for _ in range(n)]
    watch: list[list[int]] = [[] for _ in range(n)]
    down: list[list[int]] = [[] for _ in range(n)]
    for i in range(n - 1):
        cons[i].append((i + 1, [x if x < k else k - 1 for x in range(k + 1)]))
        cons[i + 1].append((i, [0] * (k + 1)))
        watch[i + 1].append(i)
        watch[i].append(i + 1)
        down[i].append(i + 1)
    return Compiled([f"P{i}" for i in range(n)], tops, cons, watch, down)
