"""``rollcheck interval optimal|utilization|compare|simulate``: checkpoint-interval models.

Formulas: ``pyimpl/intervals.py`` (utilization model, Eqs. 1–10 of Jayasekara et al.);
simulation: ``pyimpl/intervals/sim.py`` and ``spark_replay/jobs/interval_sweep.py``. Units are whatever
the user uses, as long as they are consistent (the failure rate is per that unit).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from rollcheck.cli._util import add_allow_large, add_parser, check_limit, emit_json, progress

# Upper bounds of ``interval simulate`` (specs/intervals.md, specs/cli.md), checked before any work.
MAX_PERIODS = 1e306
"""Most checkpoint periods one simulated run may count: their number (horizon / interval, summed
over a run) must stay a finite float; 5e-324 as an interval made it infinite, then NaN."""
MAX_RUNS = 100_000
MAX_HORIZON_FAILURES = 1_000_000.0
MAX_CYCLES = 1e8  # runs × horizon_failures × e^{λR}: the expected failure/restart draws of a simulation
MAX_LAMBDA_RESTART = 10.0  # λ·R: e^{λR} − 1 restart attempts per failure on average
HARD_LAMBDA_RESTART = 700.0  # beyond this a restart (practically) never succeeds: e^{-λR} underflows
MAX_SEED = 2**63 - 1

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
    """Add ``rollcheck interval`` (``optimal``, ``utilization``, ``compare``, ``simulate``)."""
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
    add_allow_large(p)


def _model_args(p: argparse.ArgumentParser, *, interval: bool) -> None:
    if interval:
        p.add_argument("--interval", type=float, required=True, metavar="T", help="checkpoint period T (> c)")
    p.add_argument("--failure-rate", type=float, required=True, metavar="L", help="failures per time unit (λ)")
    p.add_argument("--checkpoint-cost", type=float, required=True, metavar="C", help="checkpoint cost c")
    p.add_argument("--restart-cost", type=float, default=0.0, metavar="R", help="detect + restart cost R (default 0)")
    p.add_argument("--depth", type=int, default=1, metavar="N", help="operators on the critical path n (default 1)")
    p.add_argument("--token-delay", type=float, default=0.0, metavar="D", help="token delay δ per hop (default 0)")
    p.add_argument("--json", action="store_true", help="print one JSON document")


def _flagged(fn: Any, *a: Any, _derived_interval: bool = False, **kw: Any) -> Any:
    """Call ``fn``, naming the flag of an offending parameter.

    An interval the user did not pass (T* computed from --failure-rate/--checkpoint-cost) is named
    as such.
    """
    from rollcheck.pyimpl.errors import InvalidInputError

    try:
        return fn(*a, **kw)
    except InvalidInputError as e:
        loc = _FLAGS.get(e.location or "", e.location)
        if e.location == "interval" and _derived_interval:
            loc = "T* (computed from --failure-rate and --checkpoint-cost)"
        raise InvalidInputError(e.reason, location=loc) from None


def _t_star(args: argparse.Namespace) -> float:
    """T* for the flags; when λ·c underflows double precision, its limit √(2c/λ) (exact there)."""
    import math

    from rollcheck.pyimpl.errors import InvalidInputError
    from rollcheck.pyimpl.intervals import optimal_interval

    t = _flagged(optimal_interval, args.failure_rate, args.checkpoint_cost)
    lam, c = float(args.failure_rate), float(args.checkpoint_cost)
    if not t > c and lam * c < 1e-200:
        # T* = √(2c/λ)·(1 + O(√(cλ))): at this λ·c the correction is below double precision.
        t = math.sqrt(2.0 * c) / math.sqrt(lam)
    if not (math.isfinite(t) and t > c):
        raise InvalidInputError(f"T* cannot be computed in double precision for λ = {lam:g} and c = {c:g}",
                                location="--failure-rate/--checkpoint-cost")
    return t


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
    from rollcheck.pyimpl.intervals import utilization

    t = _t_star(args)
    u = _flagged(utilization, t, _derived_interval=True, **_params(args))
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
    import math

    from rollcheck.pyimpl.errors import InvalidInputError
    from rollcheck.pyimpl.intervals import baseline_intervals, utilization

    for t in args.against:
        if not (math.isfinite(t) and t > 0):
            raise InvalidInputError(f"must be a finite interval > 0, got {t}", location="--against")
    b = _flagged(baseline_intervals, args.failure_rate, args.checkpoint_cost, args.restart_cost)
    b.pop("optimal")
    t_star = _t_star(args)
    u_star = _flagged(utilization, t_star, _derived_interval=True, **_params(args))
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


def _check_simulation_bounds(args: argparse.Namespace) -> None:
    """Every option that scales the simulation's work or memory, before any work starts."""
    import math

    from rollcheck.pyimpl.errors import InvalidInputError

    big = args.allow_large
    if args.runs < 2:
        raise InvalidInputError(f"need at least 2 runs for a standard error, got {args.runs}", location="--runs")
    check_limit(args.runs, MAX_RUNS, "--runs", allow_large=big)
    if not args.horizon_failures > 0 or not math.isfinite(args.horizon_failures):
        raise InvalidInputError(f"must be a finite number > 0, got {args.horizon_failures}", location="--horizon-failures")
    check_limit(args.horizon_failures, MAX_HORIZON_FAILURES, "--horizon-failures", allow_large=big)
    if not 0 <= args.seed <= MAX_SEED:
        raise InvalidInputError(f"must be in 0..{MAX_SEED}, got {args.seed}", location="--seed")
    lam, r = float(args.failure_rate), float(args.restart_cost)
    if math.isfinite(lam) and math.isfinite(r) and lam > 0 and r > 0:
        lr = lam * r
        if lr > HARD_LAMBDA_RESTART:
            raise InvalidInputError(f"λ·R = {lr:g}: a restart would practically never complete "
                                    f"(probability e^-{lr:g}); nothing to simulate",
                                    location="--failure-rate/--restart-cost")
        check_limit(lr, MAX_LAMBDA_RESTART, "--failure-rate/--restart-cost", allow_large=big,
                    what=f"λ·R (e^{{λR}} − 1 = {math.expm1(lr):.3g} restart attempts per failure):")
        cycles = args.runs * args.horizon_failures * math.exp(lr)
        check_limit(cycles, MAX_CYCLES, "--runs/--horizon-failures/--restart-cost", allow_large=big,
                    what="runs × horizon-failures × e^{λR} =")
    else:
        check_limit(args.runs * args.horizon_failures, MAX_CYCLES, "--runs/--horizon-failures",
                    allow_large=big, what="runs × horizon-failures =")


