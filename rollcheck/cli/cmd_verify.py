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
    p.add_argument("--out", default="report", help="report folder (default: report); an existing folder must be "
                   "empty or hold a previous rollcheck report (else --force)")
    p.add_argument("--force", action="store_true",
                   help="write into a non-empty --out folder that does not hold a previous rollcheck report")
    p.add_argument("--seed", type=int, default=None,
                   help="seed for every random run (default: ROLLCHECK_SEED, else 0; printed and reported)")
    p.add_argument("--only", action="append", default=[], metavar="SECTION",
                   help="run only this section (repeatable)")


_REPORT_FILES = ("report.md", "index.html", "results.json", "meta.json")


def _check_out_dir(path: str, force: bool) -> Path:
    """``--out`` is checked before the run: a file, an unwritable folder, or a non-empty folder
    that does not hold a previous rollcheck report (unless ``force``) → exit 2 up front."""
    from rollcheck.cli._util import check_output_path
    from rollcheck.pyimpl.errors import InvalidInputError

    out = Path(path)
    if out.exists() and not out.is_dir():
        raise InvalidInputError(f"{path} exists and is not a folder", location="--out")
    check_output_path(out, "--out", directory=True)
    if out.is_dir() and any(out.iterdir()) and not force:
        md = out / "report.md"
        ours = False
        try:
            with open(md, encoding="utf-8", errors="replace") as fh:
                ours = fh.readline().startswith("# rollcheck verification report")
        except OSError:
            ours = False
        if not ours:
            present = [f for f in _REPORT_FILES if (out / f).exists()]
            what = (f"holds {', '.join(present)} not written by rollcheck" if present
                    else "is not empty and holds no previous rollcheck report")
            raise InvalidInputError(f"{path} {what}; choose another folder or pass --force to write into it",
                                    location="--out")
    return out.resolve()


def _seed(args: argparse.Namespace) -> tuple[int, str]:
    """The seed in use and where it came from (``--seed``, ``ROLLCHECK_SEED`` or the default 0)."""
    from rollcheck.properties.profiles import seed as env_seed

    if args.seed is not None:
        return args.seed, "--seed"
    s = env_seed()
    return (s, "ROLLCHECK_SEED") if s is not None else (0, "default")


def _run(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from rollcheck.properties.profiles import load_profile
    from rollcheck.properties.profiles import seed as env_seed
    from rollcheck.suite import Row, VerifyContext, discover_sections, write_report

    out_dir = _check_out_dir(args.out, args.force)
    seed, seed_from = _seed(args)
    profile = args.profile or ("ci" if args.quick else "verify")
    load_profile(profile)
    console = Console(stderr=True)
    ctx = VerifyContext(profile=profile, quick=args.quick, out_dir=out_dir, seed=seed,
                        log=lambda s: console.print(s, highlight=False))
    hyp = env_seed()
    hyp_seed = "derandomised (no ROLLCHECK_SEED)" if hyp is None else str(hyp)
    console.print(f"rollcheck verify: profile={profile} quick={args.quick} seed={seed} ({seed_from}) "
                  f"hypothesis seed={hyp_seed}")
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
    meta = {"profile": profile, "quick": args.quick, "seed": f"{seed} ({seed_from})",
            "hypothesis seed": hyp_seed,
            "total time (s)": round(time.perf_counter() - t_all, 1),
            "generated": time.strftime("%Y-%m-%d %H:%M:%S")}
    md, html = write_report(rows, out_dir, meta)
    import json

    from rollcheck.pyimpl.patternio import atomic_write_text

    # results.json holds the rows; the run's seed and profile go next to it
    atomic_write_text(out_dir / "meta.json", json.dumps({**meta, "seed": seed, "seed_from": seed_from,
                                                          "hypothesis_seed": hyp}, indent=1) + "\n")
    print(f"report: {md} and {html}")
    if any(r.status == "fail" for r in rows):
        return 1
    if not rows or any(r.status == "inconclusive" for r in rows):
        return 3
    return 0
