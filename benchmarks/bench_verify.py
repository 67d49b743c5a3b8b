"""Wall time of ``rollcheck verify`` per section, recorded so that a regression is visible.

Runs ``rollcheck verify --quick`` (``ROLLCHECK_BENCH_VERIFY_FULL=1``: the full run;
``ROLLCHECK_BENCH_VERIFY_ONLY=spark,flink``: those sections only) into a temporary folder, its
progress on the terminal, or takes a run already made (``ROLLCHECK_BENCH_VERIFY_FROM=
report/results.json``), reads the section times from its ``results.json`` and appends one record
to ``benchmarks/results/verify-sections.json``: when, the commit, the load average before and
after, the number of cores, the number of checks, the total and every section's (and part's) wall
and CPU time, and the run's machine calibration (``rollcheck.calibration``: the CPU seconds of a
pure-Python loop, one JVM start, the cores, the load at the start and the end).

It prints each section next to its budget (``rollcheck.sections.SCHEDULE``) and to the previous
record of the same kind, and the total against the target (4 minutes quick, 20 minutes full, on
2 cores). Times are compared in *calibration loops* (seconds divided by the record's calibration
loop seconds), so that a record made on a machine twice as slow compares with one made on a fast
machine: a section whose normalised time grew by more than :data:`TOLERANCE` is marked SLOWER.
Records made before calibrations were kept are *uncalibrated*: against one of those the seconds
are compared as they are (marked ``SLOWER (s)``), which only means something on the same machine.
Load still matters (it is printed for both records): compare records taken at a similar load.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results" / "verify-sections.json"
TARGET = {"quick": 240.0, "full": 1200.0}
#: a section is flagged when its time (in calibration loops) grew by more than this fraction
TOLERANCE = 0.25


def _load() -> list[dict]:
    try:
        return list(json.loads(RESULTS.read_text(encoding="utf-8")))
    except (OSError, ValueError):
        return []


def _commit() -> str:
    try:
        return subprocess.run(["git", "-C", str(RESULTS.parents[2]), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, timeout=10).stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def _run_verify(kind: str) -> tuple[dict, float, int, tuple[float, float], str]:
    """Run verify into a temporary folder (its live progress on this terminal); return its results,
    wall time, exit code, load before and after, and the kind of run."""
    load0 = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="rollcheck-bench-verify-") as d:
        out = Path(d) / "report"
        cmd = [sys.executable, "-m", "rollcheck.cli.main", "verify", "--out", str(out), "--seed", "0"]
        if kind == "quick":
            cmd.append("--quick")
        only = [x for x in os.environ.get("ROLLCHECK_BENCH_VERIFY_ONLY", "").split(",") if x.strip()]
        for name in only:
            cmd += ["--only", name.strip()]
        if only:
            kind += " --only " + ",".join(only)
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, timeout=3 * 3600)
        wall = time.perf_counter() - t0
        try:
            doc = json.loads((out / "results.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            doc = {}
    return doc, wall, proc.returncode, (load0, os.getloadavg()[0]), kind


def _from_report(path: str) -> tuple[dict, float, int, tuple[float, float], str]:
    """A run already made (``ROLLCHECK_BENCH_VERIFY_FROM=report/results.json``): its results, wall
    time, exit code (from its verdict), load at its start and end, and its kind."""
    doc = json.loads(Path(path).read_text(encoding="utf-8"))
    from rollcheck.suite import exit_code

    code = exit_code([str(r.get("status")) for r in doc.get("rows") or []])
    la = doc.get("load_average") or {}
    kind = "quick" if doc.get("quick") else "full"
    return doc, float(doc.get("total_seconds") or 0.0), code, (la.get("start") or 0.0, la.get("end") or 0.0), kind


def main(quick: bool) -> None:
    from rollcheck.calibration import describe, slower_sections
    from rollcheck.sections import SCHEDULE

    given = os.environ.get("ROLLCHECK_BENCH_VERIFY_FROM")
    if given:
        doc, wall, code, (load0, load1), kind = _from_report(given)
    else:
        kind = "full" if os.environ.get("ROLLCHECK_BENCH_VERIFY_FULL") == "1" else "quick"
        doc, wall, code, (load0, load1), kind = _run_verify(kind)
    if not doc:
        print(f"verify wrote no results (exit {code})")
        return
    secs = {str(k): float(v) for k, v in doc.get("section_seconds", {}).items()}
    cpu = {str(k): float(v) for k, v in (doc.get("section_cpu_seconds") or {}).items()}
    record = {"when": time.strftime("%Y-%m-%d %H:%M:%S"), "kind": kind, "commit": _commit(),
              "cores": doc.get("cores") or len(os.sched_getaffinity(0)), "jobs": doc.get("jobs"),
              "load_before": round(load0, 1), "load_after": round(load1, 1), "total_seconds": round(wall, 1),
              "verdict": doc.get("verdict"), "exit_code": code, "sections": secs, "sections_cpu": cpu,
              "cpu_seconds": round(sum(cpu.values()), 1), "checks": len(doc.get("rows") or []),
              "jobs_seconds": doc.get("job_seconds"), "jobs_cpu_seconds": doc.get("job_cpu_seconds"),
              "jobs_started": doc.get("job_started")}
    if isinstance(doc.get("calibration"), dict):  # a report without one stays uncalibrated
        record["calibration"] = doc["calibration"]
    history = _load()
    previous = next((r for r in reversed(history) if r.get("kind") == kind), None)
    slower = {x.name: x for x in slower_sections(record, previous, tolerance=TOLERANCE)}
    loop = (record.get("calibration") or {}).get("loop_cpu_seconds")
    prev_loop = ((previous or {}).get("calibration") or {}).get("loop_cpu_seconds")
    target = TARGET.get(kind.split()[0], 0.0)
    print(f"verify ({kind}): {wall:.0f} s wall (target for the whole run {target:.0f} s), "
          f"exit {code}, load {load0:.1f} -> {load1:.1f}, {record['cores']} cores, "
          f"{record['jobs']} sections at once, {record['checks']} checks")
    print(f"machine: {describe(record)}")
    if loop:
        print(f"in calibration loops (seconds / {loop:.2f} s): {wall / loop:.0f} wall, target "
              f"{target / loop:.0f}; the issue's slower machine (loop 2.2 s) would take about {wall / loop * 2.2:.0f} s")
    if cpu:
        print(f"CPU: {sum(cpu.values()):.0f} s in all (user + system, JVMs and TLC included): on "
              f"{record['cores']} cores no schedule can finish in less than {sum(cpu.values()) / record['cores']:.0f} s")
    print(f"{'section':<12} {'seconds':>8} {'CPU s':>7} {'loops':>6} {'budget':>8} {'previous':>9} {'loops':>6}")
    for name, s in sorted(secs.items(), key=lambda kv: -kv[1]):
        budget = float(SCHEDULE.get(name, {}).get(kind.split()[0], 0) or 0)
        prev = (previous or {}).get("sections", {}).get(name)
        flag = slower.get(name)
        mark = "" if flag is None else (" SLOWER" if flag.normalised else " SLOWER (s)")
        c = f"{cpu[name]:7.0f}" if name in cpu else f"{'-':>7}"
        n = f"{s / loop:6.0f}" if loop else f"{'-':>6}"
        pn = f"{prev / prev_loop:6.0f}" if prev is not None and prev_loop else f"{'-':>6}"
        print(f"{name:<12} {s:8.1f} {c} {n} {budget:8.0f} {prev if prev is not None else '-':>9} {pn}{mark}")
    if previous:
        print(f"previous {kind} record: {previous['total_seconds']} s at load {previous['load_before']} "
              f"({previous['when']}, {previous['commit']}); its machine: {describe(previous)}")
        how = ("in calibration loops" if loop and prev_loop else
               "in seconds (a record is uncalibrated, so the two machines' speeds are unknown)")
        print(f"{len(slower)} section(s) more than {100 * TOLERANCE:.0f} % slower than the previous record, "
              f"compared {how}" + (": " + ", ".join(f"{x.name} x{x.ratio:.2f}" for x in slower.values())
                                   if slower else ""))
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    tmp = RESULTS.with_suffix(".tmp")
    tmp.write_text(json.dumps(history + [record], indent=1), encoding="utf-8")
    tmp.replace(RESULTS)
    print(f"recorded in {RESULTS.relative_to(RESULTS.parents[2])}")
