"""``rollcheck elastic simulate|sweep``: SPATE elastic upstream backup (``docs/elastic.md``).

``simulate`` runs one seeded pipeline (from a ``rollcheck.elastic/1`` file and/or flags), with
its scaling events and at most one failure, and checks it against the failure-free semantics.
``sweep`` fails every operator task at every step of seeded random pipelines.
Exit codes: 0 all checks hold, 1 a check failed, 2 bad input, 3 nothing was examined.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from rollcheck.cli._util import (
    add_allow_large,
    add_parser,
    check_limit,
    check_output_path,
    emit_json,
    progress,
)
from rollcheck.pyimpl.verdict import Check, exit_code

MAX_CONFIGS = 100  # elastic sweep --configs (each pipeline is swept at every step: ~5-15 s each)
MAX_SEED = 2**63 - 1


def register(sub: Any) -> None:
    """Add ``rollcheck elastic`` (``simulate``, ``sweep``) to ``sub``."""
    parser = add_parser(sub, "elastic", "SPATE elastic upstream backup: simulate pipelines with "
                        "scaling and one failure, and check exactly-once output.", None)
    parser.set_defaults(handler=None)
    inner = parser.add_subparsers(dest="elastic_command", metavar="SUBCOMMAND", parser_class=type(parser))

    p = add_parser(inner, "simulate", "Run one pipeline (optionally with one failure) and check it.", _simulate)
    p.add_argument("config", nargs="?", metavar="CONFIG", help="a rollcheck.elastic/1 JSON file (flags override it)")
    p.add_argument("--keys", type=int, help="number of keys (default 6)")
    p.add_argument("--ops", help="comma-separated operators: affine, filter, sum, max, count (default affine,sum)")
    p.add_argument("--parallelism", help="comma-separated initial task counts, one per operator (default 1 each)")
    p.add_argument("--rounds", type=int, help="input rounds (default 10)")
    p.add_argument("--rate", type=int, dest="max_rate", help="max events per round from the source (default 4)")
    p.add_argument("--ack-interval", type=int, help="rounds between ACK exchanges (default 1)")
    p.add_argument("--checkpoint-interval", type=int, help="rounds between checkpoints (default 3)")
    p.add_argument("--seed", type=int, help="workload seed (default 0; printed)")
    p.add_argument("--workload", choices=["uniform", "constant"],
                   help="events per round: uniform in 0..rate (default) or constant = rate")
    p.add_argument("--scale", action="append", default=None, metavar="ROUND:OP:N",
                   help="at ROUND, operator level OP (1-based) scales to N tasks (repeatable)")
    p.add_argument("--fail", metavar="STEP:OP:KEY[:PAR]",
                   help="before STEP, the task of level OP owning KEY fails (recovered by PAR tasks, default 1)")
    p.add_argument("--no-failure", action="store_true", help="ignore the failure of CONFIG")
    p.add_argument("--mutant", metavar="NAME",
                   help="run with the rules of a broken variant from properties/mutants_elastic.py "
                        "(e.g. elastic-no-dedup) to reproduce its counterexample")
    p.add_argument("--write-config", metavar="FILE", help="also write the effective config document to FILE")
    p.add_argument("--json", action="store_true", help="print one JSON document")
    add_allow_large(p)

    s = add_parser(inner, "sweep", "Fail every operator task at every step of seeded random pipelines.", _sweep)
    s.add_argument("--seed", type=int, default=0, help="seed of the random pipelines (printed)")
    s.add_argument("--configs", type=int, default=5, help="number of random pipelines (default 5)")
    s.add_argument("--stride", type=int, default=1, help="fail at every STRIDE-th step (default 1)")
    s.add_argument("--parallel", type=int, default=1, help="recover each failed task with N tasks (default 1)")
    s.add_argument("--json", action="store_true", help="print one JSON document")
    add_allow_large(s)


def _colon_ints(text: str, flag: str, optional_fourth: bool = False) -> list[int]:
    from rollcheck.pyimpl.errors import InvalidInputError

    parts = text.split(":")
    try:
        vals = [int(x) for x in parts]
    except ValueError:
        raise InvalidInputError(f"expected integers A:B:C, got {text!r}", location=flag) from None
    if len(vals) != 3 and not (optional_fourth and len(vals) == 4):
        raise InvalidInputError(f"expected three integers A:B:C{'[:D]' if optional_fourth else ''}, "
                                f"got {text!r}", location=flag)
    return vals


def _effective_doc(args: argparse.Namespace) -> dict[str, Any]:
    import json

    from rollcheck.pyimpl.elastic import FORMAT, Config, config_to_dict, load_config
    from rollcheck.pyimpl.errors import InvalidInputError

    if args.config:
        cfg, failure = load_config(args.config, allow_large=True)  # the bounds apply to the effective config
        doc = config_to_dict(cfg, failure)
    else:
        doc = config_to_dict(Config())
    if args.ops is not None:
        doc["ops"] = [o.strip() for o in args.ops.split(",") if o.strip()]
        if args.parallelism is None:
            doc["parallelism"] = [1] * len(doc["ops"])
    if args.parallelism is not None:
        try:
            doc["parallelism"] = [int(x) for x in args.parallelism.split(",")]
        except ValueError:
            raise InvalidInputError(f"expected comma-separated integers, got {args.parallelism!r}",
                                    location="--parallelism") from None
    for name in ("keys", "rounds", "max_rate", "ack_interval", "checkpoint_interval", "seed", "workload"):
        v = getattr(args, name)
        if v is not None:
            doc[name] = v
    if args.scale is not None:
        doc["scaling"] = []
        for text in args.scale:
            r, op, g = _colon_ints(text, "--scale")
            doc["scaling"].append({"round": r, "op": op, "parallelism": g})
    if args.fail is not None:
        vals = _colon_ints(args.fail, "--fail", optional_fourth=True)
        doc["failure"] = {"step": vals[0], "op": vals[1], "key": vals[2], "parallel": vals[3] if len(vals) > 3 else 1}
    if args.no_failure:
        doc["failure"] = None
    doc["format"] = FORMAT
    json.dumps(doc)
    return doc


_FLAG_OF = {"keys": "--keys", "rounds": "--rounds", "max_rate": "--rate", "ack_interval": "--ack-interval",
            "checkpoint_interval": "--checkpoint-interval", "seed": "--seed", "workload": "--workload",
            "ops": "--ops", "parallelism": "--parallelism", "scaling": "--scale", "failure": "--fail"}


def _as_flag_error(e: Any, args: argparse.Namespace) -> Any:
    """Name the flag (not the config field) when the offending value came from a flag."""
    from rollcheck.pyimpl.errors import InvalidInputError

    reason = e.reason.replace("allow_large lifts the limits", "pass --allow-large to run it anyway")
    field = (e.location or "").split(".")[0].split("[")[0]
    attr = {"max_rate": "max_rate", "scaling": "scale", "failure": "fail"}.get(field, field)
    if field in _FLAG_OF and (not args.config or getattr(args, attr, None) is not None):
        return InvalidInputError(reason, location=f"{_FLAG_OF[field]} ({e.location})"
                                 if e.location != field else _FLAG_OF[field])
    return InvalidInputError(reason, source=args.config or None, location=e.location)


def _simulate(args: argparse.Namespace) -> int:
    import json

    from rollcheck.pyimpl.elastic import (
        REFERENCE_RULES,
        config_from_dict,
        queue_bound,
        reference_output,
        simulate,
    )
    from rollcheck.pyimpl.errors import InvalidInputError
    from rollcheck.pyimpl.patternio import atomic_write_text

    if args.write_config:
        check_output_path(args.write_config, "--write-config")
    doc = _effective_doc(args)
    try:
        cfg, failure = config_from_dict(doc, source=args.config, allow_large=args.allow_large)
    except InvalidInputError as e:
        raise _as_flag_error(e, args) from None
    rules = REFERENCE_RULES
    if args.mutant:
        from rollcheck.properties.mutants_elastic import BROKEN_RULES

        if args.mutant not in BROKEN_RULES:
            raise InvalidInputError(f"unknown mutant {args.mutant!r}; known: {sorted(BROKEN_RULES)}",
                                    location="--mutant")
        rules = BROKEN_RULES[args.mutant]
    print(f"rollcheck elastic simulate: seed={cfg.seed}", file=sys.stderr)
    want = reference_output(cfg)
    clean = simulate(cfg, check_trim=True, rules=rules)
    hit = simulate(cfg, failure=failure, rules=rules) if failure is not None else None
    bounds = {lv: queue_bound(cfg, lv) for lv in range(len(cfg.ops) + 1)}
    checks: dict[str, bool | None] = {
        "failure_free_matches_reference": clean.output_by_key() == want,
        "exactly_once": None if hit is None else hit.output_by_key() == want,
        "queues_within_bound": all(clean.max_queue[lv] <= b for lv, b in bounds.items()),
        "trim_safe": not clean.violations,
    }
    # a failure step beyond the end of the run never happens: nothing about recovery was checked
    inconclusive = hit is not None and not hit.recoveries
    if args.write_config:
        atomic_write_text(args.write_config, json.dumps(doc, indent=2) + "\n")
    out = {
        "seed": cfg.seed,
        "rules": args.mutant or "reference",
        "config": doc,
        "reference_events": sum(len(v) for v in want.values()),
        "failure_free": clean.to_dict(),
        "with_failure": None if hit is None else hit.to_dict(),
        "queue_bound": {str(lv): b for lv, b in bounds.items()},
        "checks": checks,
        "ok": all(v is not False for v in checks.values()),
        "inconclusive": inconclusive,
    }
    if args.json:
        emit_json(out)
    else:
        if args.mutant:
            print(f"rules: broken variant {args.mutant}")
        print(f"pipeline: source -> {' -> '.join(cfg.ops)} -> sink; keys={cfg.keys} rounds={cfg.rounds} "
              f"rate<={cfg.max_rate} A={cfg.ack_interval} C={cfg.checkpoint_interval}")
        print(f"failure-free: {clean.steps} steps, {len(clean.sink)} sink events, "
              f"max queue per level {clean.max_queue} (bounds {bounds})")
        if hit is not None:
            for r in hit.recoveries:
                by = "" if r["recovered_by"] == [r["task"]] else f" recovered by {', '.join(r['recovered_by'])},"
                ck = ("no checkpoint (stateless)" if r["checkpoint_round"] is None
                      else f"restored checkpoint of round {r['checkpoint_round']}")
                print(f"failure: {r['task']} at step {r['step']} (round {r['round']}),{by} {ck}, "
                      f"replayed {r['replayed_events']} events, {hit.duplicates_dropped} duplicates dropped")
        for k, v in checks.items():
            print(f"{k}: {'-' if v is None else ('ok' if v else 'VIOLATED')}")
        if inconclusive and failure is not None and hit is not None:
            print(f"failure step {failure.step} is beyond the run's {hit.steps} steps: no failure happened")
    verdict = [Check.from_ok(k, v, applicable=False) for k, v in checks.items()]
    if inconclusive:
        verdict.append(Check.unchecked("failure-observed", "the failure step is beyond the end of the run"))
    return exit_code(verdict)


def _sweep(args: argparse.Namespace) -> int:
    import time

    from rollcheck.pyimpl.elastic import config_to_dict, failure_sweep, random_config
    from rollcheck.pyimpl.errors import InconclusiveError, InvalidInputError

    if args.configs < 0 or args.stride < 1 or args.parallel < 1:
        raise InvalidInputError("--configs must be ≥ 0, --stride and --parallel ≥ 1",
                                location="--configs/--stride/--parallel")
    check_limit(args.configs, MAX_CONFIGS, "--configs", allow_large=args.allow_large)
    check_limit(abs(args.seed), MAX_SEED, "--seed", allow_large=False, what="|seed|")
    # random pipelines have at most 6 keys: more recovering tasks than keys is the same as 6
    check_limit(args.parallel, 1_000, "--parallel", allow_large=args.allow_large)
    print(f"rollcheck elastic sweep: seed={args.seed}", file=sys.stderr)
    t0 = time.perf_counter()
    runs = 0
    rows: list[dict[str, Any]] = []
    bad: list[dict[str, Any]] = []
    with progress(args.configs, "sweeping pipelines") as advance:
        for i in range(args.configs):
            cfg = random_config(args.seed * 1_000_003 + i)
            res = failure_sweep(cfg, stride=args.stride, parallel=args.parallel)
            runs += res.runs
            rows.append({"ops": list(cfg.ops), "keys": cfg.keys, "scalings": len(cfg.scaling),
                         "steps": res.failure_free_steps, "runs": res.runs, "mismatches": len(res.mismatches)})
            if res.mismatches:
                f = res.mismatches[0]
                bad.append({"config": config_to_dict(cfg, f if f.step else None),
                            "detail": res.first_difference})
            advance()
    if runs == 0:
        raise InconclusiveError("no pipeline was run (--configs 0)")
    out = {"seed": args.seed, "configs": rows, "runs": runs, "seconds": round(time.perf_counter() - t0, 2),
           "exactly_once": not bad, "counterexamples": bad}
    if args.json:
        emit_json(out)
    else:
        for r in rows:
            print(f"{' -> '.join(r['ops'])}: keys={r['keys']} scalings={r['scalings']} steps={r['steps']} "
                  f"failure runs={r['runs']} mismatches={r['mismatches']}")
        print(f"{runs} runs in {out['seconds']} s: {'exactly once' if not bad else 'VIOLATED'}")
    return exit_code([Check.held("exactly-once", f"{runs} runs", examined=runs) if not bad else
                      Check.violated("exactly-once", str(bad[0]["detail"]))])
