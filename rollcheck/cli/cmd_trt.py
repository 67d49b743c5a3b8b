"""``rollcheck trt`` (Chiron's total-recovery-time heuristic) and ``rollcheck trt optimise``.

``rollcheck trt --ci CI --timeout T --recovery R --warmup W (--ratio U | --i-avg A --i-max M)``
prints the best/average/worst TRT; ``rollcheck trt optimise PROFILE --bound C`` fits latency and
TRT over profiling points (CSV or JSON, see ``pyimpl/intervals/profile.py``) and picks the CI with
the lowest predicted latency whose predicted TRT is at most ``C``.
"""

from __future__ import annotations

import argparse
from typing import Any

from rollcheck.cli._util import add_parser, emit_json

_FLAGS = {"ci": "--ci", "timeout": "--timeout", "recovery": "--recovery", "warmup": "--warmup",
          "ratio": "--ratio", "threshold": "--threshold", "bound": "--bound", "ci_range": "--ci-min/--ci-max"}


def register(sub: Any) -> None:
    """Add ``rollcheck trt`` (and ``trt optimise``) to ``sub``."""
    p = add_parser(sub, "trt", "Chiron's total recovery time (best/average/worst) for a checkpoint interval; "
                   "'trt optimise' picks a CI under a TRT bound.", _trt)
    p.add_argument("--ci", type=float, default=None, help="checkpoint interval (same unit as the periods)")
    _period_args(p)
    p.add_argument("--case", choices=["best", "average", "worst", "all"], default="all",
                   help="E = 0, CI/2 or CI (default: all three)")
    _reading_args(p)
    p.add_argument("--json", action="store_true", help="print one JSON document")
    tsub = p.add_subparsers(dest="trt_command", metavar="SUBCOMMAND", parser_class=type(p))
    o = add_parser(tsub, "optimise", "Fit P(CI) and A(CI) (2nd-order polynomials) to profiling points and pick the "
                   "CI minimising latency under A(CI) <= --bound.", _optimise, aliases=["optimize"])
    o.add_argument("profile", metavar="PROFILE", help="profiling points: .csv (header row) or .json")
    o.add_argument("--bound", type=float, required=True, metavar="C_TRT", help="upper bound on the TRT")
    o.add_argument("--case", choices=["best", "average", "worst"], default="worst",
                   help="case used when TRT is estimated (default worst, as in the paper's experiments)")
    _reading_args(o)
    _period_args(o, defaults_note=" (default for rows without this column)")
    o.add_argument("--ci-min", type=float, default=None, help="search range start (default: smallest profiled CI)")
    o.add_argument("--ci-max", type=float, default=None, help="search range end (default: largest profiled CI)")
    o.add_argument("--json", action="store_true", help="print one JSON document")


def _period_args(p: argparse.ArgumentParser, defaults_note: str = "") -> None:
    p.add_argument("--timeout", type=float, default=None, help="heartbeat timeout T_o" + defaults_note)
    p.add_argument("--recovery", type=float, default=None, help="recovery time R" + defaults_note)
    p.add_argument("--warmup", type=float, default=None, help="warm-up time W" + defaults_note)
    p.add_argument("--ratio", type=float, default=None, help="U = I_avg/I_max, 0 <= U < 1" + defaults_note)
    p.add_argument("--i-avg", type=float, default=None, help="average ingress rate (with --i-max instead of --ratio)")
    p.add_argument("--i-max", type=float, default=None, help="maximum ingress rate")


def _reading_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--reading", choices=["eq3", "eq2"], default="eq3",
                   help="eq3 (default): a_1 = E+T_o+R+W as in Eqs. 3-4; eq2: a_1 = (E+T_o+R+W)·U as in Eq. 2")
    p.add_argument("--threshold", type=float, default=1.0,
                   help="stop at the first catch-up term below this (default 1 time unit)")


def _ratio(args: argparse.Namespace) -> float | None:
    from rollcheck.pyimpl.errors import InvalidInputError

    if args.ratio is not None:
        if args.i_avg is not None or args.i_max is not None:
            raise InvalidInputError("give either --ratio or --i-avg/--i-max, not both", location="--ratio")
        return float(args.ratio)
    if args.i_avg is None and args.i_max is None:
        return None
    if args.i_avg is None or args.i_max is None:
        raise InvalidInputError("--i-avg and --i-max go together", location="--i-avg/--i-max")
    if args.i_max <= 0 or args.i_avg < 0:
        raise InvalidInputError(f"need I_avg >= 0 and I_max > 0, got {args.i_avg} and {args.i_max}",
                                location="--i-avg/--i-max")
    return args.i_avg / args.i_max


