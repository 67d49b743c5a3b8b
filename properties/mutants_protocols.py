"""The protocol part of the mutation catalogue: broken and costlier variants of BCS and HMNR, and
broken variants of the driver, the fast kernels and the basic-checkpoint timer.

*Unsafe* protocol variants are hunted with the property they break (Hypothesis on random basic
schedules, the profile's budget); the shrunk schedule is then minimised greedily (drop events
while the variant still leaves a useless checkpoint) so that the saved counterexample is small
enough to read. *Safe* variants must pass the same properties; they are reported with their
forced-checkpoint ratio against HMNR on the same seeded schedules (``specs/protocols.md#variants``).
"""

from __future__ import annotations

import dataclasses
import random
import time
from collections.abc import Callable
from typing import Any

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as hseed
from hypothesis import strategies as st

from rollcheck.properties import profiles as _profiles
from rollcheck.properties import protocols_cic as C
from rollcheck.properties.mutation import MutantOutcome, mutant
from rollcheck.properties.strategies import build_from_actions, topology_channels
from rollcheck.pyimpl.errors import PropertyViolation
from rollcheck.pyimpl.pattern import DELIVER, SEND, Pattern
from rollcheck.pyimpl.protocols import Protocol, count_schedule, get_protocol, run_protocol, strip_forced
from rollcheck.pyimpl.protocols.fast import forced_deliveries
from rollcheck.pyimpl.zpaths import useless_checkpoints

__all__ = ["BUDGETS", "hunt", "minimize_schedule", "random_schedules", "forced_ratio"]

#: Hypothesis examples per hunt for an unsafe variant, and seeded schedules for a ratio, per profile.
BUDGETS = {"ci": (400, 300), "verify": (3000, 3000)}


def _budget(profile: str) -> tuple[int, int]:
    return BUDGETS.get(profile, BUDGETS["ci"])


def hunt(strategy: st.SearchStrategy[Any], check: Callable[[Any], None], max_examples: int,
         shrink: bool = True) -> tuple[int, Any]:
    """Run ``check`` on up to ``max_examples`` Hypothesis examples; return (examples run, the
    PropertyViolation or None), shrunk by Hypothesis when ``shrink``. Derandomised unless
    ``ROLLCHECK_SEED`` is set (then that seed is used)."""
    counter = [0]
    env_seed = _profiles.seed()
    phases = list(Phase) if shrink else [Phase.explicit, Phase.reuse, Phase.generate]

    @settings(max_examples=max_examples, derandomize=env_seed is None, database=None, deadline=None,
              suppress_health_check=list(HealthCheck), print_blob=False, phases=phases)
    @given(x=strategy)
    def search(x: Any) -> None:
        counter[0] += 1
        check(x)

    if env_seed is not None:
        search = hseed(int(env_seed))(search)
    try:
        search()
    except PropertyViolation as e:
        return counter[0], e
    return counter[0], None


def _drop_idle_processes(p: Pattern) -> Pattern:
    used = sorted({e.process for e in p.events} | {e.to for e in p.events if e.to is not None})
    if len(used) == p.n or len(used) < 2:
        return p
    new = {old: k for k, old in enumerate(used)}
    events = tuple(e._replace(process=new[e.process], to=None if e.to is None else new[e.to]) for e in p.events)
    return Pattern(tuple(f"P{k}" for k in range(len(used))), events)


def minimize_schedule(p: Pattern, fails: Callable[[Pattern], bool]) -> Pattern:
    """Greedily drop events (a send together with its delivery) while ``fails`` stays true, then
    drop processes without events. The result is 1-minimal: no single removal keeps it failing."""
    events = list(p.events)
    changed = True
    while changed:
        changed = False
        k = len(events) - 1
        while k >= 0:
            ev = events[k]
            drop = {k}
            if ev.kind == SEND:
                drop |= {x for x in range(k + 1, len(events))
                         if events[x].kind == DELIVER and events[x].message == ev.message}
            cand = [e for x, e in enumerate(events) if x not in drop]
            q = Pattern(p.processes, tuple(cand))
            if fails(q):
                events = cand
                changed = True
            k = min(k - 1, len(events) - 1)
    out = Pattern(p.processes, tuple(events))
    q = _drop_idle_processes(out)
    return q if fails(q) else out


def random_schedules(count: int, seed: int, max_actions: int = 40) -> list[Pattern]:
    """``count`` seeded random basic schedules on 2..5 processes (non-FIFO), for ratios."""
    rng = random.Random(seed)
    out = []
    kinds = (0, 0, 0, 1, 1, 1, 2)
    for _ in range(count):
        n = rng.randint(2, 5)
        actions = [(rng.choice(kinds), rng.randrange(41), 0) for _ in range(rng.randint(10, max_actions))]
        out.append(build_from_actions(n, actions, topology_channels("complete", n), False))
    return out


