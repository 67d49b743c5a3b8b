"""Foundation benchmark: useless checkpoints and the recovery line, timed as a user meets them.

Patterns of 10^4, 10^5, 10^6 messages among 50 processes, one checkpoint per 10 messages (seed
:data:`SEED`). Everything is measured side by side in one run, and every figure is a **first
call in a fresh interpreter** (cold: nothing imported, nothing cached on the pattern), because
that is what ``rollcheck useless FILE`` does:

- command level: the wall time of ``rollcheck useless FILE --json`` and ``rollcheck
  recovery-line FILE --failed P0 --json`` as child processes (interpreter start, imports, loading,
  the algorithm, printing);
- the steps inside one cold process: ``json.load`` of the file, ``load_pattern`` (parse and
  validate), the first ``useless_checkpoints`` call (it builds the pattern's array view and the
  R-graph), a second call on the same pattern (warm: shown only to say how much of the first call
  is one-off set-up), the first ``recovery_line`` call;
- at 10^5 messages, the speed-up over a networkx baseline that runs one reachability search per
  checkpoint (timed on a sample of 40 searches, scaled to all checkpoints; the R-graph it searches
  is built before timing, which favours the baseline), against the cold first call and, for
  comparison, the warm second call; and the readable networkx SCC version (first call, cold).

The load average is printed at the start and at the end: quote it with the figures.
``README.md#performance`` quotes this benchmark's output.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from benchmarks._cold import child as _child
from benchmarks._cold import command_times as _command
from benchmarks._cold import load as _load

SEED = 20261122
BASELINE_SAMPLE = 40

_STEPS = r"""
import gc, json, sys, time
t = {}
cpu0 = time.process_time()
path = sys.argv[1]
gc.collect()
t0 = time.perf_counter()
with open(path, encoding="utf-8") as fh:
    json.load(fh)
t["json_load"] = time.perf_counter() - t0
gc.collect()
t0 = time.perf_counter()
from rollcheck.pyimpl.patternio import load_pattern
t["import_loader"] = time.perf_counter() - t0
t0 = time.perf_counter()
p = load_pattern(path, allow_large=True)
t["load"] = time.perf_counter() - t0
t0 = time.perf_counter()
from rollcheck.pyimpl.zpaths import useless_checkpoints
from rollcheck.pyimpl.recovery import recovery_line
t["import_algorithms"] = time.perf_counter() - t0
t0, c0 = time.perf_counter(), time.process_time()
u = useless_checkpoints(p)
t["useless_first"] = time.perf_counter() - t0
t["useless_first_cpu"] = time.process_time() - c0
t0 = time.perf_counter()
useless_checkpoints(p)
t["useless_second"] = time.perf_counter() - t0
t0 = time.perf_counter()
recovery_line(p, [0])
t["recovery_first"] = time.perf_counter() - t0
t["cpu_all"] = time.process_time() - cpu0
t["events"] = len(p.events)
t["useless"] = len(u)
print(json.dumps(t))
"""

_BASELINE = r"""
import json, random, sys, time
import networkx as nx
from rollcheck.pyimpl.patternio import load_pattern
from rollcheck.pyimpl.rgraph import rgraph
from rollcheck.pyimpl.zpaths import useless_checkpoints_networkx
path, seed, sample, which = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
p = load_pattern(path, allow_large=True)
if which == "searches":
    g = rgraph(p)  # built before timing: the baseline is timed on its searches only
    cps = p.checkpoints(include_initial=False)
    chosen = random.Random(seed).sample(cps, min(sample, len(cps)))
    t0, c0 = time.perf_counter(), time.process_time()
    for i, x in chosen:
        _ = (i, x) in nx.descendants(g, (i, x + 1))
    per = (time.perf_counter() - t0) / len(chosen)
    per_cpu = (time.process_time() - c0) / len(chosen)
    print(json.dumps({"estimate": per * len(cps), "estimate_cpu": per_cpu * len(cps), "checkpoints": len(cps)}))
else:
    t0 = time.perf_counter()
    u = useless_checkpoints_networkx(p)
    print(json.dumps({"seconds": time.perf_counter() - t0, "useless": len(u)}))
