"""``rollcheck check trace``: check an engine's ``rollcheck.trace/1`` trace (any engine).

Exit codes: 0 conformant, 1 a check found a violation (the root cause's offending seq is named),
2 unreadable or malformed trace (``FILE: line N (seq S): field: reason``), 3 inconclusive (nothing
examined, or a check the trace calls for could not run: a failure without its recovery, a
reference but no end of run, a TLC that could not start).
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


#: Engine adapters of the built-in recorders, by header ``source``: their events mapped onto the
#: core vocabulary before the generic checks (``MODULE:CLASS``, imported only when needed).
ADAPTERS = {"spark": "rollcheck.spark_replay.adapter:SparkAdapter",
            "spark-wordcount": "rollcheck.spark_replay.adapter:SparkAdapter",
            "spark-query": "rollcheck.spark_replay.adapter:SparkAdapter"}


def adapter_for(header: dict[str, Any]) -> Any:
    """The built-in adapter for the header's ``source`` (None: the trace is core vocabulary)."""
    import importlib

    src = header.get("source")
    spec = ADAPTERS.get(src) if isinstance(src, str) else None
    if spec is None:
        return None
    mod, cls = spec.split(":")
    return getattr(importlib.import_module(mod), cls)()


def _header(path: str) -> dict[str, Any]:
    from rollcheck.pyimpl.traces.reader import read_header

    return read_header(path)


def _tlc_option(args: argparse.Namespace, header: dict[str, Any]) -> Any:
    """The ``tlc`` option of the checker: (validate, model protocol or None, why not, requested)."""
    if args.tlc is False:
        return None
    from rollcheck.pyimpl.traces.api import resolve_trace_protocol
    from rollcheck.tla.trace import PROTOCOLS, validate_segments

    proto = resolve_trace_protocol(args.protocol, header, args.trace)
    if proto is None:
        if not args.tlc:
            return None
        return (None, None, "no protocol (give --protocol or a header \"protocol\")", True)
    name = getattr(proto, "name", None)
    if name not in PROTOCOLS:
        return (None, None, f"no TLA+ model of {name!r}", bool(args.tlc))

    def validate(protocol: str, segments: Any) -> Any:
        return validate_segments(protocol, segments, timeout=args.tlc_timeout)

    return (validate, name, "", bool(args.tlc))


def run(args: argparse.Namespace) -> int:
    from rollcheck.pyimpl.traces import check_trace_file, load_reference

    reference = load_reference(args.reference) if args.reference else None
    header = _header(args.trace)
    adapter = adapter_for(header)
    if adapter is not None:
        header = adapter.header(header)
    report, _checker = check_trace_file(args.trace, protocol=args.protocol, reference=reference,
                                        virtual=not args.no_virtual, strict=args.strict,
                                        segment_limit=None if args.tlc else TLC_AUTO_MAX_EVENTS,
                                        reference_source=args.reference or "reference",
                                        tlc=_tlc_option(args, header), adapter=adapter)
    if args.json:
        emit_json(report.to_json())
    else:
        print_report(report, args.trace)
    if report.exit_code == 3:
        print(f"rollcheck: inconclusive: {report.why_inconclusive}", file=sys.stderr)
    return report.exit_code


def print_report(report: Any, name: str) -> None:
    """The human form of a trace or replay report: one line per check, then the verdict."""
    for c in report.checks:
        mark = {"held": "ok  ", "violated": "FAIL", "unchecked": "??  ", "not-applicable": "n/a "}[c.status.value]
        cons = f" [a consequence of {c.consequence_of}]" if c.consequence_of else ""
        print(f"{mark} {c.name}: {c.detail}{cons}")
    v = report.verdict.value
    if v == "violated":
        rc = report.root_cause
        verdict = (f"NOT conformant (first offending seq {report.first_offending_seq}); root cause: "
                   f"{rc.name if rc else '?'} — fix it first")
    elif v == "inconclusive":
        verdict = f"inconclusive: {report.why_inconclusive}"
    else:
        verdict = "conformant"
    trunc = (f"; trace truncated after seq {report.extra['truncated_after_seq']}"
             if report.extra.get("truncated") else "")
    print(f"{name}: {verdict}{trunc}")
