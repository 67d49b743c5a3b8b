"""Decision throughput of BCS and HMNR (deliveries per second) at n = 8, 32, 128 processes.

For each n one seeded random schedule (uniform traffic over every ordered pair, non-FIFO, about one
basic checkpoint per ten events) is run by: the reference state machines (``run_protocol``, which
also builds the output pattern), the fast python-list kernel, and the numpy kernel. Every path must
force exactly the same deliveries (checked here too). Times are the best of three runs, as CPU
time of this process (the machine is shared) and wall time.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import Any

from rollcheck.pyimpl.pattern import Pattern, PatternBuilder
from rollcheck.pyimpl.protocols import run_protocol
from rollcheck.pyimpl.protocols.fast import NUMPY_THRESHOLD, forced_deliveries


def uniform_schedule(n: int, events: int, seed: int, checkpoint_rate: float = 0.1) -> Pattern:
    rng = random.Random(seed)
    b = PatternBuilder(n)
    pending: list[tuple[int, str]] = []
    for _ in range(events):
        r = rng.random()
        if r < checkpoint_rate:
            b.checkpoint(rng.randrange(n))
        elif r < 0.55 or not pending:
            s = rng.randrange(n)
            d = rng.randrange(n - 1)
            d += d >= s
            pending.append((d, b.send(s, d)))
        else:
            d, m = pending.pop(rng.randrange(len(pending)))
            b.deliver(d, m)
    return b.build()


def _best(fn: Callable[[], Any], repeat: int = 3) -> tuple[float, float, Any]:
    cpu, wall, out = float("inf"), float("inf"), None
    for _ in range(repeat):
        c0, w0 = time.process_time(), time.perf_counter()
        out = fn()
        cpu = min(cpu, time.process_time() - c0)
        wall = min(wall, time.perf_counter() - w0)
    return cpu, wall, out


def main(quick: bool) -> None:
    events = 20_000 if quick else 100_000
    print(f"uniform random traffic, {events} events per schedule, seed = n; rates in deliveries/s "
          f"(CPU time; wall in brackets); numpy auto-threshold n >= {NUMPY_THRESHOLD}")
    print(f"{'n':>4} {'protocol':8} {'deliveries':>10} {'state machine':>20} {'fast python':>20} "
          f"{'fast numpy':>20} {'forced/deliv':>12}")
    for n in (8, 32, 128):
        p = uniform_schedule(n, events, seed=n)
        nd = sum(1 for e in p.events if e.kind == "deliver")
        forced = {}
        for name in ("bcs", "hmnr"):
            c_sm, w_sm, r = _best(lambda name=name, p=p: run_protocol(name, p), 1 if n == 128 else 3)
            want = r.forced_messages
            c_py, w_py, got_py = _best(lambda name=name, p=p: forced_deliveries(name, p, "python"))
            cells = [f"{nd / c_sm:>9.0f} ({nd / w_sm:>7.0f})", f"{nd / c_py:>9.0f} ({nd / w_py:>7.0f})"]
            assert got_py == want, f"{name} n={n}: python kernel disagrees"
            if name == "hmnr":
                c_np, w_np, got_np = _best(lambda p=p: forced_deliveries("hmnr", p, "numpy"))
                assert got_np == want, f"hmnr n={n}: numpy kernel disagrees"
                cells.append(f"{nd / c_np:>9.0f} ({nd / w_np:>7.0f})")
            else:
                cells.append(f"{'-':>20}")
            forced[name] = len(want)
            print(f"{n:>4} {name:8} {nd:>10} {cells[0]:>20} {cells[1]:>20} {cells[2]:>20} "
                  f"{len(want) / nd:>12.4f}", flush=True)
        print(f"     HMNR forces {forced['hmnr'] / max(forced['bcs'], 1):.2f}x as many checkpoints as BCS at n={n}")
