"""Benchmarks of the SPATE elastic upstream backup model (``docs/elastic.md``).

1. Queue size against the ACK interval A and checkpoint interval C at a constant input rate
   (SPATE §7.2.1.3, Fig. 11: a longer trimming interval gives a larger output queue), next to the
   bound R·W of ``specs/elastic.md#bound``.
2. Recovery work against C (SPATE §7.2.2, Fig. 13b): events replayed per recovery, averaged over a
   failure of the stateful operator at every step of the run.
3. Simulator and sweep throughput: steps per second and single-failure runs per second, and how
   the run time grows when the input rounds grow 10×; next to each, what a user meets: the wall
   (and CPU) time of ``rollcheck elastic simulate FILE --json`` and ``rollcheck elastic sweep``
   on the same work, as fresh processes (``benchmarks/_cold.py``).
All measured side by side in one run; seeds and the load average are printed.
"""

from __future__ import annotations

import statistics
import time


def _queue_table(quick: bool) -> None:
    from rollcheck.pyimpl.elastic import Config, queue_bound, simulate

    rate = 20
    print(f"-- source queue (events) at constant rate R={rate}/round, successor stateful (sum); seed 0")
    cs = (1, 2, 4, 8)
    print("   A \\ C " + "".join(f"{c:>14}" for c in cs))
    for a in (1, 2, 4, 8):
        cells = []
        for c in cs:
            cfg = Config(keys=8, ops=("sum",), rounds=40 if quick else 80, max_rate=rate, ack_interval=a,
                         checkpoint_interval=c, workload="constant", seed=0)
            got = simulate(cfg).max_queue[0]
            cells.append(f"{got:>6} (≤{queue_bound(cfg, 0):>4})")
        print(f"   {a:>5} " + "".join(f"{x:>14}" for x in cells))


def _recovery_table(quick: bool) -> None:
    from rollcheck.pyimpl.elastic import Config, Failure, simulate

    rate = 10
    print(f"-- recovery of the stateful operator: events replayed per failure, R={rate}/round, A=1, seed 0")
    print("       C   failures   mean replayed   mean reprocessed   max reprocessed   mean restored buffer")
    for c in (1, 2, 4, 8):
        cfg = Config(keys=4, ops=("affine", "sum"), rounds=24 if quick else 48, max_rate=rate, ack_interval=1,
                     checkpoint_interval=c, workload="constant", seed=0)
        clean = simulate(cfg)
        stride = 7 if quick else 2
        replayed, reproc, restored = [], [], []
        for step in range(1, clean.steps + 1, stride):
            r = simulate(cfg, failure=Failure(step, 2, 0)).recoveries
            if r:
                replayed.append(r[0]["replayed_events"])
                reproc.append(r[0]["reprocessed_events"])
                restored.append(r[0]["restored_buffer_events"])
        print(f"   {c:>5} {len(replayed):>10} {statistics.mean(replayed):>15.1f} {statistics.mean(reproc):>18.1f} "
              f"{max(reproc):>17} {statistics.mean(restored):>22.1f}")


def _throughput(quick: bool) -> None:
    import json
    import tempfile
    from pathlib import Path

    from benchmarks._cold import command_times, load
    from rollcheck.pyimpl.elastic import (
        Config,
        ScaleEvent,
        config_to_dict,
        failure_sweep,
        random_config,
        simulate,
    )

    print("-- simulator throughput (keys 8, ops affine,sum,count, parallelism 2,3,2, two scalings, R=8, seed 1)")
    base = 20 if quick else 50
    times = {}
    for rounds in (base, 10 * base):
        cfg = Config(keys=8, ops=("affine", "sum", "count"), parallelism=(2, 3, 2), rounds=rounds, max_rate=8,
                     ack_interval=2, checkpoint_interval=4, seed=1,
                     scaling=(ScaleEvent(rounds // 3, 2, 5), ScaleEvent(2 * rounds // 3, 1, 1)))
        t0 = time.perf_counter()
        res = simulate(cfg)
        dt = time.perf_counter() - t0
        times[rounds] = dt
        with tempfile.TemporaryDirectory() as d:
            f = Path(d) / "config.json"
            f.write_text(json.dumps(config_to_dict(cfg, None)))
            wall, cpu = command_times("elastic", "simulate", str(f), "--json", "--allow-large")
        print(f"   rounds={rounds:>5}: {res.steps:>7} steps, {len(res.sink):>6} sink events in {dt:.3f} s "
              f"({res.steps / dt:,.0f} steps/s in process); the command `rollcheck elastic simulate` "
              f"{wall:.2f} s wall, {cpu:.2f} s CPU ({res.steps / wall:,.0f} steps per wall second)")
    print(f"   growth for 10x rounds: {times[10 * base] / times[base]:.1f}x (linear would be 10x)")
    n = 2 if quick else 4
    t0 = time.perf_counter()
    runs = 0
    for i in range(n):  # the pipelines `rollcheck elastic sweep --seed 1000` draws
        runs += failure_sweep(random_config(1000 * 1_000_003 + i)).runs
    dt = time.perf_counter() - t0
    print(f"-- exhaustive single-failure sweep: {n} random pipelines (those of --seed 1000), "
          f"{runs} runs in {dt:.2f} s ({runs / dt:,.0f} runs/s in process)")
    wall, cpu = command_times("elastic", "sweep", "--seed", "1000", "--configs", str(n), "--json", ok=(0, 1, 3))
    print(f"   the command `rollcheck elastic sweep --seed 1000 --configs {n}`: {wall:.2f} s wall, {cpu:.2f} s CPU; "
          f"load average now {load()}")


def main(quick: bool) -> None:
    from benchmarks._cold import load

    print(f"load average at start: {load()}")
    _queue_table(quick)
    _recovery_table(quick)
    _throughput(quick)


if __name__ == "__main__":
    main(quick=False)
