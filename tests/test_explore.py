"""The explorer checked independently: counts against a brute-force enumeration of interleavings
folded by the same equivalence (written here from the definition, not from the explorer), every
interleaving equivalent to an explored schedule, the incremental Z-cycle check against the R-graph
test, the smallest counterexample against brute force, and mutants of the explorer killed.
"""

from __future__ import annotations

import threading
import time
import types
from pathlib import Path
from typing import NamedTuple

import pytest

import rollcheck.properties.explore.engine as engine_mod
from rollcheck.properties.explore import (
    Bound,
    ProtocolCodeError,
    explore,
    useless_from_delivered,
    walk,
    word_to_pattern,
    zcycle_through_last,
)
from rollcheck.pyimpl import useless_checkpoints
from rollcheck.pyimpl.protocols import BCS, HMNR, UC
from rollcheck.testing import Protocol

# --- an independent brute force -------------------------------------------------------------


def naive_interleavings(n: int, max_events: int):
    """Every interleaving of every basic schedule (no reduction), as lists of
    (process, kind, arg) with kind 'c' | 's' (arg: dst) | 'd' (arg: index of the send)."""
    out = []

    def rec(word, transit):
        out.append(list(word))
        if len(word) == max_events:
            return
        for p in range(n):
            word.append((p, "c", None))
            rec(word, transit)
            word.pop()
            for q in range(n):
                if q != p:
                    word.append((p, "s", q))
                    rec(word, transit + [(len(word) - 1, q)])
                    word.pop()
            for t in transit:
                if t[1] == p:
                    word.append((p, "d", t[0]))
                    rec(word, [x for x in transit if x != t])
                    word.pop()

    rec([], [])
    return out


def partial_order_key(n: int, word) -> tuple:
    """Per-process sequences, messages named (sender, k-th send of the sender): the equivalence."""
    name = {}
    seen = [0] * n
    seqs: list[list] = [[] for _ in range(n)]
    for pos, (p, kind, arg) in enumerate(word):
        if kind == "s":
            name[pos] = (p, seen[p])
            seen[p] += 1
            seqs[p].append(("s", arg))
        elif kind == "d":
            seqs[p].append(("d", name[arg]))
        else:
            seqs[p].append(("c",))
    return tuple(tuple(s) for s in seqs)


def explorer_words(n: int, max_events: int, walker=walk):
    """Every canonical word of at most ``max_events`` events, from the explorer's frontiers."""
    words = [()]
    for d in range(1, max_events + 1):
        words += walker(n, d + 1, zcycles=False, split_at=d).frontier
    return words


def as_naive(word):
    kinds = {0: "c", 1: "s", 2: "d"}
    return [(p, kinds[k], a if k else None) for p, k, a in word]


# --- enumeration ------------------------------------------------------------------------------


@pytest.mark.parametrize("n,e", [(2, 4), (2, 6), (3, 4), (3, 5), (4, 3)])
def test_counts_equal_brute_force_folded(n, e):
    keys = {partial_order_key(n, w) for w in naive_interleavings(n, e)}
    assert walk(n, e, zcycles=False).schedules == len(keys)


@pytest.mark.parametrize("n,e", [(2, 6), (3, 5)])
def test_every_interleaving_is_an_explored_schedule_and_each_once(n, e):
    explored = [partial_order_key(n, as_naive(w)) for w in explorer_words(n, e)]
    assert len(explored) == len(set(explored))  # each partial order once
    naive = {partial_order_key(n, w) for w in naive_interleavings(n, e)}
    assert set(explored) == naive


def test_split_walks_add_up_to_the_whole():
    whole = walk(3, 6, zcycles=False).schedules
    head = walk(3, 6, zcycles=False, split_at=2)
    below = sum(walk(3, 6, zcycles=False, prefix=pre).schedules for pre in head.frontier)
    assert head.schedules + below == whole


def test_issue_counts_at_the_default_scale_start():
    # the figures of the issue: 0.70 million partial orders of <= 10 events on 2 processes
    assert walk(2, 8, zcycles=False).schedules == 43581


# --- mutants of the explorer ----------------------------------------------------------------

MUTANTS = {
    # drops a delivery order: only the oldest message in transit to p may be delivered
    "drops-a-delivery-order": [("if m[2] != p or (s > lp and s > m[0]):\n                    continue",
                                "if m[2] != p or (s > lp and s > m[0]) or any(t[2] == p for t in transit[:j]):\n                    continue"),
                               ("if m[2] != p or (s > lp and s > m[0]):\n                        continue",
                                "if m[2] != p or (s > lp and s > m[0]) or any(t[2] == p for t in transit[:j]):\n                        continue")],
    "never-delivers-to-process-0": [("if m[2] != p or (s > lp and s > m[0]):",
                                     "if p == 0 or m[2] != p or (s > lp and s > m[0]):")],
    "stops-one-event-early": [("if depth >= lim[0]:\n            return", "if depth >= lim[0] - 1:\n            return")],
}


