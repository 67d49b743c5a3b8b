"""Spark chaos matrix benchmarks: wall time per cell, and the kill-point hooks' overhead.

- *Per cell*: a small matrix (one query of the library, the default provider, a task failure and
  two kill points; ``--quick``: one kill point) runs through :func:`run_matrix`; the wall time of
  every cell and of its configuration's shared reference is printed.
- *Kill-point hooks*: the same failure-free driver (``rollcheck spark record query --no-record``)
  runs side by side, alternating, (a) under :class:`KillSupervisor` armed at a kill point that
  never comes (the inotify watch of the commit log stays active the whole run; and the 2 ms
  polling fallback) and (b) under a plain ``wait`` (uninstrumented). The target is at most 10 %.

Run with ``python -m benchmarks --only spark_matrix [--quick]``; the machine's load is printed
with every result (the ratios are only comparable on a quiet machine).
"""

from __future__ import annotations

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
    from rollcheck.spark_replay.matrix import MatrixOptions, run_matrix

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


def _driver(d: Path, n: int) -> subprocess.Popen[bytes]:
    out = d / f"run{n}.jsonl"
    argv = [sys.executable, "-m", "rollcheck.cli.main", "spark", "record", "query", "--module",
            str(LIB / "clicks_per_window.py"), "--out", str(out), "--workdir", str(d / f"w{n}"), "--batches", "4",
            "--no-reference", "--no-record"]
    return subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)


def hook_overhead(pairs: int) -> None:
    from rollcheck.spark_replay.killpoints import KillSupervisor

    times: dict[str, list[float]] = {"plain": [], "inotify": [], "polling": []}
    with tempfile.TemporaryDirectory(prefix="rollcheck-bench-") as d_:
        d = Path(d_)
        n = 0
        for r in range(pairs):
            order = ["plain", "inotify", "polling"] if r % 2 == 0 else ["polling", "inotify", "plain"]
            for kind in order:
                n += 1
                markers = d / f"m{n}"
                markers.mkdir()
                t0 = time.perf_counter()
                p = _driver(d, n)
                if kind == "plain":
                    p.wait()
                else:
                    sup = KillSupervisor(d / f"w{n}" / "checkpoint", markers, 10**6, "commit")
                    if kind == "polling":
                        from rollcheck.spark_replay import killpoints

                        real = killpoints._Inotify.open
                        killpoints._Inotify.open = classmethod(lambda cls: None)  # type: ignore[method-assign]
                        try:
                            sup.wait(p)
                        finally:
                            killpoints._Inotify.open = real  # type: ignore[method-assign]
                    else:
                        sup.wait(p)
                    p.wait()
                times[kind].append(time.perf_counter() - t0)
    base = statistics.median(times["plain"])
    print(f"kill-point hooks, failure-free driver (4 batches), {pairs} alternating round(s) (load {_load()}):")
    for kind in ("plain", "inotify", "polling"):
        m = statistics.median(times[kind])
        print(f"  {kind:<8} {m:6.1f} s  -> overhead {100 * (m / base - 1):+.1f}% (target <= 10%)"
              if kind != "plain" else f"  {kind:<8} {m:6.1f} s  (uninstrumented)")


def main(quick: bool) -> None:
    per_cell(quick)
    hook_overhead(1 if quick else 3)


if __name__ == "__main__":
    main("--quick" in sys.argv)