def _simulate(args: argparse.Namespace) -> int:
    from rollcheck.pyimpl.intervals.sim import SimConfig, run_rng, simulate_run, summarise

    _check_simulation_bounds(args)
    derived = args.interval is None
    t = _t_star(args) if derived else args.interval
    cfg = _flagged(SimConfig, t, _derived_interval=derived, **_params(args))
    from rollcheck.pyimpl.errors import InvalidInputError

    periods = args.horizon_failures / cfg.failure_rate / cfg.interval
    if not periods <= MAX_PERIODS:  # the count of completed periods would overflow (NaN)
        raise InvalidInputError(f"interval {cfg.interval:g} gives {periods:.3g} checkpoint periods per run "
                                f"(horizon {args.horizon_failures:g}/λ); the limit is {MAX_PERIODS:g}",
                                location="--interval" if not derived else "--failure-rate/--checkpoint-cost")
    print(f"rollcheck interval simulate: seed={args.seed} runs={args.runs} horizon={args.horizon_failures:g}/λ",
          file=sys.stderr)
    timing = None
    if args.spark or args.master:
        from rollcheck.spark_replay.jobs.interval_sweep import spark_sweep

        res, timing = _flagged(spark_sweep, [cfg], args.runs, args.horizon_failures, args.seed, master=args.master)
        s = res[0]
    else:
        # simulate_runs, run by run, so that a long simulation shows its progress
        horizon = args.horizon_failures / cfg.failure_rate
        vals, fails = [], 0
        with progress(args.runs, "simulating runs") as advance:
            for r in range(args.runs):
                one = _flagged(simulate_run, cfg, horizon, run_rng(args.seed, 0, r))
                vals.append(one.utilization)
                fails += one.failures
                advance()
        s = summarise(0, cfg, vals, fails, horizon, args.seed)
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
