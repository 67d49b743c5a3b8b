"""``rollcheck check trace``: check an engine's ``rollcheck.trace/1`` trace (any engine).

Exit codes: 0 conformant, 1 a check found a violation (the root cause's offending seq is named),
2 unreadable or malformed trace (``FILE: line N (seq S): field: reason``), 3 inconclusive (nothing
examined, or a check the trace calls for could not run).

A trace of a built-in engine (:data:`ENGINES`) is checked by that engine's own replay
(:func:`rollcheck.cli.engine_replay.replay_engine_trace`), options it does not take refused; for
any other engine a check the command line did not enable is *not applicable*, naming the option
that enables it (:func:`not_enabled`). See docs/internals/cli.md#one-trace-checker-check_trace.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from rollcheck.cli._util import emit_json
from rollcheck.cli.engine_replay import DEFAULT_TLC_TIMEOUT, ENGINES, engine_of

__all__ = ["ENGINES", "HELP", "TLC_AUTO_MAX_EVENTS", "add_arguments", "adapter_for", "engine_of", "not_enabled",
           "print_report", "run"]

HELP = "Check an engine's trace: recovery line, log replay, forced checkpoints, exactly-once outputs."

#: Above this many events TLC trace validation is off unless --tlc is given (TLC needs ~10 s for
#: about 7,000 events; the Python checks are linear).
TLC_AUTO_MAX_EVENTS = 2000


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Add the arguments of ``rollcheck check trace`` to ``p``."""
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
    p.add_argument("--tlc-timeout", type=float, default=DEFAULT_TLC_TIMEOUT,
                   help=f"seconds per TLC run (default {DEFAULT_TLC_TIMEOUT:g})")
    p.add_argument("--json", action="store_true", help="print one JSON document")


#: Engine adapters of the built-in recorders, by header ``source``: their events mapped onto the
#: core vocabulary before the generic checks (``MODULE:CLASS``, imported only when needed).
#: ``trace validate`` reads a built-in engine's older traces through them.
ADAPTERS = {"spark": "rollcheck.spark_replay.replay.adapter:SparkAdapter",
            "spark-wordcount": "rollcheck.spark_replay.replay.adapter:SparkAdapter",
            "spark-query": "rollcheck.spark_replay.replay.adapter:SparkAdapter"}

#: Options of ``check trace`` that a built-in engine's replay does not take (refused for its traces).
_ENGINE_REFUSES = (("protocol", "--protocol"), ("reference", "--reference"), ("no_virtual", "--no-virtual"))


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


def not_enabled(args: argparse.Namespace, header: dict[str, Any], report: Any, outputs: int) -> list[Any]:
    """The checks the trace could call for that the command line did not enable, as not applicable.

    Each names the option that enables it (``detail`` and ``enabled_by``). ``outputs`` is the number
    of ``output`` events the trace has (``outputs-exactly-once`` is called for only then).

    Examples
    --------
    >>> import argparse
    >>> from rollcheck.pyimpl.verdict import Report
    >>> a = argparse.Namespace(protocol=None, reference=None, tlc=False)
    >>> [(c.name, c.data["enabled_by"]) for c in not_enabled(a, {}, Report(), 2)]  # doctest: +NORMALIZE_WHITESPACE
    [('forced-checkpoints', '--protocol'), ('no-useless-checkpoints', '--protocol'),
     ('outputs-exactly-once', '--reference'), ('tlc-trace', '--tlc')]
    """
    from rollcheck.pyimpl.verdict import Check

    have = {c.name for c in report.checks}
    no_protocol = not args.protocol and header.get("protocol") is None
    out: list[Any] = []

    def na(name: str, why: str, option: str) -> None:
        if name not in have:
            out.append(Check.not_applicable(name, why, enabled_by=option))

    if no_protocol:
        na("forced-checkpoints", "no protocol to decide where a checkpoint must be forced: give --protocol SPEC "
           "(or a header \"protocol\" naming a built-in one)", "--protocol")
        na("no-useless-checkpoints", "no protocol: give --protocol SPEC of a protocol that claims no useless "
           "checkpoints (zcycle_free, e.g. bcs or hmnr)", "--protocol")
    if outputs and args.reference is None:
        na("outputs-exactly-once", f"{outputs} output event(s) not compared with the expected outputs: "
           "give --reference OUTPUTS.json", "--reference")
    if args.tlc is False:
        na("tlc-trace", "skipped by --no-tlc (give --tlc, or leave both out for traces of at most "
           f"{TLC_AUTO_MAX_EVENTS} events)", "--tlc")
    elif no_protocol:
        na("tlc-trace", "TLC validates against a protocol's TLA+ model: give --protocol SPEC (uc, bcs, hmnr)",
           "--protocol")
    return out


