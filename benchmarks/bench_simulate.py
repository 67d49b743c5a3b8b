"""Simulator throughput: processed events (deliveries, source emissions, markers) per second.

Measured side by side in one run for every protocol on every workload — as a user meets it, the
wall time of the command ``rollcheck simulate --workload W --protocol P … --json`` as a fresh
process (start-up and imports included), next to one in-process run of the engine (a single run,
no best-of) — and the scaling with the operator parallelism (HMNR's vectors grow with the number
of processes). Also reports the cost of one recovery (recovery line + rollback + replay) relative
to the run itself. The load average is printed at the start and the end.
"""

from __future__ import annotations

import time

from rollcheck.pyimpl.simulate import SimConfig, run_engine


def _rate(cfg: SimConfig, repeat: int = 1) -> tuple[float, int, float]:
    best = float("inf")
    events = 0
    for _ in range(repeat):
        t0 = time.perf_counter()
        r = run_engine(cfg)
        best = min(best, time.perf_counter() - t0)
        events = r.events
    return events / best, events, best


def main(quick: bool) -> None:
    from benchmarks._cold import command, load

    records = 300 if quick else 2000
    print(f"seed=0 records/source={records} parallelism=4 interval=10; load average at start: {load()}")
    print(f"{'workload':<10} {'protocol':<13} {'events':>8} {'command s':>10} {'events/s':>9} "
          f"{'engine s':>9} {'events/s':>9}   (command: rollcheck simulate as a fresh process; "
          f"engine: one in-process run)")
    for wl in ("nexmark", "wordcount", "nhop"):
        for proto in ("uc", "bcs", "hmnr", "cl-aligned", "cl-unaligned"):
            cfg = SimConfig(wl, proto, interval=10.0, parallelism=4, records=records, seed=0)
            rate, ev, s = _rate(cfg)
            cmd = command("simulate", "--workload", wl, "--protocol", proto, "--interval", "10",
                          "--parallelism", "4", "--records", str(records), "--seed", "0", "--json",
                          ok=(0, 1, 3))
            note = " (deadlock)" if (wl == "nhop" and proto == "cl-aligned") else ""
            print(f"{wl:<10} {proto:<13} {ev:>8} {cmd:>10.2f} {ev / cmd:>9.0f} {s:>9.3f} {rate:>9.0f}{note}",
                  flush=True)
    print("\nscaling with parallelism (wordcount, hmnr vs uc):")
    base: dict[str, float] = {}
    for par in (1, 4, 16) if quick else (1, 4, 16, 32):
        n_rec = max(20, records // par)
        for proto in ("uc", "hmnr"):
            rate, ev, s = _rate(SimConfig("wordcount", proto, interval=10.0, parallelism=par, records=n_rec, seed=0))
            base.setdefault(proto, rate)
            print(f"  p={par:<3} {proto:<5} processes={3 * par + 1:<4} {rate:>10.0f} events/s "
                  f"({rate / base[proto]:.2f}x of p=1)")
    cfg = SimConfig("nhop", "hmnr", interval=10.0, parallelism=4, records=records, seed=0)
    ref = run_engine(cfg)
    t0 = time.perf_counter()
    run_engine(cfg.__class__(**{**cfg.__dict__, "fail": "map0.1", "fail_at": ref.end_time / 2}))
    t_fail = time.perf_counter() - t0
    t0 = time.perf_counter()
    run_engine(cfg)
    t_free = time.perf_counter() - t0
    print(f"\nnhop/hmnr p=4: failure-free {t_free:.3f} s, with one failure {t_fail:.3f} s "
          f"(ratio {t_fail / t_free:.2f})")
    print(f"load average at the end: {load()}")
