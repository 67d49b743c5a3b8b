"""``rollcheck verify``: the main job — every section, a progress display, and report/."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from rollcheck.cli._util import add_parser


def register(sub: Any) -> None:
    p = add_parser(sub, "verify", "Run every check (properties, Z3, mutants, TLC, Spark) and write report/.", _run)
    p.add_argument("--quick", action="store_true", help="the ci profile and small bounds (under 5 minutes)")
    p.add_argument("--profile", choices=["ci", "verify"], default=None,
                   help="Hypothesis profile (default: verify, or ci with --quick)")
    p.add_argument("--out", default="report", help="report folder (default: report)")
    p.add_argument("--seed", type=int, default=0, help="seed for every random run (printed)")
    p.add_argument("--only", action="append", default=[], metavar="SECTION",
                   help="run only this section (repeatable)")


def _run(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from rollcheck.properties.profiles import load_profile
    from rollcheck.suite import Row, VerifyContext, discover_sections, write_report

    profile = args.profile or ("ci" if args.quick else "verify")
    load_profile(profile)
    console = Console(stderr=True)
    out_dir = Path(args.out).resolve()
    ctx = VerifyContext(profile=profile, quick=args.quick, out_dir=out_dir, seed=args.seed,
                        log=lambda s: console.print(s, highlight=False))
    console.print(f"rollcheck verify: profile={profile} quick={args.quick} seed={args.seed}")
    sections = discover_sections()
    if args.only:
        names = {n for n, _ in sections}
        unknown = set(args.only) - names
        if unknown:
            from rollcheck.pyimpl.errors import InvalidInputError

            raise InvalidInputError(f"unknown section(s) {sorted(unknown)}; known: {sorted(names)}", location="--only")
        sections = [(n, m) for n, m in sections if n in args.only]
    rows: list[Row] = []
    t_all = time.perf_counter()
    for name, module in sections:
        t0 = time.perf_counter()
        console.rule(f"[bold]{getattr(module, 'TITLE', name)}")
        try:
            got = module.run(ctx)  # type: ignore[attr-defined]
        except Exception as e:  # a crashing section is a failure of that section, not of the job
            got = [Row(name, "pyimpl", "section ran", "fail", 0, "runs", time.perf_counter() - t0,
                       f"{type(e).__name__}: {e}")]
        rows.extend(got)
        console.print(f"  {name}: {len(got)} checks in {time.perf_counter() - t0:.1f} s")
    table = Table(title="rollcheck verify")
    for col in ("algorithm", "method", "check", "result", "count", "s"):
        table.add_column(col)
    colour = {"pass": "green", "fail": "red", "inconclusive": "yellow"}
    for r in rows:
        table.add_row(r.algorithm, r.method, r.check, f"[{colour[r.status]}]{r.status}",
                      f"{r.count} {r.unit}", f"{r.seconds:.1f}")
    Console(file=sys.stdout).print(table)
    meta = {"profile": profile, "quick": args.quick, "seed": args.seed,
            "total time (s)": round(time.perf_counter() - t_all, 1),
            "generated": time.strftime("%Y-%m-%d %H:%M:%S")}
    md, html = write_report(rows, out_dir, meta)
    print(f"report: {md} and {html}")
    if any(r.status == "fail" for r in rows):
        return 1
    if not rows or any(r.status == "inconclusive" for r in rows):
        return 3
    return 0
