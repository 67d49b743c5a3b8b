"""Spark chaos matrix benchmarks: wall time per cell, and the kill-point hooks' overhead.

- *Per cell*: a small matrix (one query of the library, the default provider, a task failure and
  two kill points; ``--quick``: one kill point) runs through :func:`run_matrix`; the wall time of
  every cell and of its configuration's shared reference is printed.
- *Kill-point hooks*: the same failure-free driver runs side by side, alternating, uninstrumented
  (``--no-record``, a plain ``wait``) and with the hooks: the :class:`KillSupervisor` armed at a
  kill point that never comes (inotify, and the 2 ms polling fallback), and the whole recorder
  (supervisor, checkpoint watcher, trace) — see :func:`hook_overhead`. The target is at most 10 %.

- *Side by side* (:func:`side_by_side`, ``make bench-matrix``): plain PySpark doing the reference,
  a task failure and a sink failure (each restarted from its checkpoint) and Spark's state reader
  in one session (``benchmarks/_plain_spark_runs.py``), then ``rollcheck spark matrix --providers
  hdfs --failures task,sink`` on the same query with an empty reference cache, then the same
  matrix again (its reference kept from the run before); wall seconds of each, the ratio
  matrix / plain (goal <= 1.0), the machine's load and the calibration loop
  (:mod:`rollcheck.calibration`), appended to ``benchmarks/results/spark-matrix-engine-time.json``.

- *A release's cell, cold against warm* (:func:`release_cell`, ``--release-cell V``): ``spark matrix
  --engine-version V --failures task`` (reference release: the pinned one) once with ``--no-warm``
  (every recording a fresh child, and each cell's failure-free run on the reference release a
  cold driver of its own) and once with warm drivers (V's and the reference release's, the
  reference release's run recorded once per configuration), each with an empty reference cache;
  appended to ``benchmarks/results/spark-release-cell.json``.

- *Many small matrices in a row* (:func:`matrix_series`, ``--series N``): N one-cell matrices (a task
  cell, each on its own copy of the query, as the hunt runs one matrix per program), once each
  with a warm pool of its own and once all with one pool shared across them
  (``run_matrix(..., warm_pool=pool)``); appended to ``benchmarks/results/spark-matrix-series.json``.

Run with ``python -m benchmarks --only spark_matrix [--quick]``; the machine's load is printed
with every result (the ratios are only comparable on a quiet machine).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

LIB = Path(__file__).resolve().parents[1] / "examples" / "queries"


def _load() -> str:
    try:
        return " ".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:
        return "?"


def per_cell(quick: bool) -> None:
    from rollcheck.spark_replay.matrix.run import MatrixOptions, run_matrix

    with tempfile.TemporaryDirectory(prefix="rollcheck-bench-") as d:
        opts = MatrixOptions([str(LIB / "clicks_per_window.py")], providers=["hdfs"], failures=["task", "kill"],
                             kill_points=["commit"] if quick else ["offsets", "commit"], batches=4,
                             fail_at_batch=2, out=Path(d) / "m", jobs=1, minimise=False)
        t0 = time.perf_counter()
        res = run_matrix(opts)
        total = time.perf_counter() - t0
        print(f"matrix of {len(res['cells'])} cell(s) + 1 shared reference in {total:.1f} s (load {_load()}):")
        for c in res["cells"]:
            print(f"  {c['name']} · {c['config']['state_store']} · {c['column']:<13} {c.get('seconds', 0):6.1f} s"
                  f"  {c['verdict']}")


#: The instrumentation variants of one failure-free driver, run side by side (alternating order).
VARIANTS = ("plain", "supervisor", "polling", "recorded")


def _run(kind: str, d: Path, n: int) -> tuple[float, float]:
    """One failure-free driver run of the query: (wall seconds, seconds of the query's own run)."""
    from rollcheck.spark_replay.faults.killpoints import KillSupervisor

    argv = [sys.executable, "-m", "rollcheck.cli.main", "spark", "record", "query", "--module",
            str(LIB / "clicks_per_window.py"), "--out", str(d / f"run{n}.jsonl"), "--workdir", str(d / f"w{n}"),
            "--batches", "4", "--no-reference", "--json"] + ([] if kind == "recorded" else ["--no-record"])
    markers = d / f"m{n}"
    markers.mkdir()
    t0 = time.perf_counter()
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True)
    if kind != "plain":  # armed at a kill point that never comes: the hooks stay active all run
        sup = KillSupervisor(d / f"w{n}" / "checkpoint", markers, 10**6, "commit")
        if kind == "polling":
            from rollcheck.spark_replay.faults import killpoints

            real = killpoints._Inotify.open
            killpoints._Inotify.open = classmethod(lambda cls: None)  # type: ignore[method-assign]
            try:
                sup.wait(p)
            finally:
                killpoints._Inotify.open = real  # type: ignore[method-assign]
        else:
            sup.wait(p)
    out, _ = p.communicate()
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        raise RuntimeError(f"the {kind} run failed (exit {p.returncode})")
    return wall, float(sum(json.loads(out)["attempt_seconds"]))


