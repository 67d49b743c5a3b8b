"""How the Spark hunt reads its recordings.

A matrix entry or a failure-free trace as a :class:`~rollcheck.infra.hunt.adapter.CellOutcome`, and
why a failure-free run did not finish.

- :func:`outcome_of_entry`: an entry of ``spark matrix``'s JSON document (verdict, checks, the
  attribution, cost, what was shared; the engine's exception read from the cell's trace);
- :func:`outcome_of_free`: a failure-free recording replayed. The checks that compare a run with
  the failure-free run (``output-exactly-once``, ``state-failure-free``) are not applicable to the
  failure-free run itself; ``release-differential`` is decided against the reference release's
  failure-free output when the hunt has one (:func:`with_release`);
- :func:`refusal`: the one line a failed failure-free recording left, read as Spark refusing the
  program at analysis (``rejected``: counted, never a finding), the query failing in a micro-batch,
  or neither.

Examples
--------
>>> refusal("rollcheck: error: q.py: query: Spark refused the query: AnalysisException: [X] Append output mode not supported")
'rejected'
>>> refusal("rollcheck: error: q.py: query: the query failed on its own (not an injected failure): boom")
'failed'
>>> exception_class("terminated with exception: java.util.NoSuchElementException: None.get")
'java.util.NoSuchElementException'
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rollcheck.infra.hunt.adapter import CellOutcome

__all__ = ["refusal", "exception_class", "status_of", "verdict_of", "outcome_of_entry", "outcome_of_free",
           "trace_exception", "with_release", "FREE_NOT_APPLICABLE"]

#: Checks that compare a run with the failure-free run: not applicable to the failure-free run itself.
FREE_NOT_APPLICABLE = ("output-exactly-once", "output-at-least-once", "state-failure-free")

_ANALYSIS = re.compile(r"AnalysisException|ParseException|UNSUPPORTED|NOT_SUPPORTED|not supported|"
                       r"output mode|OutputMode|Spark refused the query|STREAMING_OUTPUT_MODE|"
                       r"NON_TIME_WINDOW_NOT_SUPPORTED|requires a watermark|without watermark", re.IGNORECASE)
_FAILED = re.compile(r"failed on its own|did not finish|terminated with exception", re.IGNORECASE)
_EXC = re.compile(r"\b((?:[a-z_][a-z0-9_]*\.)+[A-Z][A-Za-z0-9_$]*(?:Exception|Error))\b")


def refusal(line: str) -> str | None:
    """``"rejected"`` (Spark refused the program at analysis), ``"failed"`` (a micro-batch failed).

    Or None (neither: a timeout, the machine, rollcheck).
    """
    if _ANALYSIS.search(line or ""):
        return "rejected"
    if _FAILED.search(line or ""):
        return "failed"
    return None


def exception_class(text: str) -> str | None:
    """The first fully qualified exception class named in ``text`` (Spark's wrapper skipped)."""
    for m in _EXC.finditer(text or ""):
        if not m.group(1).endswith("StreamingQueryException"):
            return m.group(1)
    return None


def status_of(value: str) -> str:
    """A check status of a replay (``not-applicable``) in the hunt's spelling (``not_applicable``)."""
    return value.replace("-", "_")


def verdict_of(checks: Mapping[str, str]) -> str:
    """The one verdict rule over a cell's checks.

    Violated, else inconclusive if one is unchecked or nothing held, else conformant.

    >>> verdict_of({"a": "held", "b": "unchecked"}), verdict_of({"a": "not_applicable"})
    ('inconclusive', 'inconclusive')
    """
    states = set(checks.values())
    if "violated" in states:
        return "violated"
    if "unchecked" in states or "held" not in states:
        return "inconclusive"
    return "conformant"


def trace_exception(trace: str | Path | None) -> str | None:
    """The engine's exception class a recording names.

    A failed restart or a failure-free run that failed on this release. Else None.
    """
    from rollcheck.spark_replay.checkpoint.watcher import base_kind
    from rollcheck.spark_replay.trace import read_trace

    if trace is None or not Path(trace).is_file():
        return None
    try:
        tr = read_trace(trace)
    except Exception:  # noqa: BLE001 - an unreadable trace names no exception
        return None
    for e in tr.events:
        if base_kind(str(e.get("kind"))) in ("recovery_failed", "reference_failed") and e.get("exception"):
            return exception_class(str(e["exception"])) or str(e["exception"])
    return None


def outcome_of_entry(entry: Mapping[str, Any]) -> CellOutcome:
    """A ``spark matrix`` cell entry as the hunt's outcome."""
    verdict = {"conformant": "conformant", "not-conformant": "violated"}.get(str(entry.get("verdict")), "inconclusive")
    checks = {str(c["name"]): status_of(str(c["status"])) for c in entry.get("check_statuses") or []}
    who = {"engine": "engine", "module": "user"}.get(str(entry.get("attributed_to")))
    if verdict == "violated" and who is None and not entry.get("expected_by_engine"):
        who = "engine"
    return CellOutcome(verdict=verdict, checks=checks, exception=trace_exception(entry.get("trace")),
                       attributed_to=who, trace=entry.get("trace"), detail=str(entry.get("reason") or "")[:400],
                       seconds=float(entry.get("seconds") or 0.0), cpu_seconds=float(entry.get("cpu_seconds") or 0.0),
                       shared=dict(entry.get("shared") or {}))


def with_release(trace: str | Path, release_output: Mapping[str, Any] | None) -> str | None:
    """``release-differential`` of a failure-free recording against the reference release's output.

    The reference release's failure-free output is ``{"engine_version", "output"}``; None
    without one. The oracle of :mod:`rollcheck.spark_replay.oracles.checks` over the recording's
    own final output as the run on its release.

    Parameters
    ----------
    trace : str or Path
        The failure-free recording.
    release_output : Mapping or None
        ``{"engine_version", "output"}`` of the reference release.

    Returns
    -------
    str or None
        The check's status; None without a reference output.
    """
    from rollcheck.spark_replay.checkpoint.watcher import PREFIX, base_kind
    from rollcheck.spark_replay.oracles.checks import release_differential
    from rollcheck.spark_replay.trace import read_trace

    if release_output is None:
        return None
    tr = read_trace(trace)
    events = [dict(e) for e in tr.events]
    fin = next((e for e in events if base_kind(str(e.get("kind"))) == "output_final"), None)
    if fin is None:
        return "unchecked"
    n = len(events)
    events.append({"seq": n + 1, "kind": PREFIX + "reference", "attempt": 0, "output": fin.get("rows") or []})
    events.append({"seq": n + 2, "kind": PREFIX + "release_reference", "attempt": 0, **release_output})
    ev = [e for e in events if base_kind(str(e.get("kind"))) == "batch_evaluation"]
    for e in ev:  # the recording's own evaluation serves as the reference run's
        events.append({**e, "seq": len(events) + 1, "run": "reference"})
    check = release_differential(tr.header, events)
    return None if check is None else status_of(check.status.value)


def outcome_of_free(trace: str | Path, release_output: Mapping[str, Any] | None = None,
                    extra: Mapping[str, str] | None = None) -> CellOutcome:
    """A finished failure-free recording replayed as the hunt's outcome (module docstring).

    ``extra``: more check statuses decided outside the trace (a differential).

    Parameters
    ----------
    trace : str or Path
        The failure-free recording.
    release_output : Mapping, optional
        As in :func:`with_release`.
    extra : Mapping, optional
        Check name -> status decided outside the trace.

    Returns
    -------
    CellOutcome
        The outcome.
    """
    from rollcheck.spark_replay.replay.conformance import replay_file

    rep = replay_file(Path(trace))
    checks = {c.name: status_of(c.status.value) for c in rep.checks}
    details = {c.name: c.detail for c in rep.checks}
    for name in FREE_NOT_APPLICABLE:
        if name in checks:
            checks[name] = "not_applicable"
    rel = with_release(trace, release_output)
    if rel is not None:
        checks["release-differential"] = rel
    elif checks.get("release-differential") == "unchecked":  # one release hunted: nothing to compare with
        checks["release-differential"] = "not_applicable"
    checks.update(extra or {})
    verdict = verdict_of(checks)
    bad = [n for n, s in checks.items() if s == "violated"]
    detail = f"{bad[0]}: {details.get(bad[0], '')}" if bad else f"{sum(s == 'held' for s in checks.values())} held"
    return CellOutcome(verdict=verdict, checks=checks, attributed_to="engine" if verdict == "violated" else None,
                       trace=str(trace), detail=detail[:400])
