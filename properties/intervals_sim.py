"""Properties of the stochastic simulation against the closed-form utilization (``specs/intervals.md#sim-agrees``).

A Monte Carlo mean is compared with the model in units of its standard error. The registered
properties use 5 standard errors (60 runs per example) so that a correct simulation fails with
probability below 1e-5 per example (t distribution, 59 degrees of freedom) even under the verify
profile's 600 examples; the 250-run table of ``rollcheck verify`` uses the paper's 3.
"""

from __future__ import annotations

import math
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from rollcheck.properties.intervals_model import expect
from rollcheck.properties.registry import prop
from rollcheck.pyimpl.intervals import optimal_interval, utilization
from rollcheck.pyimpl.intervals.sim import (
    SimConfig,
    run_rng,
    simulate_dag_run,
    simulate_runs,
    summarise,
    token_offsets,
)

__all__ = ["sim_params", "random_dags", "Z_LIMIT"]

SPEC = "specs/intervals.md"
Z_LIMIT = 5.0


@st.composite
def sim_params(draw: Any) -> dict[str, Any]:
    """Parameters where utilization is not negligible, with T around T* (T*·e^s)."""
    lam = draw(st.sampled_from([0.1, 0.01, 1.0, 0.005, 0.05]))
    x = draw(st.floats(0.002, 0.5))  # cλ
    c = x / lam
    rl = draw(st.floats(0.0, 1.5))  # Rλ
    n = draw(st.integers(1, 60))
    dl = draw(st.floats(0.0, 0.03))  # δλ
    t = max(c * 1.05, optimal_interval(lam, c) * math.exp(draw(st.floats(-1.0, 1.0))))
    seed = draw(st.integers(0, 2**31 - 1))
    return {"interval": t, "failure_rate": lam, "checkpoint_cost": c, "restart_cost": rl / lam, "depth": n,
            "token_delay": dl / lam, "seed": seed}


@prop("interval-sim-agrees", target="interval-sim", theorem=f"{SPEC}#sim-agrees")
@given(p=sim_params())
def sim_agrees(p: dict[str, Any], simulate: Any = simulate_runs, model: Any = utilization) -> None:
    """The vectorised simulation's mean over 60 runs of 200/λ lies within 5 standard errors of Eq. 10."""
    cfg = SimConfig(p["interval"], p["failure_rate"], p["checkpoint_cost"], p["restart_cost"], p["depth"],
                    p["token_delay"])
    s = simulate(cfg, runs=60, horizon_failures=200, seed=p["seed"])
    u = model(cfg.interval, cfg.failure_rate, cfg.checkpoint_cost, cfg.restart_cost, cfg.depth, cfg.token_delay)
    se = max(s.se, 1e-4 * max(u, 1e-3))  # a degenerate zero spread still allows rounding noise
    z = (s.mean - u) / se
    expect(abs(z) <= Z_LIMIT, f"simulated mean {s.mean:.6f} (se {s.se:.2g}) vs model {u:.6f}: z = {z:.2f}", p)


@st.composite
def random_dags(draw: Any) -> Any:
    """A small random DAG of operators (edges only from lower to higher index)."""
    import networkx as nx

    k = draw(st.integers(1, 6))
    g = nx.DiGraph()
    g.add_nodes_from(range(k))
    for j in range(1, k):
        preds = draw(st.lists(st.integers(0, j - 1), max_size=2, unique=True))
        g.add_edges_from((i, j) for i in preds)
    return g


@prop("interval-dag-sim-agrees", target="interval-sim", theorem=f"{SPEC}#sim-agrees")
@given(dag=random_dags(), lam=st.sampled_from([0.1, 0.02]), x=st.floats(0.01, 0.3), rl=st.floats(0.0, 1.0),
       dl=st.floats(0.0, 0.3), seed=st.integers(0, 2**31 - 1))
def dag_sim_agrees(dag: Any, lam: float, x: float, rl: float, dl: float, seed: int,
                   simulate_dag: Any = simulate_dag_run) -> None:
    """The explicit per-operator token simulation agrees (5 se, 30 runs of 100/λ) with Eq. 10, n = critical path."""
    c, r, d = x / lam, rl / lam, dl / lam
    import networkx as nx

    offsets = token_offsets(dag, d)
    n = nx.dag_longest_path_length(dag) + 1  # operators on the critical path
    t = optimal_interval(lam, c)
    horizon = 100 / lam
    vals, fails = [], 0
    for run in range(30):
        res = simulate_dag(t, lam, c, r, list(offsets.values()), horizon, run_rng(seed, 0, run))
        vals.append(res.utilization)
        fails += res.failures
    cfg = SimConfig(t, lam, c, r, n, d)
    s = summarise(0, cfg, vals, fails, horizon, seed)
    se = max(s.se, 1e-4)
    # the explicit simulation starts fresh at 0 (no burn-in): allow its start-up bias of at most
    # one restart's worth of lost time per run
    slack = (math.expm1(lam * r) / lam) / horizon
    z = (abs(s.mean - s.model) - slack) / se
    expect(z <= Z_LIMIT, f"explicit DAG simulation {s.mean:.6f} (se {s.se:.2g}) vs Eq. 10 {s.model:.6f} (n = {n})",
           {"edges": sorted(dag.edges()), "nodes": dag.number_of_nodes(), "failure_rate": lam,
            "checkpoint_cost": c, "restart_cost": r, "token_delay": d, "seed": seed})


def _register_measures() -> None:
    from rollcheck.properties.registry import measure

    measure("interval-sim-agrees", "restart cost and pipeline depth both matter (Rλ ≥ 0.1, n ≥ 2)",
            lambda p, **_: p["restart_cost"] * p["failure_rate"] >= 0.1 and p["depth"] >= 2)
    measure("interval-dag-sim-agrees", "a restart cost (Rλ ≥ 0.1)", lambda rl, **_: rl >= 0.1)


_register_measures()