def forced_ratio(variant: Protocol, reference: Protocol, schedules: list[Pattern]) -> tuple[float, int, int]:
    """(forced checkpoints of ``variant`` / of ``reference``, the two totals) on ``schedules``."""
    a = sum(run_protocol(variant, p).forced_checkpoints for p in schedules)
    b = sum(run_protocol(reference, p).forced_checkpoints for p in schedules)
    return (a / b if b else float("inf")), a, b


def _raises(check: Callable[[Pattern, Protocol], Any], variant: Protocol) -> Callable[[Pattern], bool]:
    def fails(s: Pattern) -> bool:
        try:
            check(s, variant)
        except PropertyViolation:
            return True
        return False

    return fails


def _kill_protocol(name: str, checks: list[tuple[str, Callable[[Pattern, Protocol], Any]]], profile: str) -> MutantOutcome:
    """Hunt with each property in turn (no Hypothesis shrinking: the failing schedule is then
    minimised greedily against the same property, which is much faster and gives a 1-minimal
    counterexample)."""
    variant = get_protocol(name)
    budget, _ = _budget(profile)
    total = 0
    t0 = time.perf_counter()
    for prop_name, check in checks:
        def run_check(p: Pattern, check: Callable[[Pattern, Protocol], Any] = check) -> None:
            check(p, variant)

        n, err = hunt(C.schedules, run_check, budget, shrink=False)
        total += n
        if err is None:
            continue
        out = err.counterexample
        detail = f"{prop_name}: {err}"
        if isinstance(out, Pattern):
            fails = _raises(check, variant)
            schedule = strip_forced(out)
            if fails(schedule):
                small = minimize_schedule(schedule, fails)
                out = run_protocol(variant, small).pattern
                try:
                    check(small, variant)
                except PropertyViolation as e2:
                    detail = f"{prop_name}: {e2}"
                detail += f" (example {n}, minimised to {len(out)} events)"
        return MutantOutcome("killed", detail + f" ({time.perf_counter() - t0:.1f} s)", out, None, total)
    return MutantOutcome("survived", f"{total} examples, no violation of {', '.join(c for c, _ in checks)}",
                         None, None, total)


