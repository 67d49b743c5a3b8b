"""``rollcheck trace to-pattern|validate``: engine-neutral traces as patterns, and their format.

``to-pattern`` writes the run before the first failure as a ``rollcheck.pattern/1`` file (written
atomically) that ``useless``, ``recovery-line``, ``protocol`` … accept. ``validate`` checks the
format only (``--strict``: also the JSON Schema, line by line). Exit codes: 0 ok, 2 bad input.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from rollcheck.cli._util import add_parser, emit_json


def register(sub: Any) -> None:
    """Add ``rollcheck trace`` (``to-pattern``, ``validate``) to ``sub``."""
    p = add_parser(sub, "trace", "Engine-neutral traces: convert to a pattern, validate the format.", None)
    p.set_defaults(handler=None)
    tsub = p.add_subparsers(dest="trace_command", metavar="SUBCOMMAND", parser_class=type(p))
    tp = add_parser(tsub, "to-pattern", "Write the run before the first failure as a pattern file.", _to_pattern)
    tp.add_argument("trace", metavar="TRACE")
    tp.add_argument("-o", "--out", required=True, metavar="PATTERN.json")
    tp.add_argument("--json", action="store_true")
    tv = add_parser(tsub, "validate", "Check a trace's format (exit 0 and 'valid', or 2 naming the line).",
                    _validate)
    tv.add_argument("trace", metavar="TRACE")
    tv.add_argument("--strict", action="store_true", help="also apply the JSON Schema to every line")
    tv.add_argument("--json", action="store_true")


def _to_pattern(args: argparse.Namespace) -> int:
    from rollcheck.pyimpl.patternio import dump_pattern
    from rollcheck.pyimpl.traces import trace_to_pattern

    p = trace_to_pattern(args.trace)
    dump_pattern(p, args.out)
    doc = {"pattern": args.out, "processes": list(p.processes), "events": len(p.events),
           "messages": p.num_messages, "checkpoints": sum(p.last_indices)}
    if args.json:
        emit_json(doc)
    else:
        print(f"wrote {args.out}: {len(p.events)} events, {p.num_messages} messages, "
              f"{sum(p.last_indices)} checkpoints")
    return 0


def _validate(args: argparse.Namespace) -> int:
    from rollcheck.cli.check_trace import _header, adapter_for
    from rollcheck.pyimpl.traces import check_trace_file

    # a built-in engine's older traces (e.g. Spark's before the prefix rule) are read by its adapter
    adapter = None if args.strict else adapter_for(_header(args.trace))
    report, _ = check_trace_file(args.trace, strict=args.strict, adapter=adapter)
    ex = report.extra
    doc = {"valid": True, "events": ex["events"], "truncated": ex["truncated"],
           "truncated_after_seq": ex["truncated_after_seq"]}
    if args.json:
        emit_json(doc)
    else:
        print("valid" + (f" (truncated after seq {ex['truncated_after_seq']})" if ex["truncated"] else ""))
    if ex["truncated"]:
        print(f"rollcheck: note: {args.trace} ends without an end event or in an incomplete line",
              file=sys.stderr)
    return 0
