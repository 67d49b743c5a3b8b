"""Falkirk Wheel fixed point at scale, and worklist against whole-graph rounds.

1. Random sequence-number systems (``rollcheck.pyimpl.spans.frontier.random_seq_system``) with 10^4, 10^5
   and 10^6 edges, 4 checkpoints per processor, average degree 4, 1% failed, as random DAGs and
   cyclic graphs; two workloads: *uncoordinated* (jittered checkpoint times, half the edges
   logged: heavy domino effect) and *coordinated* (aligned checkpoints, every edge logged:
   rollbacks stay one checkpoint deep). Times for compiling the need tables (vectorised bisect)
   and for the bulk worklist, the growth per 10x, and the plain Python worklist where affordable.
2. A domino chain: the worklist against whole-graph rounds (the rounds are quadratic).

Seeds are fixed and printed; the same seed gives the same systems and answers.
"""

from __future__ import annotations

import time
from collections import Counter

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
                best = None
                for _rep in range(3 if e < 10**6 else 1):  # best of 3 below 10^6 edges
                    t0 = time.perf_counter()
                    fc = compile_seq(s)
                    t1 = time.perf_counter()
                    lv, _ex, steps = run_bulk(fc)
                    t2 = time.perf_counter()
                    if best is None or t2 - t0 < best[2] - best[0]:
                        best = (t0, t1, t2)
                t0, t1, t2 = best
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


def main(quick: bool) -> None:
    _fixed_point(quick)
    _domino(quick)


if __name__ == "__main__":
    import sys

    main("--quick" in sys.argv)
