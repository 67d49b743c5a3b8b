"""Deliberately broken variants of SPATE's elastic upstream backup, and the properties that kill them.

Each variant replaces one rule of :class:`rollcheck.pyimpl.elastic.Rules` (or the slice split) and is
declared as a :class:`~rollcheck.properties.mutation.MutantSpec`. A mutant is *killed* when one of
its properties is violated; the counterexample is the ``rollcheck.elastic/1`` document
(``rollcheck elastic simulate FILE`` replays it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import rollcheck.properties.elastic_props  # noqa: F401  (registers the properties)
from rollcheck.properties.mutation import MutantSpec, register
from rollcheck.properties.registry import run_property
from rollcheck.pyimpl.elastic import (
    REFERENCE_RULES,
    Checkpoint,
    Config,
    Event,
    Failure,
    Rules,
    ScaleEvent,
    Slice,
    SliceRecord,
    repartition_keyed,
)

__all__ = ["run_under_profile", "SAFE_RULES", "SAFE_MUTANTS", "SAFE_SPECS", "BROKEN_RULES", "WITNESSES",
           "ELASTIC_MUTANTS", "split_drops_last_key", "merge_keeps_first_part"]


# ---------------------------------------------------------------- the broken rules
def l1_before_checkpoint(rec: SliceRecord, stateful: bool, succ_l0: Mapping[int, int]) -> bool:
    """Sends L1 as soon as the successors received the output, before the next checkpoint."""
    return all(succ_l0.get(k, 0) >= q for k, q in rec.sd.items())


def l1_without_successor_ack(rec: SliceRecord, stateful: bool, succ_l0: Mapping[int, int]) -> bool:
    """Sends L1 without waiting for the successors' L0 (only the checkpoint for stateful tasks)."""
    return rec.checkpointed or not stateful


def never_duplicate(e: Event, in_wm: Mapping[int, int]) -> bool:
    """No deduplication by sequence number: replayed events are processed again."""
    return False


def repartition_loses_last_key(parts: Any, owner: Mapping[int, str]) -> dict[str, dict[int, Any]]:
    """State split with an off-by-one range end: each new task of ≥ 2 keys loses its last key."""
    out = repartition_keyed(parts, owner)
    for t, d in out.items():
        keys = sorted(k for k, o in owner.items() if o == t)
        if len(keys) >= 2:
            d.pop(keys[-1], None)
    return out


def stale_checkpoint(old: Sequence[Checkpoint], owner: Mapping[int, str], repartition: Any) -> dict[str, Checkpoint]:
    """No dynamic checkpoint update: new tasks after scaling fall back to the initial checkpoint."""
    return {t: Checkpoint(0, {}, {}, ()) for t in dict.fromkeys(owner.values())}


def checkpoint_without_buffer(queue: Any, succ_l0: Mapping[int, int]) -> tuple[Slice, ...]:
    """The checkpoint keeps the processing state only, not the unacknowledged output buffer."""
    return ()


def split_drops_last_key(s: Slice, owner: Mapping[int, str]) -> dict[str, Slice]:
    """Slice split that routes each part with an exclusive upper end: the last key of a range is lost."""
    last: dict[str, int] = {}
    for k, t in owner.items():
        last[t] = max(last.get(t, k), k)
    parts: dict[str, list[Event]] = {}
    for e in s.events:
        t = owner[e.key]
        if e.key == last[t] and sum(1 for o in owner.values() if o == t) > 1:
            continue
        parts.setdefault(t, []).append(e)
    return {t: Slice(s.k, tuple(evs)) for t, evs in parts.items()}


def l1_on_checkpoint_only(rec: SliceRecord, stateful: bool, succ_l0: Mapping[int, int]) -> bool:
    """Safe: a stateful task sends L1 right after its checkpoint, without the successors' L0.

    Correct here because the checkpoint keeps the unacknowledged outputs (its data buffer); it
    trims upstream queues earlier (ratio < 1 of the queue sizes).
    """
    if stateful:
        return rec.checkpointed
    return all(succ_l0.get(k, 0) >= q for k, q in rec.sd.items())


