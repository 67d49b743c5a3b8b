"""``rollcheck check trace`` on big engine-neutral traces, side by side with ``json.loads`` of their lines.

A seeded toy-engine run (:mod:`rollcheck.pyimpl.traces.synth`, HMNR, 4 processes, one failure and
recovery early, outputs with a reference) of about 10^5 and 10^6 events is written to a temporary
folder. For each size: the time to ``json.loads`` every line (the floor of any JSON Lines reader),
the time of the user-facing command ``rollcheck check trace TRACE --reference REF --json --no-tlc``
in a subprocess (interpreter start-up and imports included), their ratio (target ≤ 10×), the
growth from 10^5 to 10^6 (linear: about 10×), and the command's peak memory (it streams the file,
keeping compact pattern events rather than the JSON objects). ``--quick``: 10^5 only.
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


def _loads_time(path: Path) -> tuple[float, int]:
    loads = json.loads
    t0 = time.perf_counter()
    n = 0
    with open(path, "rb") as fh:
        for raw in fh:
            loads(raw)
            n += 1
    return time.perf_counter() - t0, n


def _check_time(path: Path, ref: Path) -> tuple[float, int, dict]:
    cmd = [sys.executable, "-P", "-m", "rollcheck.cli.main", "check", "trace", str(path), "--reference",
           str(ref), "--json", "--no-tlc"]
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
    secs = time.perf_counter() - t0
    if r.returncode != 0:
        raise SystemExit(f"bench_trace: check trace exited {r.returncode}: {r.stderr.strip()}")
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss  # KiB on Linux, max over children
    return secs, peak, json.loads(r.stdout)


def main(quick: bool = False) -> None:
    from rollcheck.pyimpl.traces.synth import write_synthetic_trace

    sizes = [100_000] if quick else [100_000, 1_000_000]
    tmp = Path(tempfile.mkdtemp(prefix="rollcheck-bench-trace-"))
    print(f"bench_trace: seed={SEED}; ratio target <= {TARGET_RATIO:g}x json.loads of the lines", flush=True)
    rows = []
    try:
        for size in sizes:
            trace, ref = tmp / f"t{size}.jsonl", tmp / f"r{size}.json"
            t0 = time.perf_counter()
            # about 1.04 events per action (forced checkpoints, the recovery)
            n = write_synthetic_trace(str(trace), 4, int(size / 1.04), seed=SEED, protocol="hmnr",
                                      failures=[2000], reference=str(ref), output_every=10)
            gen = time.perf_counter() - t0
            tl, lines = _loads_time(trace)
            tc, peak, doc = _check_time(trace, ref)
            ratio = tc / tl
            rows.append((n, tl, tc))
            mb = os.path.getsize(trace) / 2**20
            print(f"events={n:>9d} file={mb:7.1f} MiB  json.loads={tl:6.2f} s  check trace={tc:6.2f} s  "
                  f"ratio={ratio:5.2f}x ({'ok' if ratio <= TARGET_RATIO else 'OVER TARGET'})  "
                  f"peak RSS={peak / 1024:7.1f} MiB  conformant={doc['conformant']}  "
                  f"(generated in {gen:.1f} s)", flush=True)
        if len(rows) == 2:
            (n0, l0, c0), (n1, l1, c1) = rows
            print(f"growth x{n1 / n0:.1f} events: json.loads x{l1 / l0:.1f}, check trace x{c1 / c0:.1f}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main("--quick" in sys.argv)
