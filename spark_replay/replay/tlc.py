"""Replaying a Spark trace together with TLC's trace validation (message-passing traces).

TLC validates the executions between failures against the protocol's TLA+ model through the
generic ``tlc-trace`` plug-in of the trace checker. A TLC that could not run (no Java, no jar, a
timeout) leaves the check *unchecked* (the replay is inconclusive), never a pass; a protocol
without a TLA+ model makes it not applicable.
"""

from __future__ import annotations

from typing import Any

__all__ = ["replay_with_tlc", "tlc_option"]


def tlc_option(protocol: str | None, timeout: float | None = 300.0) -> Any:
    """The trace checker's ``tlc`` option for ``protocol``: (validate, model name or None, why not, requested).

    Parameters
    ----------
    protocol : str or None
        The trace's protocol.
    timeout : float, optional
        TLC's limit (s); None for none.
    """
    from rollcheck.tla.trace import PROTOCOLS, validate_segments

    if protocol is None or protocol not in PROTOCOLS:
        return (None, None, f"no TLA+ model of {protocol!r}", False)

    def validate(name: str, segments: Any) -> Any:
        return validate_segments(name, segments, timeout=timeout)

    return (validate, protocol, "", False)


def replay_with_tlc(path: str, tlc: bool = True) -> Any:
    """Replay a trace file; message-passing traces also get TLC trace validation (``tlc``).

    Parameters
    ----------
    path : str
        The trace file.
    tlc : bool, optional
        Validate message-passing traces with TLC.

    Returns
    -------
    Report
        The checks' verdicts.
    """
    from rollcheck.spark_replay.replay.conformance import replay_file

    return replay_file(path, tlc=tlc_option if tlc else None)