def _with_not_enabled(report: Any, extra: list[Any]) -> None:
    """Insert the not-applicable checks of :func:`not_enabled` where the checker reports them."""
    order = ["pattern-valid", "forced-checkpoints", "no-useless-checkpoints", "recovery-line", "log-replay",
             "outputs-exactly-once", "checkpoint-indices", "tlc-trace"]
    for c in extra:
        rank = order.index(c.name)
        at = next((k for k, x in enumerate(report.checks) if x.name in order and order.index(x.name) > rank),
                  len(report.checks))
        report.checks.insert(at, c)


def _refuse_engine_options(args: argparse.Namespace, header: dict[str, Any], engine: str) -> None:
    from rollcheck.pyimpl.errors import InvalidInputError

    for attr, flag in _ENGINE_REFUSES:
        if getattr(args, attr):
            raise InvalidInputError(f"{flag}: a {header.get('source')} trace is checked by {engine}'s own replay "
                                    f"(the checks of `rollcheck {engine} replay`), which does not take this "
                                    "option; drop it", source=args.trace, location="line 1")


def _run_engine(args: argparse.Namespace, header: dict[str, Any], engine: str) -> Any:
    _refuse_engine_options(args, header, engine)
    if args.strict:  # the JSON Schema on every line first, as for any trace
        from rollcheck.pyimpl.traces.reader import TraceLines
        from rollcheck.pyimpl.traces.schema import line_validator

        for _ in TraceLines(args.trace, validator=line_validator(args.trace)):
            pass
    from rollcheck.cli import engine_replay

    report = engine_replay.replay_engine_trace(args.trace, engine=engine, header=header, tlc=args.tlc is not False,
                                               tlc_timeout=args.tlc_timeout)
    report.extra.setdefault("truncated", False)
    report.extra["checked_by"] = f"{engine} replay"
    return report


def run(args: argparse.Namespace) -> int:
    """Run ``rollcheck check trace``; its exit code."""
    from rollcheck.pyimpl.traces import check_trace_file, load_reference

    header = _header(args.trace)
    engine = engine_of(header)
    if engine is not None:
        report = _run_engine(args, header, engine)
    else:
        reference = load_reference(args.reference) if args.reference else None
        report, checker = check_trace_file(args.trace, protocol=args.protocol, reference=reference,
                                           virtual=not args.no_virtual, strict=args.strict,
                                           segment_limit=None if args.tlc else TLC_AUTO_MAX_EVENTS,
                                           reference_source=args.reference or "reference",
                                           tlc=_tlc_option(args, header))
        _with_not_enabled(report, not_enabled(args, header, report, checker.view.n_outputs))
    if args.json:
        emit_json(report.to_json())
    else:
        if engine is not None:
            print(f"{args.trace}: a {header.get('source')} trace, checked by {engine}'s own replay "
                  f"(as `rollcheck {engine} replay`)")
        print_report(report, args.trace)
    if report.exit_code == 3:
        off = [f"{c.name} ({c.data['enabled_by']})" for c in report.checks if c.data.get("enabled_by")]
        hint = f"; not enabled: {', '.join(off)}" if off else ""
        print(f"rollcheck: inconclusive: {report.why_inconclusive}{hint}", file=sys.stderr)
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
