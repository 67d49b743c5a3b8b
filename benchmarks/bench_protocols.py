"""Decision throughput of BCS and HMNR (deliveries per second) at n = 8, 32, 128 processes.

For each n one seeded random schedule (uniform traffic over every ordered pair, non-FIFO, about one
basic checkpoint per ten events) is written to a pattern file and run, each as a **first call in a
fresh interpreter** (``benchmarks/_cold.py``), by: the command a user runs, ``rollcheck protocol
NAME FILE --json`` (wall time of the whole process: start, imports, loading, deciding, printing the
resulting pattern); the reference state machines (``run_protocol``, what that command calls); the
fast python-list kernel; and the numpy kernel (``forced_deliveries``, used by the property tests
and sweeps, not by the command). Every path must force exactly the same deliveries (checked here).
Rates are deliveries per second of wall time, CPU time of the child in brackets (the machine is
shared: quote the load average printed at the start and the end).
"""

from __future__ import annotations

import random

from rollcheck.pyimpl.pattern import Pattern, PatternBuilder
from rollcheck.pyimpl.protocols.fast import NUMPY_THRESHOLD


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


_FIRST_CALL = r"""
import json, sys, time
path, name, path_kind = sys.argv[1], sys.argv[2], sys.argv[3]
from rollcheck.pyimpl.patternio import load_pattern
p = load_pattern(path)
c0, w0 = time.process_time(), time.perf_counter()
if path_kind == "state machine":
    from rollcheck.pyimpl.protocols import run_protocol
    forced = list(run_protocol(name, p).forced_messages)
else:
    from rollcheck.pyimpl.protocols.fast import forced_deliveries
    forced = list(forced_deliveries(name, p, path_kind))
print(json.dumps({"cpu": time.process_time() - c0, "wall": time.perf_counter() - w0, "forced": forced}))
"""
"""A first call of one decision path in a fresh interpreter (its imports are part of the call)."""


def _rate(nd: int, wall: float, cpu: float | None = None) -> str:
    return f"{nd / wall:>9,.0f}" + (f" ({nd / cpu:>9,.0f})" if cpu else " " * 12)


def main(quick: bool) -> None:
    import json
    import tempfile
    from pathlib import Path

    from benchmarks._cold import child, command_times, load
    from rollcheck.pyimpl.patternio import pattern_to_dict

    events = 20_000 if quick else 100_000
    print(f"uniform random traffic, {events} events per schedule, seed = n; deliveries per second of "
          f"wall time (CPU time of the child in brackets); every figure a first call in a fresh "
          f"process; numpy auto-threshold n >= {NUMPY_THRESHOLD}; load average at start: {load()}")
    print(f"{'n':>4} {'protocol':8} {'deliveries':>10} {'rollcheck protocol':>22} {'state machine':>22} "
          f"{'fast python':>22} {'fast numpy':>22} {'forced/deliv':>12}")
    with tempfile.TemporaryDirectory() as d:
        for n in (8, 32, 128):
            p = uniform_schedule(n, events, seed=n)
            nd = sum(1 for e in p.events if e.kind == "deliver")
            path = Path(d) / f"schedule-{n}.json"
            path.write_text(json.dumps(pattern_to_dict(p)))
            forced = {}
            for name in ("bcs", "hmnr"):
                cmd, cmd_cpu = command_times("protocol", name, str(path), "--json")
                sm = child(_FIRST_CALL, str(path), name, "state machine")
                py = child(_FIRST_CALL, str(path), name, "python")
                assert py["forced"] == sm["forced"], f"{name} n={n}: python kernel disagrees"
                cells = [_rate(nd, cmd, cmd_cpu), _rate(nd, sm["wall"], sm["cpu"]), _rate(nd, py["wall"], py["cpu"])]
                if name == "hmnr":
                    npy = child(_FIRST_CALL, str(path), name, "numpy")
                    assert npy["forced"] == sm["forced"], f"hmnr n={n}: numpy kernel disagrees"
                    cells.append(_rate(nd, npy["wall"], npy["cpu"]))
                else:
                    cells.append(f"{'-':>21}")
                forced[name] = len(sm["forced"])
                print(f"{n:>4} {name:8} {nd:>10} {cells[0]:>22} {cells[1]:>22} {cells[2]:>22} {cells[3]:>22} "
                      f"{forced[name] / nd:>12.4f}   (command {cmd:.1f} s, CPU {cmd_cpu:.1f} s)", flush=True)
            print(f"     HMNR forces {forced['hmnr'] / max(forced['bcs'], 1):.2f}x as many checkpoints as BCS at n={n}")
    print(f"load average at the end: {load()}")
