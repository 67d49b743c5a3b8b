"""The Monte Carlo simulation of the utilization model (numpy path and explicit DAG path)."""

from __future__ import annotations

import math

import networkx as nx
import numpy as np
import pytest

from rollcheck.pyimpl.errors import InvalidInputError
from rollcheck.pyimpl.intervals import optimal_interval
from rollcheck.pyimpl.intervals.sim import (
    SimConfig,
    run_rng,
    simulate_dag_run,
    simulate_run,
    simulate_runs,
    summarise,
    sweep,
    token_offsets,
)


def test_same_seed_same_result_other_seed_other_result() -> None:
    cfg = SimConfig(30.0, 0.01, 5.0, 10.0, 4, 0.5)
    a = simulate_runs(cfg, runs=8, horizon_failures=300, seed=11)
    b = simulate_runs(cfg, runs=8, horizon_failures=300, seed=11)
    c = simulate_runs(cfg, runs=8, horizon_failures=300, seed=12)
    assert a.values == b.values and a.failures == b.failures
    assert a.values != c.values


def test_runs_do_not_depend_on_grouping() -> None:
    cfgs = [SimConfig(20.0, 0.05, 2.0, 3.0), SimConfig(40.0, 0.01, 5.0, 10.0, 10, 0.2)]
    swept = sweep(cfgs, runs=5, horizon_failures=100, seed=3)
    one = simulate_runs(cfgs[1], runs=5, horizon_failures=100, seed=3, point=1)
    assert swept[1].values == one.values
    single = simulate_run(cfgs[1], 100 / 0.01, run_rng(3, 1, 4))
    assert single.utilization == swept[1].values[4]


@pytest.mark.parametrize(("lam", "n"), [(0.1, 1), (0.025, 10), (0.005, 50)])
def test_paper_configurations_within_three_standard_errors(lam: float, n: int) -> None:
    """Figs. 5 and 12 (R = 10, c = 5, δ = 0.5) at T*: 100 runs of 2000/λ (seed 0)."""
    cfg = SimConfig(optimal_interval(lam, 5.0), lam, 5.0, 10.0, n, 0.5)
    s = simulate_runs(cfg, runs=100, horizon_failures=2000, seed=0, point=n)
    assert abs(s.z) <= 3, (s.mean, s.model, s.se)
    assert s.failures > 100 * 1900
    assert s.std > 0


def test_failures_during_restart_matter() -> None:
    """With λR = 2 most restarts are interrupted: U is far below a model where restarts cannot fail."""
    lam, t, c, r = 0.2, 10.0, 1.0, 10.0
    s = simulate_runs(SimConfig(t, lam, c, r), runs=40, horizon_failures=300, seed=1)
    commits_per_cycle = math.exp(-lam * t) / -math.expm1(-lam * t)
    uninterrupted = (t - c) * commits_per_cycle / (1 / lam + r)  # renewal reward, restart always R
    assert abs(s.z) <= 4
    assert s.mean < 0.5 * uninterrupted


def test_token_offsets_longest_path() -> None:
    g = nx.DiGraph([("src", "a"), ("a", "b"), ("src", "b"), ("b", "sink"), ("src2", "sink")])
    off = token_offsets(g, 2.0)
    assert off == {"src": 0.0, "src2": 0.0, "a": 2.0, "b": 4.0, "sink": 6.0}
    assert nx.dag_longest_path_length(g) + 1 == 4  # n: the sink completes (n − 1)·δ after the source
    with pytest.raises(InvalidInputError):
        token_offsets(nx.DiGraph([(1, 2), (2, 1)]), 1.0)


def test_explicit_dag_simulation_matches_eq10_and_vectorised_path() -> None:
    g = nx.DiGraph([(0, 1), (1, 2), (0, 2), (2, 3)])  # critical path of 4 operators
    lam, c, r, d = 0.05, 1.0, 4.0, 2.0
    t = optimal_interval(lam, c)
    offs = list(token_offsets(g, d).values())
    vals = [simulate_dag_run(t, lam, c, r, offs, 200 / lam, run_rng(5, 0, k)).utilization for k in range(40)]
    cfg = SimConfig(t, lam, c, r, 4, d)
    s = summarise(0, cfg, vals, 0, 200 / lam, 5)
    v = simulate_runs(cfg, runs=40, horizon_failures=200, seed=5)
    assert abs(s.mean - s.model) <= 4 * s.se + 0.004
    assert abs(v.z) <= 4
    # the source-only restore (a mistake) would be far off
    wrong = [simulate_dag_run(t, lam, c, r, [0.0], 200 / lam, run_rng(5, 0, k)).utilization for k in range(40)]
    assert np.mean(wrong) - s.model > 8 * s.se


def test_degenerate_checkpoint_interval_and_bad_input() -> None:
    # almost every period fails: utilization near 0, still within [0, 1]
    s = simulate_runs(SimConfig(50.0, 1.0, 1.0, 1.0), runs=5, horizon_failures=50, seed=0)
    assert 0 <= s.mean < 1e-3
    with pytest.raises(InvalidInputError):
        SimConfig(10.0, 0.0, 1.0)
    with pytest.raises(InvalidInputError):
        SimConfig(1.0, 0.1, 1.0)
    with pytest.raises(InvalidInputError):
        simulate_runs(SimConfig(10.0, 0.1, 1.0), runs=0)
    with pytest.raises(InvalidInputError):
        simulate_run(SimConfig(10.0, 0.1, 1.0), 0.0, run_rng(0, 0, 0))
    with pytest.raises(InvalidInputError):
        simulate_dag_run(10.0, 0.1, 1.0, 0.0, [], 10.0, run_rng(0, 0, 0))
