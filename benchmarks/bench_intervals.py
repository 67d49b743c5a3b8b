"""Simulation throughput (simulated failures per second): one numpy process vs Spark ``local[2]``.

Both run the same sweep (same seeds, so the same numbers, which is checked) side by side in one
run. Spark is timed twice after its session has started: a first job (Python workers start) and
a second, warm job; the session start-up is reported separately. The load average is printed
because the machine may be shared. ``python -m benchmarks --only intervals [--quick]``.
"""

from __future__ import annotations

import os
import time
from typing import Any


def _configs(k: int) -> list[Any]:
    from rollcheck.pyimpl.intervals import optimal_interval
    from rollcheck.pyimpl.intervals.sim import SimConfig

    lams = (0.1, 0.05, 0.025, 0.005)
    depths = (1, 10, 25, 50)
    out = []
    for i in range(k):
        lam = lams[i % len(lams)]
        n = depths[(i // len(lams)) % len(depths)]
        out.append(SimConfig(optimal_interval(lam, 5.0), lam, 5.0, 10.0, n, 0.5))
    return out


def main(quick: bool) -> None:
    from rollcheck.pyimpl.intervals.sim import sweep
    from rollcheck.spark_replay.jobs.interval_sweep import spark_sweep
    from rollcheck.spark_replay.session import spark_session

    points, runs = (4, 250) if quick else (16, 8000)
    cfgs = _configs(points)
    print(f"sweep: {points} configurations x {runs} runs x 2000/λ; cores={os.cpu_count()} "
          f"load average before={os.getloadavg()[0]:.1f}")

    t0, c0 = time.perf_counter(), time.process_time()
    local = sweep(cfgs, runs=runs, horizon_failures=2000, seed=0)
    t_np, cpu_np = time.perf_counter() - t0, time.process_time() - c0
    fails = sum(s.failures for s in local)
    print(f"numpy, 1 process : {fails:>12,d} failures in {t_np:7.2f} s = {fails / t_np:12,.0f} failures/s "
          f"(CPU {cpu_np:.2f} s = {fails / cpu_np:,.0f} failures per CPU-second; scheduled {cpu_np / t_np:.0%})")

    t0 = time.perf_counter()
    with spark_session("local[2]", app_name="bench-intervals") as spark:
        startup = time.perf_counter() - t0
        block = max(25, runs // 4)
        first, tm1 = spark_sweep(cfgs, runs=runs, horizon_failures=2000, seed=0, spark=spark, block_size=block)
        warm, tm2 = spark_sweep(cfgs, runs=runs, horizon_failures=2000, seed=0, spark=spark, block_size=block)
    same = [a.values for a in first] == [b.values for b in local] == [c.values for c in warm]
    print(f"Spark local[2]   : start-up {startup:.1f} s; {tm1.partitions} tasks, blocks of {block} runs")
    print(f"  first job      : {fails:>12,d} failures in {tm1.job:7.2f} s = {fails / tm1.job:12,.0f} failures/s "
          f"(x{t_np / tm1.job:.2f} numpy)")
    print(f"  warm job       : {fails:>12,d} failures in {tm2.job:7.2f} s = {fails / tm2.job:12,.0f} failures/s "
          f"(x{t_np / tm2.job:.2f} numpy)")
    print(f"  incl. start-up : x{t_np / (startup + tm1.job):.2f} numpy")
    print(f"  warm job tasks : CPU {tm2.task_cpu:.2f} s = {fails / max(tm2.task_cpu, 1e-9):,.0f} failures per CPU-second; "
          f"workers scheduled {tm2.task_cpu / max(tm2.task_wall, 1e-9):.0%} of their wall time")
    print(f"identical numbers (same seeds): {same}; load average after={os.getloadavg()[0]:.1f}")
