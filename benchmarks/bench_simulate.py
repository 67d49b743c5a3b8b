"""Simulator throughput: processed events (deliveries, source emissions, markers) per second.

Measured side by side in one run for every protocol on every workload, and the scaling with the
operator parallelism (HMNR's vectors grow with the number of processes). Also reports the cost of
one recovery (recovery line + rollback + replay) relative to the run itself.
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
    records = 300 if quick else 2000
    print(f"seed=0 records/source={records} parallelism=4 interval=10 (events/s, best of {1 if quick else 3})")
    print(f"{'workload':<10} {'protocol':<13} {'events':>8} {'seconds':>8} {'events/s':>10}")
    for wl in ("nexmark", "wordcount", "nhop"):
        for proto in ("uc", "bcs", "hmnr", "cl-aligned", "cl-unaligned"):
            cfg = SimConfig(wl, proto, interval=10.0, parallelism=4, records=records, seed=0)
            rate, ev, s = _rate(cfg, 1 if quick else 3)
            note = " (deadlock)" if (wl == "nhop" and proto == "cl-aligned") else ""
            print(f"{wl:<10} {proto:<13} {ev:>8} {s:>8.3f} {rate:>10.0f}{note}")
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
