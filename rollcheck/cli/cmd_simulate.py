"""``rollcheck simulate``: one deterministic dataflow simulation, or ``simulate sweep`` (tables).

Exit codes: 0 the run finished; 1 it deadlocked (aligned barriers on a cycle; the JSON names the
stuck operators); 2 bad parameters (unknown workload/protocol/operator, out-of-range values, a
failure time after the end of the run).
"""

from __future__ import annotations

import argparse
from typing import Any

from rollcheck.cli._util import add_parser, emit_json

WORKLOAD_NAMES = ("nexmark", "wordcount", "nhop")
PROTOCOLS = ("uc", "bcs", "hmnr", "cl-aligned", "cl-unaligned")


def _run_params(p: argparse.ArgumentParser, single: bool) -> None:
    p.add_argument("--records", type=int, default=120, help="records per source instance (default 120)")
    p.add_argument("--parallelism", type=int, default=2, help="instances per operator (default 2)")
    p.add_argument("--no-virtual", dest="virtual", action="store_false",
                   help="recovery line without virtual checkpoints (everyone restores a checkpoint)")
    p.add_argument("--volatile-logs", action="store_true",
                   help="message logs are lost with their (failed) process")


def register(sub: Any) -> None:
    """Add ``rollcheck simulate`` (and ``simulate sweep``) to ``sub``."""
    p = add_parser(sub, "simulate", "Simulate a dataflow job under a checkpointing protocol "
                   "(deterministic, seeded); 'simulate sweep' prints FERDiS-style tables.", _run)
    p.add_argument("--workload", default="nexmark", help=f"one of {', '.join(WORKLOAD_NAMES)} (default nexmark)")
    p.add_argument("--protocol", default="uc",
                   help=f"one of {', '.join(PROTOCOLS)} (default uc), or your own protocol class as "
                        "MODULE:CLASS or path/to/file.py:CLASS")
    p.add_argument("--interval", type=float, default=10.0,
                   help="basic-checkpoint interval (UC/CIC) or snapshot period (CL), > 0 (default 10)")
    p.add_argument("--fail", metavar="OP", default=None, help="failing operator instance: OP (instance 0) or OP.k")
    p.add_argument("--fail-at", type=float, default=None, metavar="T", help="failure time (with --fail)")
    p.add_argument("--seed", type=int, default=0, help="seed of every random choice (printed)")
    p.add_argument("--delay", type=float, default=0.5, help="mean network delay (default 0.5)")
    p.add_argument("--gap", type=float, default=1.0, help="mean time between source records (default 1)")
    _run_params(p, True)
    p.add_argument("--save-pattern", metavar="FILE", default=None,
                   help="write the run's pattern (up to the failure) as rollcheck.pattern/1")
    p.add_argument("--render", metavar="OUT.png", default=None, help="draw the pattern and the recovery line")
    p.add_argument("--json", action="store_true", help="print one JSON document")
    inner = p.add_subparsers(dest="simulate_command", metavar="{sweep}", parser_class=type(p))
    s = add_parser(inner, "sweep", "Protocol x workload x interval table, with and without one failure "
                   "(markdown + CSV + PNG), like FERDiS Tables 4-6.", _sweep)
    s.add_argument("--workloads", default=",".join(WORKLOAD_NAMES), help="comma-separated workloads")
    s.add_argument("--protocols", default=",".join(PROTOCOLS),
                   help="comma-separated protocols (built-in names, MODULE:CLASS or path/to/file.py:CLASS)")
    s.add_argument("--intervals", default="5,10", help="comma-separated intervals (default 5,10)")
    s.add_argument("--seeds", type=int, default=3, help="runs per cell, seeds 0..N-1 (default 3)")
    s.add_argument("--seed", type=int, default=0, help="first seed (default 0)")
    s.add_argument("--fail-fraction", type=float, default=0.5,
                   help="failure time as a fraction of the failure-free run (default 0.5)")
    s.add_argument("--persistent-logs", action="store_true", help="logs survive the failure (default: volatile, as FERDiS)")
    s.add_argument("--records", type=int, default=120, help="records per source instance (default 120)")
    s.add_argument("--parallelism", type=int, default=2, help="instances per operator (default 2)")
    s.add_argument("--no-virtual", dest="virtual", action="store_false", help="no virtual checkpoints")
    s.add_argument("--out", default="report/simulate", help="folder for sweep.md, sweep.csv, sweep.png")
    s.add_argument("--json", action="store_true", help="print the rows as one JSON document")


def _names(text: str, flag: str, allowed: tuple[str, ...]) -> list[str]:
    from rollcheck.pyimpl.errors import InvalidInputError

    out = [t.strip() for t in text.split(",") if t.strip()]
    bad = [t for t in out if t not in allowed]
    if not out or bad:
        raise InvalidInputError(f"expected a comma-separated subset of {', '.join(allowed)}, got {text!r}",
                                location=flag)
    return out


def _protocol_specs(text: str) -> list[str]:
    """Built-in protocol names and user protocols (``MODULE:CLASS``, ``file.py:CLASS``), each checked."""
    from rollcheck.pyimpl.errors import InvalidInputError
    from rollcheck.pyimpl.simulate import make_protocol

    out = [t.strip() for t in text.split(",") if t.strip()]
    if not out:
        raise InvalidInputError(f"expected a comma-separated list of protocols, got {text!r}", location="--protocols")
    for t in out:
        if t in PROTOCOLS:
            continue
        if ":" not in t:
            raise InvalidInputError(f"unknown protocol {t!r} (known: {', '.join(PROTOCOLS)}, or MODULE:CLASS, "
                                    "path/to/file.py:CLASS)", location="--protocols")
        try:
            make_protocol(t)
        except InvalidInputError as e:
            raise InvalidInputError(e.reason, source=e.source, location="--protocols") from None
    return out


