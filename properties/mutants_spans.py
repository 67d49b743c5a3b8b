"""Mutants of the span algorithm: deliberately broken (or costlier) variants.

They are declared as :class:`~rollcheck.properties.mutation.MutantSpec` entries of the
catalogue.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rollcheck.properties.mutation import MutantSpec, register
from rollcheck.properties.spans_props import downstream_only_solver, drops_inflight_solver
from rollcheck.pyimpl.spans.fixpoint import compile_system, domino_chain, run_worklist
from rollcheck.pyimpl.spans.system import SpanSystem
from rollcheck.pyimpl.spans.watermark import checkpoints_only

__all__ = ["only_p_update", "domino_chain", "SPECS"]


def only_p_update(s_new: SpanSystem, old: Mapping[str, int], p: str) -> dict[str, int]:
    """WRONG on purpose: incremental watermark that raises only ``p`` (not its connected group)."""
    c = compile_system(checkpoints_only(s_new))
    idx = {n: i for i, n in enumerate(c.names)}
    start = [c.top[idx[n]] if n == p else old.get(n, 0) for n in c.names]
    r = run_worklist(c, start=start, initial=[idx[p]])
    return dict(zip(c.names, r.levels, strict=True))


def downstream_worklist_orders(s: SpanSystem, order: str = "fifo", seed: int = 0) -> dict[str, int]:
    """WRONG on purpose: the downstream-only worklist for the worklist orders (rounds stay right)."""
    from rollcheck.properties.spans_props import reference_solver

    if order == "rounds":
        return reference_solver(s, order, seed)
    return downstream_only_solver(s, order, seed)


def frontier_without_top_exemption(s: Any) -> Any:
    """WRONG on purpose: flat need tables without the ⊤–⊤ exemption of C1 (too cautious)."""
    from rollcheck.pyimpl.spans.frontier import compile_seq

    fc = compile_seq(s)
    c1 = fc.need[: len(s.src)]  # C1 rows come first, one per edge
    # an unlogged edge with a message in flight: without the exemption no receiver level works
    c1[~s.failed[s.dst] & ~s.logged & (s.total > s.processed), s.K + 1] = 255
    return fc


def _rounds_cost(profile: str) -> tuple[float, str]:
    from rollcheck.pyimpl.errors import PropertyViolation
    from rollcheck.pyimpl.spans.fixpoint import run_rounds

    c = domino_chain(300 if profile == "verify" else 120)
    a, b = run_worklist(c), run_rounds(c)
    if a.levels != b.levels:
        raise PropertyViolation("whole-graph rounds gave a different answer on the domino chain")
    return b.examinations / a.examinations, f"examinations {b.examinations} vs {a.examinations} on a domino chain"


SPECS = (
    MutantSpec("spans-downstream-worklist", area="spans",
               description="worklist re-examines only the receivers of a changed processor, not its senders",
               kills=("spans-feasible", "spans-end-to-end"), slots={"solver": downstream_only_solver}),
    MutantSpec("spans-drops-inflight", area="spans",
               description="solver whose C1 ignores an unlogged message still in flight (T_D of ⊤ dropped): "
                           "a kept sender's lost message goes unnoticed",
               kills=("spans-greatest-brute", "spans-greatest-z3", "spans-feasible"),
               slots={"solver": drops_inflight_solver}),
    MutantSpec("spans-orders-downstream", area="spans",
               description="the downstream-only worklist among the evaluation orders: it disagrees with the "
                           "literal set-based algorithm",
               kills=("spans-orders-agree",), slots={"solver": downstream_worklist_orders}),
    MutantSpec("spans-frontier-no-top-exemption", area="spans",
               description="flat frontier need tables without the ⊤–⊤ exemption of C1",
               kills=("spans-frontier-equals-sets",), slots={"compile_fn": frontier_without_top_exemption}),
    MutantSpec("spans-top-all-times", area="spans",
               description="⊤ of a live processor taken as all times instead of its concrete set "
                           "(loses an in-flight unlogged message)",
               kills=("spans-end-to-end",), slots={"top_all": True},
               examples={"ci": 300, "verify": 1200}),  # needs a failure with an unlogged message in flight
    MutantSpec("spans-watermark-only-p", area="spans",
               description="incremental low watermark raises only the processor that checkpointed",
               kills=("spans-watermark",), slots={"update": only_p_update}, shrink=False),
    MutantSpec("spans-whole-graph-rounds", area="spans", safe=True,
               description="whole-graph rounds instead of a worklist: same answer, quadratic on domino chains",
               kills=("spans-orders-agree",), slots={}, cost=_rounds_cost),
)
register(*SPECS)
