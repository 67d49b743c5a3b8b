"""TLC state counts, depths and times per model at growing bounds, and trace-validation speed.

Each family is run at increasing bounds until a run exceeds the budget (120 s by default,
``ROLLCHECK_TLC_BUDGET``); the last bound that finished within it is reported as the largest
bound that fits. ``--quick`` runs only the first two bounds of each family and a short trace.
Numbers go to stdout as one line per run (family, bound, status, distinct states, depth, seconds).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

from rollcheck.tla.manifest import MODELS_DIR

MODELS = MODELS_DIR


def _cfg(consts: dict[str, object], invariants: list[str], symmetry: bool) -> str:
    lines = ["CONSTANTS"]
    for k, v in consts.items():
        if isinstance(v, bool):
            v = "TRUE" if v else "FALSE"
        elif isinstance(v, str) and not v.startswith("{"):
            v = f'"{v}"'
        lines.append(f"  {k} = {v}")
    lines += ["INIT Init", "NEXT Next", *[f"INVARIANT {i}" for i in invariants]]
    if symmetry:
        lines.append("SYMMETRY Sym")
    return "\n".join(lines) + "\n"


def _procs(n: int) -> str:
    return "{" + ", ".join(f"p{i}" for i in range(n)) + "}"


def _cic(proto: str) -> list[tuple[str, dict[str, object]]]:
    return [
        (f"N={n} sends={s} basic={b}", {"Procs": _procs(n), "Protocol": proto, "Inf": 99, "MaxSends": s, "MaxBasic": b})
        for n, s, b in ((2, 4, 2), (3, 3, 1), (3, 3, 2), (3, 4, 1), (2, 6, 2), (3, 4, 2), (3, 5, 2))
    ]


# family -> (module, invariants, deadlock check, symmetry, [(bound label, constants)])
FAMILIES: dict[str, tuple[str, list[str], bool, bool, list[tuple[str, dict[str, object]]]]] = {
    "cl-aligned-acyclic": ("ChandyLamport", ["TypeOK", "Consistent", "NoChannelState"], True, False,
                           [(f"records={r}", {"Graph": "acyclic", "Mode": "aligned", "MaxRecords": r}) for r in (2, 3, 4, 5, 6, 7)]),
    "cl-aligned-cyclic": ("ChandyLamport", ["TypeOK", "Consistent"], True, False,
                          [(f"records={r}", {"Graph": "cyclic", "Mode": "aligned", "MaxRecords": r}) for r in (2, 5, 10)]),
    "cl-unaligned-cyclic": ("ChandyLamport", ["TypeOK", "Consistent"], True, False,
                            [(f"records={r}", {"Graph": "cyclic", "Mode": "unaligned", "MaxRecords": r}) for r in (2, 3, 4, 5, 6)]),
    "cic-hmnr": ("CIC", ["TypeOK", "NoUseless"], False, True, _cic("hmnr")),
    "cic-hmnr-merge-own-index": ("CIC", ["TypeOK", "NoUseless"], False, True, _cic("hmnr-merge-own-index")[1:3]),
    "cic-bcs": ("CIC", ["TypeOK", "NoUseless"], False, True, _cic("bcs")),
    "recovery-line": ("RecoveryLine", ["TypeOK", "LineIsMaxConsistent"], False, False,
                      [(f"N={n} events={e}", {"N": n, "MaxEvents": e, "Virtual": True, "Variant": "correct"})
                       for n, e in ((2, 5), (2, 6), (2, 7), (3, 5), (3, 6), (3, 7))]),
    "spans": ("Spans", ["TypeOK", "ResultCorrect"], True, False,
              [(f"{g} K={k}", {"Graph": g, "K": k, "Variant": "worklist"})
               for g, k in (("single", 1), ("single", 2), ("cycle2", 1), ("chain3", 1), ("cycle2", 2))]),
    "upstream-backup": ("UpstreamBackup", ["TypeOK", "RecoveryExact", "ExactOutput"], True, False,
                        [(f"slices={s} failures={f}", {"NumSlices": s, "MaxFailures": f, "Variant": "two-level"})
                         for s, f in ((3, 1), (4, 2), (5, 2), (6, 2), (6, 3), (7, 3))]),
    "message-log": ("MessageLog", ["TypeOK", "ExactlyOnce", "NoLoss"], True, False,
                    [(f"N={n} failures={f}", {"N": n, "MaxFailures": f, "Variant": "persistent"})
                     for n, f in ((3, 1), (4, 2), (4, 3), (5, 3), (5, 4), (6, 4))]),
}


def run_family(name: str, quick: bool, budget: float, workers: int) -> None:
    from rollcheck.tla.runner import run_tlc

    module, invs, deadlock, sym, bounds = FAMILIES[name]
    largest = None
    for label, consts in bounds[: 2 if quick else None]:
        tmp = Path(tempfile.mkdtemp(prefix="rollcheck-bench-tla-"))
        try:
            for f in MODELS.glob("*.tla"):
                shutil.copy(f, tmp / f.name)
            (tmp / "b.cfg").write_text(_cfg(consts, invs, sym))
            r = run_tlc(tmp / f"{module}.tla", tmp / "b.cfg", workers=workers, timeout=budget, deadlock=deadlock)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        print(f"{name:22s} {label:28s} {r.status:12s} states={r.distinct_states:>10,d} depth={r.depth} "
              f"time={r.seconds:7.1f} s", flush=True)
        if r.status == "inconclusive" or r.seconds > budget:
            break
        if r.status == "violation":  # a mutant family: the first bound that catches it
            print(f"{name:22s} caught at {label}", flush=True)
            return
        largest = label
    print(f"{name:22s} largest bound within {budget:.0f} s: {largest}", flush=True)


def run_traces(quick: bool, budget: float) -> None:
    from rollcheck.pyimpl.generate import random_pattern
    from rollcheck.pyimpl.protocols import run_protocol
    from rollcheck.tla.trace import validate_trace

    sizes = [(1000, False), (300, True)] if quick else [(1000, False), (10_000, False), (30_000, False),
                                                          (300, True), (1000, True), (2000, True)]
    for steps, z in sizes:
        p = run_protocol("hmnr", random_pattern(4, steps, 1)).pattern
        t0 = time.perf_counter()
        v = validate_trace("hmnr", p, zcheck=z, timeout=budget)
        print(f"trace-validation hmnr events={len(p.events):>6d} zcheck={z!s:5s} {v.status:12s} "
              f"time={time.perf_counter() - t0:7.1f} s (seed 1)", flush=True)


def main(quick: bool) -> None:
    budget = float(os.environ.get("ROLLCHECK_TLC_BUDGET", "120"))
    workers = int(os.environ.get("ROLLCHECK_TLC_WORKERS", "1"))
    print(f"TLC budget per run {budget:.0f} s, {workers} worker(s), {os.cpu_count()} cores", flush=True)
    only = os.environ.get("ROLLCHECK_TLC_FAMILIES")
    for name in FAMILIES:
        if only and name not in only.split(","):
            continue
        run_family(name, quick, budget, workers)
    if not only or "traces" in only.split(","):
        run_traces(quick, budget)