def _flagged(fn: Any, *a: Any, **kw: Any) -> Any:
    from rollcheck.pyimpl.errors import InvalidInputError

    try:
        return fn(*a, **kw)
    except InvalidInputError as e:
        if e.source:
            raise
        raise InvalidInputError(e.reason, location=_FLAGS.get(e.location or "", e.location)) from None


def _trt(args: argparse.Namespace) -> int:
    from rollcheck.pyimpl.errors import InvalidInputError
    from rollcheck.pyimpl.intervals import CASES, trt_breakdown, trt_limit

    ratio = _ratio(args)
    missing = [f for f, v in (("--ci", args.ci), ("--timeout", args.timeout), ("--recovery", args.recovery),
                              ("--warmup", args.warmup), ("--ratio or --i-avg/--i-max", ratio)) if v is None]
    if missing:
        raise InvalidInputError(f"missing {', '.join(missing)}", location="rollcheck trt")
    cases = CASES if args.case == "all" else (args.case,)
    kw = {"timeout": args.timeout, "recovery": args.recovery, "warmup": args.warmup, "ratio": ratio,
          "reading": args.reading}
    res = {c: _flagged(trt_breakdown, args.ci, case=c, threshold=args.threshold, **kw) for c in cases}
    lim = {c: _flagged(trt_limit, args.ci, case=c, **kw) for c in cases}
    if args.json:
        emit_json({
            "ci": args.ci, "ratio": ratio, "reading": args.reading, "threshold": args.threshold,
            "trt": {c: b.trt for c, b in res.items()},
            "terms": {c: {"reprocess": b.reprocess, "first_term": b.first_term, "terms": b.terms,
                          "catch_up": b.catch_up} for c, b in res.items()},
            "limit": lim,
        })
    else:
        for c, b in res.items():
            print(f"{c:<8} TRT = {b.trt:.6g}  (E = {b.reprocess:g}, a_1 = {b.first_term:.6g}, n = {b.terms}, "
                  f"S_n = {b.catch_up:.6g}; limit {lim[c]:.6g})")
    return 0


def _optimise(args: argparse.Namespace) -> int:
    from rollcheck.pyimpl.errors import InvalidInputError
    from rollcheck.pyimpl.intervals import optimise_ci
    from rollcheck.pyimpl.intervals.profile import load_profile

    defaults = {"timeout": args.timeout, "recovery": args.recovery, "warmup": args.warmup, "ratio": _ratio(args)}
    points = load_profile(args.profile, case=args.case, reading=args.reading, threshold=args.threshold,
                          defaults=defaults)
    rng = None
    if args.ci_min is not None or args.ci_max is not None:
        lo = args.ci_min if args.ci_min is not None else min(p.ci for p in points)
        hi = args.ci_max if args.ci_max is not None else max(p.ci for p in points)
        rng = (lo, hi)
    try:
        ch = optimise_ci(points, args.bound, ci_range=rng)
    except InvalidInputError as e:
        raise InvalidInputError(e.reason, source=args.profile,
                                location=_FLAGS.get(e.location or "", e.location)) from None

    def fit(f: Any) -> dict[str, Any]:
        return {"coefficients": list(f.coefficients), "r_squared": f.r_squared}

    if args.json:
        emit_json({"ci": ch.ci, "latency": ch.latency, "trt": ch.trt, "bound": ch.bound, "case": args.case,
                   "reading": args.reading, "points": len(points), "ci_range": list(ch.ci_range),
                   "feasible": [list(iv) for iv in ch.feasible],
                   "fits": {"latency": fit(ch.latency_fit), "trt": fit(ch.trt_fit)}})
    else:
        print(f"CI = {ch.ci:.6g}: predicted latency {ch.latency:.6g}, predicted TRT {ch.trt:.6g} <= {ch.bound:g}")
        print(f"fits over {len(points)} points: R² latency {ch.latency_fit.r_squared:.3f}, "
              f"TRT {ch.trt_fit.r_squared:.3f}; feasible CIs {[tuple(round(x, 6) for x in iv) for iv in ch.feasible]}")
    return 0