def hook_overhead(rounds: int) -> None:
    """The kill-point hooks against an uninstrumented run of the same failure-free query.

    ``plain``: no recorder, no supervisor (the baseline). ``supervisor``: the kill supervisor's
    inotify watch on the commit log, armed all run. ``polling``: the same with the 2 ms polling
    fallback. ``recorded``: everything a kill cell runs — the supervisor, and the recorder with its
    checkpoint watcher (a 0.5 s polling thread, a synchronous poll at every sink call) writing the
    trace. Compared: the query's own run (``attempt_seconds``: the driver's start of the query to
    its end), and the wall time of the whole child (the recorded one also reads the final output
    and state with Spark's state reader, which is the recording's, not a hook's).
    """
    times: dict[str, list[tuple[float, float]]] = {k: [] for k in VARIANTS}
    with tempfile.TemporaryDirectory(prefix="rollcheck-bench-") as d_:
        d = Path(d_)
        n = 0
        for r in range(rounds):
            for kind in (VARIANTS if r % 2 == 0 else tuple(reversed(VARIANTS))):
                n += 1
                times[kind].append(_run(kind, d, n))
    base_q = statistics.median(q for _w, q in times["plain"])
    base_w = statistics.median(w for w, _q in times["plain"])
    print(f"kill-point hooks, failure-free driver (clicks_per_window, 4 batches), {rounds} alternating round(s) "
          f"(load {_load()}):")
    print(f"  {'variant':<11} {'query run':>10} {'overhead':>9}   {'wall':>7} {'overhead':>9}")
    for kind in VARIANTS:
        q = statistics.median(x for _w, x in times[kind])
        w = statistics.median(x for x, _q in times[kind])
        oq = "(baseline)" if kind == "plain" else f"{100 * (q / base_q - 1):+8.1f}%"
        ow = "(baseline)" if kind == "plain" else f"{100 * (w / base_w - 1):+8.1f}%"
        print(f"  {kind:<11} {q:9.1f}s {oq:>10}   {w:6.1f}s {ow:>10}")
    print("  target: the hooks cost at most 10 % of the query's run")


RESULTS = Path(__file__).resolve().parent / "results" / "spark-matrix-engine-time.json"


def _timed(argv: list[str], env: dict[str, str] | None = None) -> tuple[float, str]:
    t0 = time.perf_counter()
    r = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=3600)
    if r.returncode not in (0, 1):
        raise RuntimeError(f"{argv[:4]} exited {r.returncode}: {r.stderr[-1500:]}")
    return time.perf_counter() - t0, r.stdout


