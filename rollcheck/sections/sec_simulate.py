"""``rollcheck verify`` section: the dataflow simulator (``specs/simulate.md``, ``docs/simulate.md``).

Its properties, the kept domino example and the comparison table.
"""

from __future__ import annotations

import time
from typing import Any

from rollcheck.sections._words import word

TITLE = "Dataflow simulator (FERDiS-style comparison)"

_ALGO = {
    "sim-cic-no-useless": "simulate: CIC",
    "sim-cic-no-domino": "simulate: CIC",
    "sim-cl-aligned-consistent": "simulate: Chandy–Lamport",
    "sim-cl-unaligned-recorded": "simulate: Chandy–Lamport",
    "sim-cl-aligned-cycle-deadlock": "simulate: Chandy–Lamport",
    "sim-exactly-once": "simulate: recovery",
    "sim-dedup-once": "simulate: recovery",
    "sim-volatile-at-most-once": "simulate: recovery",
}


def run(ctx: Any) -> list[Any]:
    """Run the dataflow simulator section: its rows."""
    import rollcheck.properties.simulate_props  # noqa: F401  (registers the properties)
    from rollcheck.properties.registry import PROPERTIES, run_property
    from rollcheck.suite import Row

    rows: list[Row] = []
    for name in sorted(n for n, p in PROPERTIES.items() if p.area == "simulate"):
        ctx.log(f"  property {name}")
        r = run_property(name, seed=ctx.seed if ctx.profile == "verify" else None)
        detail = "; ".join(x for x in (r.error or PROPERTIES[name].theorem, r.coverage_text()) if x)
        rows.append(Row(_ALGO.get(name, "simulate"), "Hypothesis", name, r.status, r.examples, "runs",
                        r.seconds, detail))
    rows.append(_domino(ctx))
    rows.append(_table(ctx))
    # the mutants run once, in the catalogue section (sec_mutants)
    return rows


def _domino(ctx: Any) -> Any:
    from importlib.resources import as_file, files

    from rollcheck.pyimpl.patternio import load_pattern
    from rollcheck.pyimpl.recovery import recovery_line
    from rollcheck.pyimpl.render import render_pattern
    from rollcheck.suite import Row

    t0 = time.perf_counter()
    with as_file(files("rollcheck.data") / "uc_domino_nhop.json") as data:
        p = load_pattern(data)
    f = p.process_index("map1.0")
    line = recovery_line(p, [f], virtual=True)
    ops = [i for i in range(p.n) if not p.processes[i].startswith("source.")]
    ok = all(line.line[i] == 0 for i in ops) and all(p.last_index(i) >= 2 for i in ops)
    pic = render_pattern(p, ctx.path("simulate", "uc_domino_nhop.png"), failed=(f,),
                         title="UC on the cyclic n-hop query: map1.0 fails, the line falls to the initial state")
    return Row("simulate: UC", "pyimpl", "kept domino example (recovery line at the initial state)",
               "pass" if ok else "fail", 1, "patterns", time.perf_counter() - t0,
               f"line {word(line.to_json(p)['line'])}", [str(pic)])


def _table(ctx: Any) -> Any:
    from rollcheck.pyimpl.patternio import atomic_write_text
    from rollcheck.pyimpl.simulate.sweep import plot, sweep, to_csv, to_markdown
    from rollcheck.suite import Row

    t0 = time.perf_counter()
    if ctx.quick:
        rows = sweep(intervals=[5.0], seeds=[ctx.seed], records=40)
    else:
        rows = sweep(intervals=[5.0, 10.0], seeds=[ctx.seed, ctx.seed + 1, ctx.seed + 2], records=120)
    atomic_write_text(ctx.path("simulate", "sweep.md"), to_markdown(rows))
    atomic_write_text(ctx.path("simulate", "sweep.csv"), to_csv(rows))
    pic = plot(rows, ctx.path("simulate", "sweep.png"))
    by = {(r.workload, r.protocol, r.interval): r for r in rows}
    problems = []
    for (wl, proto, iv), r in by.items():
        if wl == "nhop" and proto == "cl-aligned" and r.verdict != "deadlock":
            problems.append(f"cl-aligned ran on nhop @ {iv:g}")
        if proto in ("bcs", "hmnr") and r.useless:
            problems.append(f"{proto} has useless checkpoints on {wl} @ {iv:g}")
        if wl == "nhop" and proto == "uc" and not r.useless:
            problems.append(f"uc on nhop @ {iv:g} has no useless checkpoint")
    forced_acyclic = any(r.forced > 0 for r in rows if r.workload == "wordcount" and r.protocol in ("bcs", "hmnr"))
    if not forced_acyclic:
        problems.append("no forced checkpoint on the acyclic scatter-gather")
    return Row("simulate: comparison", "pyimpl", "protocol x workload x interval table (FERDiS shape)",
               "fail" if problems else "pass", len(rows), "table rows", time.perf_counter() - t0,
               "; ".join(problems) or "report/simulate/sweep.md", [str(pic)])


