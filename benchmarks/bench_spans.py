"""Falkirk Wheel fixed point at scale, and worklist against whole-graph rounds.

1. Random sequence-number systems (``rollcheck.pyimpl.spans.frontier.random_seq_system``) with 10^4, 10^5
   and 10^6 edges, 4 checkpoints per processor, average degree 4, 1% failed, as random DAGs and
   cyclic graphs; two workloads: *uncoordinated* (jittered checkpoint times, half the edges
   logged: heavy domino effect) and *coordinated* (aligned checkpoints, every edge logged:
   rollbacks stay one checkpoint deep). Times for compiling the need tables (vectorised bisect)
   and for the bulk worklist, the growth per 10x, and the plain Python worklist where affordable.
2. A domino chain: the worklist against whole-graph rounds (the rounds are quadratic).
3. The command path: a ``rollcheck.spans/1`` file with 10^4, 10^5, 10^6 edges (epochs as times,
   4 checkpoints per processor, degree 4, 1% failed, half the edges logged), side by side:
   ``json.load`` of the file, ``rollcheck spans FILE --json`` (the user-facing command, as a
   subprocess, wall time and peak RSS), and the kernel alone (the bulk worklist on the compiled
   tables). Ratios to ``json.load`` and growth per 10x.

Seeds are fixed and printed; the same seed gives the same systems and answers.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

SEED = 1


def _fixed_point(quick: bool) -> None:
    from rollcheck.pyimpl.spans.frontier import compile_seq, random_seq_system, run_bulk, run_flat

    sizes = [10**3, 10**4, 10**5] if quick else [10**4, 10**5, 10**6]
    print(f"seed={SEED}  K=4 checkpoints/processor, degree 4, 1% failed")
    print(f"{'workload':<14}{'graph':<8}{'edges':>9}{'procs':>8}{'compile s':>11}{'bulk s':>9}"
          f"{'total s':>9}{'python s':>10}{'steps':>7}  levels (most common)")
    for name, jitter, logged in (("uncoordinated", 0.9, 0.5), ("coordinated", 0.0, 1.0)):
        for cyclic in (False, True):
            prev = first = None
            for e in sizes:
                s = random_seq_system(e, cyclic=cyclic, seed=SEED, jitter=jitter, logged=logged)
                # one run (the first on this system), not a best-of: what a caller meets
                t0 = time.perf_counter()
                fc = compile_seq(s)
                t1 = time.perf_counter()
                lv, _ex, steps = run_bulk(fc)
                t2 = time.perf_counter()
                py = "-"
                if e <= (10**5 if not quick else 10**4):
                    t3 = time.perf_counter()
                    lv2, _ = run_flat(fc)
                    py = f"{time.perf_counter() - t3:.2f}"
                    assert lv2 == lv.tolist(), "python worklist and bulk worklist disagree"
                tot = t2 - t0
                grow = f"  x{tot / prev:.1f}/10x" if prev else ""
                if first is None:
                    first = tot
                elif e == sizes[-1]:
                    grow += f" (mean x{(tot / first) ** 0.5:.1f}/10x over 100x)"
                prev = tot
                common = Counter(lv.tolist()).most_common(3)
                print(f"{name:<14}{'cyclic' if cyclic else 'DAG':<8}{e:>9}{s.n:>8}{t1 - t0:>11.2f}"
                      f"{t2 - t1:>9.2f}{tot:>9.2f}{py:>10}{steps:>7}  {common}{grow}", flush=True)


def _domino(quick: bool) -> None:
    from rollcheck.pyimpl.spans.fixpoint import domino_chain, run_rounds, run_worklist

    print("\ndomino chain (last processor failed, cascade against index order)")
    print(f"{'n':>6}{'worklist exams':>16}{'worklist s':>12}{'rounds exams':>14}{'rounds s':>10}{'ratio':>8}")
    for n in ([100, 200, 400] if quick else [250, 500, 1000, 2000]):
        c = domino_chain(n)
        t0 = time.perf_counter()
        w = run_worklist(c)
        t1 = time.perf_counter()
        r = run_rounds(c)
        t2 = time.perf_counter()
        assert w.levels == r.levels
        print(f"{n:>6}{w.examinations:>16}{t1 - t0:>12.4f}{r.examinations:>14}{t2 - t1:>10.3f}"
              f"{r.examinations / w.examinations:>8.0f}", flush=True)


def write_epoch_system(path: Path, n_edges: int, seed: int = SEED, K: int = 4, epochs: int = 8,
                       degree: int = 4, failed: float = 0.01, logged: float = 0.5) -> int:
    """Write a random ``rollcheck.spans/1`` system over epochs with ``n_edges`` edges; returns the
    number of processors. Every processor checkpoints ``K`` times (epochs ``0..ck``) and has
    processed up to some later epoch; a sender sends every epoch it processed; a receiver has
    processed the prefix it reached; φ is the identity (an epoch fixes itself)."""
    rng = random.Random(seed)
    n = max(2, n_edges // degree)
    ck = [sorted(rng.sample(range(epochs - 1), K)) for _ in range(n)]
    done = [c[-1] + rng.randrange(0, epochs - c[-1]) for c in ck]
    dead = [rng.random() < failed for _ in range(n)]
    upto = [list(range(e + 1)) for e in range(epochs + 1)]
    with open(path, "w") as f:
        f.write('{"format": "rollcheck.spans/1", "processors": {')
        for p in range(n):
            d = {"chain": [[]] + [upto[e] for e in ck[p]]}
            if not dead[p]:
                d["top"] = upto[done[p]]
            f.write(("," if p else "") + f'"p{p}": ' + json.dumps(d, separators=(",", ":")))
        f.write('}, "edges": [')
        for j in range(n_edges):
            a, b = rng.randrange(n), rng.randrange(n)
            sent = done[a]
            lg = rng.random() < logged
            e: dict = {"name": f"e{j}", "src": f"p{a}", "dst": f"p{b}",
                       "discarded": [[]] + [[] if lg else upto[min(c, sent)] for c in ck[a]]}
            if not dead[a]:
                e["discarded_top"] = [] if lg else upto[sent]
            e["processed"] = upto[min(sent, done[b])] if not dead[b] else upto[min(sent, ck[b][-1])]
            e["phi"] = [[]] + [upto[min(c, sent)] for c in ck[a]]
            f.write(("," if j else "") + json.dumps(e, separators=(",", ":")))
        f.write("]}\n")
    return n


def _child(cmd: list[str]) -> tuple[float, float, float, str]:
    """Run ``cmd``; (wall seconds, CPU seconds, peak RSS of the child in GB, its stdout)."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        t0 = time.perf_counter()
        pr = subprocess.Popen(cmd, stdout=out, stderr=err, text=True)
        _pid, status, ru = os.wait4(pr.pid, 0)
        wall = time.perf_counter() - t0
        pr.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if pr.returncode != 0:
            raise SystemExit(f"{cmd[:3]} failed with exit {pr.returncode}: {err.read().strip()[-300:]}")
        return wall, ru.ru_utime + ru.ru_stime, ru.ru_maxrss / 1e6, out.read()


