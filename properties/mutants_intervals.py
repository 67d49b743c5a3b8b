"""Deliberately broken variants of the checkpoint-interval models, and the properties that catch them.

Each variant is a plausible mistake when typing the formulas of ``pyimpl/intervals/`` or writing
the simulation of ``pyimpl/intervals/sim.py``; each is registered in the mutation catalogue with
the property that must kill it. Nothing here is used outside tests and the catalogue.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from rollcheck.properties.mutation import MutantSpec, register
from rollcheck.pyimpl.intervals import (
    CIChoice,
    ProfilingPoint,
    TRTBreakdown,
    optimal_interval,
    optimise_ci,
    trt_breakdown,
    utilization,
)
from rollcheck.pyimpl.intervals.sim import (
    SimConfig,
    SimSummary,
    run_rng,
    simulate_dag_run,
    simulate_runs,
    summarise,
)

__all__ = ["BROKEN", "SPECS"]


# --------------------------------------------------------------------------- broken variants
def tstar_wrong_branch(failure_rate: float, checkpoint_cost: float) -> float:
    """Lambert W on the lower branch W₋₁ instead of the principal W₀."""
    return optimal_interval(failure_rate, checkpoint_cost, branch=-1)


def tstar_unpolished(failure_rate: float, checkpoint_cost: float) -> float:
    """The Lambert-W formula in plain floating point, without the Newton polish near −1/e."""
    from scipy.special import lambertw

    x = checkpoint_cost * failure_rate
    return (x + float(lambertw(-math.exp(-x - 1.0), 0).real) + 1.0) / failure_rate


def tstar_young(failure_rate: float, checkpoint_cost: float) -> float:
    """Young's first-order √(2c/λ) used as if it were the optimum."""
    return math.sqrt(2 * checkpoint_cost / failure_rate)


def utilization_dropped_delta(interval: Any, failure_rate: float, checkpoint_cost: float, restart_cost: float = 0.0,
                              depth: int = 1, token_delay: float = 0.0) -> Any:
    """Eq. 10 with the e^{δλ} factor of the numerator dropped (restart shifted by nδ, not (n−1)δ)."""
    u = utilization(interval, failure_rate, checkpoint_cost, restart_cost, depth, token_delay)
    return u * math.exp(-failure_rate * token_delay)


def utilization_no_restart(interval: Any, failure_rate: float, checkpoint_cost: float, restart_cost: float = 0.0,
                           depth: int = 1, token_delay: float = 0.0) -> Any:
    """The restart cost R left out of the exponent (Eq. 3 used for Eq. 4/10)."""
    return utilization(interval, failure_rate, checkpoint_cost, 0.0, depth, token_delay)


def utilization_no_checkpoint_cost(interval: Any, failure_rate: float, checkpoint_cost: float,
                                   restart_cost: float = 0.0, depth: int = 1, token_delay: float = 0.0) -> Any:
    """Eq. 10 with the checkpoint cost left out of the useful time (T instead of T − c)."""
    u = utilization(interval, failure_rate, checkpoint_cost, restart_cost, depth, token_delay)
    return u * interval / (interval - checkpoint_cost)


def utilization_delta_sign_flipped(interval: Any, failure_rate: float, checkpoint_cost: float,
                                   restart_cost: float = 0.0, depth: int = 1, token_delay: float = 0.0) -> Any:
    """The e^{δλ} factor with the wrong sign in the exponent of the n·δ shift (U grows with δ)."""
    u = utilization(interval, failure_rate, checkpoint_cost, restart_cost, depth, token_delay)
    return u * math.exp(2.0 * failure_rate * token_delay * depth)


def sim_restores_in_progress(config: SimConfig, runs: int = 250, horizon_failures: float = 2000.0, seed: int = 0,
                             point: int = 0) -> SimSummary:
    """Restores the checkpoint the source has taken even if the token has not reached the sink."""
    return simulate_runs(dataclasses.replace(config, depth=1), runs, horizon_failures, seed, point)


