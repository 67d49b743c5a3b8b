"""The exhaustive explorer of ``check protocol``: throughput, what the reductions save, growth per
event, and the speed-up of worker processes and of Spark, side by side in one run.

- schedules per second of the walk (one process) for BCS and HMNR at 2x8 and 3x7;
- protocol calls with the reductions (least interleaving of each partial order, leaves without
  calls, symmetry) and without (every interleaving, prefix sharing only) at 2x8 and 3x7;
- how the number of schedules grows per added event (2 and 3 processes);
- wall time of one bound with 1 worker, 2 workers and Spark ``local[2]`` (same counts checked).

Times are wall-clock on a shared machine: read the ratios, and the load printed first.
"""

from __future__ import annotations

import os
import time
from typing import Any

from rollcheck.properties.explore import Bound, explore, walk
from rollcheck.properties.explore.calls import ProtocolCalls
from rollcheck.pyimpl.protocols import BCS, HMNR

__all__ = ["main", "CountingCalls", "naive_calls"]


class CountingCalls(ProtocolCalls):
    """A ProtocolCalls that counts the user's calls."""

    def __init__(self, proto: Any):
        super().__init__(proto, type(proto).__name__, checking=False)
        self.count = 0
        for name in ("on_checkpoint", "on_send", "must_force", "on_deliver"):
            fn = getattr(self, name)
            setattr(self, name, self._counted(fn))

    def _counted(self, fn: Any) -> Any:
        def call(*args: Any) -> Any:
            self.count += 1
            return fn(*args)

        return call


def naive_calls(proto: Any, n: int, max_events: int) -> tuple[int, int]:
    """(interleavings, protocol calls) of a walk over every interleaving (no reduction)."""
    calls = CountingCalls(proto)
    st = [calls.initial(i, n) for i in range(n)]
    transit: list[tuple[int, int, Any]] = []
    nodes = [0]

    def rec(depth: int) -> None:
        nodes[0] += 1
        if depth == max_events:
            return
        for p in range(n):
            s0 = st[p]
            st[p] = calls.on_checkpoint(s0, False)
            rec(depth + 1)
            st[p] = s0
            for q in range(n):
                if q != p:
                    st[p], pb = calls.on_send(s0, q)
                    transit.append((p, q, pb))
                    rec(depth + 1)
                    transit.pop()
                    st[p] = s0
            for j in range(len(transit)):
                src, dst, pb = transit[j]
                if dst != p:
                    continue
                s1 = calls.on_checkpoint(s0, True) if calls.must_force(s0, src, pb) else s0
                st[p] = calls.on_deliver(s1, src, pb)
                del transit[j]
                rec(depth + 1)
                transit.insert(j, (src, dst, pb))
                st[p] = s0

    rec(0)
    return nodes[0], calls.count


def main(quick: bool = False) -> None:
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    sizes = [(2, 7), (3, 6)] if quick else [(2, 8), (3, 7)]
    print("\n-- throughput of the walk (one process) --")
    for cls in (BCS, HMNR):
        for n, e in sizes:
            t0 = time.perf_counter()
            r = walk(n, e, ProtocolCalls(cls(), cls.__name__))
            dt = time.perf_counter() - t0
            print(f"{cls.__name__:5s} {n}x{e}: {r.schedules:>9,d} schedules in {dt:6.2f} s = "
                  f"{r.schedules / dt:>9,.0f} schedules/s")
    print("\n-- protocol calls with and without the reductions (HMNR) --")
    for n, e in sizes if not quick else [(2, 6), (3, 5)]:
        with_red = CountingCalls(HMNR())
        plain = walk(n, e, with_red).schedules
        sym_cls = type("SymHMNR", (HMNR,), {"symmetric": True})
        with_sym = CountingCalls(sym_cls())
        sym = walk(n, e, with_sym, symmetric=True).schedules
        t0 = time.perf_counter()
        inter, none = naive_calls(HMNR(), n, e)
        dt = time.perf_counter() - t0
        print(f"{n}x{e}: every interleaving {inter:>11,d} nodes, {none:>11,d} calls ({dt:.1f} s) | "
              f"one per partial order {plain:>9,d} schedules, {with_red.count:>9,d} calls "
              f"(x{none / max(1, with_red.count):.1f} fewer) | + symmetry {sym:>9,d}, "
              f"{with_sym.count:>9,d} calls (x{none / max(1, with_sym.count):.1f} fewer)")
    print("\n-- growth per added event (schedules, no protocol) --")
    for n, top in ((2, 9 if quick else 11), (3, 7 if quick else 9)):
        prev = None
        row = []
        for e in range(4, top + 1):
            if n == 3 and e > 8 and not quick:
                break  # 3x9 (15.1 million) is measured in the default bounds run below
            c = walk(n, e, zcycles=False).schedules
            row.append(f"{n}x{e} {c:,d}" + (f" (x{c / prev:.2f})" if prev else ""))
            prev = c
        print("; ".join(row))
    print("\n-- one bound, 1 vs 2 workers vs Spark local[2] (HMNR, same counts) --")
    bound = [Bound(3, 6)] if quick else [Bound(3, 8)]
    results = {}
    for label, kw in (("1 worker", {"workers": 1}), ("2 workers", {"workers": 2})):
        t0 = time.perf_counter()
        e = explore(HMNR(), "hmnr", bound, **kw)
        results[label] = (time.perf_counter() - t0, e.bounds[0].schedules)
    try:
        from rollcheck.testing._spark import spark_runner

        runner = spark_runner("local[2]")
        try:
            t0 = time.perf_counter()
            e = explore(HMNR(), "hmnr", bound, spark=runner)
            results["spark local[2]"] = (time.perf_counter() - t0, e.bounds[0].schedules)
        finally:
            runner.close()
    except Exception as exc:  # no JVM here: say so, do not hide it
        print(f"spark: not measured ({type(exc).__name__}: {exc})")
    base = results["1 worker"][0]
    for label, (dt, count) in results.items():
        print(f"{label:15s} {count:>10,d} schedules in {dt:6.1f} s (speed-up x{base / dt:.2f})")
    if len({c for _, c in results.values()}) != 1:
        raise SystemExit("the schedule counts differ between the runs: a bug in the explorer")
