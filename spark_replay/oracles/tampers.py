"""Mutants of the engine-distrusting oracles (:mod:`rollcheck.spark_replay.oracles.checks`).

Recorded query traces changed as a misbehaving engine (or recorder) would have left them.

Each function takes a parsed query trace and returns ``(lines, seq)`` like
:mod:`rollcheck.spark_replay.tamper`: the text of the tampered trace (renumbered) and the ``seq``
of the first event the tampering makes wrong. :data:`ORACLE_TAMPERS` maps a name to the function
and :data:`CAUGHT_BY` to the check that must call the tampered trace a violation:

- :func:`drop_on_time_row` (``batch-equivalent``): the engine lost an output row of on-time input
  in *every* run, the failure-free one included, so ``output-exactly-once`` (failure-free run as
  the reference) sees nothing: the key's last row is removed from the reference's and the final
  output and from the sink writes.
- :func:`count_late_row` (``batch-equivalent``): the engine counted a late row in state it had
  already finished with: the key the late row touches shows only that row's contribution (numeric
  columns: the evaluation with the row minus the one without), as a window re-created from the
  late row alone would. (Counting a late row into a window that is still open is Spark's
  documented behaviour, not a mutant: the watermark's guarantee holds in one direction only.)
- :func:`swallow_recovery_exception` (``recovery-succeeded``): the restart after the failure died
  and the recorder swallowed its exception: everything the restarted query did is gone and the
  run still ends ``done``.
- :func:`fail_recovery` (``recovery-succeeded``): the restart fails with an engine exception, as
  the recorder records it (``spark.recovery_failed`` naming the exception and the checkpoint).
- :func:`differ_release` (``release-differential``): the failure-free run on the reference
  release lost a row.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

from rollcheck.pyimpl.errors import InvalidInputError
from rollcheck.spark_replay.checkpoint.watcher import base_kind
from rollcheck.spark_replay.oracles.checks import canon_row
from rollcheck.spark_replay.tamper import to_lines
from rollcheck.spark_replay.trace import Trace

__all__ = [
    "drop_on_time_row",
    "count_late_row",
    "swallow_recovery_exception",
    "fail_recovery",
    "differ_release",
    "ORACLE_TAMPERS",
    "CAUGHT_BY",
]

_END_KINDS = ("reference", "output_final", "state_final", "batch_evaluation", "release_reference", "end")


def _index(events: list[dict[str, Any]], kind: str) -> int | None:
    return next((k for k, e in enumerate(events) if base_kind(e["kind"]) == kind), None)


def _key(header: dict[str, Any]) -> list[str]:
    return [str(k) for k in (header.get("config") or {}).get("key") or []]


def drop_on_time_row(trace: Trace) -> tuple[list[str], int]:
    """Remove one key's last output row from the reference's and the final output.

    And its sink write. An on-time row lost in every run.
    """
    events = copy.deepcopy(trace.events)
    ref, fin = _index(events, "reference"), _index(events, "output_final")
    if ref is None or fin is None or not events[fin].get("rows"):
        raise InvalidInputError("the trace has no reference and final output to take a row from")
    rows = events[fin]["rows"]
    key = _key(trace.header)
    kv = [json.dumps([r.get(k) for k in key], default=str) for r in rows]
    once = [i for i, x in enumerate(kv) if kv.count(x) == 1]
    victim = rows[once[0] if once else len(rows) - 1]
    target = canon_row(victim)
    for idx, field in ((ref, "output"), (fin, "rows")):
        out = events[idx].get(field) or []
        hit = [i for i, r in enumerate(out) if canon_row(r) == target]
        if hit:
            del out[hit[-1]]
    for e in events:
        if base_kind(e["kind"]) == "sink_written":
            e["rows"] = [r for r in e.get("rows") or [] if canon_row(r) != target]
    return to_lines(trace.header, events), ref + 1


def count_late_row(trace: Trace) -> tuple[list[str], int]:
    """The key a late row touches shows only that row's contribution in the final table.

    Numeric columns: the evaluation with the row minus the one without.
    """
    events = copy.deepcopy(trace.events)
    fin = _index(events, "output_final")
    ev = next((e for e in events if base_kind(e["kind"]) == "batch_evaluation" and e.get("run") == "final"), None)
    if fin is None or ev is None or not (ev.get("late") or ev.get("dropped")):
        raise InvalidInputError("the trace's final run has no late input row (record a query with late rows, "
                                "e.g. tests/queries/late_rows.py)")
    key = _key(trace.header)
    variants = [*(ev.get("variants") or []), *([{"late": [0], "rows": ev["with_dropped"]}] if ev.get("with_dropped") else [])]
    base_rows = {json.dumps([r.get(k) for k in key], default=str): r for r in variants[0]["rows"]}
    for v in variants[1:]:
        if len(v.get("late") or []) != 1:
            continue
        for r in v["rows"]:
            k = json.dumps([r.get(c) for c in key], default=str)
            old = base_rows.get(k, {})
            if canon_row(old) == canon_row(r):  # a key the late row does not touch
                continue
            alone = {c: (x - old.get(c, 0) if isinstance(x, int | float) and c not in key
                         and isinstance(old.get(c, 0), int | float) else x) for c, x in r.items()}
            if canon_row(alone) in {canon_row(r), canon_row(old)}:
                continue
            events[fin]["rows"] = [*events[fin]["rows"], alone]  # the last row of the key
            return to_lines(trace.header, events), fin + 1
    raise InvalidInputError("no late row of the trace changes a key of the batch job's result")


def _after_restart(trace: Trace) -> tuple[list[dict[str, Any]], int]:
    events = copy.deepcopy(trace.events)
    fails = [k for k, e in enumerate(events) if e["kind"] == "failure"]
    if not fails:
        raise InvalidInputError("the trace has no failure, so no recovery to tamper with")
    start = next((k for k in range(fails[-1] + 1, len(events)) if base_kind(events[k]["kind"]) == "attempt_start"),
                 None)
    if start is None:
        raise InvalidInputError("the trace has no restart after its failure")
    return events, start


def swallow_recovery_exception(trace: Trace) -> tuple[list[str], int]:
    """Drop everything the restarted query did; the run still ends ``done``."""
    events, start = _after_restart(trace)
    kept = events[: start + 1] + [e for e in events[start + 1:]
                                  if base_kind(e["kind"]) in _END_KINDS and e.get("attempt", 1) != 0]
    for e in kept:
        if e["kind"] == "end":
            e["status"] = "done"
    end = next(k for k, e in enumerate(kept) if e["kind"] == "end")
    return to_lines(trace.header, kept), end + 1


def fail_recovery(trace: Trace) -> tuple[list[str], int]:
    """The restart fails with an engine exception, recorded as the recorder records it."""
    events, start = _after_restart(trace)
    ck = f"{trace.source}.work/checkpoint" if trace.source else "OUT.work/checkpoint"  # record_query's layout
    att = events[start].get("attempt", 1)
    failed = {"kind": "spark.recovery_failed", "attempt": att, "checkpoint": ck,
              "exception": "org.apache.spark.SparkException",
              "message": "[CANNOT_LOAD_STATE_STORE.UNCATEGORIZED] An error occurred during loading state.",
              "user_code": False}
    out = events[: start + 1] + [failed, {"kind": "end", "attempt": att, "status": "recovery-failed"}]
    return to_lines(trace.header, out), start + 2


def differ_release(trace: Trace) -> tuple[list[str], int]:
    """The reference release's failure-free run lost its first row."""
    events = copy.deepcopy(trace.events)
    rel, ref = _index(events, "release_reference"), _index(events, "reference")
    if rel is None or ref is None or not events[rel].get("output"):
        raise InvalidInputError("the trace has no failure-free run on a reference release (record with "
                                "--engine-version)")
    events[rel]["output"] = events[rel]["output"][1:]
    return to_lines(trace.header, events), ref + 1


ORACLE_TAMPERS: dict[str, Callable[[Trace], tuple[list[str], int]]] = {
    "drop-on-time-row": drop_on_time_row,
    "count-late-row": count_late_row,
    "swallow-recovery-exception": swallow_recovery_exception,
    "fail-recovery": fail_recovery,
    "differ-release": differ_release,
}
#: The check that must find each tampered trace a violation.
CAUGHT_BY = {"drop-on-time-row": "batch-equivalent", "count-late-row": "batch-equivalent",
             "swallow-recovery-exception": "recovery-succeeded", "fail-recovery": "recovery-succeeded",
             "differ-release": "release-differential"}
