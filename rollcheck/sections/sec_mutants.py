"""``rollcheck verify`` section: the mutation catalogue — the only place mutants run.

Every mutant of every area (``rollcheck.properties.mutants_*``) runs once, in quick and full runs
alike (the catalogue takes about a minute under ``ci``); one row each. A killed mutant's
counterexample, reproducer and picture are saved under ``report/mutants/``. A row passes when an
unsafe mutant is killed by a property violation or a safe one stays correct; "error" fails it.
"""

from __future__ import annotations

from rollcheck.suite import Row, VerifyContext

TITLE = "Mutation catalogue: broken variants killed, costlier variants safe with their ratio"

#: Independent parts (areas of the catalogue) the scheduler runs side by side, of similar cost;
#: the last one runs every area the others do not name (a new area is never left out).
PARTS = ("foundation-elastic", "intervals-spans", "others")


def _areas(part: str | None) -> tuple[str, ...]:
    """The catalogue areas of ``part`` (all of them for None)."""
    if part is None:
        return ()
    if part != "others":
        return tuple(part.split("-"))
    from rollcheck.properties.mutation import MUTANTS, load_all

    load_all()
    named = {a for p in PARTS if p != "others" for a in p.split("-")}
    return tuple(sorted({m.area for m in MUTANTS.values()} - named)) or ("(none)",)


def run(ctx: VerifyContext) -> list[Row]:
    """Run the mutation catalogue section: one row per mutant."""
    from rollcheck.properties.catalogue import run_catalogue

    out = ctx.path("mutants", "x").parent
    areas = _areas(ctx.part)
    records = run_catalogue(ctx.profile, out, (), pictures=True, log=lambda s: ctx.log("  mutants: " + s),
                            areas=areas)
    rows = []
    for r in records:
        ok = (r["verdict"] == "safe") if r["safe"] else (r["verdict"] == "killed" and bool(r["reproducer"]))
        what = "safe (stays correct)" if r["safe"] else f"killed by {r['killed_by'] or '(nothing)'}"
        detail = r["verdict"] + (f", ratio {r['ratio']} vs reference" if r["ratio"] is not None else "")
        if r["reproducer"]:
            detail += f"; reproducer {r['reproducer']}"
        detail += f"; {r['detail']}"
        pics = [r["picture"]] if r["picture"] else []
        rows.append(Row(r["target"], "mutants", f"{r['name']} {what}: {r['description']}",
                        "pass" if ok else "fail", max(r["examples"], 1), "examples", r["seconds"], detail[:400],
                        pics))
    return rows
