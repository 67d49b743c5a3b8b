"""Properties of the pattern model: Netzer–Xu, Wang, SCC, recovery lines, checkpoint graph, lattice.

Each property states the theorem of ``specs/theorems.md`` it checks and compares the reference
implementation (substitutable through keyword arguments, so mutants can be run) against the
independent brute-force oracle of :mod:`rollcheck.properties.oracle`.
"""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import example, given
from hypothesis import strategies as st

from rollcheck.properties import oracle as O
from rollcheck.properties.registry import interesting, prop
from rollcheck.properties.strategies import patterns, walk_patterns, weighted, zcycle_patterns
from rollcheck.pyimpl.clocks import concurrent_checkpoints, vector_clocks
from rollcheck.pyimpl.consistency import is_consistent
from rollcheck.pyimpl.errors import InvalidInputError, PropertyViolation
from rollcheck.pyimpl.pattern import Pattern
from rollcheck.pyimpl.patternio import pattern_from_dict, pattern_to_dict
from rollcheck.pyimpl.recovery import (
    max_consistent_containing,
    min_consistent_containing,
    recovery_line,
    recovery_line_networkx,
    rollback_propagation,
)
from rollcheck.pyimpl.rgraph import rgraph
from rollcheck.pyimpl.zpaths import (
    is_zpath,
    useless_checkpoints,
    useless_checkpoints_networkx,
    zcycle_checkpoints,
    zpath,
    zpath_exists_rgraph,
)

__all__ = ["expect", "small_patterns", "failed_sets_all", "PITFALLS"]


def _pitfall(*steps: tuple[str, int, int], n: int = 2) -> Pattern:
    from rollcheck.pyimpl.pattern import PatternBuilder

    b = PatternBuilder(n)
    ids: list[str] = []
    for op, a, c in steps:
        if op == "s":
            ids.append(b.send(a, c))
        elif op == "d":
            b.deliver(a, ids[c])
        else:
            b.checkpoint(a)
    return b.build()


#: The smallest cases of the design notes' pitfalls, kept as explicit examples:
#: V nodes are needed (C[1,1] is useless only through V[0]); and with real checkpoints only a
#: checkpoint on no Z-cycle can still pair with no real checkpoint.
PITFALLS = {
    "volatile-needed": _pitfall(("s", 0, 1), ("d", 1, 0), ("c", 1, 0), ("s", 1, 0), ("d", 0, 1)),
    "real-only-differs": _pitfall(("s", 0, 1), ("d", 1, 0), ("c", 1, 0)),
    # rollback propagates P0 → P1 → P2: one pass of the checkpoint-graph algorithm is not enough
    "two-hop-propagation": _pitfall(("s", 0, 1), ("d", 1, 0), ("s", 1, 2), ("d", 2, 1), n=3),
}

#: Small enough for the brute-force oracle (every global checkpoint is enumerated). Useless
#: checkpoints are rare in short random patterns (about 2% at 12 actions on 3 processes, 23% at
#: 30 with uniform random choices, less under Hypothesis's generator), so short patterns are mixed
#: with Z-cycle motifs, control walks (Z-cycle prone) and longer patterns; all of them shrink to
#: few events. The properties report the fraction with a useless checkpoint (floor 25%).
small_patterns = weighted(
    (5, zcycle_patterns(max_processes=4, max_steps=8)),
    (1, patterns(min_processes=2, max_processes=4, max_actions=10)),
    (1, walk_patterns(max_processes=3, max_steps=30)),
    (1, walk_patterns(max_processes=4, max_steps=30)),
    (1, patterns(min_processes=2, max_processes=4, min_actions=16, max_actions=30)),
)
small_with_topologies = weighted(
    (10, zcycle_patterns(max_processes=4, max_steps=8)),
    (1, patterns(min_processes=2, max_processes=4, max_actions=10)),
    (1, walk_patterns(max_processes=3, max_steps=30)),
    (1, walk_patterns(max_processes=4, max_steps=30)),
    (1, patterns(min_processes=2, max_processes=4, min_actions=16, max_actions=30)),
    (1, patterns(min_processes=2, max_processes=4, min_actions=8, max_actions=24, topology=None)),
    (1, patterns(min_processes=2, max_processes=4, min_actions=8, max_actions=24, fifo=True)),
)


