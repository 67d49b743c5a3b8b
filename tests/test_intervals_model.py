"""Utilization model and optimum: the papers' numbers, preconditions, properties and their mutants."""

from __future__ import annotations

import math

import pytest

import rollcheck.properties.intervals_model  # noqa: F401  (registers the properties)
import rollcheck.properties.intervals_sim  # noqa: F401
import rollcheck.properties.intervals_trt  # noqa: F401
from rollcheck.properties.intervals_model import run_with
from rollcheck.properties.mutants_intervals import BROKEN
from rollcheck.properties.registry import PROPERTIES
from rollcheck.pyimpl.errors import InvalidInputError
from rollcheck.pyimpl.intervals import (
    daly_interval,
    failure_rate_for_optimal,
    optimal_interval,
    utilization,
    utilization_dag,
    utilization_dag_no_failure,
    utilization_no_failure,
    utilization_no_restart,
    utilization_single,
    young_interval,
    zhuang_interval,
)

# --------------------------------------------------------------------------- the paper's numbers


def test_fig4_single_process_optimum() -> None:
    """§3.4, Fig. 4: λ = 0.005/min, c = 5 min, R = 10 min → T* = 46.452 min, U = 0.7541."""
    t = optimal_interval(0.005, 5.0)
    assert t == pytest.approx(46.452, abs=5e-4)
    assert utilization_single(t, 0.005, 5.0, 10.0) == pytest.approx(0.7541, abs=5e-5)


def test_fig10_dag_optimum() -> None:
    """§4.3, Fig. 10: n = 50, δ = 0.5 min → U(T*) = 0.667 at the same T*."""
    t = optimal_interval(0.005, 5.0)
    u = utilization_dag(t, 0.005, 5.0, 10.0, depth=50, token_delay=0.5)
    assert u == pytest.approx(0.667, abs=5e-4)
    # Fig. 11: the DAG loses 11.6 % against a single operator (11.54 % unrounded)
    single = utilization_single(t, 0.005, 5.0, 10.0)
    assert 100 * (1 - u / single) == pytest.approx(11.6, abs=0.1)


@pytest.mark.parametrize(
    ("per_hour", "paper_gain"),
    [(0.8475, 18.91), (0.1701, 2.4), (0.135, 1.73), (0.1161, 1.4), (0.0606, 0.5)],
)
def test_section5_real_world_gains(per_hour: float, paper_gain: float) -> None:
    """§5: R = 30 s, c = 5 s, δ = 50 ms, n = 5: gain of T* over a 30-minute interval."""
    lam = per_hour / 3600.0  # per second
    kw = {"failure_rate": lam, "checkpoint_cost": 5.0, "restart_cost": 30.0, "depth": 5, "token_delay": 0.05}
    gain = 100 * (utilization(optimal_interval(lam, 5.0), **kw) / utilization(1800.0, **kw) - 1)
    # the paper rounds (1.744 is printed as 1.73)
    assert gain == pytest.approx(paper_gain, abs=0.02)


def test_section5_rate_for_which_30_minutes_is_optimal() -> None:
    """§5: with c = 1 s, 30 minutes is optimal for λ = 0.0022 per hour (about one failure every 19 days)."""
    lam = failure_rate_for_optimal(1800.0, 1.0) * 3600
    assert lam == pytest.approx(0.0022, abs=5e-5)
    assert optimal_interval(lam / 3600, 1.0) == pytest.approx(1800.0, rel=1e-9)
    assert 1 / lam / 24 == pytest.approx(19, abs=0.5)