def sim_no_restart_failures(config: SimConfig, runs: int = 250, horizon_failures: float = 2000.0, seed: int = 0,
                            point: int = 0) -> SimSummary:
    """Failures cannot strike during a restart: every restart takes exactly R."""
    lam, t_per, c, r_cost, lag = (config.failure_rate, config.interval, config.checkpoint_cost,
                                  config.restart_cost, config.token_lag)
    horizon = horizon_failures / lam
    vals, fails = [], 0
    for run in range(runs):
        rng = run_rng(seed, point, run)
        t, periods = 0.0, 0
        while t < horizon:
            x = float(rng.exponential(1 / lam))
            periods += max(0, math.floor((min(x, horizon - t) - lag) / t_per))
            t += x + r_cost
            fails += 1
        vals.append(periods * (t_per - c) / horizon)
    return summarise(point, config, vals, fails, horizon, seed)


def dag_sim_source_only(interval: float, failure_rate: float, checkpoint_cost: float, restart_cost: float,
                        offsets: Any, horizon: float, rng: np.random.Generator) -> Any:
    """Restores the last checkpoint the *source* completed instead of the last system-wide one."""
    return simulate_dag_run(interval, failure_rate, checkpoint_cost, restart_cost, [min(offsets)], horizon, rng)


def trt_first_term_only(ci: float, **kw: Any) -> float:
    """The catch-up series cut after its first term (TRT = T_o + R + a_1)."""
    b: TRTBreakdown = trt_breakdown(ci, **kw)
    return kw["timeout"] + kw["recovery"] + b.first_term


def _breakdown_without_warmup(ci: float, **kw: Any) -> TRTBreakdown:
    kw = dict(kw)
    kw["warmup"] = 0.0  # a_1 = E + T_o + R: the warm-up W forgotten in the first term
    return trt_breakdown(ci, **kw)


def trt_a1_without_warmup(ci: float, **kw: Any) -> float:
    """TRT whose first term a_1 leaves out the warm-up W (E + T_o + R)."""
    return _breakdown_without_warmup(ci, **kw).trt


def trt_limit_a1_without_warmup(ci: float, **kw: Any) -> float:
    """The closed-form limit built from the same W-less a_1 (the implementation's own first term)."""
    b = _breakdown_without_warmup(ci, **kw)
    return kw["timeout"] + kw["recovery"] + b.first_term / (1.0 - kw["ratio"])


def trt_ratio_inverted(ci: float, **kw: Any) -> float:
    """Uses the spare capacity 1 − U as the common ratio instead of U = I_avg/I_max."""
    kw = dict(kw)
    kw["ratio"] = min(1.0 - kw["ratio"], 0.999999)
    return trt_breakdown(ci, **kw).trt


def optimise_paper_inverse(points: list[ProfilingPoint], bound: float, **kw: Any) -> CIChoice:
    """Takes the largest CI meeting the bound (inverting A at C_TRT) whatever the latency curve does."""
    ch = optimise_ci(points, bound, **kw)
    ci = ch.feasible[-1][1]
    return dataclasses.replace(ch, ci=ci, latency=ch.latency_fit(ci), trt=ch.trt_fit(ci))


def optimise_ignores_bound(points: list[ProfilingPoint], bound: float, **kw: Any) -> CIChoice:
    """Minimises the predicted latency over the whole profiled range, ignoring the TRT bound."""
    return optimise_ci(points, 1e300, **kw)