def checkpoint_whole_queue(queue: Any, succ_l0: Mapping[int, int]) -> tuple[Slice, ...]:
    """Safe: the checkpoint stores the whole output queue, acknowledged events included."""
    return tuple(queue.slices)


def merge_keeps_first_part(slices: Any) -> list[Slice]:
    """Slice merge (Eq. 2) that keeps only the first part of each round ``k``."""
    first: dict[int, Slice] = {}
    for s in slices:
        first.setdefault(s.k, s)
    return [first[k] for k in sorted(first)]


BROKEN_RULES: dict[str, Rules] = {
    "elastic-l1-before-checkpoint": Rules(l1_ready=l1_before_checkpoint),
    "elastic-l1-without-successor-ack": Rules(l1_ready=l1_without_successor_ack),
    "elastic-no-dedup": Rules(is_duplicate=never_duplicate),
    "elastic-split-loses-key": Rules(repartition=repartition_loses_last_key),
    "elastic-stale-checkpoint": Rules(split_checkpoint=stale_checkpoint),
    "elastic-checkpoint-without-buffer": Rules(checkpoint_buffer=checkpoint_without_buffer),
    "elastic-lazy-l1": Rules(l1_delay=1),
}

SAFE_RULES: dict[str, Rules] = {
    "elastic-safe-l1-on-checkpoint-only": Rules(l1_ready=l1_on_checkpoint_only),
    "elastic-safe-checkpoint-whole-queue": Rules(checkpoint_buffer=checkpoint_whole_queue),
}


# Small witnesses found by failure_sweep: with the failure, each broken rule loses or duplicates
# output while the reference rules give exactly the failure-free output.
WITNESSES: dict[str, tuple[Config, Failure]] = {
    "elastic-l1-before-checkpoint": (
        Config(keys=1, ops=("affine", "sum"), rounds=3, max_rate=1, checkpoint_interval=3, seed=4,
               parallelism=(1, 1)), Failure(64, 2, 0)),
    "elastic-l1-without-successor-ack": (
        Config(keys=1, ops=("affine",), parallelism=(1,), rounds=3, max_rate=2, checkpoint_interval=3, seed=71),
        Failure(18, 1, 0)),
    "elastic-no-dedup": (
        Config(keys=1, ops=("affine",), parallelism=(1,), rounds=3, max_rate=2, checkpoint_interval=3, seed=71),
        Failure(18, 1, 0)),
    "elastic-stale-checkpoint": (
        Config(keys=2, ops=("count", "affine"), parallelism=(1, 1), rounds=5, max_rate=2, checkpoint_interval=2,
               seed=29, scaling=(ScaleEvent(5, 1, 2),)), Failure(58, 1, 0)),
    "elastic-checkpoint-without-buffer": (
        Config(keys=1, ops=("sum",), parallelism=(1,), rounds=3, max_rate=1, checkpoint_interval=3, seed=89),
        Failure(20, 1, 0)),
}


def ElasticMutant(name: str, description: str, properties: tuple[str, ...], impl: dict[str, Any]) -> MutantSpec:
    """An unsafe elastic variant: ``impl`` replaces slots of the ``properties`` that must kill it."""
    return MutantSpec(name, area="elastic", description=description, kills=properties, slots=impl,
                      target="elastic")


