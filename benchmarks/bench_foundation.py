"""Foundation benchmark: useless checkpoints and the recovery line on large generated patterns.

Patterns of 10^4, 10^5, 10^6 messages among 50 processes, one checkpoint per 10 messages. Printed,
measured side by side in one run: each step's time relative to ``json.load`` of the same file,
growth per 10x input, and the speed-up over a straightforward networkx baseline that runs one
reachability search per checkpoint (timed on a sample of checkpoints, then scaled to all of them).
"""

from __future__ import annotations

import gc
import json
import random
import tempfile
import time
from pathlib import Path

import networkx as nx

from rollcheck.pyimpl.generate import pattern_document as generate
from rollcheck.pyimpl.patternio import load_pattern
from rollcheck.pyimpl.patternio import pattern_from_dict as load_pattern_from_doc
from rollcheck.pyimpl.recovery import recovery_line
from rollcheck.pyimpl.rgraph import rgraph
from rollcheck.pyimpl.zpaths import useless_checkpoints, useless_checkpoints_networkx

SEED = 20261122


def _json_load(path: Path) -> object:
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


def timed(fn, *args, **kw):
    t0 = time.perf_counter()
    out = fn(*args, **kw)
    return time.perf_counter() - t0, out


def baseline_per_checkpoint(p, sample: int = 40) -> tuple[float, int]:
    """networkx baseline: C[i,x] useless iff C[i,x] is among the descendants of C[i,x+1] (one full
    reachability search per checkpoint).

    Returns (estimated seconds for all checkpoints, number of checkpoints)."""
    g = rgraph(p)
    cps = p.checkpoints(include_initial=False)
    rnd = random.Random(SEED)
    chosen = rnd.sample(cps, min(sample, len(cps)))
    t0 = time.perf_counter()
    for i, x in chosen:
        _ = (i, x) in nx.descendants(g, (i, x + 1))
    per = (time.perf_counter() - t0) / len(chosen)
    return per * len(cps), len(cps)


def main(quick: bool) -> None:
    sizes = [10**4, 10**5] if quick else [10**4, 10**5, 10**6]
    print(f"seed {SEED}; 50 processes; one checkpoint per 10 messages")
    print(f"{'messages':>9} {'events':>9} {'json.load s':>11} {'load+validate':>14} {'useless':>9} "
          f"{'recovery':>9} {'total/json':>10}")
    rows = []
    warm = load_pattern_from_doc(generate(200, seed=SEED))
    useless_checkpoints(warm)  # import scipy and numpy before timing
    recovery_line(warm, [0])
    with tempfile.TemporaryDirectory() as d:
        for m in sizes:
            doc = generate(m, seed=SEED)
            path = Path(d) / f"p{m}.json"
            path.write_text(json.dumps(doc))
            del doc
            gc.collect()
            t_json, _ = timed(_json_load, path)
            gc.collect()
            t_load, p = timed(load_pattern, path)
            t_useless, u = timed(useless_checkpoints, p)
            t_rec, _ = timed(recovery_line, p, [0])
            total = t_load + t_useless + t_rec
            rows.append((m, p if m == 10**5 else None, t_json, t_load, t_useless, t_rec))
            print(f"{m:>9} {len(p.events):>9} {t_json:>11.3f} {t_load:>8.3f} ({t_load / t_json:4.1f}x)"
                  f" {t_useless:>7.3f}s {t_rec:>7.3f}s {total / t_json:>9.1f}x   useless={len(u)}")
            del p, u  # keep only the 10^5 pattern (for the baseline): memory stays flat
        print("\nrelative to json.load of the same file (target <= 10x):")
        for m, _p, tj, tl, tu, tr in rows:
            print(f"  {m:>8} messages: useless {tu / tj:5.2f}x, recovery line {tr / tj:5.2f}x, "
                  f"load {tl / tj:5.2f}x, load+useless+recovery {(tl + tu + tr) / tj:5.2f}x")
        print("growth per 10x input (target <= 12x):")
        for (m0, _, _, l0, u0, r0), (m1, _, _, l1, u1, r1) in zip(rows, rows[1:], strict=False):
            print(f"  {m0}->{m1}: load {l1 / l0:5.1f}x, useless {u1 / u0:5.1f}x, recovery {r1 / r0:5.1f}x")
        m, p, *_ = rows[1]
        base, n_cp = baseline_per_checkpoint(p)
        t_fast, u_fast = timed(useless_checkpoints, p)
        t_nx, u_nx = timed(useless_checkpoints_networkx, p)
        assert set(u_fast) == set(u_nx), "fast and readable versions disagree"
        print(f"speed-up at {m} messages ({n_cp} checkpoints; target >= 100x):")
        print(f"  networkx one-search-per-checkpoint baseline ~{base:.1f} s (sampled 40 searches)")
        print(f"  useless_checkpoints (scipy SCC) {t_fast:.3f} s -> {base / t_fast:,.0f}x faster")
        print(f"  readable networkx SCC version   {t_nx:.3f} s -> fast path {t_nx / t_fast:.1f}x faster; same answer")


if __name__ == "__main__":
    main(quick=False)
