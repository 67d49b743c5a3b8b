"""The protocol part of the mutation catalogue.

Broken and costlier variants of BCS and HMNR, and broken variants of the driver, the fast
kernels and the basic-checkpoint timer.

Each entry is a :class:`~rollcheck.properties.mutation.MutantSpec`: the registered properties of
:mod:`rollcheck.properties.protocols_cic` and :mod:`rollcheck.properties.protocols_forced` with the
variant in their implementation slot. Unsafe variants are hunted with a larger example budget than
the profile's (they hide in long schedules); the runner reduces the violating schedule greedily to a
1-minimal one. *Safe* variants must pass the same properties; they are reported with their
forced-checkpoint ratio against HMNR on the same seeded schedules (``specs/protocols.md#variants``).
"""

from __future__ import annotations

import dataclasses
import random
from typing import Any

from rollcheck.properties.mutation import MutantSpec, register
from rollcheck.properties.protocols_forced import OverForcingHMNR
from rollcheck.properties.strategies import build_from_actions, topology_channels
from rollcheck.pyimpl.pattern import DELIVER, SEND, Pattern
from rollcheck.pyimpl.protocols import Protocol, count_schedule, get_protocol, run_protocol
from rollcheck.pyimpl.protocols.fast import forced_deliveries

__all__ = ["BUDGETS", "random_schedules", "forced_ratio", "SPECS"]

#: Hypothesis examples per hunt for an unsafe variant, and seeded schedules for a ratio, per profile.
BUDGETS = {"ci": (400, 300), "verify": (3000, 3000)}
_HUNT = {k: v[0] for k, v in BUDGETS.items()}
_SAFE_HUNT = {k: v[0] // 2 for k, v in BUDGETS.items()}


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


def _ratio_cost(name: str) -> Any:
    def cost(profile: str) -> tuple[float, str]:
        from rollcheck.properties.profiles import seed as env_seed

        count = BUDGETS.get(profile, BUDGETS["ci"])[1]
        seed = env_seed() or 0
        schedules = random_schedules(count, seed)
        variant = get_protocol(name)
        ratio, a, b = forced_ratio(variant, get_protocol("hmnr"), schedules)
        deliveries = sum(1 for s in schedules for e in s.events if e.kind == DELIVER)
        extra = ""
        if name.startswith("bcs"):
            r_bcs, _, b_bcs = forced_ratio(variant, get_protocol("bcs"), schedules)
            extra = f"; {r_bcs:.2f}x BCS ({b_bcs})"
        return ratio, (f"forced {a} vs HMNR {b} over {deliveries} deliveries of {count} seeded schedules "
                       f"(seed {seed}){extra}")

    return cost


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




def get_unsafe_variant(name: str) -> Protocol:
    """The protocol getter of the dataflow property, handing out an unsafe variant of each protocol."""
    return get_protocol({"bcs": "bcs-no-force", "hmnr": "hmnr-no-c2"}.get(name, name))


# --------------------------------------------------------------------------- the catalogue
def _unsafe(name: str, kills: tuple[str, ...], description: str, target: str, **slots: Any) -> MutantSpec:
    return MutantSpec(name, area="protocols", description=description, kills=kills, slots=slots,
                      target=target, examples=_HUNT, shrink=False)


def _safe(name: str, kills: tuple[str, ...], description: str, target: str) -> MutantSpec:
    return MutantSpec(name, area="protocols", description=description, kills=kills,
                      slots={"protocol": get_protocol(name)}, safe=True, cost=_ratio_cost(name), target=target,
                      examples=_SAFE_HUNT, shrink=False)


SPECS = (
    _unsafe("hmnr-no-c1", ("hmnr-no-useless",), "HMNR without C1 (non-causal Z-paths not detected)", "hmnr",
            protocol=get_protocol("hmnr-no-c1")),
    _unsafe("hmnr-no-c2", ("hmnr-no-useless",), "HMNR without C2 (causal Z-cycles not detected)", "hmnr",
            protocol=get_protocol("hmnr-no-c2")),
    _unsafe("cic-no-c2-zigzag", ("cic-no-useless-zigzag",),
            "BCS without its forced checkpoint and HMNR without C2, hunted on zig-zag schedules", "hmnr",
            get=get_unsafe_variant),
    _unsafe("hmnr-merge-skip-sender", ("hmnr-no-useless",), "HMNR merge loop over k != i, j (sender skipped)",
            "hmnr", protocol=get_protocol("hmnr-merge-skip-sender")),
    _unsafe("bcs-no-force", ("bcs-index-lines-consistent", "bcs-no-useless"),
            "BCS adopting m.lc without taking the forced checkpoint", "bcs", protocol=get_protocol("bcs-no-force")),
    _unsafe("hmnr-over-forcing", ("hmnr-forced-reference",),
            "HMNR that also forces after every send of the interval (no useless checkpoint, but forces "
            "where its rules do not)", "hmnr", protocol=OverForcingHMNR()),
    _unsafe("bcs-over-forcing", ("bcs-forced-reference",),
            "BCS forcing on m.lc >= lc passed off as BCS (forces where the rule does not)", "bcs",
            protocol=get_protocol("bcs-geq")),
    dataclasses.replace(
        _unsafe("cic-dataflow-unsafe-variants", ("cic-no-useless-dataflow",),
                "BCS without forcing and HMNR without C2 on FIFO dataflow topologies", "protocols",
                get=get_unsafe_variant),
        examples={"ci": 1500, "verify": 3000}),
    _safe("hmnr-no-minto", ("hmnr-no-useless",), "HMNR C1 without the min_to conjunct", "hmnr"),
    _safe("hmnr-minto-every-send", ("hmnr-no-useless",),
          "HMNR with min_to[k] = min(clock[k], clock[i]) recomputed at every send", "hmnr"),
    _safe("bcs-geq", ("bcs-no-useless",), "BCS forcing iff m.lc >= lc", "bcs"),
    _safe("hmnr-piggyback-at-delivery", ("hmnr-no-useless",),
          "HMNR reading the piggyback from the sender's state at delivery time "
          "(no counterexample found, see specs/protocols.md#variants)", "hmnr"),
    _unsafe("run-forced-list-off-by-one", ("protocol-forced-list",),
            "run_protocol reporting the delivery before each forced checkpoint", "protocols",
            run=run_forced_list_shifted),
    _unsafe("run-drops-in-transit", ("protocol-keeps-basic",),
            "run_protocol leaving undelivered messages out of its output pattern", "protocols",
            run=run_dropping_in_transit),
    _unsafe("fast-kernel-off-by-one", ("protocol-fast-path-agrees",),
            "fast decision kernel that never looks at the last event", "protocols", fast=fast_drops_last_event),
    _unsafe("timer-restart-basic-only", ("basic-timer-restarts",),
            "basic-checkpoint timer not restarted by forced checkpoints", "timer",
            schedule=schedule_restart_basic_only),
)
register(*SPECS)