def mutant_walk(name):
    src = Path(engine_mod.__file__).read_text()
    for old, new in MUTANTS[name]:
        assert old in src, (name, old)
        src = src.replace(old, new)
    import sys

    modname = f"engine_mutant_{name.replace('-', '_')}"
    mod = types.ModuleType(modname)
    sys.modules[modname] = mod  # dataclasses look their module up
    try:
        exec(compile(src, f"<mutant {name}>", "exec"), mod.__dict__)
    finally:
        del sys.modules[modname]
    return mod.walk


@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_explorer_mutants_are_killed(name):
    mwalk = mutant_walk(name)
    n, e = 3, 4
    naive = {partial_order_key(n, w) for w in naive_interleavings(n, e)}
    count_ok = mwalk(n, e, zcycles=False).schedules == len(naive)
    try:
        cover_ok = {partial_order_key(n, as_naive(w)) for w in explorer_words(n, e, mwalk)} == naive
    except Exception:
        cover_ok = False
    assert not (count_ok and cover_ok), f"mutant {name} survived"


# --- the incremental Z-cycle check ----------------------------------------------------------


def incremental_flags(n, word):
    """Walk the word as UC does; True iff some delivery closed a Z-cycle (the explorer's test)."""
    dlv, nck, sends = [], [0] * n, {}
    for pos, (p, k, a) in enumerate(word):
        if k == 0:
            nck[p] += 1
        elif k == 1:
            sends[pos] = (p, nck[p])
        else:
            s, si = sends[a]
            dlv.append((s, si, p, nck[p]))
            if zcycle_through_last(dlv):
                return True, dlv
    return False, dlv


@pytest.mark.parametrize("n,e,step", [(2, 6, 1), (3, 6, 23)])
def test_incremental_zcycle_check_agrees_with_the_rgraph(n, e, step):
    seen_bad = 0
    for w in explorer_words(n, e)[::step]:
        p = word_to_pattern(n, w)
        ref = [tuple(c) for c in useless_checkpoints(p)]
        flag, dlv = incremental_flags(n, w)
        assert flag == bool(ref), w
        assert useless_from_delivered(dlv) == ref, w
        seen_bad += flag
    assert seen_bad > 0


def test_smallest_counterexample_equals_brute_force_minimum():
    kinds = {"c": 0, "s": 1, "d": 2}
    bad = [w for w in naive_interleavings(2, 5)
           if useless_checkpoints(word_to_pattern(2, [(p, kinds[k], a or 0) for p, k, a in w]))]
    assert bad and min(len(w) for w in bad) == 5
    for n in (2, 3):
        got = walk(n, 6)  # no protocol: UC
        assert got.best is not None and got.best.events == 5
        flag, _ = incremental_flags(n, got.best.word)
        assert flag


# --- exploring protocols ------------------------------------------------------------------------


def test_safe_protocols_and_worker_independence():
    a = explore(HMNR(), "hmnr", [Bound(2, 7), Bound(3, 6)], workers=1)
    b = explore(HMNR(), "hmnr", [Bound(2, 7), Bound(3, 6)], workers=2)
    assert a.best is None and b.best is None
    assert [r.schedules for r in a.bounds] == [r.schedules for r in b.bounds]
    assert all(r.complete for r in a.bounds)


def test_unsafe_counterexample_is_the_same_however_split():
    a = explore(UC(), "uc", [Bound(2, 7), Bound(3, 6)], workers=1)
    b = explore(UC(), "uc", [Bound(2, 7), Bound(3, 6)], workers=2)
    assert a.best == b.best and a.best.events == 5
    assert [r.schedules for r in a.bounds] == [r.schedules for r in b.bounds]


class Lopsided(BCS):
    symmetric = True  # a false claim: P0 never forces

    def must_force(self, st, src, pb):
        return st.i != 0 and pb > st.lc


def test_symmetry_claim_verified_not_trusted():
    sym = type("SymBCS", (BCS,), {"symmetric": True})
    e = explore(sym(), "bcs", [Bound(3, 6)], workers=1)
    plain = explore(BCS(), "bcs", [Bound(3, 6)], workers=1)
    assert e.symmetry.startswith("claimed, verified")
    assert e.bounds[0].schedules < plain.bounds[0].schedules
    e = explore(Lopsided(), "lopsided", [Bound(2, 6)], workers=1)
    assert "refuted" in e.symmetry


