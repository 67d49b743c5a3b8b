"""Mutants of the span algorithm: deliberately broken (or costlier) variants, declared as
:class:`~rollcheck.properties.mutation.MutantSpec` entries of the catalogue."""

from __future__ import annotations

from collections.abc import Mapping

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
    MutantSpec("spans-top-all-times", area="spans",
               description="⊤ of a live processor taken as all times instead of its concrete set "
                           "(loses an in-flight unlogged message)",
               kills=("spans-end-to-end",), slots={"top_all": True}),
    MutantSpec("spans-watermark-only-p", area="spans",
               description="incremental low watermark raises only the processor that checkpointed",
               kills=("spans-watermark",), slots={"update": only_p_update}, shrink=False),
    MutantSpec("spans-whole-graph-rounds", area="spans", safe=True,
               description="whole-graph rounds instead of a worklist: same answer, quadratic on domino chains",
               kills=("spans-orders-agree",), slots={}, cost=_rounds_cost),
)
register(*SPECS)
