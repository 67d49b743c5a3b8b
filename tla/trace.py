"""Trace validation: check with TLC that a recorded execution is one the protocol can produce.

:func:`trace_module_text` writes the events of a pattern or trace as a constant sequence in a
module ``TraceData``; ``TraceCheck.tla`` walks it under the protocol rules of ``CICRules.tla``, so
a trace the protocol cannot produce deadlocks at its first rejected event. Engine-neutral traces
are validated execution by execution between failures. See docs/internals/tla.md#trace and
``specs/tla.md#trace``.

References
----------
H. Cirstea, M. A. Kuppe, B. Loillier, S. Merz, "Validating traces of distributed programs
against TLA+ specifications", 2024 (the trace-as-constant technique).
"""

from __future__ import annotations

import shutil
import tempfile
import time
from dataclasses import dataclass, field
from importlib.resources import files
from pathlib import Path
from typing import Any

from rollcheck.pyimpl.errors import InvalidInputError
from rollcheck.pyimpl.pattern import CHECKPOINT, DELIVER, SEND, Event, Pattern
from rollcheck.tla.trace_load import MAX_PROCESSES, TracePattern, load_trace_events

__all__ = [
    "MAX_PROCESSES",
    "PROTOCOLS",
    "TracePattern",
    "TraceValidation",
    "load_trace_events",
    "trace_module_text",
    "validate_trace",
    "validate_segments",
]

MODELS = Path(str(files("rollcheck.tla.models")))  # package data
PROTOCOLS = (
    "uc", "bcs", "hmnr", "hmnr-no-c1", "hmnr-no-c2", "hmnr-merge-skip-sender",
    "hmnr-piggyback-at-delivery", "bcs-no-force", "hmnr-no-minto", "hmnr-minto-every-send", "bcs-geq",
)
INF = 10**9
# loading a trace (load_trace_events, TracePattern, MAX_PROCESSES): trace_load, re-exported here

@dataclass
class TraceValidation:
    """Result of :func:`validate_trace`."""

    accepted: bool
    first_rejected_event: int | None
    status: str  # "accepted" | "rejected" | "inconclusive"
    events: int
    protocol: str
    reason: str = ""
    distinct_states: int = 0
    seconds: float = 0.0
    zcheck: bool = False
    useless_found: bool = False
    tlc: Any = field(default=None, repr=False)
    first_rejected_seq: int | None = None
    first_rejected_line: int | None = None
    validated: str = ""

    def to_json(self) -> dict[str, Any]:
        """The validation as a JSON-ready dictionary (``rollcheck tlc --trace --json``)."""
        return {
            "accepted": self.accepted,
            "first_rejected_event": self.first_rejected_event,
            "first_rejected_seq": self.first_rejected_seq,
            "first_rejected_line": self.first_rejected_line,
            "validated": self.validated,
            "status": self.status,
            "protocol": self.protocol,
            "events": self.events,
            "reason": self.reason,
            "zcheck": self.zcheck,
            "distinct_states": self.distinct_states,
            "seconds": round(self.seconds, 3),
        }




