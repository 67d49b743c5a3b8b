"""Run every benchmark: ``python -m benchmarks [--quick] [--only NAME]``.

Each ``benchmarks/bench_<name>.py`` defines ``main(quick: bool) -> None`` and prints its ratios and
scaling factors, measured side by side in the same run.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import time

import benchmarks


def main() -> None:
    ap = argparse.ArgumentParser(prog="python -m benchmarks")
    ap.add_argument("--quick", action="store_true", help="smaller sizes")
    ap.add_argument("--only", action="append", default=[], help="run only bench_NAME (repeatable)")
    args = ap.parse_args()
    mods = sorted(m.name for m in pkgutil.iter_modules(benchmarks.__path__) if m.name.startswith("bench_"))
    for name in mods:
        if args.only and name[6:] not in args.only:
            continue
        print(f"=== {name} ===", flush=True)
        t0 = time.perf_counter()
        importlib.import_module(f"benchmarks.{name}").main(args.quick)
        print(f"=== {name} done in {time.perf_counter() - t0:.1f} s ===\n", flush=True)


if __name__ == "__main__":
    main()
