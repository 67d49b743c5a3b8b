"""``rollcheck check trace`` on big engine-neutral traces, side by side with ``json.loads`` of their lines.

A seeded toy-engine run (:mod:`rollcheck.pyimpl.traces.synth`, HMNR, 4 processes, one failure and
recovery early, outputs with a reference) of about 10^5 and 10^6 events is written to a temporary
folder. For each size: the time to ``json.loads`` every line (the floor of any JSON Lines reader),
the time of the user-facing command ``rollcheck check trace TRACE --reference REF --json --no-tlc``
in a subprocess (interpreter start-up and imports included), their ratio (target ≤ 10×) in CPU
time (user + system: robust on a shared machine) and in wall time, the growth from 10^5 to 10^6
(linear: about 10×), and peak memory: the command's (it streams the file, keeping compact pattern
events rather than the JSON objects) beside a child that merely holds every parsed line.
``--quick``: 10^5 only.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SEED = 2026
TARGET_RATIO = 10.0


def _loads_time(path: Path) -> tuple[float, float, int]:
    loads = json.loads
    t0, c0 = time.perf_counter(), time.process_time()
    n = 0
    with open(path, "rb") as fh:
        for raw in fh:
            loads(raw)
            n += 1
    return time.perf_counter() - t0, time.process_time() - c0, n


# Runs a command in a child and reports the child's own peak RSS (KiB) on the last stderr line.
_WRAP = ("import resource, sys\n"
         "from rollcheck.cli.main import main\n"
         "rc = main(sys.argv[1:])\n"
         "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)\n"
         "sys.exit(rc)\n")
_HOLD = ("import json, resource, sys\n"
         "objs = [json.loads(line) for line in open(sys.argv[1], 'rb')]\n"
         "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)\n")


def _child(code: str, args: list[str]) -> tuple[float, float, int, str]:
    """Wall seconds, CPU seconds (user + system), peak RSS (KiB) and stdout of a child."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-P", "-c", code, *args], capture_output=True, text=True, timeout=3600)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode != 0:
        raise SystemExit(f"bench_trace: child exited {r.returncode}: {r.stderr.strip()[-400:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, int(r.stderr.strip().splitlines()[-1]), r.stdout


def main(quick: bool = False) -> None:
    from rollcheck.pyimpl.traces.synth import write_synthetic_trace

    sizes = [100_000] if quick else [100_000, 1_000_000]
    tmp = Path(tempfile.mkdtemp(prefix="rollcheck-bench-trace-"))
    from benchmarks._cold import load

    print(f"bench_trace: seed={SEED}; ratio target <= {TARGET_RATIO:g}x json.loads of the lines; "
          f"load average at start: {load()}", flush=True)
    rows = []
    try:
        # the command's baseline (interpreter, numpy, scipy, networkx) on a 3-event trace
        tiny = tmp / "tiny.jsonl"
        write_synthetic_trace(str(tiny), 2, 3, seed=SEED, protocol="hmnr", output_every=0)
        _tw, _tc, base, _ = _child(_WRAP, ["check", "trace", str(tiny), "--json", "--no-tlc"])
        print(f"baseline peak RSS of check trace (imports, a 3-event trace): {base / 1024:.1f} MiB", flush=True)
        for size in sizes:
            trace, ref = tmp / f"t{size}.jsonl", tmp / f"r{size}.json"
            t0 = time.perf_counter()
            # about 1.04 events per action (forced checkpoints, the recovery)
            n = write_synthetic_trace(str(trace), 4, int(size / 1.04), seed=SEED, protocol="hmnr",
                                      failures=[2000], reference=str(ref), output_every=10)
            gen = time.perf_counter() - t0
            tl, cl, lines = _loads_time(trace)
            tc, cc, peak, out = _child(_WRAP, ["check", "trace", str(trace), "--reference", str(ref),
                                               "--json", "--no-tlc"])
            doc = json.loads(out)
            _th, _ch, held, _ = _child(_HOLD, [str(trace)])
            ratio, cratio = tc / tl, cc / cl
            rows.append((n, tl, tc, cl, cc))
            mb = os.path.getsize(trace) / 2**20
            print(f"events={n:>9d} file={mb:6.1f} MiB  json.loads: {tl:6.2f} s wall {cl:6.2f} s CPU  "
                  f"check trace: {tc:6.2f} s wall {cc:6.2f} s CPU  ratio: {cratio:5.2f}x CPU "
                  f"({'ok' if cratio <= TARGET_RATIO else 'OVER TARGET'}), {ratio:5.2f}x wall  "
                  f"peak RSS: check {peak / 1024:6.1f} MiB, all JSON objects held {held / 1024:6.1f} MiB  "
                  f"conformant={doc['conformant']} (generated in {gen:.1f} s)", flush=True)
        if len(rows) == 2:
            (n0, _l0, _c0, l0, c0), (n1, _l1, _c1, l1, c1) = rows
            print(f"growth x{n1 / n0:.1f} events (CPU): json.loads x{l1 / l0:.1f}, check trace x{c1 / c0:.1f}")
        print(f"load average at the end: {load()}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main("--quick" in sys.argv)
