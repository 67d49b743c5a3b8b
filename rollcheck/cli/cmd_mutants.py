"""``rollcheck mutants [--profile ci|verify] [--out DIR] --json``: run the mutation catalogue.

Every ``rollcheck.properties.mutants_*`` module is loaded; one runner
(:func:`rollcheck.properties.mutation.run_mutant`) runs each mutant's properties. Unsafe mutants are
*killed* by a property violation (``killed_by``; the counterexample saved as ``DIR/<name>.json``, a
reproducer ``DIR/<name>.replay.json`` that ``--replay`` reads back, and a picture ``DIR/<name>.png``)
or *survived*; safe (costlier) variants are reported as *safe* with their cost ratio and never count
as killed; *error* means the run crashed or its evidence could not be written. Exit 1 if an unsafe
mutant survived (or a safe one was killed), 4 if any verdict is "error".
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from rollcheck.cli._util import add_parser, emit_json
from rollcheck.properties.catalogue import run_catalogue
from rollcheck.pyimpl.verdict import Check, exit_code

__all__ = ["register", "run_catalogue"]


def register(sub: Any) -> None:
    """Add ``rollcheck mutants`` to ``sub``."""
    p = add_parser(sub, "mutants", "Run the mutation catalogue: every deliberately broken variant must "
                   "be killed by the properties; safe variants are reported with their cost ratio.", _run)
    p.add_argument("--profile", choices=["ci", "verify"], default=None,
                   help="Hypothesis budget (default: $ROLLCHECK_PROFILE or ci)")
    p.add_argument("--out", metavar="DIR", default="report/mutants",
                   help="where counterexamples (.json) and pictures (.png) go (default report/mutants)")
    p.add_argument("--only", metavar="NAME", action="append", default=[],
                   help="run only this mutant (repeatable)")
    p.add_argument("--no-pictures", action="store_true", help="do not draw PNG pictures")
    p.add_argument("--timeout", type=float, default=None, metavar="SECONDS",
                   help="per-mutant time limit (default 300 for ci, 1800 for verify); a mutant that "
                        "runs out of time is reported as survived")
    p.add_argument("--area", action="append", default=[], metavar="AREA",
                   help="run only the mutants of this area (repeatable)")
    p.add_argument("--replay", metavar="FILE", default=None,
                   help="read a reproducer (NAME.replay.json) back and raise its violation again "
                        "(exit 1 when reproduced, 3 when not)")
    p.add_argument("--json", action="store_true", help="print one JSON document")




def _replay(path: str, as_json: bool) -> int:
    from rollcheck.properties.reproducer import replay

    e = replay(path)
    if as_json:
        emit_json({"reproduced": True, "violation": str(e)})
    else:
        print(f"reproduced: {e}")
    return exit_code([Check.violated("reproducer", str(e))])


def _run(args: argparse.Namespace) -> int:
    from rollcheck.properties.profiles import active_profile
    from rollcheck.properties.profiles import seed as env_seed

    if args.replay:
        return _replay(args.replay, args.json)
    profile = args.profile or active_profile()
    seed = env_seed()  # empty = derandomised; not an integer: exit 2
    print(f"mutants: profile {profile}, seed {seed if seed is not None else 'derandomised'}", file=sys.stderr)
    if args.timeout is not None and args.timeout <= 0:
        from rollcheck.pyimpl.errors import InvalidInputError

        raise InvalidInputError(f"--timeout must be > 0, got {args.timeout}", location="--timeout")
    from rollcheck.properties.registry import AREAS

    bad_areas = [a for a in args.area if a not in AREAS]
    if bad_areas:
        from rollcheck.pyimpl.errors import InvalidInputError

        raise InvalidInputError(f"unknown area(s) {bad_areas} (one of {', '.join(AREAS)})", location="--area")
    records = run_catalogue(profile, args.out, args.only, not args.no_pictures,
                            log=lambda s: print(s, file=sys.stderr, flush=True),
                            timeout=args.timeout if args.timeout is not None else -1.0, areas=args.area)
    counts = {v: sum(1 for r in records if r["verdict"] == v) for v in ("killed", "survived", "safe", "error")}
    bad = [r["name"] for r in records if not r["safe"] and r["verdict"] == "survived"]
    errors = [r["name"] for r in records if r["verdict"] == "error"]
    safe_killed = [r["name"] for r in records if r["safe"] and r["verdict"] == "killed"]
    if args.json:
        emit_json({"mutants": records, "profile": profile, "seed": seed, **counts, "survived_unsafe": bad,
                   "errors": errors, "safe_killed": safe_killed})
    else:
        for r in records:
            extra = f" ratio {r['ratio']}" if r["ratio"] is not None else ""
            where = f" -> {r['counterexample']}" if r["counterexample"] else ""
            print(f"{r['name']:32s} {r['verdict']:9s}{extra}{where}")
        print(f"{counts['killed']} killed, {counts['safe']} safe, {counts['survived']} survived, "
              f"{counts['error']} error")
    if not records:
        from rollcheck.pyimpl.errors import InconclusiveError

        raise InconclusiveError("no mutant was run")
    if errors:
        print(f"error: the catalogue could not judge {', '.join(errors)}", file=sys.stderr)
        return 4
    checks = [Check.violated(r["name"], "an unsafe mutant survived") if r["name"] in bad else
              Check.violated(r["name"], "a safe variant was killed") if r["name"] in safe_killed else
              Check.held(r["name"], str(r["verdict"])) for r in records]
    return exit_code(checks)