def side_by_side(batches: int = 4, fail_at: int = 2) -> dict:
    """Plain PySpark against the matrix on the same query, in one run (module docstring)."""
    from rollcheck.calibration import calibrate, finish

    module = str(LIB / "clicks_per_window.py")
    cal = calibrate()
    with tempfile.TemporaryDirectory(prefix="rollcheck-bench-") as d:
        plain_s, out = _timed([sys.executable, str(Path(__file__).with_name("_plain_spark_runs.py")), module,
                               str(batches), str(fail_at), str(Path(d) / "plain")])
        plain = json.loads(out.strip().splitlines()[-1])
        env = {**os.environ, "ROLLCHECK_CACHE": str(Path(d) / "cache")}
        runs = {}
        for name in ("matrix", "matrix_kept_reference"):
            argv = [sys.executable, "-m", "rollcheck.cli.main", "spark", "matrix", "--module", module, "--providers",
                    "hdfs", "--failures", "task,sink", "--batches", str(batches), "--fail-at-batch", str(fail_at),
                    "--out", str(Path(d) / name), "--json"]
            wall, out = _timed(argv, env)
            doc = json.loads(out)
            runs[name] = {"wall_seconds": round(wall, 1), "verdicts": [c["verdict"] for c in doc["cells"]],
                          "cells": [{k: c.get(k) for k in ("column", "wall_seconds", "cpu_seconds", "shared")}
                                    for c in doc["cells"]], "cost": doc.get("cost"),
                          "preparations": doc.get("preparations")}
    record = {"when": time.strftime("%Y-%m-%dT%H:%M:%S"), "module": "clicks_per_window", "batches": batches,
              "fail_at_batch": fail_at, "plain_wall_seconds": round(plain_s, 1), "plain": plain, **runs,
              "ratio": round(runs["matrix"]["wall_seconds"] / plain_s, 2),
              "ratio_kept_reference": round(runs["matrix_kept_reference"]["wall_seconds"] / plain_s, 2),
              "calibration": finish(cal)}
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    old = json.loads(RESULTS.read_text()) if RESULTS.exists() else []
    RESULTS.write_text(json.dumps([*old, record], indent=1) + "\n")
    print(f"plain PySpark (reference + task + sink + state reader, one session): {plain_s:.1f} s")
    print(f"spark matrix --failures task,sink: {runs['matrix']['wall_seconds']:.1f} s "
          f"(ratio {record['ratio']}; goal <= 1.0); reference kept from before: "
          f"{runs['matrix_kept_reference']['wall_seconds']:.1f} s (ratio {record['ratio_kept_reference']})")
    print(f"load {_load()}, calibration loop {record['calibration'].get('loop_cpu_seconds')} s")
    return record


RELEASE_RESULTS = Path(__file__).resolve().parent / "results" / "spark-release-cell.json"


def release_cell(version: str, batches: int = 4, fail_at: int = 2) -> dict:
    """One task cell on pyspark ``version``, cold (``--no-warm``) against warm (module docstring)."""
    from rollcheck.calibration import calibrate, finish
    from rollcheck.spark_replay.releases import cache_root, pinned_release, spark_environment

    spark_environment(version)  # made (once) before anything is timed
    module = str(LIB / "clicks_per_window.py")
    cal = calibrate()
    runs: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="rollcheck-bench-") as d:
        for name, flags in (("cold", ["--no-warm"]), ("warm", [])):
            cache = Path(d) / f"cache-{name}"  # an empty reference cache; the release environments shared
            cache.mkdir()
            (cache / "spark").symlink_to(cache_root() / "spark")
            argv = [sys.executable, "-m", "rollcheck.cli.main", "spark", "matrix", "--module", module, "--providers",
                    "hdfs", "--failures", "task", "--batches", str(batches), "--fail-at-batch", str(fail_at),
                    "--engine-version", version, "--no-minimise", "--out", str(Path(d) / name), "--json", *flags]
            load = _load()
            wall, out = _timed(argv, {**os.environ, "ROLLCHECK_CACHE": str(cache)})
            doc = json.loads(out)
            (cell,) = doc["cells"]
            runs[name] = {"wall_seconds": round(wall, 1), "load_before": load, "verdict": cell["verdict"],
                          "cell": {k: cell.get(k) for k in ("wall_seconds", "cpu_seconds", "shared")},
                          "checks": {c["name"]: c["status"] for c in
                                     json.loads(Path(cell["checks"]).read_text())["checks"]},
                          "preparations": doc.get("preparations"), "cost": doc.get("cost")}
    record = {"when": time.strftime("%Y-%m-%dT%H:%M:%S"), "module": "clicks_per_window", "engine_version": version,
              "reference_version": pinned_release(), "batches": batches, "fail_at_batch": fail_at, **runs,
              "same_checks": runs["cold"]["checks"] == runs["warm"]["checks"], "load_after": _load(),
              "calibration": finish(cal)}
    RELEASE_RESULTS.parent.mkdir(parents=True, exist_ok=True)
    old = json.loads(RELEASE_RESULTS.read_text()) if RELEASE_RESULTS.exists() else []
    RELEASE_RESULTS.write_text(json.dumps([*old, record], indent=1) + "\n")
    for name in ("cold", "warm"):
        r = runs[name]
        print(f"pyspark {version} task cell, {name}: matrix {r['wall_seconds']} s; cell {r['cell']['wall_seconds']} s "
              f"wall, {r['cell']['cpu_seconds']} s CPU ({r['cell']['shared']}); {r['verdict']}")
    print(f"same checks: {record['same_checks']}; load {record['load_after']}, calibration loop "
          f"{record['calibration'].get('loop_cpu_seconds')} s")
    return record


