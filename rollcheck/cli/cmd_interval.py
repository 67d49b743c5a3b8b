"""``rollcheck interval optimal|utilization|compare|simulate``: checkpoint-interval models.

Formulas: ``pyimpl/intervals/`` (utilization model, Eqs. 1–10 of Jayasekara et al.);
simulation: ``pyimpl/intervals/sim.py`` and ``spark_replay/interval_sweep.py``. Units are whatever
the user uses, as long as they are consistent (the failure rate is per that unit).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from rollcheck.cli._util import add_parser, emit_json

_FLAGS = {
    "interval": "--interval",
    "failure_rate": "--failure-rate",
    "checkpoint_cost": "--checkpoint-cost",
    "restart_cost": "--restart-cost",
    "depth": "--depth",
    "token_delay": "--token-delay",
    "runs": "--runs",
    "horizon_failures": "--horizon-failures",
}


def register(sub: Any) -> None:
    fam = sub.add_parser("interval", help="Checkpoint-interval models: optimum, utilization, baselines, simulation.",
                         description="Checkpoint-interval models (utilization model of Jayasekara et al.).")
    fam.set_defaults(_parser=fam)
    isub = fam.add_subparsers(dest="interval_command", metavar="SUBCOMMAND", parser_class=type(fam))

    p = add_parser(isub, "optimal", "The interval T* maximising utilization (Lambert W, principal branch).", _optimal)
    _model_args(p, interval=False)
    p = add_parser(isub, "utilization", "Utilization of a given interval (Eq. 10 and its special cases).", _utilization)
    _model_args(p, interval=True)
    p = add_parser(isub, "compare", "T* against Young, Daly (first order) and Zhuang et al., and the utilization each achieves.",
                   _compare)
    _model_args(p, interval=False)
    p.add_argument("--against", type=float, action="append", default=[], metavar="T",
                   help="also compare with this fixed interval (repeatable), e.g. a default of 30 minutes")
    p = add_parser(isub, "simulate", "Monte Carlo simulation of the modelled system against the closed form.", _simulate)
    _model_args(p, interval=False)
    p.add_argument("--interval", type=float, default=None, help="period T (default: T*)")
    p.add_argument("--runs", type=int, default=250, help="independent runs (default 250)")
    p.add_argument("--horizon-failures", type=float, default=2000.0,
                   help="each run lasts this many mean times to failure (default 2000, i.e. 2000/λ)")
    p.add_argument("--seed", type=int, default=0, help="seed (printed; same seed, same result)")
    p.add_argument("--spark", action="store_true", help="spread the runs over Spark tasks")
    p.add_argument("--master", default=None, help="Spark master (default local[2]; implies --spark)")


def _model_args(p: argparse.ArgumentParser, *, interval: bool) -> None:
    if interval:
        p.add_argument("--interval", type=float, required=True, metavar="T", help="checkpoint period T (> c)")
    p.add_argument("--failure-rate", type=float, required=True, metavar="L", help="failures per time unit (λ)")
    p.add_argument("--checkpoint-cost", type=float, required=True, metavar="C", help="checkpoint cost c")
    p.add_argument("--restart-cost", type=float, default=0.0, metavar="R", help="detect + restart cost R (default 0)")
    p.add_argument("--depth", type=int, default=1, metavar="N", help="operators on the critical path n (default 1)")
    p.add_argument("--token-delay", type=float, default=0.0, metavar="D", help="token delay δ per hop (default 0)")
    p.add_argument("--json", action="store_true", help="print one JSON document")


def _flagged(fn: Any, *a: Any, **kw: Any) -> Any:
    from rollcheck.pyimpl.errors import InvalidInputError

    try:
        return fn(*a, **kw)
    except InvalidInputError as e:
        raise InvalidInputError(e.reason, location=_FLAGS.get(e.location or "", e.location)) from None


def _params(args: argparse.Namespace) -> dict[str, Any]:
    return {"failure_rate": args.failure_rate, "checkpoint_cost": args.checkpoint_cost,
            "restart_cost": args.restart_cost, "depth": args.depth, "token_delay": args.token_delay}


def _equation(args: argparse.Namespace) -> str:
    if args.failure_rate == 0:
        return "1"
    if args.depth > 1 and args.token_delay > 0:
        return "10"
    return "4" if args.restart_cost > 0 else "3"


def _optimal(args: argparse.Namespace) -> int:
    from rollcheck.pyimpl.intervals import optimal_interval, utilization

    t = _flagged(optimal_interval, args.failure_rate, args.checkpoint_cost)
    u = _flagged(utilization, t, **_params(args))
    if args.json:
        emit_json({"interval": t, "utilization": u, "equation": _equation(args)})
    else:
        print(f"T* = {t:.6g}   U(T*) = {u:.6g}   (Eq. {_equation(args)})")
    return 0


def _utilization(args: argparse.Namespace) -> int:
    from rollcheck.pyimpl.intervals import utilization

    u = _flagged(utilization, args.interval, **_params(args))
    if args.json:
        emit_json({"utilization": u, "equation": _equation(args)})
    else:
        print(f"U({args.interval:g}) = {u:.6g}   (Eq. {_equation(args)})")
    return 0


def _compare(args: argparse.Namespace) -> int:
    from rollcheck.pyimpl.intervals import baseline_intervals, utilization

    b = _flagged(baseline_intervals, args.failure_rate, args.checkpoint_cost, args.restart_cost)
    t_star = b.pop("optimal")
    u_star = _flagged(utilization, t_star, **_params(args))
    rows: dict[str, dict[str, Any]] = {}
    named = list(b.items()) + [(f"fixed:{t:g}", t) for t in args.against]
    for name, t in named:
        if t <= args.checkpoint_cost:
            rows[name] = {"interval": t, "utilization": None, "gain_percent": None,
                          "note": "interval <= checkpoint cost: no useful work"}
            continue
        u = _flagged(utilization, t, **_params(args))
        gain = 100.0 * (u_star / u - 1.0) if u > 0 else None
        rows[name] = {"interval": t, "utilization": u, "gain_percent": gain}
    if args.json:
        emit_json({"interval": t_star, "utilization": u_star, "equation": _equation(args), "baselines": rows})
    else:
        print(f"{'model':<14}{'interval':>14}{'utilization':>14}{'T* gain %':>12}")
        print(f"{'T* (ours)':<14}{t_star:>14.6g}{u_star:>14.6g}{'':>12}")
        for name, r in rows.items():
            uu = "n/a" if r["utilization"] is None else f"{r['utilization']:.6g}"
            gg = "n/a" if r["gain_percent"] is None else f"{r['gain_percent']:.3g}"
            print(f"{name:<14}{r['interval']:>14.6g}{uu:>14}{gg:>12}")
    return 0


def _simulate(args: argparse.Namespace) -> int:
    from rollcheck.pyimpl.errors import InvalidInputError
    from rollcheck.pyimpl.intervals import optimal_interval
    from rollcheck.pyimpl.intervals.sim import SimConfig, simulate_runs

    if args.runs < 2:
        raise InvalidInputError(f"need at least 2 runs for a standard error, got {args.runs}", location="--runs")
    t = args.interval if args.interval is not None else _flagged(optimal_interval, args.failure_rate, args.checkpoint_cost)
    cfg = _flagged(SimConfig, t, **_params(args))
    print(f"rollcheck interval simulate: seed={args.seed} runs={args.runs} horizon={args.horizon_failures:g}/λ",
          file=sys.stderr)
    timing = None
    if args.spark or args.master:
        from rollcheck.spark_replay.interval_sweep import spark_sweep

        res, timing = _flagged(spark_sweep, [cfg], args.runs, args.horizon_failures, args.seed, master=args.master)
        s = res[0]
    else:
        s = _flagged(simulate_runs, cfg, args.runs, args.horizon_failures, args.seed)
    out = s.to_dict()
    out["within_3_se"] = abs(s.z) <= 3
    if timing is not None:
        out["spark"] = {"master": timing.master, "partitions": timing.partitions,
                        "startup_seconds": timing.startup, "job_seconds": timing.job}
    if args.json:
        emit_json(out)
    else:
        print(f"T = {t:.6g}: simulated U = {s.mean:.5f} ± {s.std:.5f} (sd), se {s.se:.2g}; "
              f"model {s.model:.5f}; z = {s.z:.2f}; {s.failures} failures simulated")
    return 0