def _run(args: argparse.Namespace) -> int:
    import sys

    from rollcheck.pyimpl.errors import InvalidInputError
    from rollcheck.pyimpl.patternio import dump_pattern
    from rollcheck.pyimpl.simulate import SimConfig, simulate

    if args.protocol not in PROTOCOLS and ":" not in args.protocol:
        raise InvalidInputError(f"unknown protocol {args.protocol!r} (known: {', '.join(PROTOCOLS)}, or "
                                "MODULE:CLASS, path/to/file.py:CLASS)", location="--protocol")
    cfg = SimConfig(workload=args.workload, protocol=args.protocol, interval=args.interval,
                    parallelism=args.parallelism, records=args.records, gap=args.gap, delay=args.delay,
                    fail=args.fail, fail_at=args.fail_at, virtual=args.virtual,
                    persistent_logs=not args.volatile_logs, seed=args.seed)
    cfg.validate()
    print(f"rollcheck simulate: seed={cfg.seed}", file=sys.stderr)
    res = simulate(cfg)
    names = res.topology.process_names
    doc: dict[str, Any] = {
        "workload": cfg.workload, "protocol": cfg.protocol, "interval": cfg.interval, "seed": cfg.seed,
        "parallelism": cfg.parallelism, "records": cfg.records, "processes": list(names),
        "failure": None if cfg.fail is None else {"process": names[res.topology.resolve_process(cfg.fail)],
                                                  "time": cfg.fail_at},
        "virtual": cfg.virtual, "persistent_logs": cfg.persistent_logs,
        "metrics": res.metrics,
        "recovery": None,
        "deadlock": None,
        "pattern": None,
    }
    if res.recovery is not None:
        rec = res.recovery
        doc["recovery"] = {**rec.line.to_json(rec.pattern), "in_transit": len(rec.line.in_transit),
                           "lost_messages": rec.lost, "replayed_messages": rec.replayed,
                           "cleared_messages": rec.cleared}
    if res.deadlock is not None:
        doc["deadlock"] = {"time": round(res.deadlock.time, 6), "stuck": list(res.deadlock.stuck),
                           "waiting_on": {k: list(v) for k, v in res.deadlock.waiting.items()}}
    if args.save_pattern:
        dump_pattern(res.pattern, args.save_pattern)
        doc["pattern"] = args.save_pattern
    if args.render:
        from rollcheck.pyimpl.render import render_pattern

        failed = () if res.recovery is None else (res.recovery.failed,)
        render_pattern(res.pattern, args.render, failed=failed, virtual=cfg.virtual,
                       title=f"{cfg.workload} / {cfg.protocol} @ {cfg.interval:g}, seed {cfg.seed}")
        doc["picture"] = args.render
    if args.json:
        emit_json(doc)
    else:
        m = res.metrics
        print(f"{cfg.workload} / {cfg.protocol} @ {cfg.interval:g}: {m['regular_checkpoints']} regular, "
              f"{m['forced_checkpoints']} forced, {m['useless_checkpoints']} useless checkpoints; "
              f"verdict {m['verdict']}")
        if res.recovery is not None:
            print(f"failure of {doc['failure']['process']} at {cfg.fail_at:g}: rollback distance "
                  f"{m['rollback_distance']} intervals, {m['lost_messages']} lost messages")
    if res.deadlock is not None:
        print(f"rollcheck: deadlock at t={res.deadlock.time:g}: {', '.join(res.deadlock.stuck)} wait for "
              "markers on a cycle", file=sys.stderr)
    from rollcheck.pyimpl.verdict import Check, exit_code

    return exit_code([Check.held("deadlock-free", "the run ended") if res.deadlock is None else
                      Check.violated("deadlock-free", f"deadlock at t={res.deadlock.time:g}")])


def _sweep(args: argparse.Namespace) -> int:
    import json
    import sys
    from pathlib import Path

    from rollcheck.pyimpl.errors import InvalidInputError
    from rollcheck.pyimpl.patternio import atomic_write_text
    from rollcheck.pyimpl.simulate.sweep import plot, sweep, to_csv, to_markdown

    wls = _names(args.workloads, "--workloads", WORKLOAD_NAMES)
    protos = _protocol_specs(args.protocols)
    try:
        ivs = [float(x) for x in args.intervals.split(",") if x.strip()]
    except ValueError:
        raise InvalidInputError(f"intervals must be numbers, got {args.intervals!r}", location="--intervals") from None
    if not ivs or any(not (v > 0 and v < float("inf")) for v in ivs):
        raise InvalidInputError(f"intervals must be finite numbers > 0, got {args.intervals!r}", location="--intervals")
    if not 1 <= args.seeds <= 1000:
        raise InvalidInputError(f"--seeds must be in 1..1000, got {args.seeds}", location="--seeds")
    seeds = list(range(args.seed, args.seed + args.seeds))
    print(f"rollcheck simulate sweep: seeds={seeds}", file=sys.stderr)
    rows = sweep(wls, protos, ivs, seeds=seeds, records=args.records, parallelism=args.parallelism,
                 virtual=args.virtual, persistent_logs=args.persistent_logs, fraction=args.fail_fraction)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    md = to_markdown(rows)
    atomic_write_text(out / "sweep.md", md)
    atomic_write_text(out / "sweep.csv", to_csv(rows))
    plot(rows, out / "sweep.png")
    files = {"markdown": str(out / "sweep.md"), "csv": str(out / "sweep.csv"), "png": str(out / "sweep.png")}
    if args.json:
        emit_json({"rows": [r.as_dict() for r in rows], "files": files, "seeds": seeds})
    else:
        sys.stdout.write(md)
        print(json.dumps(files), file=sys.stderr)
    return 0