def test_symmetry_keeps_the_smallest_counterexample():
    sym_uc = type("SymUC", (UC,), {"symmetric": True, "zcycle_free": True})
    a = explore(sym_uc(), "uc", [Bound(3, 6)], workers=1)
    b = explore(UC(), "uc", [Bound(3, 6)], workers=1, symmetric=False)
    assert a.best.events == b.best.events == 5


# --- the user's code ----------------------------------------------------------------------------


class MutatesInPlace(Protocol):
    zcycle_free = True

    def initial(self, i, n):
        return {"lc": 0}

    def on_checkpoint(self, st):
        st["lc"] += 1          # in place: refused
        return st

    def on_send(self, st, dst):
        return st, st["lc"]

    def must_force(self, st, src, pb):
        return pb > st["lc"]

    def on_deliver(self, st, src, pb):
        return {"lc": max(st["lc"], pb)}


class SaysYes(BCS):
    def must_force(self, st, src, pb):
        return "yes"


class Hangs(BCS):
    def must_force(self, st, src, pb):
        while True:
            time.sleep(0.01)


class OneTuple(BCS):
    def must_force(self, st, src, pb):
        return (pb > st.lc,)


def test_in_place_mutation_refused_naming_the_method():
    with pytest.raises(ProtocolCodeError) as ei:
        explore(MutatesInPlace(), "mut.py:MutatesInPlace", [Bound(2, 4)], workers=1)
    assert ei.value.kind == "mutated" and ei.value.method == "on_checkpoint"
    assert "on_checkpoint" in str(ei.value) and "mut.py:MutatesInPlace" in str(ei.value)


@pytest.mark.parametrize("cls,shown", [(SaysYes, "returned 'yes'"), (OneTuple, "of type tuple")])
def test_must_force_must_return_a_bool(cls, shown):
    with pytest.raises(ProtocolCodeError) as ei:
        explore(cls(), "x.py:C", [Bound(2, 4)], workers=1)
    assert ei.value.method == "must_force" and shown in str(ei.value)


def test_call_timeout_names_method_and_limit_and_leaves_no_thread():
    before = threading.active_count()
    t0 = time.monotonic()
    with pytest.raises(ProtocolCodeError) as ei:
        explore(Hangs(), "hang.py:Hangs", [Bound(2, 4)], workers=1, call_timeout=0.5)
    assert time.monotonic() - t0 < 10
    assert ei.value.kind == "timeout" and "must_force" in str(ei.value) and "0.5 s" in str(ei.value)
    assert "hang.py:Hangs" in str(ei.value)
    assert threading.active_count() == before


class CountsForced(NamedTuple):
    lc: int
    forced: int


class TwoArgCheckpoint(Protocol):
    zcycle_free = True

    def initial(self, i, n):
        return CountsForced(0, 0)

    def on_checkpoint(self, st, forced):
        return CountsForced(st.lc + 1, st.forced + (1 if forced else 0))

    def on_send(self, st, dst):
        return st, st.lc

    def must_force(self, st, src, pb):
        return pb > st.lc

    def on_deliver(self, st, src, pb):
        return CountsForced(max(st.lc, pb), st.forced)


def test_two_argument_on_checkpoint_receives_forced():
    from rollcheck.pyimpl import PatternBuilder
    from rollcheck.pyimpl.protocols import run_protocol

    b = PatternBuilder(2)
    _ = b.checkpoint(0)
    b.deliver(1, b.send(0, 1))
    r = run_protocol(TwoArgCheckpoint(), b.build())
    assert r.final_states[1].forced == 1 and r.final_states[0].forced == 0
    assert explore(TwoArgCheckpoint(), "two", [Bound(2, 6)], workers=1).best is None


# --- every process count of the bounds; copyable, deterministic states ---------------------------


class FifthApart(BCS):
    """Claims symmetry, but P4 never forces: only schedules of 5 processes or more show it."""

    symmetric = True
    zcycle_free = True

    def must_force(self, st, src, pb):
        return st.i != 4 and pb > st.lc


def test_symmetry_is_sampled_at_every_process_count_of_the_bounds():
    # with the reduction P4 acts only after P0..P3 have: 5 events cannot close its Z-cycle, so a
    # claim verified on 2-4 processes alone would hide the flaw
    from rollcheck.properties.explore import ProtocolCalls

    assert walk(5, 5, ProtocolCalls(FifthApart(), "fifth"), symmetric=True).best is None
    assert walk(5, 5, ProtocolCalls(FifthApart(), "fifth"), symmetric=False).best is not None
    e = explore(FifthApart(), "fifth", [Bound(2, 4), Bound(5, 5)], workers=1)
    assert "refuted" in e.symmetry and "[0, 1, 2, 3, 4]" in e.symmetry
    assert e.best is not None and e.best.events == 5 and e.best_processes == 5


