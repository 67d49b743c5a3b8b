"""Trim safety of the elastic simulator's queue trimming (QTP, SPATE §5.1.1), as an invariant.

After every step (``check_trim=True``), every event that a recovery of any operator task would need
(from its checkpoint's input watermark, or a stateless task's successor's, up to what its upstream
level emitted) must still be in the upstream task's output queue.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rollcheck.pyimpl.elastic.operators import KINDS

if TYPE_CHECKING:
    from rollcheck.pyimpl.elastic.simulator import Simulator

__all__ = ["trim_violations"]


def trim_violations(sim: Simulator) -> list[str]:
    """Trim safety after a step of ``sim``: what a recovery would need is still queued upstream.

    Every event a recovery of any operator task would need must still be in its upstream queue;
    the result has one sentence per task and key that misses some (empty when safe).
    """
    out: list[str] = []
    assert sim._ref is not None
    for lv in range(1, sim.n + 1):
        kind = KINDS[sim.cfg.ops[lv - 1]]
        up_level = sim._ref[lv - 1]
        for tid in sim.partitions[lv].tasks:
            t = sim.tasks[tid]
            for k in t.keys:
                hi = sim.emitted[lv - 1].get(k, 0)
                if kind.stateful:
                    lo = t.checkpoint.in_wm.get(k, 0) if t.checkpoint else 0
                else:
                    lo = sim.owner(lv + 1, k).received.get(k, 0)
                if hi <= lo:
                    continue
                need = [e.seq for e in up_level.get(k, []) if lo < e.seq <= hi
                        and (kind.stateful or kind.step(None, e.value)[1] is not None)]
                if not need:
                    continue
                have = {e.seq for e in sim.owner(lv - 1, k).queue.events([k])}
                missing = [q for q in need if q not in have]
                if missing:
                    out.append(
                        f"step {sim.step}: {tid} key {k} needs seq {missing[:5]} trimmed from "
                        f"{sim.owner(lv - 1, k).id}'s queue")
    return out
