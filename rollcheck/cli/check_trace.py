"""``rollcheck check trace``: check an engine's ``rollcheck.trace/1`` trace (any engine).

Exit codes: 0 conformant, 1 a check found a violation (the first offending seq is named),
2 unreadable or malformed trace (``FILE: line N (seq S): field: reason``), 3 nothing checkable.
TLC trace validation runs by default for traces of at most :data:`TLC_AUTO_MAX_EVENTS` events
whose protocol has a TLA+ model (``--tlc`` forces it, ``--no-tlc`` skips it).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from rollcheck.cli._util import emit_json

HELP = "Check an engine's trace: recovery line, log replay, forced checkpoints, exactly-once outputs."

#: Above this many events TLC trace validation is off unless --tlc is given (TLC needs ~10 s for
#: about 7,000 events; the Python checks are linear).
TLC_AUTO_MAX_EVENTS = 2000


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("trace", metavar="TRACE", help="a rollcheck.trace/1 file (JSON Lines)")
    p.add_argument("--protocol", metavar="SPEC", default=None,
                   help="protocol to check forced checkpoints against: a built-in name, MODULE:CLASS "
                        "or path/file.py:CLASS (default: the header's built-in protocol)")
    p.add_argument("--reference", metavar="OUTPUTS.json", default=None,
                   help="JSON list of the expected outputs {process, key, value} (outputs-exactly-once)")
    p.add_argument("--no-virtual", action="store_true",
                   help="the engine restores a real checkpoint on every process (no volatile states)")
    p.add_argument("--strict", action="store_true",
                   help="also validate every line against the JSON Schema (slow)")
    tlc = p.add_mutually_exclusive_group()
    tlc.add_argument("--tlc", dest="tlc", action="store_const", const=True, default=None,
                     help="validate with TLC against the protocol's TLA+ model, whatever the size")
    tlc.add_argument("--no-tlc", dest="tlc", action="store_const", const=False,
                     help=f"skip TLC (default: on for traces of at most {TLC_AUTO_MAX_EVENTS} events)")
    p.add_argument("--tlc-timeout", type=float, default=300.0, help="seconds per TLC run (default 300)")
    p.add_argument("--json", action="store_true", help="print one JSON document")


def _tlc_protocol(args: argparse.Namespace, header: dict[str, Any]) -> str | None:
    from rollcheck.tla.trace import PROTOCOLS

    spec = args.protocol if args.protocol else header.get("protocol")
    if isinstance(spec, str) and spec in PROTOCOLS:
        return spec
    return None


def run(args: argparse.Namespace) -> int:
    from rollcheck.pyimpl.traces import CheckResult, check_trace_file, load_reference

    reference = load_reference(args.reference) if args.reference else None
    want_tlc = args.tlc
    report, checker = check_trace_file(args.trace, protocol=args.protocol, reference=reference,
                                       virtual=not args.no_virtual, strict=args.strict,
                                       keep_segments=want_tlc is not False,
                                       segment_limit=None if want_tlc else TLC_AUTO_MAX_EVENTS,
                                       reference_source=args.reference or "reference")
    if want_tlc is not False and checker.protocol is not None:
        from rollcheck.tla.trace import validate_segments

        name = _tlc_protocol(args, {"protocol": getattr(checker.protocol, "name", None)})
        if name is None:
            report.checks.append(CheckResult("tlc-trace", None, f"skipped: no TLA+ model of "
                                             f"{checker.protocol.name!r}"))
        elif want_tlc is None and report.events > TLC_AUTO_MAX_EVENTS:
            report.checks.append(CheckResult("tlc-trace", None, f"skipped: {report.events} events > "
                                             f"{TLC_AUTO_MAX_EVENTS} (give --tlc to run it)"))
        else:
            ok, detail, seq = validate_segments(name, checker.segments, timeout=args.tlc_timeout)
            report.checks.append(CheckResult("tlc-trace", ok, detail, seq))
    elif want_tlc and checker.protocol is None:
        report.checks.append(CheckResult("tlc-trace", None, "skipped: no protocol (give --protocol or a "
                                                            "header \"protocol\")"))
    doc = report.to_json()
    if args.json:
        emit_json(doc)
    else:
        for c in report.checks:
            mark = {True: "ok  ", False: "FAIL", None: "--  "}[c.ok]
            print(f"{mark} {c.name}: {c.detail}")
        verdict = {True: "conformant", False: f"NOT conformant (first offending seq {report.first_offending_seq})",
                   None: "inconclusive: nothing was checked beyond the format (give --protocol or "
                         "--reference, or record a failure and its recovery)"}[report.conformant]
        trunc = (f"; trace truncated after seq {report.truncated_after_seq}" if report.truncated else "")
        print(f"{args.trace}: {verdict}{trunc}")
    if report.conformant is None:
        print("rollcheck: inconclusive: nothing was checked beyond the format", file=sys.stderr)
        return 3
    return 0 if report.conformant else 1