def expect(cond: bool, message: str, p: Any) -> None:
    """Raise a PropertyViolation carrying the counterexample when ``cond`` is false."""
    if not cond:
        raise PropertyViolation(message, counterexample=p)


def failed_sets_all(p: Pattern) -> list[tuple[int, ...]]:
    """Every non-empty set of failed processes of ``p``, as sorted tuples, smallest first."""
    return [f for r in range(1, p.n + 1) for f in itertools.combinations(range(p.n), r)]


USELESS = "a useless checkpoint"
ZPATH = "a Z-path of two or more messages"
ROLLBACK = "a survivor rolls back (recovery line below a live process's volatile state)"
NO_CUT = "a set of checkpoints that no consistent global checkpoint contains"


def _brute_lines(p: Pattern) -> Any:
    """``O.brute_recovery_line`` of ``p``, computed once per availability bound within an example.

    The brute-force line depends on the failed set and ``virtual`` only through the bound of each
    process (last+1 for a survivor with virtual checkpoints, else last), so failed sets with the
    same bounds (every failed set without virtual checkpoints) share one enumeration.
    """
    last = O.raw_last(p)
    memo: dict[tuple[int, ...], tuple[int, ...]] = {}

    def line(failed: tuple[int, ...], virtual: bool) -> tuple[int, ...]:
        key = tuple(x + 1 if (virtual and i not in failed) else x for i, x in enumerate(last))
        if key not in memo:
            memo[key] = O.brute_recovery_line(p, failed, virtual)
        return memo[key]

    return line


def _zpath_chain(p: Pattern, closure: set[tuple[int, int]] | None = None) -> bool:
    return any(a != b for a, b in (O.zpath_closure(p) if closure is None else closure))


@prop("netzer-xu-useless-iff-zcycle", target="zpaths", theorem="specs/theorems.md#t2-netzer-xu",
      area="foundation", interesting=USELESS, floor=0.25)
@example(p=PITFALLS["volatile-needed"])
@example(p=PITFALLS["real-only-differs"])
@given(p=small_with_topologies)
def netzer_xu_useless(p: Pattern, zcycles: Any = zcycle_checkpoints) -> None:
    """A checkpoint is on a Z-cycle iff no consistent global checkpoint (V allowed) contains it."""
    got = {tuple(c) for c in zcycles(p)}
    want = O.brute_useless(p)
    interesting(bool(want), USELESS)
    expect(got == want, f"on Z-cycle {sorted(got)} != useless {sorted(want)}", p)


def _netzer_xu_message(a: Any, b: Any, extends: bool, linked: bool) -> str:
    """The Netzer–Xu violation in words.

    ``{C[0,1], C[1,2]} extends to no consistent global checkpoint, yet no Z-path links them`` (a
    singleton is named once).
    """
    what = f"{{{a}}}" if a == b else f"{{{a}, {b}}}"
    them = "it to itself" if a == b else "them"
    if extends:
        return f"{what} extends to a consistent global checkpoint, yet a Z-path links {them}"
    return f"{what} extends to no consistent global checkpoint, yet no Z-path links {them}"


@prop("netzer-xu-sets", target="zpaths", theorem="specs/theorems.md#t2-netzer-xu", area="foundation",
      interesting=ZPATH, floor=0.25)
@given(p=small_patterns)
def netzer_xu_sets(p: Pattern, zpath_fn: Any = zpath) -> None:
    """A set of checkpoints extends to a consistent global checkpoint iff no Z-path links any two.

    Checked for every singleton and every pair of checkpoints of different processes.
    """
    interesting(_zpath_chain(p), ZPATH)
    covered: set[tuple[int, int, int, int]] = set()
    for cut in O.consistent_cuts(p):
        for i in range(p.n):
            for j in range(p.n):
                covered.add((i, cut[i], j, cut[j]))
    cps = p.checkpoints()
    for a in cps:
        for b in cps:
            if a.process == b.process and a != b:
                continue
            linked = any(zpath_fn(p, u, v) is not None for u in (a, b) for v in (a, b))
            extends = (a.process, a.index, b.process, b.index) in covered
            expect(extends == (not linked), _netzer_xu_message(a, b, extends, linked), p)


@prop("zpath-witness", target="zpaths", theorem="specs/theorems.md#t1-zpath", area="foundation",
      interesting=ZPATH, floor=0.25)