def test_symmetry_sample_reaches_eight_processes():
    from rollcheck.properties.explore.symmetry import refute_symmetry

    class EighthApart(BCS):
        def must_force(self, st, src, pb):
            return st.i != 7 and pb > st.lc

    assert refute_symmetry(EighthApart(), "eighth", processes=[2, 3, 4, 5, 6, 7]) is None
    assert refute_symmetry(EighthApart(), "eighth", processes=[2, 8]) is not None


def test_a_state_of_a_local_class_changed_in_place_is_refused():
    """A state whose class cannot be pickled by name (a local class) is still compared before and
    after each call: changing it in place is named (the mutation check used to skip such states)."""

    class Box:
        def __init__(self):
            self.lc = 0

    class BoxProtocol(Protocol):
        zcycle_free = True

        def initial(self, i, n):
            return Box()

        def on_checkpoint(self, st):
            st.lc += 1
            return st

        def on_send(self, st, dst):
            return st, st.lc

        def must_force(self, st, src, pb):
            return pb > st.lc

        def on_deliver(self, st, src, pb):
            b = Box()
            b.lc = max(st.lc, pb)
            return b

    with pytest.raises(ProtocolCodeError, match="on_checkpoint changed its state argument in place") as e:
        explore(BoxProtocol(), "box", [Bound(2, 4)], workers=1)
    assert e.value.kind == "mutated"


def test_a_state_that_cannot_be_copied_is_refused_naming_the_method():
    class Locked(BCS):
        def on_send(self, st, dst):
            return st, threading.Lock()  # a piggyback that cannot be copied

        def must_force(self, st, src, pb):
            return False

    with pytest.raises(ProtocolCodeError, match="on_send returned a piggyback that cannot be copied") as e:
        explore(Locked(), "locked", [Bound(2, 4)], workers=1)
    assert e.value.kind == "not-copyable" and e.value.method == "on_send"


def test_results_that_differ_on_the_same_schedule_are_refused_naming_the_method():
    class Counted(BCS):
        deliveries = 0  # kept on the class, outside the per-process state

        def on_deliver(self, st, src, pb):
            Counted.deliveries += 1
            return st._replace(lc=max(st.lc, pb) + Counted.deliveries % 2)

    with pytest.raises(ProtocolCodeError, match="on_deliver gave different results") as e:
        explore(Counted(), "counted", [Bound(2, 4)], workers=1)
    assert e.value.kind == "nondeterministic" and e.value.word
    assert explore(BCS(), "bcs", [Bound(2, 4)], workers=1).determinism.startswith("the same results")


@pytest.mark.slow
def test_the_default_budget_completes_the_default_bounds_on_a_cpu_half_as_fast():
    """The default budget's claim (``rollcheck.testing._check.DEFAULT_BUDGET``): HMNR, the slowest
    built-in, explores the default bounds in one worker within budget / 1.5 on a machine whose
    calibration loop takes 2.2 CPU s, i.e. its cost in calibration loops times 2.2 s times a margin of
    1.5 is at most the budget. CPU seconds, so the load of the machine matters little."""
    from rollcheck.calibration import loop_cpu_seconds
    from rollcheck.properties.explore import DEFAULT_BOUNDS
    from rollcheck.testing._check import DEFAULT_BUDGET

    loop = loop_cpu_seconds(repeat=2)
    t0 = time.process_time()
    e = explore(HMNR(), "hmnr", DEFAULT_BOUNDS, workers=1)
    cpu = time.process_time() - t0
    loop = min(loop, loop_cpu_seconds(repeat=2))
    assert all(b.complete for b in e.bounds) and e.best is None
    loops = cpu / loop
    assert loops * 2.2 * 1.5 <= DEFAULT_BUDGET, f"{cpu:.1f} CPU s = {loops:.1f} loops of {loop:.2f} s"


def test_equal_results_shared_differently_are_not_nondeterminism():
    """A cache that hands out its stored object on a hit but a fresh equal one on a miss changes how
    a result pickles (one object twice, or two equal ones), not what it is: no error."""
    from rollcheck.properties.explore.determinism import refute_determinism

    class Cached(BCS):
        store: dict = {}

        def _index(self, k):
            if k in Cached.store:
                return Cached.store[k]
            Cached.store[k] = (k,)
            return (k,)  # a miss: an equal, fresh tuple

        def on_send(self, st, dst):
            return st, (self._index(st.lc), Cached.store[st.lc])

        def must_force(self, st, src, pb):
            return pb[0][0] > st.lc

        def on_deliver(self, st, src, pb):
            return super().on_deliver(st, src, pb[0][0])

    assert refute_determinism(Cached(), "cached", processes=[2, 3]) is None
    assert explore(Cached(), "cached", [Bound(2, 5)], workers=1).determinism.startswith("the same")
