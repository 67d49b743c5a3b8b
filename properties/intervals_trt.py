"""Properties of Chiron's total-recovery-time heuristic and CI optimiser (``specs/intervals.md``)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from rollcheck.properties.intervals_model import expect
from rollcheck.properties.registry import interesting, prop
from rollcheck.pyimpl.errors import InvalidInputError
from rollcheck.pyimpl.intervals import (
    CASES,
    READINGS,
    ProfilingPoint,
    fit_quadratic,
    optimise_ci,
    total_recovery_time,
    trt_limit,
)

__all__ = ["trt_params", "profiles", "direct_trt"]

SPEC = "specs/intervals.md"
_time = st.floats(0.0, 500.0)


@st.composite
def trt_params(draw: Any) -> dict[str, Any]:
    """Drawn arguments of the TRT formula: CI, timeout, recovery, warm-up, ratio, case, reading."""
    return {"ci": draw(st.floats(0.0, 600.0)), "timeout": draw(_time), "recovery": draw(_time),
            "warmup": draw(_time), "ratio": draw(st.floats(0.0, 0.98)), "case": draw(st.sampled_from(CASES)),
            "reading": draw(st.sampled_from(READINGS)), "threshold": draw(st.sampled_from([1.0, 0.1, 5.0]))}


@prop("trt-monotone", target="chiron-trt", theorem=f"{SPEC}#trt-monotone")
@given(p=trt_params(), which=st.sampled_from(["ci", "timeout", "recovery", "warmup", "ratio", "case"]),
       grow=st.floats(0.0, 300.0))
def trt_monotone(p: dict[str, Any], which: str, grow: float, trt: Any = total_recovery_time) -> None:
    """TRT never decreases when CI, T_o, R, W or U grows, nor from best to average to worst."""
    q = dict(p)
    if which == "ratio":
        q["ratio"] = p["ratio"] + (0.99 - p["ratio"]) * min(grow, 300.0) / 300.0
    elif which == "case":
        q["case"] = CASES[min(2, CASES.index(p["case"]) + 1)]
    else:
        q[which] = p[which] + grow
    a = trt(p.pop("ci"), **p)
    b = trt(q.pop("ci"), **q)
    expect(b >= a * (1 - 1e-12), f"TRT fell from {a} to {b} when {which} grew", {**p, "grown": which, "to": q})


def direct_trt(ci: float, timeout: float, recovery: float, warmup: float, ratio: float, case: str,
               reading: str, threshold: float) -> tuple[float, float, int]:
    """An independent derivation of TRT from ``specs/intervals.md#trt``; returns (TRT, limit, terms).

    The terms ``a_k`` are summed one by one (``E`` = 0, CI/2, CI; ``a_1 = E + T_o + R + W``,
    times U under the Eq. 2 reading; stop after the first term below the threshold), and the
    limit is the closed form ``T_o + R + a_1/(1 − U)``.
    """
    e = {"best": 0.0, "average": 0.5 * ci, "worst": ci}[case]
    a1 = (e + timeout + recovery + warmup) * (ratio if reading == "eq2" else 1.0)
    total, term, k = 0.0, a1, 0
    while True:
        k += 1
        total += term
        if term < threshold:
            break
        term = a1 * ratio ** k
    return timeout + recovery + total, timeout + recovery + a1 / (1.0 - ratio), k


@prop("trt-direct-sum", target="chiron-trt", theorem=f"{SPEC}#trt-limit", area="intervals",
      interesting="the catch-up series has at least 3 terms", floor=0.3)
@given(p=trt_params())
def trt_direct_sum(p: dict[str, Any], trt: Any = total_recovery_time, limit: Any = trt_limit) -> None:
    """TRT equals the direct summation of the series, and the limit the closed form.

    Relative tolerance 1e-9 for the sum and 1e-12 for the closed form from a_1 = E + T_o + R + W:
    a derivation that shares nothing with the implementation.
    """
    args = {k: v for k, v in p.items() if k != "threshold"}
    ci = args.pop("ci")
    want, want_lim, terms = direct_trt(ci, threshold=p["threshold"], **args)
    interesting(terms >= 3, "the catch-up series has at least 3 terms")
    got = trt(ci, threshold=p["threshold"], **args)
    expect(abs(got - want) <= 1e-9 * max(1.0, abs(want)),
           f"TRT {got} != direct sum {want} over {terms} terms", p)
    lim = limit(ci, **args)
    expect(abs(lim - want_lim) <= 1e-12 * max(1.0, abs(want_lim)), f"limit {lim} != closed form {want_lim}", p)


@prop("trt-limit", target="chiron-trt", theorem=f"{SPEC}#trt-limit")
@given(p=trt_params())
def trt_tends_to_limit(p: dict[str, Any], trt: Any = total_recovery_time, limit: Any = trt_limit) -> None:
    """T_o + R + S_n <= the closed form T_o + R + a_1/(1 − U), and tends to it.

    Short by less than threshold·U/(1 − U), and equal to it (1e-9) as the threshold tends to 0.
    """
    args = {k: v for k, v in p.items() if k not in ("threshold",)}
    ci = args.pop("ci")
    lim = limit(ci, **args)
    v = trt(ci, threshold=p["threshold"], **args)
    u = p["ratio"]
    tail = p["threshold"] * u / (1 - u)
    expect(v <= lim * (1 + 1e-12) and lim - v <= tail * (1 + 1e-9) + 1e-9 * lim,
           f"TRT {v} vs limit {lim}: gap {lim - v} exceeds the tail bound {tail}", p)
    tiny = trt(ci, threshold=1e-12 * max(1.0, lim), **args)
    expect(abs(tiny - lim) <= 1e-9 * max(1.0, lim), f"TRT {tiny} does not tend to the limit {lim}", p)


@st.composite
def profiles(draw: Any) -> tuple[list[ProfilingPoint], float]:
    """Profiling points from quadratic latency/TRT curves plus noise, and a TRT bound."""
    k = draw(st.integers(3, 11))
    lo = draw(st.floats(0.5, 10.0))
    hi = lo + draw(st.floats(5.0, 100.0))
    xs = np.linspace(lo, hi, k)
    # latency: any quadratic; TRT: mostly increasing in CI
    l0, l1, l2 = draw(st.floats(100, 2000)), draw(st.floats(-50, 50)), draw(st.floats(-0.5, 0.5))
    a0, a1, a2 = draw(st.floats(10, 200)), draw(st.floats(-1, 5)), draw(st.floats(-0.02, 0.05))
    noise = draw(st.lists(st.floats(-1, 1), min_size=2 * k, max_size=2 * k))
    pts = [ProfilingPoint(float(x), float(l0 + l1 * x + l2 * x * x + 20 * noise[i]),
                          float(a0 + a1 * x + a2 * x * x + 5 * noise[k + i])) for i, x in enumerate(xs)]
    trts = [p.trt for p in pts]
    bound = draw(st.floats(min(trts) * 0.8, max(trts) * 1.1)) if min(trts) > 0 else 10.0
    return pts, max(bound, 1e-3)


@prop("trt-optimiser-optimal", target="chiron-optimiser", theorem=f"{SPEC}#optimiser")
@given(data=profiles())
def optimiser_optimal(data: tuple[list[ProfilingPoint], float], optimise: Any = optimise_ci) -> None:
    """The chosen CI meets A(CI) <= bound and no sampled feasible CI has lower predicted P(CI).

    When the optimiser reports that no CI meets the bound, no sampled CI does.
    """
    points, bound = data
    lat = fit_quadratic([p.ci for p in points], [p.latency for p in points])
    trt = fit_quadratic([p.ci for p in points], [p.trt for p in points])
    lo, hi = min(p.ci for p in points), max(p.ci for p in points)
    grid = np.linspace(lo, hi, 2001)
    feasible = grid[np.asarray(trt(grid)) <= bound]
    ex = {"points": [(p.ci, p.latency, p.trt) for p in points], "bound": bound}
    try:
        ch = optimise(points, bound)
    except InvalidInputError:
        expect(feasible.size == 0, f"reported infeasible, but e.g. CI = {feasible[:1]} meets the bound", ex)
        return
    expect(lo - 1e-9 <= ch.ci <= hi + 1e-9, f"CI {ch.ci} outside the profiled range [{lo}, {hi}]", ex)
    a = trt(ch.ci)
    expect(a <= bound + 1e-9 * max(1.0, abs(bound)), f"A({ch.ci}) = {a} exceeds the bound {bound}", ex)
    if feasible.size:
        best = float(np.min(lat(feasible)))
        scale = max(1.0, float(np.max(np.abs(lat(grid)))))
        expect(lat(ch.ci) <= best + 1e-9 * scale,
               f"P({ch.ci}) = {lat(ch.ci)} but a sampled feasible CI reaches {best}", ex)
    expect(math.isfinite(ch.latency), "non-finite predicted latency", ex)


def _register_measures() -> None:
    from rollcheck.properties.registry import measure

    measure("trt-monotone", "a ratio U ≥ 0.5 (several catch-up terms)", lambda p, **_: p["ratio"] >= 0.5)
    measure("trt-limit", "a ratio U ≥ 0.5 (several catch-up terms)", lambda p, **_: p["ratio"] >= 0.5)
    measure("trt-optimiser-optimal", "a bound below the largest profiled TRT (it excludes some CIs)",
            lambda data, **_: data[1] < max(q.trt for q in data[0]))


_register_measures()