@given(p=small_patterns)
def zpath_witness(p: Pattern, zpath_fn: Any = zpath) -> None:
    """Zpath finds a Z-path exactly when one exists, and each witness satisfies the definition.

    Existence is the closure of the Z-step relation.
    """
    closure = O.zpath_closure(p)
    interesting(_zpath_chain(p, closure), ZPATH)
    for a in p.checkpoints():
        for b in p.checkpoints():
            w = zpath_fn(p, a, b)
            exists = O.brute_zpath_exists(p, a, b, closure)
            expect((w is not None) == exists, f"Z-path {a}->{b}: found={w}, exists={exists}", p)
            if w is not None:
                expect(is_zpath(p, w, a, b), f"witness {w} is not a Z-path {a}->{b}", p)


@prop("wang-zpath-rgraph", target="rgraph", theorem="specs/theorems.md#t3-wang", area="foundation",
      interesting=ZPATH, floor=0.25)
@given(p=small_patterns)
def wang_zpath_rgraph(p: Pattern, exists_fn: Any = zpath_exists_rgraph) -> None:
    """Z-path C[i,x]→C[j,y] iff an R-graph path C[i,x+1]→C[j,y] with at least one message edge."""
    closure = O.zpath_closure(p)
    interesting(_zpath_chain(p, closure), ZPATH)
    graph = rgraph(p)  # the one R-graph of p, for every pair (the search does not modify it)
    for a in p.checkpoints():
        for b in p.checkpoints():
            want = O.brute_zpath_exists(p, a, b, closure)
            expect(exists_fn(p, a, b, graph=graph) == want, f"R-graph says {not want} for Z-path {a}->{b}", p)


@prop("scc-useless", target="rgraph", theorem="specs/theorems.md#t4-scc", area="foundation",
      interesting=USELESS, floor=0.25)
@example(p=PITFALLS["volatile-needed"])
@given(p=small_patterns)
def scc_useless(p: Pattern, useless: Any = useless_checkpoints) -> None:
    """C[i,x] is useless iff C[i,x] and C[i,x+1] share an SCC of the R-graph with V nodes.

    The scipy and networkx versions agree with brute force.
    """
    want = O.brute_useless(p)
    interesting(bool(want), USELESS)
    got = {tuple(c) for c in useless(p)}
    expect(got == want, f"useless {sorted(got)} != brute force {sorted(want)}", p)
    expect({tuple(c) for c in useless_checkpoints_networkx(p)} == want, "networkx SCC disagrees", p)


@prop("recovery-line-is-maximum", target="recovery", theorem="specs/theorems.md#t5-recovery-line",
      area="foundation", interesting=ROLLBACK, floor=0.3)
@given(p=small_with_topologies)
def recovery_line_is_max(p: Pattern, line_fn: Any = recovery_line) -> None:
    """The line is the maximum consistent global checkpoint under the availability bounds.

    For every failed set, virtual checkpoints on and off; in_transit follows its definition.
    """
    last = O.raw_last(p)
    brute = _brute_lines(p)
    interesting(any(brute((f,), True)[i] <= last[i]
                    for f in range(p.n) for i in range(p.n) if i != f), ROLLBACK)
    graph = rgraph(p)  # the networkx cross-check's R-graph, built once per pattern
    for failed in failed_sets_all(p):
        for virtual in (True, False):
            want = brute(failed, virtual)
            got = line_fn(p, failed, virtual=virtual)
            expect(tuple(got.line) == want, f"failed={failed} virtual={virtual}: {got.line} != {want}", p)
            transit = {
                m.id for m in p.messages
                if m.send_interval < want[m.sender]
                and (m.deliver_interval is None or m.deliver_interval >= want[m.receiver])
            }
            expect(set(got.in_transit) == transit, f"in_transit {got.in_transit} != {sorted(transit)}", p)
            nx_line = recovery_line_networkx(p, failed, virtual=virtual, graph=graph).line
            expect(nx_line == want, f"networkx line {nx_line} != {want}", p)


@prop("cgraph-equals-rgraph", target="recovery", theorem="specs/theorems.md#t6-checkpoint-graph",
      area="foundation", interesting=ROLLBACK, floor=0.3)
