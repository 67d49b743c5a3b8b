"""Verify section: the pattern model — Netzer–Xu, Wang, SCC, recovery lines, Z3, pictures."""

from __future__ import annotations

import time

from rollcheck.suite import Row, VerifyContext

TITLE = "Foundation: patterns, Z-paths, recovery lines (Hypothesis, Z3, pyimpl)"


def run(ctx: VerifyContext) -> list[Row]:
    """Run the pattern model section: its rows."""
    import rollcheck.properties.foundation  # noqa: F401  (registers the properties)
    import rollcheck.properties.z3check  # noqa: F401
    from rollcheck.properties.registry import PROPERTIES, run_property
    from rollcheck.pyimpl.patternio import load_pattern
    from rollcheck.pyimpl.recovery import (
        recovery_line,
        recovery_line_networkx,
        rollback_propagation,
    )
    from rollcheck.pyimpl.render import render_pattern
    from rollcheck.pyimpl.rgraph import rgraph
    from rollcheck.pyimpl.zpaths import useless_checkpoints, useless_checkpoints_networkx

    rows: list[Row] = []
    for name, p in PROPERTIES.items():
        if p.area != "foundation":
            continue
        r = run_property(name)
        method = "Z3" if p.func.__module__ == "rollcheck.properties.z3check" else "Hypothesis"
        detail = "; ".join(x for x in (r.error or f"checks {p.theorem}", r.coverage_text()) if x)
        rows.append(Row(p.target, method, name, r.status, r.examples, "examples", r.seconds, detail[:300]))
        ctx.log(f"  {name}: {r.status} ({r.examples} examples, {r.seconds:.1f} s)")

    # mutants: the catalogue section (sec_mutants) runs every area's mutants, once

    # pyimpl: the fast (scipy) and readable (networkx) paths agree on a large generated pattern
    from rollcheck.pyimpl.generate import pattern_document as generate
    from rollcheck.pyimpl.patternio import pattern_from_dict

    t0 = time.perf_counter()
    size = 20_000 if ctx.quick else 100_000
    big = pattern_from_dict(generate(size, seed=ctx.seed))
    big_graph = rgraph(big)  # the readable path's R-graph, built once for its four searches
    same_useless = set(useless_checkpoints(big)) == set(useless_checkpoints_networkx(big, big_graph))
    same_line = all(
        recovery_line(big, [f]).line == recovery_line_networkx(big, [f], graph=big_graph).line for f in (0, 7, 31)
    )
    rows.append(Row("rgraph", "pyimpl", "fast scipy path = readable networkx path",
                    "pass" if same_useless and same_line else "fail", big.num_messages, "messages",
                    time.perf_counter() - t0, f"useless and recovery lines on {size} messages, seed {ctx.seed}"))

    # pictures: the example pattern with its Z-cycles and the recovery line
    t0 = time.perf_counter()
    from importlib.resources import as_file, files

    with as_file(files("rollcheck.data") / "useless.json") as example:
        pat = load_pattern(example)
    pic = render_pattern(pat, ctx.path("foundation", "useless-zcycles.png"), failed=[1], zcycles=True,
                         title="examples/useless.json: Z-cycles and the recovery line after P1 fails")
    agree = recovery_line(pat, [1]).line == rollback_propagation(pat, [1]).line
    rows.append(Row("recovery", "pyimpl", "example drawn; R-graph = checkpoint graph", "pass" if agree else "fail",
                    1, "patterns", time.perf_counter() - t0, "examples/useless.json", [str(pic)]))
    return rows