def _tla_string(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def trace_module_text(p: Pattern) -> str:
    """The text of module ``TraceData`` for pattern ``p``.

    Each event becomes ``[k |-> kind, p |-> process, m |-> message number, to |-> process,
    f |-> forced]`` with processes as integers 0..n-1 and messages numbered 1, 2, ... in order of
    their sends (0 where not applicable).

    Examples
    --------
    >>> from rollcheck.pyimpl.pattern import PatternBuilder
    >>> b = PatternBuilder(2); b.deliver(1, b.send(0, 1))
    >>> print(trace_module_text(b.build()))  # doctest: +NORMALIZE_WHITESPACE
    ---- MODULE TraceData ----
    NumProcs == 2
    Trace == <<
    [k |-> "send", p |-> 0, m |-> 1, to |-> 1, f |-> FALSE],
    [k |-> "deliver", p |-> 1, m |-> 1, to |-> 0, f |-> FALSE]
    >>
    ====
    """
    num: dict[str, int] = {}
    rows = []
    for ev in p.events:
        m = 0
        if ev.kind == SEND:
            num[ev.message or ""] = m = len(num) + 1
        elif ev.kind == DELIVER:
            m = num[ev.message or ""]
        to = ev.to if ev.kind == SEND and ev.to is not None else 0
        rows.append(
            f"[k |-> {_tla_string(ev.kind)}, p |-> {ev.process}, m |-> {m}, to |-> {to}, "
            f"f |-> {'TRUE' if ev.forced else 'FALSE'}]"
        )
    body = ",\n".join(rows)
    return (
        "---- MODULE TraceData ----\n"
        f"NumProcs == {p.n}\n"
        f"Trace == <<\n{body}\n>>\n"
        "====\n"
    )


def _config_text(protocol: str, zcheck: bool) -> str:
    inv = "INVARIANT NoUseless\n" if zcheck else ""
    return (
        "CONSTANTS\n"
        f"  Protocol = {_tla_string(protocol)}\n"
        f"  Inf = {INF}\n"
        f"  ZCheck = {'TRUE' if zcheck else 'FALSE'}\n"
        "  Procs <- ProcSet\n"
        "INIT Init\nNEXT Next\n" + inv
    )


def validate_trace(
    protocol: str,
    pattern: Pattern,
    *,
    zcheck: bool = False,
    timeout: float | None = 600.0,
    workers: int = 1,
) -> TraceValidation:
    """Check with TLC that ``pattern`` is an execution of ``protocol`` (rules of ``CICRules.tla``).

    Parameters
    ----------
    protocol : str
        One of :data:`PROTOCOLS`.
    pattern : Pattern
        The recorded execution; its forced checkpoints are the protocol's decisions.
    zcheck : bool
        Also track the R-graph and check that no checkpoint is useless (quadratic; short traces).

    Returns
    -------
    TraceValidation
        ``accepted`` with ``first_rejected_event = None``, or ``rejected`` naming ``events[k]``
        (k from 0), or ``inconclusive`` (TLC unavailable, timeout, empty trace).

    Raises
    ------
    InvalidInputError
        Unknown protocol.
    """
    from rollcheck.tla.runner import run_tlc

    if protocol not in PROTOCOLS:
        raise InvalidInputError(f"unknown protocol {protocol!r}; expected one of {', '.join(PROTOCOLS)}",
                                location="PROTOCOL")
    if isinstance(pattern, TracePattern) and pattern.segments:
        v = _validate_trace_segments(protocol, pattern.segments, zcheck=zcheck, timeout=timeout,
                                     workers=workers)
        if v.first_rejected_seq is not None and pattern.source:
            v.first_rejected_line = _line_of(pattern.source, v.first_rejected_seq)
            if v.first_rejected_line is not None:
                v.reason = v.reason.replace(f"seq {v.first_rejected_seq}:",
                                            f"line {v.first_rejected_line} (seq {v.first_rejected_seq}):", 1)
        return v
    n_events = len(pattern.events)
    if n_events == 0:
        return TraceValidation(False, None, "inconclusive", 0, protocol, "the trace has no events")
    tmp = Path(tempfile.mkdtemp(prefix="rollcheck-trace-"))
    t0 = time.monotonic()
    try:
        shutil.copy(MODELS / "CICRules.tla", tmp / "CICRules.tla")
        text = (MODELS / "TraceCheck.tla").read_text(encoding="utf-8")
        # ProcSet is defined next to the trace so that Procs can be substituted from the config.
        text = text.replace("EXTENDS CICRules, TraceData, Sequences",
                            "EXTENDS CICRules, TraceData, Sequences\n\nProcSet == 0..(NumProcs - 1)", 1)
        (tmp / "TraceCheck.tla").write_text(text, encoding="utf-8")
        (tmp / "TraceData.tla").write_text(trace_module_text(pattern), encoding="utf-8")
        (tmp / "TraceCheck.cfg").write_text(_config_text(protocol, zcheck), encoding="utf-8")
        res = run_tlc(tmp / "TraceCheck.tla", tmp / "TraceCheck.cfg", workers=workers,
                      timeout=timeout, trace_keep_last=1)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    secs = time.monotonic() - t0
    out = TraceValidation(False, None, "inconclusive", n_events, protocol, res.message,
                          res.distinct_states, secs, zcheck, False, res)
    if res.status == "ok":
        out.accepted, out.status, out.reason = True, "accepted", "every event is a step of the protocol"
        return out
    if res.status in ("deadlock", "violation") and res.trace:
        last = res.trace[-1].values
        i = last.get("i")
        if res.status == "violation":
            # NoUseless failed: the event just taken created a useless checkpoint.
            k = int(i) - 2 if isinstance(i, int) else None
            out.status, out.useless_found = "rejected", True
            out.first_rejected_event = k
            out.reason = f"a useless checkpoint appears at events[{k}] (Z-cycle in the R-graph)"
            return out
        if isinstance(i, int) and 1 <= i <= n_events:
            k = i - 1
            out.status, out.first_rejected_event = "rejected", k
            out.reason = _why(protocol, pattern, k)
            return out
    if res.status == "error":
        out.reason = f"TLC error: {res.message}"
    return out


def _why(protocol: str, p: Pattern, k: int) -> str:
    ev = p.events[k]
    name = p.processes[ev.process]
    if ev.kind == DELIVER:
        forced_before = any(
            e.process == ev.process and e.kind == CHECKPOINT and e.forced
            for e in _previous_own(p, k)
        )
        if forced_before:
            return (f"events[{k}]: {protocol} would not force a checkpoint before {name} delivers "
                    f"{ev.message!r}, but the trace has one")
        return (f"events[{k}]: {protocol} forces a checkpoint before {name} delivers {ev.message!r}; "
                "the trace has none")
    if ev.kind == CHECKPOINT and ev.forced:
        return f"events[{k}]: a forced checkpoint of {name} in a place where none can follow"
    return f"events[{k}]: {ev.kind} of {name} follows a forced checkpoint that has no delivery"


def _previous_own(p: Pattern, k: int) -> list[Event]:
    for j in range(k - 1, -1, -1):
        if p.events[j].process == p.events[k].process:
            return [p.events[j]]
    return []


def _line_of(path: str, seq: int) -> int | None:
    """The line number of event ``seq`` in a trace file (only called for a rejection)."""
    from rollcheck.pyimpl.traces import TraceLines

    try:
        for line, obj in TraceLines(path):
            if obj["seq"] == seq:
                return line
    except InvalidInputError:
        return None
    return None


def _basic_given(seg: Any) -> Pattern:
    """The segment's pattern with the checkpoints restored by a recovery made basic."""
    given = seg.given
    if not given:
        return seg.pattern
    evs = tuple(Event(ev.process, CHECKPOINT) if (k in given and ev.kind == CHECKPOINT) else ev
                for k, ev in enumerate(seg.pattern.events))
    return Pattern(seg.pattern.processes, evs)


def _validate_trace_segments(protocol: str, segments: Any, *, zcheck: bool = False,
                             timeout: float | None = 600.0, workers: int = 1) -> TraceValidation:
    """Validate every execution between failures; the first rejection names its seq."""
    total = 0
    secs = 0.0
    states = 0
    done: list[str] = []
    for seg in segments:
        v = validate_trace(protocol, _basic_given(seg), zcheck=zcheck, timeout=timeout, workers=workers)
        total += v.events
        secs += v.seconds
        states += v.distinct_states
        if v.status == "inconclusive" and v.events == 0:
            done.append(f"{seg.label}: empty")
            continue
        if v.status != "accepted":
            if v.first_rejected_event is not None:
                k = v.first_rejected_event
                seq = seg.seqs[k] if 0 <= k < len(seg.seqs) else None
                v.first_rejected_seq = seq
                v.first_rejected_event = None if seq is None else seq - 1
                v.reason = v.reason.replace(f"events[{k}]", f"seq {seq}") + f" ({seg.label})"
            v.events, v.seconds, v.distinct_states = total, secs, states
            v.validated = "; ".join([*done, f"{seg.label}: {v.status}"])
            return v
        done.append(f"{seg.label}: {v.events} events accepted")
    out = TraceValidation(True, None, "accepted", total, protocol,
                          f"every event is a step of the protocol ({len(segments)} execution(s) "
                          "between failures)", states, secs, zcheck)
    if total == 0:
        out.accepted, out.status, out.reason = False, "inconclusive", "the trace has no events"
    out.validated = "; ".join(done)
    return out


def validate_segments(protocol: str, segments: Any, *, timeout: float | None = 300.0) -> tuple[bool | None, str, int | None]:
    """TLC trace validation of a checker's segments as ``(ok, detail, offending seq)``.

    ``ok`` is None when TLC could not decide (missing tool, timeout): never a pass.
    """
    if not segments:
        return None, "no execution to validate", None
    v = _validate_trace_segments(protocol, segments, timeout=timeout)
    what = ("an independent TLA+ encoding of the protocol's rules (CICRules.tla) checked by TLC "
            f"on {len(segments)} execution(s) between failures")
    if v.status == "inconclusive":
        return None, f"inconclusive (not counted): {v.reason}", None
    if v.accepted:
        return True, f"{what}: accepted ({v.events} events, {v.distinct_states} states, {v.seconds:.1f} s)", None
    return False, f"{what}: rejected at seq {v.first_rejected_seq}: {v.reason}", v.first_rejected_seq