@example(p=PITFALLS["two-hop-propagation"])
@given(p=small_with_topologies)
def cgraph_equals_rgraph(p: Pattern, propagate: Any = rollback_propagation) -> None:
    """Rollback propagation on the checkpoint graph gives the R-graph recovery line.

    It also gives the brute force's: the R-graph line is not trusted either.
    """
    last = O.raw_last(p)
    brute = _brute_lines(p)
    interesting(any(brute((f,), True)[i] <= last[i]
                    for f in range(p.n) for i in range(p.n) if i != f), ROLLBACK)
    for failed in failed_sets_all(p):
        for virtual in (True, False):
            a = propagate(p, failed, virtual=virtual).line
            b = recovery_line(p, failed, virtual=virtual).line
            expect(tuple(a) == tuple(b), f"failed={failed} virtual={virtual}: cgraph {a} != rgraph {b}", p)
            want = brute(failed, virtual)
            expect(tuple(a) == want, f"failed={failed} virtual={virtual}: cgraph {a} != brute force {want}", p)


@prop("consistency-lattice", target="consistency", theorem="specs/theorems.md#t7-lattice")
@given(p=small_patterns)
def consistency_lattice(p: Pattern, consistent: Any = is_consistent, clocks: Any = vector_clocks) -> None:
    """Consistency (no orphan) ⇔ pairwise concurrency by vector clocks.

    Consistent cuts are closed under componentwise max and min.
    """
    vc = clocks(p)
    good = []
    for cut in O.global_checkpoints(p):
        c = consistent(p, cut)
        expect(c == concurrent_checkpoints(p, cut, vc), f"cut {cut}: consistent={c} vs clocks", p)
        expect(c == O.is_orphan_free(p, cut), f"cut {cut}: consistent={c} vs orphan definition", p)
        if c:
            good.append(cut)
    for a, b in itertools.combinations(good[:60], 2):
        hi = tuple(map(max, a, b))
        lo = tuple(map(min, a, b))
        expect(consistent(p, hi) and consistent(p, lo), f"lattice: {a} {b}", p)


@prop("wang-min-max-containing", target="recovery", theorem="specs/theorems.md#t8-wang-min-max",
      area="foundation", interesting=NO_CUT, floor=0.25)
@given(p=small_patterns, rnd=st.randoms(use_true_random=False))
def wang_min_max(p: Pattern, rnd: Any, max_fn: Any = max_consistent_containing,
                 min_fn: Any = min_consistent_containing) -> None:
    """Wang's algorithms return the max/min consistent global checkpoint containing the set.

    That is the componentwise max/min of the consistent global checkpoints that contain it, or
    none exactly when there is none (V allowed or not); checked for every singleton and up to 12
    pairs of checkpoints of different processes.
    """
    cps = p.checkpoints()
    pairs = [(a, b) for a in cps for b in cps if a.process < b.process]
    rnd.shuffle(pairs)
    sets = [{a.process: a.index} for a in cps] + [{a.process: a.index, b.process: b.index} for a, b in pairs[:12]]
    none_found = False
    for allow in (True, False):
        upper = [p.volatile_index(i) if allow else p.last_index(i) for i in range(p.n)]
        cuts = O.consistent_cuts(p, upper)
        for s in sets:
            sel = [c for c in cuts if all(c[i] == x for i, x in s.items())]
            none_found = none_found or not sel
            want_hi = tuple(map(max, *sel)) if len(sel) > 1 else (sel[0] if sel else None)
            want_lo = tuple(map(min, *sel)) if len(sel) > 1 else (sel[0] if sel else None)
            hi, lo = max_fn(p, s.items(), allow), min_fn(p, s.items(), allow)
            expect(hi.cut == want_hi, f"max for {s} (volatile={allow}): {hi.cut} != {want_hi}", p)
            expect(lo.cut == want_lo, f"min for {s} (volatile={allow}): {lo.cut} != {want_lo}", p)
    interesting(none_found, NO_CUT)


@prop("pattern-json-roundtrip", target="pattern", theorem="specs/formats.md#pattern")
@given(p=patterns(max_processes=5, max_actions=25, forced=True))
def json_roundtrip(p: Pattern, dump: Any = pattern_to_dict) -> None:
    """Writing a pattern and reading it back gives the same pattern (forced flags included)."""
    q = pattern_from_dict(dump(p))
    expect(q == p, "round trip changed the pattern", p)
    expect(q.last_indices == p.last_indices and all(
        q.is_forced(i, x) == p.is_forced(i, x) for i, x in p.checkpoints()), "forced flags changed", p)