_LOAD = "import json, sys, time; t = time.perf_counter(); json.load(open(sys.argv[1])); print(time.perf_counter() - t)"
_LOAD_NOGC = ("import gc, json, resource, sys; gc.disable(); json.load(open(sys.argv[1])); "
              "r = resource.getrusage(resource.RUSAGE_SELF); print(r.ru_utime + r.ru_stime)")
_KERNEL = ("import json, sys, time; from rollcheck.pyimpl.spans.tables import compile_document; "
           "from rollcheck.pyimpl.spans.frontier import run_bulk; "
           "t = compile_document(json.load(open(sys.argv[1]))); t0 = time.perf_counter(); run_bulk(t.flat); "
           "print(time.perf_counter() - t0)")


def _command_path(quick: bool) -> None:
    """json.load vs ``rollcheck spans FILE --json`` vs the kernel, side by side. Ratios use CPU
    seconds (user + system of the child process: robust on a shared machine); wall seconds are
    shown too. ``rollcheck spans`` turns the cyclic garbage collector off while it loads (millions
    of small lists), so ``json.load`` with the collector off is shown as well."""
    sizes = [10**3, 10**4, 10**5] if quick else [10**4, 10**5, 10**6]
    print(f"\ncommand path: rollcheck.spans/1 over epochs, seed={SEED}, K=4, degree 4, 1% failed, half logged")
    print(f"{'edges':>9}{'MB':>6} | {'json.load cpu':>13}{'wall':>7}{'GB':>6}{'gc off cpu':>11} | "
          f"{'rollcheck spans cpu':>19}{'wall':>7}{'GB':>6} | {'kernel s':>8} | {'cli/load':>8}{'cli/gc off':>11}"
          f"{'cli x/10x':>10}{'load x/10x':>11}")
    py = sys.executable
    cli = str(Path(sys.executable).with_name("rollcheck"))
    prev = None
    with tempfile.TemporaryDirectory(prefix="bench-spans-") as tmp:
        for e in sizes:
            path = Path(tmp) / f"spans-{e}.json"
            write_epoch_system(path, e)
            mb = path.stat().st_size / 1e6
            wl, cl, rl, _out = _child([py, "-c", _LOAD, str(path)])
            _w, _c, _r, outg = _child([py, "-c", _LOAD_NOGC, str(path)])
            cg = float(outg.strip())
            wc, cc, rc, out = _child([cli, "spans", str(path), "--json"])
            json.loads(out)  # exactly one JSON document
            _w, _c, _r, outk = _child([py, "-c", _KERNEL, str(path)])
            tk = float(outk.strip())
            grow = f"{cc / prev[0]:>10.1f}{cl / prev[1]:>11.1f}" if prev else f"{'-':>10}{'-':>11}"
            print(f"{e:>9}{mb:>6.0f} | {cl:>13.2f}{wl:>7.1f}{rl:>6.2f}{cg:>11.2f} | {cc:>19.2f}{wc:>7.1f}{rc:>6.2f} | "
                  f"{tk:>8.2f} | {cc / cl:>8.1f}{cc / cg:>11.1f}{grow}", flush=True)
            prev = (cc, cl)
            path.unlink()


def main(quick: bool) -> None:
    from benchmarks._cold import load

    print(f"load average at start: {load()}")
    # the command path first: a child's peak RSS (ru_maxrss) counts the pages of the parent it was
    # forked from, and the fixed-point section leaves this process large
    _command_path(quick)
    _fixed_point(quick)
    _domino(quick)
    print(f"load average at the end: {load()}")


if __name__ == "__main__":
    import sys

    if "--command-only" in sys.argv:
        _command_path("--quick" in sys.argv)
    else:
        main("--quick" in sys.argv)
