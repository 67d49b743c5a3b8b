"""Replaying a Spark trace together with TLC's trace validation (HMNR message-passing traces).

A TLC that could not run (no Java, no jar, a timeout) gives an inconclusive check, never a pass.
"""

from __future__ import annotations

from typing import Any

__all__ = ["replay_with_tlc", "tlc_check"]


def tlc_check(trace: Any) -> Any:
    """TLC trace validation of an HMNR message-passing trace, as a replay :class:`Check`."""
    from rollcheck.spark_replay.nhop_replay import derive_patterns, tlc_pattern
    from rollcheck.spark_replay.verdict import Check
    from rollcheck.tla.trace import validate_trace

    d = derive_patterns(trace)
    pat = tlc_pattern(d)
    if pat is None:
        return Check("tlc-trace", False, "no valid pattern to validate", None)
    v = validate_trace("hmnr", pat)
    if v.status == "inconclusive":
        return Check("tlc-trace", None, f"inconclusive: {v.reason}")
    seq = None
    if not v.accepted and v.first_rejected_event is not None:
        seq = d.effective_seqs[v.first_rejected_event]
    return Check("tlc-trace", bool(v.accepted),
                 f"TLC {'accepts' if v.accepted else 'rejects'} the effective HMNR execution "
                 f"({v.events} events, {v.distinct_states} states, {v.seconds:.1f} s)"
                 + ("" if v.accepted else f"; first rejected at seq {seq}: {v.reason}"), seq)


def replay_with_tlc(path: str, tlc: bool = True) -> Any:
    """Replay a trace file; HMNR message-passing traces also get the TLC trace validation."""
    from rollcheck.spark_replay.replay import replay_trace
    from rollcheck.spark_replay.trace import read_trace

    trace = read_trace(path)
    res = replay_trace(trace)
    if tlc and trace.source_kind == "spark-nhop" and (trace.header.get("config") or {}).get("protocol") == "hmnr":
        res.checks.append(tlc_check(trace))
    return res
