"""Monte Carlo sweeps of the checkpoint-interval simulation spread over Spark tasks.

Every run is independent and draws from its own generator
(:func:`rollcheck.pyimpl.intervals.sim.run_rng`, keyed by seed, sweep point and run index), so the result of
a sweep does not depend on the master, the number of partitions or the order in which tasks run:
:func:`spark_sweep` returns exactly the numbers of :func:`rollcheck.pyimpl.intervals.sim.sweep` for the same
seed (``tests/test_intervals_spark.py`` checks it). Runs are grouped into contiguous blocks, one
block per task, and each task uses the vectorised numpy path.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from rollcheck.pyimpl.errors import InvalidInputError
from rollcheck.pyimpl.intervals.sim import SimConfig, SimSummary, run_rng, simulate_run, summarise

__all__ = ["SweepTiming", "spark_sweep", "run_block"]


@dataclass(frozen=True)
class SweepTiming:
    """Seconds of a Spark sweep: session start-up and job (wall clock), and the tasks' own time.

    ``task_wall`` and ``task_cpu`` add up the tasks' wall-clock and CPU seconds measured inside
    the Python workers: ``task_cpu/task_wall`` well below 1 means the workers were runnable but
    not scheduled (a busy machine), not that the computation was slower.
    """

    startup: float
    job: float
    partitions: int
    master: str
    task_wall: float = 0.0
    task_cpu: float = 0.0


def run_block(block: tuple[int, dict[str, Any], float, int, int, int]) -> list[tuple[int, int, float, int]]:
    """Runs ``start..stop-1`` of one sweep point: ``[(point, run, utilization, failures), ...]``."""
    point, cfg_dict, horizon, seed, start, stop = block
    cfg = SimConfig.from_dict(cfg_dict)
    out = []
    for r in range(start, stop):
        res = simulate_run(cfg, horizon, run_rng(seed, point, r))
        out.append((point, r, res.utilization, res.failures))
    return out


def _blocks(configs: Sequence[SimConfig], runs: int, horizon_failures: float, seed: int,
            block_size: int) -> list[tuple[int, dict[str, Any], float, int, int, int]]:
    blocks = []
    for p, cfg in enumerate(configs):
        horizon = horizon_failures / cfg.failure_rate
        for start in range(0, runs, block_size):
            blocks.append((p, cfg.to_dict(), horizon, seed, start, min(runs, start + block_size)))
    return blocks


def _partition(it: Iterator[Any]) -> Iterator[tuple[int, int, float, float]]:
    wall, cpu = time.perf_counter(), time.process_time()
    for block in it:
        yield from run_block(block)
    yield (-1, -1, time.perf_counter() - wall, time.process_time() - cpu)  # the task's own timing


def spark_sweep(
    configs: Sequence[SimConfig],
    runs: int = 250,
    horizon_failures: float = 2000.0,
    seed: int = 0,
    *,
    master: str | None = None,
    partitions: int | None = None,
    block_size: int = 25,
    spark: Any = None,
) -> tuple[list[SimSummary], SweepTiming]:
    """Run the sweep on Spark; same results as :func:`rollcheck.pyimpl.intervals.sim.sweep`.

    Parameters
    ----------
    configs : sequence of SimConfig
        The sweep points (point ``p`` is the position in the sequence).
    runs, horizon_failures, seed
        As in :func:`rollcheck.pyimpl.intervals.sim.simulate_runs`.
    master : str, optional
        Spark master (``local[2]`` by default, see :func:`rollcheck.spark_replay.session.spark_session`).
    partitions : int, optional
        Number of tasks (default: two per core of the default parallelism).
    block_size : int
        Runs per block (the unit of work handed to a task).
    spark : SparkSession, optional
        Reuse an existing session instead of starting one.
    """
    if runs < 1:
        raise InvalidInputError(f"runs must be >= 1, got {runs}", location="runs")
    if not configs:
        raise InvalidInputError("no sweep points", location="configs")
    blocks = _blocks(configs, runs, horizon_failures, seed, max(1, block_size))
    t0 = time.perf_counter()
    if spark is None:
        from rollcheck.spark_replay.session import spark_session

        with spark_session(master, app_name="rollcheck-interval-sweep") as s:
            startup = time.perf_counter() - t0
            rows, parts, used = _collect(s, blocks, partitions)
    else:
        startup = 0.0
        rows, parts, used = _collect(spark, blocks, partitions)
    job = time.perf_counter() - t0 - startup
    task_wall = sum(r[2] for r in rows if r[0] == -1)
    task_cpu = sum(r[3] for r in rows if r[0] == -1)
    rows = [r for r in rows if r[0] != -1]
    by_point: dict[int, list[tuple[int, float, int]]] = {}
    for point, r, u, f in rows:
        by_point.setdefault(point, []).append((r, u, f))
    out = []
    for p, cfg in enumerate(configs):
        got = sorted(by_point.get(p, []))
        if len(got) != runs:
            raise RuntimeError(f"point {p}: expected {runs} runs from Spark, got {len(got)}")
        out.append(summarise(p, cfg, [u for _, u, _ in got], sum(f for _, _, f in got),
                             horizon_failures / cfg.failure_rate, seed))
    return out, SweepTiming(startup, job, parts, used, task_wall, task_cpu)


def _collect(spark: Any, blocks: list[Any], partitions: int | None) -> tuple[list[Any], int, str]:
    sc = spark.sparkContext
    parts = partitions or max(1, min(len(blocks), 2 * sc.defaultParallelism))
    rdd = sc.parallelize(blocks, parts).mapPartitions(_partition)
    return rdd.collect(), parts, sc.master
