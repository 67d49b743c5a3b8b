"""Mutants of the span algorithm: deliberately broken (or costlier) variants and their checks."""

from __future__ import annotations

from collections.abc import Mapping

from rollcheck.properties.mutation import MutantOutcome, mutant
from rollcheck.properties.profiles import PROFILES
from rollcheck.properties.registry import run_property
from rollcheck.properties.spans_props import downstream_only_solver
from rollcheck.pyimpl.spans.fixpoint import compile_system, domino_chain, run_worklist
from rollcheck.pyimpl.spans.system import SpanSystem
from rollcheck.pyimpl.spans.watermark import checkpoints_only

__all__ = ["only_p_update", "domino_chain"]


def _killed_by(names: list[str], profile: str, shrink: bool = True, **impls: object) -> MutantOutcome:
    # shrink=False: the watermark property's shrinker is slow; the first failure is evidence enough
    total = 0
    for name in names:
        prof = profile if profile in PROFILES else "ci"
        r = run_property(name, profile=prof, shrink=shrink, **impls)  # type: ignore[arg-type]
        total += r.examples
        if r.status == "fail":
            return MutantOutcome("killed", f"{name}: {r.error}", r.counterexample, None, total)
    return MutantOutcome("survived", f"not caught by {names}", None, None, total)


@mutant("spans-downstream-worklist", target="spans",
        description="worklist re-examines only the receivers of a changed processor, not its senders")
def _downstream(profile: str) -> MutantOutcome:
    return _killed_by(["spans-feasible", "spans-end-to-end"], profile, solver=downstream_only_solver)


@mutant("spans-top-all-times", target="spans",
        description="⊤ of a live processor taken as all times instead of its concrete set "
                    "(loses an in-flight unlogged message)")
def _top_all(profile: str) -> MutantOutcome:
    return _killed_by(["spans-end-to-end"], profile, top_all=True)


def only_p_update(s_new: SpanSystem, old: Mapping[str, int], p: str) -> dict[str, int]:
    """WRONG on purpose: incremental watermark that raises only ``p`` (not its connected group)."""
    c = compile_system(checkpoints_only(s_new))
    idx = {n: i for i, n in enumerate(c.names)}
    start = [c.top[idx[n]] if n == p else old.get(n, 0) for n in c.names]
    r = run_worklist(c, start=start, initial=[idx[p]])
    return dict(zip(c.names, r.levels, strict=True))


@mutant("spans-watermark-only-p", target="spans",
        description="incremental low watermark raises only the processor that checkpointed")
def _only_p(profile: str) -> MutantOutcome:
    return _killed_by(["spans-watermark"], profile, shrink=False, update=only_p_update)


@mutant("spans-whole-graph-rounds", target="spans", safe=True,
        description="whole-graph rounds instead of a worklist: same answer, quadratic on domino chains")
def _rounds(profile: str) -> MutantOutcome:
    from rollcheck.pyimpl.spans.fixpoint import run_rounds

    c = domino_chain(300 if profile == "verify" else 120)
    a, b = run_worklist(c), run_rounds(c)
    if a.levels != b.levels:
        return MutantOutcome("survived", "rounds gave a different answer", None, None, 1)
    return MutantOutcome("safe", f"examinations {b.examinations} vs {a.examinations}", None,
                         b.examinations / a.examinations, 1)
