"""A Spark matrix cell's evidence: its replay report and its witness.

- :func:`report_of` — a replay's result in the one verdict model;
- :func:`witness` — the lost or duplicated rows of a recording against its reference, each with the
  batch whose rows the sink was handed, the attempts in which it was handed them, and the failure
  (:func:`protocol_step`: where in the micro-batch protocol it struck);
- :func:`expected_by_engine` — the documentation that explains a not-conformant cell
  (:func:`rollcheck.pyimpl.attribution.classify_cell`, the matrix's attribution), or None.

References
----------
Spark Structured Streaming Programming Guide ("Fault Tolerance Semantics", "Using Foreach and
ForeachBatch").
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from rollcheck.pyimpl.verdict import Check, Report
from rollcheck.spark_replay.replay.checks import FOREACHBATCH_DOC

__all__ = ["FOREACHBATCH_DOC", "report_of", "protocol_step", "witness", "expected_by_engine"]


def report_of(replay: Any) -> Report:
    """The replay's result in the one verdict model (a :class:`Report`).

    Whatever check type the replay returns (the verdict model's own, or the older ``ok`` /
    ``detail`` triple).
    """
    if isinstance(replay, Report):
        return replay
    checks = []
    for c in replay.checks:
        if isinstance(c, Check):
            checks.append(c)
        else:
            checks.append(Check.from_ok(c.name, c.ok, c.detail, offending_seq=getattr(c, "offending_seq", None)))
    extra = {"truncated": getattr(replay, "truncated", False), "events": getattr(replay, "events", None)}
    return Report(checks, subject="spark-query", extra=extra)


def _canon(row: Any) -> str:
    return json.dumps(row, sort_keys=True, separators=(",", ":"), default=str)


def protocol_step(failure: dict[str, Any]) -> str:
    """Where in the micro-batch protocol a ``failure`` event struck, in words.

    >>> protocol_step({"mode": "kill", "batch": 2, "kill_point": "state"})
    'driver killed after the state stores committed batch 2, before the sink (offsets/2 written, commits/2 not)'
    """
    b = failure.get("batch")
    mode, point = failure.get("mode"), failure.get("kill_point")
    if mode == "task":
        return f"a task of batch {b} failed, before the sink (offsets/{b} written, commits/{b} not)"
    if mode == "sink":
        return f"the sink raised after it wrote batch {b}, before commits/{b}"
    where = {"offsets": f"right after offsets/{b} was written, before the batch ran",
             "state": f"after the state stores committed batch {b}, before the sink",
             "commit": f"after the sink wrote batch {b}, as commits/{b} was being written"}.get(
        str(point), f"after the sink wrote batch {b}, before commits/{b}")
    return f"driver killed {where} (offsets/{b} written, commits/{b} not)" if point == "state" or point == "offsets" \
        else f"driver killed {where}"


def witness(header: dict[str, Any], events: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The lost or duplicated rows of a recording against its reference.

    Each with the batch whose rows handed to the sink hold it (None: never handed to the sink as
    such), the attempts in which the sink was handed it, and the failure (the step of the commit
    protocol where it struck). None when the output equals the reference.

    Parameters
    ----------
    header : dict
        The trace's header.
    events : list of dict
        The trace's recorded events.

    Returns
    -------
    dict or None
        ``lost``/``duplicated`` rows with their batches, attempts and failure.

    Examples
    --------
    >>> ev = [{"seq": 1, "kind": "spark.reference", "output": [{"k": 1}]},
    ...       {"seq": 2, "kind": "spark.sink_written", "batch": 0, "attempt": 1, "rows": [{"k": 1}]},
    ...       {"seq": 3, "kind": "failure", "mode": "kill", "batch": 0, "kill_point": "sink"},
    ...       {"seq": 4, "kind": "spark.sink_written", "batch": 0, "attempt": 2, "rows": [{"k": 1}]},
    ...       {"seq": 5, "kind": "spark.output_final", "rows": [{"k": 1}, {"k": 1}]}]
    >>> w = witness({}, ev); w["duplicated"][0]["batch"], w["duplicated"][0]["written_in_attempts"]
    (0, [1, 2])
    """
    from rollcheck.spark_replay.checkpoint.watcher import base_kind

    ends = {base_kind(e["kind"]): e for e in events}
    ref, fin = ends.get("reference"), ends.get("output_final")
    if ref is None or fin is None:
        return None
    want, got = Counter(map(_canon, ref.get("output", []))), Counter(map(_canon, fin.get("rows", [])))
    extra, missing = got - want, want - got
    if not extra and not missing:
        return None
    writes = [e for e in events if base_kind(e["kind"]) == "sink_written"]
    fails = [{**{k: e.get(k) for k in ("seq", "mode", "batch", "kill_point", "checkpoint_logs") if k in e},
              "step": protocol_step(e)} for e in events if e["kind"] == "failure"]

    def where(row: str) -> dict[str, Any]:
        hits = [e for e in writes if row in set(map(_canon, e.get("rows", [])))]
        batches = sorted({e["batch"] for e in hits})
        b = batches[0] if batches else None
        return {"row": json.loads(row), "batch": b,
                "written_in_attempts": [e.get("attempt") for e in hits if e["batch"] == b],
                "sink_written_seqs": [e["seq"] for e in hits]}

    return {"duplicated": [{**where(r), "extra_copies": n} for r, n in sorted(extra.items())],
            "lost": [{**where(r), "missing_copies": n} for r, n in sorted(missing.items())],
            "failures": fails, "config": (header.get("config") or {})}


def expected_by_engine(report: Report, header: dict[str, Any], wit: dict[str, Any] | None) -> str | None:
    """The documentation that explains this not-conformant cell.

    Or None (a finding, or a cell that cannot be attributed):
    :func:`~rollcheck.pyimpl.attribution.classify_cell`'s attribution, counted from the trace's sink
    handings (``header`` and ``wit`` are not needed any more).

    Parameters
    ----------
    report : Report
        The cell's replay report.
    header : dict
        The trace's header (unused).
    wit : dict or None
        The cell's witness (unused).

    Returns
    -------
    str or None
        The explaining documentation.
    """
    from rollcheck.pyimpl.attribution import classify_cell

    c = classify_cell(report)
    return c["reason"] if c["expected_by_engine"] else None
