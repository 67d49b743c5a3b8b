"""``rollcheck verify`` section: the mutation catalogue.

Full run: every mutant of every area (``rollcheck.properties.mutants_*``), one row each; a killed mutant's
counterexample is saved under ``report/mutants/`` as a pattern file and drawn. Quick run: only
the protocol mutants (the other areas' sections run their own mutants in quick mode).
"""

from __future__ import annotations

from rollcheck.suite import Row, VerifyContext

TITLE = "Mutation catalogue: broken variants killed, costlier variants safe with their ratio"

_QUICK_TARGETS = {"hmnr", "bcs", "protocols", "timer"}


def run(ctx: VerifyContext) -> list[Row]:
    from rollcheck.properties.mutation import load_all
    from rollcheck.cli.cmd_mutants import run_catalogue

    mutants = load_all()
    only = [n for n, m in mutants.items() if m.target in _QUICK_TARGETS] if ctx.quick else []
    out = ctx.path("mutants", "x").parent
    records = run_catalogue(ctx.profile, out, only, pictures=True, log=lambda s: ctx.log("  mutants: " + s))
    rows = []
    for r in records:
        ok = (r["verdict"] == "safe") if r["safe"] else (r["verdict"] == "killed")
        what = "safe (stays correct)" if r["safe"] else "killed"
        detail = r["verdict"] + (f", ratio {r['ratio']} vs reference" if r["ratio"] is not None else "")
        detail += f"; {r['detail']}"
        pics = [r["picture"]] if r["picture"] else []
        rows.append(Row(r["target"], "mutants", f"{r['name']} {what}: {r['description']}",
                        "pass" if ok else "fail", r["examples"], "examples", r["seconds"], detail[:400], pics))
    return rows