CORRUPTIONS = ("unknown-process", "deliver-before-send", "wrong-receiver", "self-send", "duplicate-id",
               "duplicate-delivery", "unknown-kind", "missing-field", "mistyped-field")


def corrupt(doc: dict[str, Any], how: str, k: int) -> tuple[dict[str, Any], int] | None:
    """Make ``doc`` invalid in the way ``how`` near event ``k``; return it and the offending index."""
    import copy

    d = copy.deepcopy(doc)
    ev = d["events"]
    sends = [i for i, e in enumerate(ev) if e["kind"] == "send"]
    delivers = [i for i, e in enumerate(ev) if e["kind"] == "deliver"]
    procs = d["processes"]
    if how == "unknown-process":
        i = k % len(ev)
        ev[i]["process"] = "nobody"
        return d, i
    if how == "unknown-kind":
        i = k % len(ev)
        ev[i]["kind"] = "explode"
        return d, i
    if how == "missing-field":
        i = k % len(ev)
        del ev[i]["process"]
        return d, i
    if how == "mistyped-field":
        i = k % len(ev)
        ev[i]["process"] = 7
        return d, i
    if how == "self-send" and sends:
        i = sends[k % len(sends)]
        ev[i]["to"] = ev[i]["process"]
        return d, i
    if how == "duplicate-id" and len(sends) >= 2:
        a, b = sorted({sends[k % len(sends)], sends[(k + 1) % len(sends)]})
        if a == b:
            return None
        ev[b]["message"] = ev[a]["message"]
        # make the later duplicate's deliveries refer to something still valid
        return d, b
    if how == "deliver-before-send" and delivers:
        i = delivers[k % len(delivers)]
        e = ev.pop(i)
        s = next(j for j, x in enumerate(ev) if x["kind"] == "send" and x["message"] == e["message"])
        ev.insert(s, e)
        return d, s
    if how == "wrong-receiver" and delivers:
        i = delivers[k % len(delivers)]
        other = [q for q in procs if q != ev[i]["process"]]
        ev[i]["process"] = other[k % len(other)]
        return d, i
    if how == "duplicate-delivery" and delivers:
        i = delivers[k % len(delivers)]
        ev.append(dict(ev[i]))
        return d, len(ev) - 1
    return None


@prop("loader-rejects-invalid", target="pattern", theorem="specs/formats.md#validation")
@given(p=st.one_of(patterns(max_processes=4, max_actions=16), walk_patterns(max_steps=16)),
       k=st.integers(0, 50))
def loader_rejects(p: Pattern, k: int, load: Any = pattern_from_dict) -> None:
    """Every corrupted document is rejected naming the file and the offending event.

    Each kind of corruption, near event k, gives InvalidInputError.
    """
    doc = pattern_to_dict(p)
    if not doc["events"]:
        return
    for how in CORRUPTIONS:
        got = corrupt(doc, how, k)
        if got is None:
            continue
        bad, idx = got
        try:
            load(bad, "fuzz.json")
        except InvalidInputError as e:
            expect(e.location is not None and e.location.startswith(f"events[{idx}]"),
                   f"{how}: error at {e.location!r}, expected events[{idx}]", p)
            expect(e.source == "fuzz.json", f"{how}: error does not name the file", p)
            continue
        raise PropertyViolation(f"{how} at events[{idx}] was accepted", counterexample=p)


def _register_measures() -> None:
    from rollcheck.properties.registry import measure

    def inconsistent(p: Pattern, **_: Any) -> bool:
        total = 1
        for x in O.raw_last(p):
            total *= x + 2
        return len(O.consistent_cuts(p)) < total

    measure("consistency-lattice", "an inconsistent global checkpoint", inconsistent, floor=0.25)
    measure("pattern-json-roundtrip", "a forced checkpoint",
            lambda p, **_: any(e.kind == "checkpoint" and e.forced for e in p.events))
    measure("loader-rejects-invalid", "a delivery (every kind of corruption applies)",
            lambda p, **_: any(e.kind == "deliver" for e in p.events))


_register_measures()