@pytest.mark.parametrize(
    ("lam", "n", "c", "r", "delta_ms", "u30", "t_star_min"),
    [(.05, 5, 1.6, 23.1, 27.35, .4222, 1.0418), (.05, 7, 3.09, 23.81, 32.65, .4216, 1.4526),
     (.01, 5, 1.07, 23.70, 13.86, .8536, 1.8945), (.01, 7, 1.59, 24.12, 15.07, .8533, 2.3110),
     (.005, 5, 1.15, 25.37, 12.6, .9243, 2.7753), (.005, 7, 2.57, 24.07, 12.85, .9237, 4.1536)],
)
def test_table1_flink_predictions(lam: float, n: int, c: float, r: float, delta_ms: float, u30: float,
                                  t_star_min: float) -> None:
    """Table 1: the model's U at T = 30 min and T* from the measured c, R, δ (λ per minute, times in s)."""
    per_s = lam / 60
    assert optimal_interval(per_s, c) / 60 == pytest.approx(t_star_min, abs=5e-5)
    assert utilization(1800.0, per_s, c, r, n, delta_ms / 1000) == pytest.approx(u30, abs=5e-5)


def test_fig14_large_depth() -> None:
    """§5.1, Fig. 14: n = 15000, R = 30 s, c = 10 s, δ = 5 s, λ = 0.005/min: U(T*) = 0.0018."""
    lam = 0.005 / 60
    assert utilization(optimal_interval(lam, 10.0), lam, 10.0, 30.0, 15000, 5.0) == pytest.approx(0.0018, abs=5e-5)


def test_fig16_gain_over_daly_and_zhuang() -> None:
    """§5.1, Fig. 16: c = 2 min, R = 5 min, δ = 30 s, n = 25, λ = 11 per hour: +2.3 % vs Daly, +3.7 % vs Zhuang."""
    lam = 11 / 60  # per minute
    kw = {"failure_rate": lam, "checkpoint_cost": 2.0, "restart_cost": 5.0, "depth": 25, "token_delay": 0.5}
    u = utilization(optimal_interval(lam, 2.0), **kw)
    assert 100 * (u / utilization(daly_interval(lam, 2.0, 5.0), **kw) - 1) == pytest.approx(2.3, abs=0.05)
    assert 100 * (u / utilization(zhuang_interval(lam, 2.0, 5.0), **kw) - 1) == pytest.approx(3.7, abs=0.05)


# --------------------------------------------------------------------------- special cases and limits


def test_special_cases_agree() -> None:
    t, lam, c, r = 40.0, 0.01, 4.0, 6.0
    assert utilization_no_restart(t, lam, c) == pytest.approx(lam * (t - c) / (math.exp(lam * t) - 1), rel=1e-13)
    assert utilization_single(t, lam, c, r) == pytest.approx(
        lam * (t - c) / (math.exp(lam * (r + t)) - math.exp(lam * r)), rel=1e-13)
    assert utilization_dag(t, lam, c, r, 1, 3.0) == pytest.approx(utilization_single(t, lam, c, r), rel=1e-13)
    assert utilization(t, 0.0, c, r, 5, 1.0) == utilization_no_failure(t, c) == pytest.approx(0.9)
    assert utilization(t, 1e-12, c, r, 5, 1.0) == pytest.approx(0.9, rel=1e-9)
    assert utilization_dag_no_failure(t, c, 5, 1.0) == pytest.approx(36 / 44)


