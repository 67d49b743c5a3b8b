"""``rollcheck spans SYSTEM --json``: globally consistent rollback spans (Falkirk Wheel §3.3)."""

from __future__ import annotations

import argparse
from typing import Any

from rollcheck.cli._util import add_parser, emit_json


def register(sub: Any) -> None:
    p = add_parser(sub, "spans", "Compute the Falkirk Wheel rollback spans of a span system "
                   "(rollcheck.spans/1).", _run)
    p.add_argument("system", metavar="SYSTEM", help="a rollcheck.spans/1 JSON file")
    p.add_argument("--json", action="store_true", help="print one JSON document")
    p.add_argument("--normalise-phi", "--normalize-phi", dest="normalise_phi", action="store_true",
                   help="replace φ(c_k) by the union of φ(c_0..c_k) instead of rejecting non-monotone φ")
    p.add_argument("--order", choices=["fifo", "lifo", "random", "rounds"], default="fifo",
                   help="evaluation order (every order gives the same answer)")
    p.add_argument("--seed", type=int, default=0, help="seed of --order random")
    p.add_argument("--stats", action="store_true", help="add examinations/decreases to the output")


def _run(args: argparse.Namespace) -> int:
    from rollcheck.pyimpl.spans.fixpoint import solve_levels
    from rollcheck.pyimpl.spans.system import load_system

    s = load_system(args.system, phi="normalise" if args.normalise_phi else "reject")
    r = solve_levels(s, args.order, args.seed)
    spans = {p.name: p.label(r.levels[i]) for i, p in enumerate(s.processors)}
    out: dict[str, Any] = {"spans": spans}
    if args.stats:
        out["stats"] = {"order": args.order, "seed": args.seed, "examinations": r.examinations,
                        "decreases": r.decreases}
    if args.json:
        emit_json(out)
    else:
        for name, v in spans.items():
            print(f"{name}: {v}")
    return 0