SERIES_RESULTS = Path(__file__).resolve().parent / "results" / "spark-matrix-series.json"


def _series(d: Path, name: str, n: int, pool: object | None) -> dict:
    from rollcheck.infra.matrix.cost import TreeCpu
    from rollcheck.spark_replay.matrix.run import MatrixOptions, run_matrix

    cells, load = [], _load()
    t0 = time.perf_counter()
    with TreeCpu(os.getpid()) as meter:
        for i in range(n):
            mod = d / f"{name}_{i}.py"
            mod.write_text((LIB / "clicks_per_window.py").read_text() + f"\n# program {i}\n")
            doc = run_matrix(MatrixOptions([str(mod)], providers=["hdfs"], failures=["task"], batches=3,
                                           fail_at_batch=1, out=d / f"{name}-m{i}", minimise=False),
                             warm_pool=pool)  # type: ignore[arg-type]
            (c,) = doc["cells"]
            cells.append({"verdict": c["verdict"], "wall_seconds": c.get("wall_seconds"),
                          "shared": c.get("shared"), "reference": doc["preparations"][0].get("wall_seconds")})
    return {"wall_seconds": round(time.perf_counter() - t0, 1), "cpu_seconds": meter.seconds(), "load_before": load,
            "load_after": _load(), "matrices": cells}


def matrix_series(n: int = 3) -> dict:
    """N one-cell matrices in a row, without and with one warm pool shared by all (module docstring)."""
    from rollcheck.calibration import calibrate, finish
    from rollcheck.spark_replay.matrix.warm import WarmPool

    cal = calibrate()
    runs = {}
    with tempfile.TemporaryDirectory(prefix="rollcheck-bench-") as d_:
        d = Path(d_)
        old_cache = os.environ.get("ROLLCHECK_CACHE")
        os.environ["ROLLCHECK_CACHE"] = str(d / "cache")  # every program's reference recorded
        try:
            runs["own_pools"] = _series(d, "own", n, None)
            pool = WarmPool(d / "pool")
            try:
                runs["one_pool"] = _series(d, "shared", n, pool)
            finally:
                pool.close()
        finally:
            if old_cache is None:
                os.environ.pop("ROLLCHECK_CACHE", None)
            else:
                os.environ["ROLLCHECK_CACHE"] = old_cache
    record = {"when": time.strftime("%Y-%m-%dT%H:%M:%S"), "module": "clicks_per_window (a copy per matrix)",
              "matrices": n, "cells_per_matrix": 1, **runs, "calibration": finish(cal)}
    SERIES_RESULTS.parent.mkdir(parents=True, exist_ok=True)
    old = json.loads(SERIES_RESULTS.read_text()) if SERIES_RESULTS.exists() else []
    SERIES_RESULTS.write_text(json.dumps([*old, record], indent=1) + "\n")
    for name, r in runs.items():
        print(f"{n} one-cell matrices, {name}: {r['wall_seconds']} s wall, {r['cpu_seconds']} s CPU "
              f"(load {r['load_before']} -> {r['load_after']}); " + ", ".join(str(m["shared"]) for m in r["matrices"]))
    return record


def main(quick: bool) -> None:
    per_cell(quick)
    hook_overhead(1 if quick else 3)
    side_by_side()


if __name__ == "__main__":
    if "--side-by-side" in sys.argv:
        side_by_side()
    elif "--series" in sys.argv:
        matrix_series(int(sys.argv[sys.argv.index("--series") + 1]))
    elif "--release-cell" in sys.argv:
        release_cell(sys.argv[sys.argv.index("--release-cell") + 1])
    else:
        main("--quick" in sys.argv)
