"""Stochastic simulation of checkpointing with exponential failures (the utilization model's system).

The system checkpoints every ``T`` after a (re)start at cost ``c``, fails as a Poisson process of
rate ``λ`` (also while checkpointing or restarting), restarts in ``R`` and resumes from the last
completed system-wide checkpoint. Two independent implementations: :func:`simulate_run`
(vectorised numpy, i.i.d. failure cycles, burn-in before time 0) and :func:`simulate_dag_run`
(event by event over the operators of a DAG). Run ``r`` of sweep point ``p`` uses its own
generator (:func:`run_rng`): same seed, same numbers. See docs/internals/pyimpl-intervals.md#sim.

References
----------
.. [1] S. Jayasekara, A. Harwood, S. Karunasekera. A Utilization Model for Optimization of
   Checkpoint Intervals in Distributed Stream Processing Systems. §3.5 (Fig. 5), §4.4 (Fig. 12).

The theorem the simulation checks is ``specs/intervals.md#sim-agrees``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from rollcheck.pyimpl.errors import InvalidInputError
from rollcheck.pyimpl.intervals.utilization import utilization

_BURN_IN_CYCLES = 20.0

__all__ = [
    "SimConfig",
    "RunResult",
    "SimSummary",
    "run_rng",
    "simulate_run",
    "simulate_dag_run",
    "simulate_runs",
    "summarise",
    "sweep",
    "token_offsets",
]


@dataclass(frozen=True)
class SimConfig:
    """Parameters of one simulated system (units as in :mod:`rollcheck.pyimpl.intervals.utilization`).

    Examples
    --------
    >>> SimConfig(30.0, 0.01, 5.0, 10.0, depth=3, token_delay=0.5).token_lag
    1.0
    """

    interval: float
    failure_rate: float
    checkpoint_cost: float
    restart_cost: float = 0.0
    depth: int = 1
    token_delay: float = 0.0

    def __post_init__(self) -> None:
        # the closed form validates every parameter the same way
        utilization(self.interval, self.failure_rate, self.checkpoint_cost, self.restart_cost,
                    self.depth, self.token_delay)
        if not self.failure_rate > 0:
            raise InvalidInputError("the simulation needs failure_rate > 0", location="failure_rate")

    @property
    def token_lag(self) -> float:
        """``(depth − 1)·δ``: when the last operator completes a checkpoint the source started."""
        return (self.depth - 1) * self.token_delay

    def model(self) -> float:
        """The closed-form utilization (Eq. 10) for this configuration."""
        return float(utilization(self.interval, self.failure_rate, self.checkpoint_cost,
                                 self.restart_cost, self.depth, self.token_delay))

    def to_dict(self) -> dict[str, Any]:
        """The configuration as a JSON-ready dict."""
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> SimConfig:
        """The configuration of a dict written by :meth:`to_dict` (unknown keys ignored)."""
        return cls(**{k: d[k] for k in ("interval", "failure_rate", "checkpoint_cost", "restart_cost",
                                        "depth", "token_delay") if k in d})


@dataclass(frozen=True)
class RunResult:
    """One run: useful work, horizon, failures drawn, system-wide checkpoints completed."""

    utilization: float
    useful: float
    horizon: float
    failures: int
    checkpoints: int


@dataclass(frozen=True)
class SimSummary:
    """Mean and spread of ``runs`` runs at one configuration, against the closed form."""

    point: int
    config: SimConfig
    runs: int
    horizon: float
    seed: int
    mean: float
    std: float
    se: float
    model: float
    failures: int
    values: tuple[float, ...]

    @property
    def z(self) -> float:
        """``(mean − model)/se`` (0 when the runs do not vary)."""
        if self.se == 0:
            return 0.0 if self.mean == self.model else math.inf
        return (self.mean - self.model) / self.se

    def to_dict(self) -> dict[str, Any]:
        """The summary as a JSON-ready dict (the point, its configuration and the statistics)."""
        return {"point": self.point, **self.config.to_dict(), "runs": self.runs, "horizon": self.horizon,
                "seed": self.seed, "mean": self.mean, "std": self.std, "se": self.se,
                "model": self.model, "z": self.z, "failures": self.failures}


def run_rng(seed: int, point: int, run: int) -> np.random.Generator:
    """The generator of run ``run`` of sweep point ``point`` under ``seed`` (independent streams).

    Parameters
    ----------
    seed : int
        The sweep's seed.
    point : int
        The sweep point (position of the configuration).
    run : int
        The run number within the point.

    Examples
    --------
    >>> float(run_rng(0, 1, 2).random()) == float(run_rng(0, 1, 2).random())
    True
    """
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(int(seed), spawn_key=(int(point), int(run)))))


def simulate_run(config: SimConfig, horizon: float, rng: np.random.Generator) -> RunResult:
    """Simulate one run up to ``horizon`` with the vectorised cycle method (see module notes).

    Parameters
    ----------
    config : SimConfig
        Interval, failure rate, checkpoint and restart costs, token lag.
    horizon : float
        The counted time span (time units, > 0).
    rng : numpy.random.Generator
        The run's random stream (:func:`run_rng`).

    Returns
    -------
    RunResult
        The run's useful work, utilization, failures and checkpoints.

    Examples
    --------
    >>> cfg = SimConfig(46.452, 0.005, 5.0, 10.0)
    >>> r = simulate_run(cfg, 2000 / 0.005, run_rng(0, 0, 0))
    >>> abs(r.utilization - cfg.model()) < 0.02
    True
    """
    lam, t_per, c, r_cost, lag = (config.failure_rate, config.interval, config.checkpoint_cost,
                                  config.restart_cost, config.token_lag)
    if not horizon > 0:
        raise InvalidInputError(f"horizon must be > 0, got {horizon}", location="horizon")
    q = math.exp(-lam * r_cost)  # a restart attempt succeeds with this probability
    p_fail = -math.expm1(-lam * r_cost)
    mean_cycle = 1.0 / (lam * q) if q > 0 else math.inf
    # Burn-in: the run starts at -warm (fresh) and only [0, horizon] is counted, so the counted
    # window starts in (nearly) the stationary regime and the estimate has no start-up bias.
    warm = min(_BURN_IN_CYCLES * mean_cycle, horizon) if math.isfinite(mean_cycle) else 0.0
    chunk = int(min(1_000_000, (horizon + warm) / mean_cycle * 1.05 + 32)) if math.isfinite(mean_cycle) else 32
    t = -warm
    periods = 0
    failures = 0
    while True:
        x = rng.exponential(1.0 / lam, chunk)
        if r_cost > 0:
            k = rng.geometric(q, chunk) - 1 if q > 0 else np.full(chunk, 10**9)
            total = int(k.sum())
            lost = -np.log1p(-rng.random(total) * p_fail) / lam
            restart = r_cost + np.bincount(np.repeat(np.arange(chunk), k), weights=lost, minlength=chunk)
        else:
            k = np.zeros(chunk, dtype=np.int64)
            restart = np.zeros(chunk)
        length = x + restart
        ends = t + np.cumsum(length)
        starts = ends - length
        j = int(np.searchsorted(starts, horizon, side="left"))
        s = starts[:j]
        avail = np.minimum(x[:j], horizon - s)
        done = np.clip(np.floor((avail - lag) / t_per), 0, None)
        # checkpoints completing before time 0 (burn-in) are not counted
        early = np.clip(np.floor((-s - lag) / t_per), 0, None)
        periods += int(np.clip(done - early, 0, None).sum())
        counted = s + x[:j] >= 0
        failures += int(np.count_nonzero(counted)) + int(k[:j][counted].sum())
        if j < chunk or ends[-1] >= horizon:
            break
        t = float(ends[-1])
    useful = periods * (t_per - c)
    return RunResult(useful / horizon, useful, horizon, failures, periods)


def token_offsets(dag: Any, token_delay: float) -> dict[Any, float]:
    """Token arrival offset of every operator: ``δ ×`` the longest path (in edges) from a source.

    ``dag`` is a ``networkx.DiGraph`` without cycles; the critical path has ``n`` operators
    when the largest offset is ``(n − 1)·δ``.

    Parameters
    ----------
    dag : networkx.DiGraph
        The operator graph (no cycles).
    token_delay : float
        The delay ``δ`` of one edge (>= 0).

    Returns
    -------
    dict
        Operator to its offset (time units).

    Examples
    --------
    >>> import networkx as nx
    >>> token_offsets(nx.DiGraph([("a", "b"), ("b", "c"), ("a", "c")]), 0.5)
    {'a': 0.0, 'b': 0.5, 'c': 1.0}
    """
    import networkx as nx

    if not nx.is_directed_acyclic_graph(dag):
        raise InvalidInputError("the operator graph must be a DAG", location="dag")
    if token_delay < 0:
        raise InvalidInputError(f"token_delay must be >= 0, got {token_delay}", location="token_delay")
    hops: dict[Any, int] = {}
    for v in nx.topological_sort(dag):
        hops[v] = max((hops[u] + 1 for u in dag.predecessors(v)), default=0)
    return {v: h * token_delay for v, h in hops.items()}


def simulate_dag_run(
    interval: float,
    failure_rate: float,
    checkpoint_cost: float,
    restart_cost: float,
    offsets: Sequence[float],
    horizon: float,
    rng: np.random.Generator,
) -> RunResult:
    """Event-by-event simulation over explicit operators with a staggered checkpoint token.

    After each (re)start at ``s`` operator ``v`` completes its ``k``-th checkpoint at
    ``s + k·T + offsets[v]``; at a failure the system restores the last checkpoint that *every*
    operator has completed. Restart attempts are drawn one by one. Slow (pure Python), for tests.

    Parameters
    ----------
    interval : float
        The checkpoint interval ``T``.
    failure_rate : float
        The failure rate ``λ`` (per time unit).
    checkpoint_cost : float
        The time one checkpoint takes.
    restart_cost : float
        The time one restart attempt takes.
    offsets : sequence of float
        Per operator, the token's arrival offset (:func:`token_offsets`).
    horizon : float
        The simulated time span.
    rng : numpy.random.Generator
        The run's random stream.

    Returns
    -------
    RunResult
        The run's useful work, utilization, failures and checkpoints.

    Examples
    --------
    >>> r = simulate_dag_run(30.0, 0.01, 5.0, 10.0, [0.0, 0.5, 1.0], 1e4, run_rng(0, 0, 0))
    >>> 0 < r.utilization < 1
    True
    """
    SimConfig(interval, failure_rate, checkpoint_cost, restart_cost)  # validates
    if not offsets:
        raise InvalidInputError("at least one operator is needed", location="offsets")
    scale = 1.0 / failure_rate
    t = 0.0
    useful_periods = 0
    failures = 0
    while t < horizon:
        start = t
        fail_at = start + float(rng.exponential(scale))
        stop = min(fail_at, horizon)
        completed = 0
        k = 1
        while True:
            base = start + k * interval
            if base > stop:
                break
            if all(base + off <= stop for off in offsets):
                completed = k
            else:
                break
            k += 1
        useful_periods += completed
        if fail_at >= horizon:
            break
        failures += 1
        t = fail_at
        while True:  # restart, possibly interrupted
            x = float(rng.exponential(scale))
            if x >= restart_cost:
                t += restart_cost
                break
            t += x
            failures += 1
    useful = useful_periods * (interval - checkpoint_cost)
    return RunResult(useful / horizon, useful, horizon, failures, useful_periods)


def summarise(point: int, config: SimConfig, values: Sequence[float], failures: int, horizon: float,
              seed: int) -> SimSummary:
    """Mean, standard deviation (ddof 1), standard error and the closed form of a set of runs.

    Parameters
    ----------
    point : int
        The sweep point.
    config : SimConfig
        The simulated configuration.
    values : sequence of float
        The runs' utilizations (at least one).
    failures : int
        The failures over all runs.
    horizon : float
        The time span of one run.
    seed : int
        The sweep's seed.
    """
    v = np.asarray(values, dtype=float)
    if v.size == 0:
        raise InvalidInputError("no runs to summarise", location="runs")
    std = float(v.std(ddof=1)) if v.size > 1 else 0.0
    return SimSummary(point, config, int(v.size), float(horizon), int(seed), float(v.mean()), std,
                      std / math.sqrt(v.size), config.model(), int(failures), tuple(float(x) for x in v))


def simulate_runs(config: SimConfig, runs: int = 250, horizon_failures: float = 2000.0, seed: int = 0,
                  point: int = 0) -> SimSummary:
    """``runs`` independent runs of ``horizon_failures/λ`` time units each (the paper: 250, 2000/λ).

    Parameters
    ----------
    config : SimConfig
        The configuration to simulate.
    runs : int, optional
        The number of runs (>= 1).
    horizon_failures : float, optional
        The length of a run in expected failures (> 0).
    seed : int, optional
        The seed of the random streams.
    point : int, optional
        The sweep point, selecting the streams.

    Returns
    -------
    SimSummary
        The runs' statistics next to the closed form.

    Examples
    --------
    >>> s = simulate_runs(SimConfig(46.452, 0.005, 5.0, 10.0), runs=20, horizon_failures=500)
    >>> abs(s.z) < 4
    True
    """
    if runs < 1:
        raise InvalidInputError(f"runs must be >= 1, got {runs}", location="runs")
    if not horizon_failures > 0:
        raise InvalidInputError(f"horizon_failures must be > 0, got {horizon_failures}", location="horizon_failures")
    horizon = horizon_failures / config.failure_rate
    vals, fails = [], 0
    for r in range(runs):
        res = simulate_run(config, horizon, run_rng(seed, point, r))
        vals.append(res.utilization)
        fails += res.failures
    return summarise(point, config, vals, fails, horizon, seed)


def sweep(configs: Iterable[SimConfig], runs: int = 250, horizon_failures: float = 2000.0,
          seed: int = 0) -> list[SimSummary]:
    """:func:`simulate_runs` for each configuration; point ``p`` is its position in ``configs``.

    Parameters
    ----------
    configs : iterable of SimConfig
        The configurations, one sweep point each.
    runs, horizon_failures, seed
        As for :func:`simulate_runs`.

    Returns
    -------
    list of SimSummary
        One summary per configuration, in order.
    """
    return [simulate_runs(cfg, runs, horizon_failures, seed, p) for p, cfg in enumerate(configs)]