# --------------------------------------------------------------------------- catalogue
#: name -> (property, keyword slot, broken implementation, target, description)
BROKEN: dict[str, tuple[str, str, Callable[..., Any], str, str]] = {
    "interval-lambertw-wrong-branch": ("interval-tstar-maximises", "optimal", tstar_wrong_branch, "interval-model",
                                       "T* with the W₋₁ branch of Lambert W instead of W₀"),
    "interval-tstar-unpolished": ("interval-tstar-young-limit", "optimal", tstar_unpolished, "interval-model",
                                  "Lambert-W formula without Newton polish: loses digits as cλ → 0"),
    "interval-young-as-optimum": ("interval-tstar-maximises", "optimal", tstar_young, "interval-model",
                                  "Young's √(2c/λ) taken as the optimum"),
    "interval-young-not-stationary": ("interval-tstar-stationary", "optimal", tstar_young, "interval-model",
                                      "Young's √(2c/λ) taken as the optimum (dU/dT ≠ 0 there)"),
    "interval-young-not-argmax": ("interval-tstar-independent", "optimal", tstar_young, "interval-model",
                                  "Young's √(2c/λ) taken as the optimum (not the numerical argmax)"),
    "interval-no-checkpoint-cost": ("interval-utilization-unit-range", "util", utilization_no_checkpoint_cost,
                                    "interval-model", "useful time T instead of T − c"),
    "interval-delta-sign-flipped": ("interval-utilization-monotone", "util", utilization_delta_sign_flipped,
                                    "interval-model", "sign error in the e^{nδλ} shift: U grows with δ"),
    "interval-dropped-delta": ("interval-dag-as-single", "util", utilization_dropped_delta, "interval-model",
                               "Eq. 10 without the e^{δλ} numerator factor"),
    "interval-restart-ignored": ("interval-eq10-literal", "util", utilization_no_restart, "interval-model",
                                 "restart cost R missing from the exponent"),
    "sim-restores-in-progress": ("interval-sim-agrees", "simulate", sim_restores_in_progress, "interval-sim",
                                 "restore from a checkpoint the token has not completed"),
    "sim-no-restart-failures": ("interval-sim-agrees", "simulate", sim_no_restart_failures, "interval-sim",
                                "failures cannot strike during restart"),
    "dag-sim-source-only": ("interval-dag-sim-agrees", "simulate_dag", dag_sim_source_only, "interval-sim",
                            "restore the source's last checkpoint, not the last system-wide one"),
    "trt-first-term-only": ("trt-limit", "trt", trt_first_term_only, "chiron-trt",
                            "catch-up series cut after the first term"),
    "trt-a1-without-warmup": ("trt-direct-sum", "trt", trt_a1_without_warmup, "chiron-trt",
                              "first term a_1 without the warm-up W (limit from the same a_1)"),
    "trt-ratio-inverted": ("trt-monotone", "trt", trt_ratio_inverted, "chiron-trt",
                           "common ratio 1 − U instead of U"),
    "optimiser-paper-inverse": ("trt-optimiser-optimal", "optimise", optimise_paper_inverse, "chiron-optimiser",
                                "largest CI meeting the bound, whatever the latency does"),
    "optimiser-ignores-bound": ("trt-optimiser-optimal", "optimise", optimise_ignores_bound, "chiron-optimiser",
                                "latency minimised without the TRT bound"),
}


#: Properties whose examples are expensive (simulation, many fits): their mutants are reported
#: with the first failing example, unshrunk, to keep the catalogue run short.
NO_SHRINK = {"interval-sim-agrees", "interval-dag-sim-agrees", "trt-optimiser-optimal"}

def _slots(name: str, slot: str, broken: Callable[..., Any]) -> dict[str, Any]:
    if name == "trt-a1-without-warmup":  # the bug lives in a_1, which the limit reuses too
        return {"trt": broken, "limit": trt_limit_a1_without_warmup}
    return {slot: broken}


SPECS = tuple(
    MutantSpec(name, area="intervals", description=description, kills=(prop_name,),
               slots=_slots(name, slot, broken), target=target, shrink=False if prop_name in NO_SHRINK else None)
    for name, (prop_name, slot, broken, target, description) in BROKEN.items()
)
register(*SPECS)
