"""Conformance checks of recorded message-passing runs: the engine-neutral checker, plus Spark's own.

The message-passing job records the engine-neutral core vocabulary (``specs/formats.md#trace``:
``send``, ``deliver`` with ``replayed``, ``checkpoint``, ``failure``, ``recovery``, ``output``,
``end``; its own kinds are prefixed with its source, ``spark-nhop.``), so its trace is checked by the same one-pass
checker as any engine's (:class:`rollcheck.pyimpl.traces.TraceChecker`): ``pattern-valid``,
``forced-checkpoints`` (the protocol of the header), ``no-useless-checkpoints`` (BCS, HMNR),
``recovery-line``, ``log-replay`` and ``outputs-exactly-once`` (reference: the failure-free run
:func:`rollcheck.spark_replay.nhop.simulate`). One implementation serves every engine.

Spark-specific (``specs/spark.md#message-passing-conformance``):

- ``outputs-failure-free``: the ``end`` record's per-process (count, sum) equals the failure-free
  run *and* the count and payload sum of the deliveries of the effective execution (a delivery
  deleted from the recording, or one the application state does not reflect, is caught here).

TLC trace validation of HMNR traces (the TLA+ model) is added by the CLI layer, which may import
``tla``; :func:`derive_patterns` and :func:`tlc_pattern` give it the executions.
"""

from __future__ import annotations

from typing import Any

from rollcheck.pyimpl.errors import InvalidInputError
from rollcheck.pyimpl.pattern import CHECKPOINT, Event, Pattern
from rollcheck.spark_replay.trace import Trace
from rollcheck.spark_replay.verdict import Check

__all__ = ["check_nhop", "check_core", "derive_patterns", "DerivedPatterns", "tlc_pattern"]


class DerivedPatterns:
    """Patterns of a message-passing trace and the trace ``seq`` of each of their events."""

    def __init__(self) -> None:
        self.pre: Pattern | None = None
        self.pre_seqs: list[int] = []
        self.effective: Pattern | None = None
        self.effective_seqs: list[int] = []
        self.recovery: dict[str, Any] | None = None
        self.failure: dict[str, Any] | None = None
        self.end: dict[str, Any] | None = None
        self.invalid: Check | None = None
        #: Positions in ``effective`` of the checkpoints that rolled-back processes restored.
        self.restored_positions: set[int] = set()
        self.checker: Any = None


def _run_checker(trace: Trace, protocol: str | None, reference: list[dict[str, Any]] | None) -> Any:
    from rollcheck.pyimpl.protocols import resolve_protocol
    from rollcheck.pyimpl.traces import TraceChecker, reference_from_list

    proto = resolve_protocol(protocol) if protocol else None
    ref = reference_from_list(reference, source="failure-free run") if reference is not None else None
    checker = TraceChecker(trace.header, trace.source, protocol=proto, reference=ref,
                           keep_segments=True, keep_first=True)
    checker.run((e.get("_line", 0), e) for e in trace.events)
    return checker


def derive_patterns(trace: Trace) -> DerivedPatterns:
    """The pattern before the first failure and the effective execution, from the generic checker."""
    checker = _run_checker(trace, None, None)
    report = checker.finish(trace.truncated, trace.truncated_after_seq)
    d = DerivedPatterns()
    d.checker = checker
    final = checker.segments[-1]
    d.effective, d.effective_seqs, d.restored_positions = final.pattern, final.seqs, set(final.given)
    if checker.first_pattern is not None:
        d.pre, d.pre_seqs = checker.first_pattern[0], checker.first_pattern[1]
    else:
        d.pre, d.pre_seqs = d.effective, d.effective_seqs
    for e in trace.events:
        k = e["kind"]
        if k == "failure" and d.failure is None:
            d.failure = e
        elif k == "recovery" and d.recovery is None:
            d.recovery = e
        elif k == "end":
            d.end = e
    bad = report.check("pattern-valid")
    if bad is not None and bad.ok is False:
        d.invalid = Check("pattern-valid", False, bad.detail, bad.offending_seq)
    return d


def _as_checks(report: Any) -> list[Check]:
    out = []
    for c in report.checks:
        if c.ok is None:
            out.append(Check(c.name, True, f"not checked: {c.detail}"))
        else:
            out.append(Check(c.name, bool(c.ok), c.detail, c.offending_seq))
    return out


def check_core(trace: Trace, protocol: str | None = None, reference: list[dict[str, Any]] | None = None) -> list[Check]:
    """The engine-neutral checks over a parsed trace (any engine; ``spark replay`` of other sources)."""
    from rollcheck.pyimpl.traces import resolve_trace_protocol

    if protocol is None:
        proto = resolve_trace_protocol(None, trace.header, trace.source)
        protocol = proto.name if proto is not None else None
    checker = _run_checker(trace, protocol, reference)
    return _as_checks(checker.finish(trace.truncated, trace.truncated_after_seq))


def check_nhop(trace: Trace) -> list[Check]:
    """The message-passing conformance checks over a parsed trace (module docstring)."""
    from rollcheck.spark_replay.nhop import NhopConfig, simulate

    cfg_doc = dict(trace.header.get("config") or {})
    try:
        cfg = NhopConfig(**{k: v for k, v in cfg_doc.items() if k in NhopConfig.__dataclass_fields__})
        cfg.validate()
    except (TypeError, InvalidInputError) as err:
        raise InvalidInputError(f"header config is not an nhop configuration: {err}",
                                source=trace.source, location="line 1") from None
    ref = simulate(cfg)["outputs"]
    reference = [{"process": p, "key": "count_sum", "value": v} for p, v in ref.items()]
    checker = _run_checker(trace, cfg.protocol, reference)
    report = checker.finish(trace.truncated, trace.truncated_after_seq)
    checks = _as_checks(report)
    end = next((e for e in trace.events if e["kind"] == "end"), None)
    if end is None:
        last = trace.events[-1]["seq"] if trace.events else 0
        checks.append(Check("end-of-run", True, f"not reached: the recording stopped after seq {last}; "
                                                f"the prefix was checked"))
        return checks
    payload = {str(e.get("message")): e.get("payload", 0) for e in trace.events if e["kind"] == "send"}
    eff = checker.final_pattern()
    got_del: dict[str, list[int]] = {p: [0, 0] for p in eff.processes}
    for m in eff.messages:
        if m.delivered:
            row = got_del[eff.processes[m.receiver]]
            row[0] += 1
            row[1] += int(payload.get(m.id, 0))
    got_out = end.get("outputs")
    problems = []
    if got_out != ref:
        problems.append(f"outputs {got_out} differ from the failure-free {ref}")
    if got_out != got_del:
        problems.append(f"the deliveries of the effective execution give {got_del}, the end record "
                        f"says {got_out}")
    checks.append(Check("outputs-failure-free", not problems,
                        "per-process (count, sum) of delivered payloads equal the failure-free run and "
                        "the recorded deliveries" if not problems else "; ".join(problems),
                        None if not problems else end["seq"]))
    return checks


def tlc_pattern(d: DerivedPatterns) -> Pattern | None:
    """The effective execution for TLC trace validation: restored forced checkpoints made basic.

    A rolled-back process resumes from its restored checkpoint; if that checkpoint was forced, the
    delivery it preceded was undone, so in the effective execution it is a given checkpoint.
    """
    if d.effective is None:
        return None
    evs = tuple(Event(ev.process, CHECKPOINT) if (ev.kind == CHECKPOINT and k in d.restored_positions) else ev
                for k, ev in enumerate(d.effective.events))
    return Pattern(d.effective.processes, evs)
