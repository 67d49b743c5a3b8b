"""The simulator's entries in the mutation catalogue (``rollcheck mutants``).

Unsafe variants must be killed by a property of :mod:`rollcheck.properties.simulate_props`; the
counterexample is the pattern of the offending run. Safe variants (they stay correct but cost
more) are reported with their checkpoint ratio against the reference on the same fixed runs.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from rollcheck.properties.mutation import MutantSpec, register
from rollcheck.pyimpl.simulate import SimConfig, Variant, run_engine

__all__ = ["UNSAFE", "SAFE", "SPECS", "cost_ratio"]

#: name -> (property, keyword, broken value, description)
UNSAFE: dict[str, tuple[str, str, Any, str]] = {
    "sim-cl-aligned-no-block": (
        "sim-cl-aligned-consistent", "protocol", "cl-aligned-no-block",
        "aligned Chandy–Lamport that keeps delivering data on marked inputs"),
    "sim-cl-unaligned-no-recording": (
        "sim-cl-unaligned-recorded", "variant", Variant(record_channels=False),
        "unaligned Chandy–Lamport that does not record in-flight messages"),
    "sim-no-channel-clearing": (
        "sim-exactly-once", "variant", Variant(clear_channels=False),
        "channels are not flushed when both ends roll back"),
    "sim-no-dedup": (
        "sim-dedup-once", "variant", Variant(dedup=False),
        "receivers accept every message (no sequence-number deduplication)"),
    "sim-replay-skips-one": (
        "sim-exactly-once", "variant", Variant(replay_offset=2),
        "replay starts one past the restored next sequence number"),
    "sim-volatile-logs-of-rolled-back": (
        "sim-volatile-at-most-once", "variant", Variant(volatile_logs_of_rolled_back=True),
        "with volatile logs every rolled-back process (not only the failed one) loses its log"),
    "sim-no-deadlock-detection": (
        "sim-cl-aligned-cycle-deadlock", "variant", Variant(detect_deadlock=False),
        "a run stuck on aligned barriers ends silently instead of reporting a deadlock"),
    "sim-hmnr-no-c2": (
        "sim-cic-no-useless", "protocol", "hmnr-no-c2", "HMNR without C2 on simulated dataflows"),
    "sim-hmnr-merge-skip-sender": (
        "sim-cic-no-useless", "protocol", "hmnr-merge-skip-sender",
        "HMNR merge skipping the sender, on simulated dataflows"),
    "sim-bcs-no-force": (
        "sim-cic-no-useless", "protocol", "bcs-no-force", "BCS without forced checkpoints on dataflows"),
    "sim-uc-domino": (
        "sim-cic-no-domino", "protocol", "uc",
        "uncoordinated checkpointing in place of CIC on the cyclic query (domino effect)"),
}

#: name -> (property that must still hold, keyword, value, reference protocol, description)
SAFE: dict[str, tuple[str, dict[str, Any], str, str]] = {
    "sim-timer-restart-basic-only": (
        "sim-cic-no-useless", {"variant": Variant(timer_restart_on_forced=False)}, "hmnr",
        "the basic-checkpoint timer ignores forced checkpoints (flurries of checkpoints)"),
    "sim-bcs-geq": (
        "sim-cic-no-useless", {"protocol": "bcs-geq"}, "bcs", "BCS forcing on m.lc >= lc, on dataflows"),
    "sim-hmnr-no-minto": (
        "sim-cic-no-useless", {"protocol": "hmnr-no-minto"}, "hmnr",
        "HMNR without the min_to conjunct, on dataflows"),
}


def cost_ratio(reference: str, change: dict[str, Any], runs: int = 12) -> float:
    """Checkpoints (regular + forced) of the changed configuration over the reference's.

    Summed over the same ``runs`` fixed wordcount and nhop runs (seeds 0..runs-1).
    """
    ref = mine = 0
    for seed in range(runs):
        base = SimConfig("wordcount" if seed % 2 else "nhop", reference, interval=3.0, parallelism=2,
                         records=40, seed=seed)
        a = run_engine(base)
        changed = replace(base, **change)
        b = run_engine(changed)
        ref += a.checkpoints["regular"] + a.checkpoints["forced"]
        mine += b.checkpoints["regular"] + b.checkpoints["forced"]
    return round(mine / ref, 3) if ref else float("nan")


def _sim_cost(reference: str, change: dict[str, Any]) -> Any:
    def cost(profile: str) -> tuple[float, str]:
        ratio = cost_ratio(reference, change)
        return ratio, f"checkpoints x{ratio} of {reference} on 12 fixed wordcount/nhop runs"

    return cost


#: Z-cycles on simulated dataflows need a few runs: the CIC variants get a larger budget.
_BUDGET = {"sim-cic-no-useless": {"ci": 200, "verify": 1200}}

SPECS = tuple(
    MutantSpec(name, area="simulate", description=description, kills=(prop_name,), slots={slot: broken},
               target="simulate", examples=_BUDGET.get(prop_name))
    for name, (prop_name, slot, broken, description) in UNSAFE.items()
) + tuple(
    MutantSpec(name, area="simulate", description=description, kills=(prop_name,), slots=change, safe=True,
               cost=_sim_cost(reference, change), target="simulate")
    for name, (prop_name, change, reference, description) in SAFE.items()
)
register(*SPECS)