def _safe_protocol(name: str, prop_check: Callable[[Pattern, Protocol], Any], profile: str) -> MutantOutcome:
    variant = get_protocol(name)
    budget, count = _budget(profile)
    n, err = hunt(C.schedules, lambda p: prop_check(p, variant), budget // 2, shrink=False)
    if err is not None:
        return MutantOutcome("killed", f"declared safe, yet: {err}", err.counterexample, None, n)
    seed = _profiles.seed() or 0
    schedules = random_schedules(count, seed)
    for s in schedules:
        out = run_protocol(variant, s).pattern
        if useless_checkpoints(out):
            return MutantOutcome("killed", "declared safe, yet a seeded schedule has a useless checkpoint", out, None, n)
    ratio, a, b = forced_ratio(variant, get_protocol("hmnr"), schedules)
    deliveries = sum(1 for s in schedules for e in s.events if e.kind == DELIVER)
    extra = ""
    if name.startswith("bcs"):
        r_bcs, _, b_bcs = forced_ratio(variant, get_protocol("bcs"), schedules)
        extra = f"; {r_bcs:.2f}x BCS ({b_bcs})"
    return MutantOutcome(
        "safe",
        f"no useless checkpoint in {n} Hypothesis examples + {count} seeded schedules (seed {seed}); "
        f"forced {a} vs HMNR {b} over {deliveries} deliveries{extra}",
        None, round(ratio, 3), n + count,
    )


def _no_useless(p: Pattern, proto: Protocol) -> None:
    C.check_no_useless(p, proto)


# --------------------------------------------------------------------------- unsafe protocol variants
@mutant("hmnr-no-c1", target="hmnr", description="HMNR without C1 (non-causal Z-paths not detected)")
def _m_no_c1(profile: str) -> MutantOutcome:
    return _kill_protocol("hmnr-no-c1", [("hmnr-no-useless", _no_useless)], profile)


@mutant("hmnr-no-c2", target="hmnr", description="HMNR without C2 (causal Z-cycles not detected)")
def _m_no_c2(profile: str) -> MutantOutcome:
    return _kill_protocol("hmnr-no-c2", [("hmnr-no-useless", _no_useless)], profile)


@mutant("hmnr-merge-skip-sender", target="hmnr", description="HMNR merge loop over k != i, j (sender skipped)")
def _m_skip_sender(profile: str) -> MutantOutcome:
    return _kill_protocol("hmnr-merge-skip-sender", [("hmnr-no-useless", _no_useless)], profile)


@mutant("bcs-no-force", target="bcs", description="BCS adopting m.lc without taking the forced checkpoint")
def _m_bcs_no_force(profile: str) -> MutantOutcome:
    return _kill_protocol("bcs-no-force", [("bcs-index-lines-consistent", C.check_bcs_lines),
                                           ("bcs-no-useless", _no_useless)], profile)


# --------------------------------------------------------------------------- safe (costlier) variants
@mutant("hmnr-no-minto", target="hmnr", safe=True, description="HMNR C1 without the min_to conjunct")
def _m_no_minto(profile: str) -> MutantOutcome:
    return _safe_protocol("hmnr-no-minto", _no_useless, profile)


@mutant("hmnr-minto-every-send", target="hmnr", safe=True,
        description="HMNR with min_to[k] = min(clock[k], clock[i]) recomputed at every send")
def _m_minto_every_send(profile: str) -> MutantOutcome:
    return _safe_protocol("hmnr-minto-every-send", _no_useless, profile)


@mutant("bcs-geq", target="bcs", safe=True, description="BCS forcing iff m.lc >= lc")
def _m_bcs_geq(profile: str) -> MutantOutcome:
    return _safe_protocol("bcs-geq", _no_useless, profile)


@mutant("hmnr-piggyback-at-delivery", target="hmnr", safe=True,
        description="HMNR reading the piggyback from the sender's state at delivery time "
                    "(design notes call it a bug; no counterexample found, see specs/protocols.md#variants)")
def _m_pb_at_delivery(profile: str) -> MutantOutcome:
    return _safe_protocol("hmnr-piggyback-at-delivery", _no_useless, profile)


# --------------------------------------------------------------------------- driver, kernels, timer
def run_forced_list_shifted(name: str, p: Pattern) -> Any:
    """Reports, for each forced checkpoint, the process's *previous* delivery (off by one)."""
    r = run_protocol(name, p)
    prev: dict[int, str] = {}
    shifted = []
    by_msg = {}
    for ev in r.pattern.events:
        if ev.kind == DELIVER:
            by_msg[ev.message] = prev.get(ev.process, ev.message)
            prev[ev.process] = ev.message  # type: ignore[assignment]
    shifted = [str(by_msg[m]) for m in r.forced_messages]
    return dataclasses.replace(r, forced_messages=tuple(shifted))


def run_dropping_in_transit(name: str, p: Pattern) -> Any:
    """Leaves the messages that are never delivered out of the output pattern (a "cleanup")."""
    r = run_protocol(name, p)
    delivered = {e.message for e in r.pattern.events if e.kind == DELIVER}
    keep = tuple(e for e in r.pattern.events if not (e.kind == SEND and e.message not in delivered))
    return dataclasses.replace(r, pattern=Pattern(r.pattern.processes, keep))


def fast_drops_last_event(name: str, p: Pattern, backend: str = "auto") -> tuple[str, ...]:
    """A fast kernel whose loop bound is off by one (the last event is never looked at)."""
    return forced_deliveries(name, Pattern(p.processes, p.events[:-1]), backend)


def schedule_restart_basic_only(kinds: Any, every: int, forced_at: Any = ()) -> list[int]:
    """The timer restarted only by basic checkpoints ("flurries" after forced ones)."""
    return count_schedule(kinds, every, ())


def _kill_prop(name: str, strategy: Any, check: Callable[[Any], None], profile: str) -> MutantOutcome:
    budget, _ = _budget(profile)
    t0 = time.perf_counter()
    n, err = hunt(strategy, check, budget)
    if err is None:
        return MutantOutcome("survived", f"{n} examples, no violation", None, None, n)
    cex = err.counterexample if isinstance(err.counterexample, Pattern) else None
    return MutantOutcome("killed", f"{name}: {err} ({time.perf_counter() - t0:.1f} s)", cex, None, n)


_NAMES = st.sampled_from(("bcs", "hmnr"))


@mutant("run-forced-list-off-by-one", target="protocols",
        description="run_protocol reporting the delivery before each forced checkpoint")
def _m_forced_list(profile: str) -> MutantOutcome:
    strat = st.tuples(C.schedules, _NAMES)
    return _kill_prop("protocol-forced-list", strat,
                      lambda x: C.check_forced_list(x[0], x[1], run_forced_list_shifted), profile)


@mutant("run-drops-in-transit", target="protocols",
        description="run_protocol leaving undelivered messages out of its output pattern")
def _m_keeps_basic(profile: str) -> MutantOutcome:
    strat = st.tuples(C.schedules, _NAMES)
    return _kill_prop("protocol-keeps-basic", strat,
                      lambda x: C.check_keeps_basic(x[0], x[1], run_dropping_in_transit), profile)


@mutant("fast-kernel-off-by-one", target="protocols",
        description="fast decision kernel that never looks at the last event")
def _m_fast(profile: str) -> MutantOutcome:
    strat = st.tuples(C.schedules, _NAMES, st.sampled_from(("python", "numpy")))
    return _kill_prop("protocol-fast-path-agrees", strat,
                      lambda x: C.check_fast_agrees(x[0], x[1], x[2], fast_drops_last_event), profile)


@mutant("timer-restart-basic-only", target="timer",
        description="basic-checkpoint timer not restarted by forced checkpoints")
def _m_timer(profile: str) -> MutantOutcome:
    strat = st.tuples(st.integers(0, 40), st.integers(1, 6), st.sets(st.integers(0, 39), max_size=8))
    return _kill_prop("basic-timer-restarts", strat,
                      lambda x: C.check_timer(x[0], x[1], x[2], schedule_restart_basic_only), profile)