def test_utilization_at_an_interval_too_short_for_floating_point() -> None:
    """λT underflows (e^(λT) − 1 is 0): the model gives its limit (T − c)/T · e^(−λR), not NaN."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert utilization_dag(5e-324, 0.5, 0.0) == 1.0
        # subnormal T and c carry few digits: (T - c)/T is 0.5 to about 3 places
        assert utilization_dag(1e-320, 0.5, 5e-321, 2.0) == pytest.approx(0.5 * math.exp(-1.0), rel=2e-3)
        both = utilization_dag([5e-324, 10.0], 0.5, 0.0)
    assert both[0] == 1.0 and both[1] == pytest.approx(0.5 * 10 / math.expm1(5.0))


def test_array_input() -> None:
    import numpy as np

    ts = np.array([10.0, 46.452, 100.0])
    us = utilization(ts, 0.005, 5.0, 10.0)
    assert us.shape == (3,) and us[1] == max(us)


def test_baselines_and_young_limit() -> None:
    assert young_interval(0.005, 5.0) == pytest.approx(math.sqrt(2000))
    assert daly_interval(0.005, 5.0, 10.0) == pytest.approx(math.sqrt(10 * 210))
    assert zhuang_interval(0.005, 5.0, 10.0) == pytest.approx(math.sqrt(10 * 210 + 25))
    for x in (1e-4, 1e-8, 1e-13):
        ratio = optimal_interval(1.0, x) / young_interval(1.0, x)
        assert abs(ratio - 1 - math.sqrt(x) / (3 * math.sqrt(2))) < 3 * x + 1e-13


def test_huge_checkpoint_cost_gives_finite_optimum() -> None:
    t = optimal_interval(1.0, 800.0)  # e^{-cλ-1} underflows; W0(-0) = 0
    assert t == pytest.approx(801.0) and utilization(t, 1.0, 800.0) >= 0


@pytest.mark.parametrize(
    ("call", "location"),
    [
        (lambda: utilization(5.0, 0.01, 5.0), "interval"),
        (lambda: utilization(4.0, 0.01, 5.0), "interval"),
        (lambda: utilization(40.0, -0.01, 5.0), "failure_rate"),
        (lambda: utilization(40.0, 0.01, -5.0), "checkpoint_cost"),
        (lambda: utilization(40.0, 0.01, 5.0, -1.0), "restart_cost"),
        (lambda: utilization(40.0, 0.01, 5.0, 1.0, 0, 1.0), "depth"),
        (lambda: utilization(40.0, 0.01, 5.0, 1.0, 2, -1.0), "token_delay"),
        (lambda: utilization(float("nan"), 0.01, 5.0), "interval"),
        (lambda: optimal_interval(0.0, 5.0), "failure_rate"),
        (lambda: optimal_interval(0.01, 0.0), "checkpoint_cost"),
        (lambda: young_interval(-1.0, 1.0), "failure_rate"),
    ],
)
def test_bad_input(call: object, location: str) -> None:
    with pytest.raises(InvalidInputError) as e:
        call()  # type: ignore[operator]
    assert e.value.location == location


# --------------------------------------------------------------------------- properties and mutants

INTERVAL_PROPERTIES = sorted(n for n, p in PROPERTIES.items() if p.area == "intervals")


def test_every_property_has_a_mutant() -> None:
    assert len(INTERVAL_PROPERTIES) >= 12
    killed_by = {spec[0] for spec in BROKEN.values()}
    # every model/sim/TRT property is the killer of at least one registered mutant
    assert set(INTERVAL_PROPERTIES) <= killed_by


@pytest.mark.parametrize("name", INTERVAL_PROPERTIES)
def test_property_holds(name: str) -> None:
    r = run_with(name, "ci")
    assert r.status == "pass", r.error
    assert r.examples >= 30


@pytest.mark.parametrize(
    ("prop_name", "slot", "broken"),
    [
        ("interval-tstar-stationary", "optimal", lambda lam, c: optimal_interval(lam, c) * 1.01),
        ("interval-tstar-independent", "optimal", lambda lam, c: optimal_interval(lam, c) * 1.01),
        ("interval-utilization-unit-range", "util",
         lambda t, failure_rate, checkpoint_cost, *a, **k: (t - checkpoint_cost / 2) / t),
        ("interval-utilization-monotone", "util",
         lambda t, failure_rate, checkpoint_cost, restart_cost=0.0, depth=1, token_delay=0.0:
         utilization(t, failure_rate, checkpoint_cost, 0.0, depth, token_delay) * (1 + restart_cost * 0.1)),
    ],
)
def test_sanity_properties_catch_broken_variants(prop_name: str, slot: str, broken: object) -> None:
    r = run_with(prop_name, "ci", shrink=False, **{slot: broken})
    assert r.status == "fail"