"""


def main(quick: bool) -> None:
    from rollcheck.pyimpl.generate import pattern_document as generate

    sizes = [10**4, 10**5] if quick else [10**4, 10**5, 10**6]
    print(f"seed {SEED}; 50 processes; one checkpoint per 10 messages; load average (1/5/15 min) "
          f"at start: {_load()}")
    print("every time is a first call in a fresh process unless marked 'second call'")
    head = (f"{'messages':>9} {'events':>9} {'useless cmd':>11} {'recovery cmd':>12} {'json.load':>9} "
            f"{'load+valid.':>11} {'useless 1st':>11} {'useless 2nd':>11} {'recovery 1st':>12}")
    rows = []
    with tempfile.TemporaryDirectory() as d:
        at_1e5 = None
        print(head)
        for m in sizes:
            path = Path(d) / f"p{m}.json"
            path.write_text(json.dumps(generate(m, seed=SEED)))
            s = _child(_STEPS, str(path))
            flags = ["--allow-large"] if m >= 10**6 else []
            c_useless, cpu_useless = _command("useless", str(path), "--json", *flags)
            c_rec, cpu_rec = _command("recovery-line", str(path), "--failed", "P0", "--json", *flags)
            rows.append((m, s, c_useless, c_rec))
            print(f"{m:>9} {s['events']:>9} {c_useless:>10.2f}s {c_rec:>11.2f}s {s['json_load']:>8.3f}s "
                  f"{s['load']:>10.3f}s {s['useless_first']:>10.3f}s {s['useless_second']:>10.4f}s "
                  f"{s['recovery_first']:>11.3f}s   useless={s['useless']}; CPU time: useless command "
                  f"{cpu_useless:.2f}s, recovery-line command {cpu_rec:.2f}s, the steps' process "
                  f"{s['cpu_all']:.2f}s", flush=True)
            if m == 10**5:
                at_1e5 = path
        print("\nrelative to json.load of the same file (cold first calls):")
        for m, s, cu, _cr in rows:
            tj = s["json_load"]
            print(f"  {m:>8} messages: load+validate {s['load'] / tj:5.2f}x, useless {s['useless_first'] / tj:5.2f}x"
                  f" (second call {s['useless_second'] / tj:5.3f}x), recovery line {s['recovery_first'] / tj:5.2f}x,"
                  f" all three {(s['load'] + s['useless_first'] + s['recovery_first']) / tj:5.2f}x;"
                  f" the useless command {cu / tj:5.1f}x")
        print("growth per 10x input (cold first calls):")
        for (m0, s0, cu0, _), (m1, s1, cu1, _) in zip(rows, rows[1:], strict=False):
            print(f"  {m0}->{m1}: load {s1['load'] / s0['load']:5.1f}x, useless {s1['useless_first'] / s0['useless_first']:5.1f}x,"
                  f" recovery {s1['recovery_first'] / s0['recovery_first']:5.1f}x, useless command {cu1 / cu0:5.1f}x")
        if at_1e5 is not None:
            s = next(s for m, s, _, _ in rows if m == 10**5)
            base = _child(_BASELINE, str(at_1e5), str(SEED), str(BASELINE_SAMPLE), "searches")
            readable = _child(_BASELINE, str(at_1e5), str(SEED), str(BASELINE_SAMPLE), "readable")
            assert readable["useless"] == s["useless"], "fast and readable versions disagree"
            first, second = s["useless_first"], s["useless_second"]
            print(f"speed-up at 10^5 messages ({base['checkpoints']} checkpoints):")
            print(f"  networkx one-search-per-checkpoint baseline ~{base['estimate']:.1f} s "
                  f"(sampled {BASELINE_SAMPLE} searches, scaled)")
            print(f"  useless_checkpoints, first call (cold)  {first:.3f} s -> {base['estimate'] / first:,.0f}x faster"
                  f" (CPU time: baseline ~{base['estimate_cpu']:.1f} s, first call {s['useless_first_cpu']:.3f} s -> "
                  f"{base['estimate_cpu'] / s['useless_first_cpu']:,.0f}x)")
            print(f"  useless_checkpoints, second call (warm) {second:.4f} s -> {base['estimate'] / second:,.0f}x "
                  "(not what a user meets: the pattern's arrays are cached)")
            print(f"  readable networkx SCC version, first call {readable['seconds']:.3f} s -> the fast "
                  f"path is {readable['seconds'] / first:.1f}x faster (cold vs cold); same answer")
    print(f"load average (1/5/15 min) at the end: {_load()}")


if __name__ == "__main__":
    main(quick=False)
