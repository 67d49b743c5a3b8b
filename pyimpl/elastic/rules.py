"""The replaceable rules of SPATE's protocol: L1 readiness, deduplication, checkpoint contents, splits.

Source: SPATE §5.1.1 (QTP: L1-ACK after the successors' L0 and, for stateful tasks, after the
next checkpoint), §5.2.2 (deduplication by sequence number), §4.2 (checkpoint split/merge),
Table 2 (the data buffer is part of the running status). Rules: ``specs/elastic.md#qtp``,
``#checkpoint``, ``#scaling``. Mutants substitute single rules (``properties/mutants_elastic.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rollcheck.pyimpl.elastic.partition import repartition_keyed
from rollcheck.pyimpl.elastic.slices import Event, OutputQueue, Slice, SliceRecord, merge_slices

__all__ = ["Checkpoint", "l1_ready", "is_duplicate", "checkpoint_buffer", "split_checkpoint", "Rules",
           "REFERENCE_RULES"]


@dataclass(frozen=True)
class Checkpoint:
    """A checkpoint of a stateful task: processing state, input watermarks, unacked output buffer."""

    round: int
    state: Mapping[int, int]
    in_wm: Mapping[int, int]
    buffer: tuple[Slice, ...] = ()


# --------------------------------------------------------------------------------------------
# The protocol rules (substituted by mutants)
# --------------------------------------------------------------------------------------------


def l1_ready(rec: SliceRecord, stateful: bool, succ_l0: Mapping[int, int]) -> bool:
    """QTP T5: whether the L1-ACK for the input of slice ``rec`` may be sent upstream.

    Only when every output of the slice was received downstream (L0 from the successors covers
    ``sd``) and, for a stateful task, a checkpoint was taken after the slice was processed.

    Parameters
    ----------
    rec : SliceRecord
        The slice's IST/OST entry.
    stateful : bool
        The task keeps state (needs a checkpoint after the slice).
    succ_l0 : mapping of int to int
        Per key, the highest sequence number the successors acknowledged (L0).
    """
    if stateful and not rec.checkpointed:
        return False
    return all(succ_l0.get(k, 0) >= q for k, q in rec.sd.items())


def is_duplicate(e: Event, in_wm: Mapping[int, int]) -> bool:
    """§5.2.2: an input event whose sequence number is at most the key's watermark is a duplicate.

    Parameters
    ----------
    e : Event
        The input event.
    in_wm : mapping of int to int
        Per key, the task's input watermark (highest sequence number processed).
    """
    return e.seq <= in_wm.get(e.key, 0)


def checkpoint_buffer(queue: OutputQueue, succ_l0: Mapping[int, int]) -> tuple[Slice, ...]:
    """The data buffer a checkpoint keeps: output events the successors have not acknowledged (L0).

    Parameters
    ----------
    queue : OutputQueue
        The task's output queue.
    succ_l0 : mapping of int to int
        Per key, the highest sequence number the successors acknowledged (L0).

    Returns
    -------
    tuple of Slice
        The unacknowledged events, slice by slice (empty slices left out).
    """
    out = []
    for s in queue.slices:
        evs = tuple(e for e in s.events if e.seq > succ_l0.get(e.key, 0))
        if evs:
            out.append(Slice(s.k, evs))
    return tuple(out)


def split_checkpoint(old: Sequence[Checkpoint], owner: Mapping[int, str],
                     repartition: Callable[..., dict[str, dict[int, Any]]]) -> dict[str, Checkpoint]:
    """§4.2: split/merge the checkpoints of the old tasks by the new key partition.

    Parameters
    ----------
    old : sequence of Checkpoint
        The checkpoints of the old tasks.
    owner : mapping of int to str
        Per key, its task after scaling.
    repartition : callable
        Splits the old tasks' states by ``owner`` (an operator's own rule).

    Returns
    -------
    dict of str to Checkpoint
        Per new task, its checkpoint (the oldest round of the old ones).
    """
    states = repartition([c.state for c in old], owner)
    wms = repartition_keyed([c.in_wm for c in old], owner)
    buf = merge_slices(s for c in old for s in c.buffer)
    rnd = min((c.round for c in old), default=0)
    out = {}
    for t in dict.fromkeys(owner.values()):
        keys = {k for k, o in owner.items() if o == t}
        parts = [s.restrict(keys) for s in buf]
        out[t] = Checkpoint(rnd, states.get(t, {}), wms.get(t, {}), tuple(p for p in parts if p.events))
    return out


@dataclass(frozen=True)
class Rules:
    """The replaceable rules of the protocol; :data:`REFERENCE_RULES` is SPATE's.

    ``repartition`` splits/merges the keyed processing state and checkpoint state on scaling;
    ``split_checkpoint`` builds the new tasks' checkpoints from the old ones (dynamic checkpoint
    update, §4.2).
    """

    l1_ready: Callable[[SliceRecord, bool, Mapping[int, int]], bool] = l1_ready
    is_duplicate: Callable[[Event, Mapping[int, int]], bool] = is_duplicate
    checkpoint_buffer: Callable[[OutputQueue, Mapping[int, int]], tuple[Slice, ...]] = checkpoint_buffer
    repartition: Callable[..., dict[str, dict[int, Any]]] = repartition_keyed
    split_checkpoint: Callable[..., dict[str, Checkpoint]] = split_checkpoint
    l1_delay: int = 0  # ack rounds by which L1 is held back (0 = send as soon as ready)


REFERENCE_RULES = Rules()