ELASTIC_MUTANTS: tuple[MutantSpec, ...] = (
    ElasticMutant("elastic-l1-before-checkpoint",
                  "stateful tasks send the L1-ACK before their next checkpoint (QTP T5 reordered)",
                  ("elastic-trim-safety", "elastic-exactly-once"),
                  {"rules": BROKEN_RULES["elastic-l1-before-checkpoint"]}),
    ElasticMutant("elastic-l1-without-successor-ack",
                  "L1-ACK sent without waiting for the successors' L0-ACK",
                  ("elastic-trim-safety", "elastic-exactly-once"),
                  {"rules": BROKEN_RULES["elastic-l1-without-successor-ack"]}),
    ElasticMutant("elastic-no-dedup", "receivers do not drop events by sequence number",
                  ("elastic-exactly-once",), {"rules": BROKEN_RULES["elastic-no-dedup"]}),
    ElasticMutant("elastic-split-loses-key", "state split on scaling loses the last key of each range",
                  ("elastic-scaling-preserves-output", "elastic-exactly-once"),
                  {"rules": BROKEN_RULES["elastic-split-loses-key"]}),
    ElasticMutant("elastic-stale-checkpoint",
                  "checkpoint state is not split/merged on scaling (new tasks restore the initial state)",
                  ("elastic-trim-safety", "elastic-exactly-once"),
                  {"rules": BROKEN_RULES["elastic-stale-checkpoint"]}),
    ElasticMutant("elastic-checkpoint-without-buffer",
                  "a checkpoint omits the output events the successors have not acknowledged",
                  ("elastic-exactly-once",), {"rules": BROKEN_RULES["elastic-checkpoint-without-buffer"]}),
    ElasticMutant("elastic-lazy-l1", "L1-ACKs are held back by one ack round (queues grow past the bound)",
                  ("elastic-queue-bound",), {"rules": BROKEN_RULES["elastic-lazy-l1"]}),
    ElasticMutant("elastic-split-drops-boundary",
                  "slice split (Eq. 1) drops the events of the last key of each multi-key range",
                  ("elastic-slice-split",), {"split": split_drops_last_key}),
    ElasticMutant("elastic-merge-keeps-first",
                  "slice merge (Eq. 2) keeps only the first part of each round",
                  ("elastic-slice-split",), {"merge": merge_keeps_first_part}),
)


def run_under_profile(name: str, profile: str = "ci", *, shrink: bool = True, **impls: Any) -> Any:
    """:func:`run_property` under ``profile`` (optionally without shrinking)."""
    from rollcheck.properties.profiles import PROFILES

    return run_property(name, profile=profile if profile in PROFILES else "ci", shrink=shrink, **impls)


register(*ELASTIC_MUTANTS)


# ---------------------------------------------------------------- safe (costlier or cheaper) variants
def _cost(rules: Rules, measure: str) -> int:
    """Total cost over a fixed set of constant-rate pipelines: max queue sizes or checkpointed events."""
    from rollcheck.pyimpl.elastic import Config, simulate

    total = 0
    for ops in (("sum",), ("affine", "sum", "count"), ("filter", "max")):
        for a in (1, 2, 3):
            for c in (1, 2, 4):
                cfg = Config(keys=4, ops=ops, rounds=24, max_rate=4, ack_interval=a, checkpoint_interval=c,
                             workload="constant", seed=a * 10 + c)
                res = simulate(cfg, rules=rules)
                total += sum(res.max_queue.values()) if measure == "queue" else res.checkpoint_events
    return total


def _cost_of(name: str, measure: str) -> Any:
    def cost(profile: str) -> tuple[float, str]:
        ref = _cost(REFERENCE_RULES, measure)
        ratio = _cost(SAFE_RULES[name], measure) / ref if ref else float("inf")
        what = "sum of max queue sizes" if measure == "queue" else "events stored in checkpoints"
        return ratio, f"{what} relative to the reference: {ratio:.2f} (18 constant-rate pipelines)"

    return cost


SAFE_MUTANTS = (
    ("elastic-safe-l1-on-checkpoint-only",
     "stateful tasks send L1 at their checkpoint without waiting for the successors' L0 "
     "(safe because checkpoints keep unacknowledged output)", "queue"),
    ("elastic-safe-checkpoint-whole-queue", "checkpoints store the whole output queue", "checkpoint"),
)


SAFE_SPECS = tuple(
    MutantSpec(name, area="elastic", description=description, kills=("elastic-exactly-once", "elastic-trim-safety"),
               slots={"rules": SAFE_RULES[name]}, safe=True, cost=_cost_of(name, measure), target="elastic")
    for name, description, measure in SAFE_MUTANTS
)
register(*SAFE_SPECS)
