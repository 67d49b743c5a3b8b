"""The recorder side of ``batch-equivalent``.

The query run as a batch job over exactly the input rows Spark's lateness rule keeps
(:mod:`rollcheck.spark_replay.oracles.lateness`).

:func:`analyse_plan` reads the analysed streaming plan (per source); :func:`evaluate_batch` runs
the batch job once over the kept rows (for sliding windows whose rows count in some windows only:
once per distinct late-events watermark, keeping each output window from the evaluation whose rows
it counts) and returns the payload of a ``spark.batch_evaluation`` event.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from rollcheck.spark_replay.oracles.lateness import (
    LateRule,
    event_time_us,
    late_watermarks,
    plan_rule,
    row_dropped,
)

__all__ = ["ARBITRARY_STATEFUL", "analyse_plan", "event_time_ms", "evaluate_batch", "describe_rule"]

#: Logical plan nodes of arbitrary stateful processing (no batch meaning in the oracle's sense).
ARBITRARY_STATEFUL = ("FlatMapGroupsWithState", "FlatMapGroupsInPandasWithState", "TransformWithState",
                      "FlatMapGroupsInR", "FlatMapCoGroupsInPandasWithState")
_PROCESSING_TIME = re.compile(r"\b(current_timestamp|current_date|now|localtimestamp|current_time)\(")
#: At most this many dropped rows are listed in the event (all are counted).
MAX_LISTED = 200


def analyse_plan(plan: str, sources: Mapping[str, Sequence[str]] | Sequence[str]) -> dict[str, Any]:
    """What the streaming query's analysed plan tells the oracle.

    ``{"applicable", "reason", "event_time", "watermarked", "rule"}`` (``rule``: a
    :class:`~rollcheck.spark_replay.oracles.lateness.LateRule`). ``sources`` maps each source to its
    columns (a plain column list is the one source ``input``); ``event_time`` is the watermarked
    input column (one source) or ``{source: column}``.

    Examples
    --------
    >>> p = '''~Aggregate [ts#0-T20000ms, page#1], [ts#0-T20000ms, page#1, count(1) AS n#3L]
    ... +- ~EventTimeWatermark 4032c16a-9c4d-4e25-9af6-e0afe8eae570, ts#0: timestamp, 20 seconds
    ...    +- StreamingRelation FileSource[/x], [ts#0, page#1], name=<Unassigned>'''
    >>> analyse_plan(p, ["ts", "page"])["event_time"]
    'ts'
    >>> analyse_plan("FlatMapGroupsInPandasWithState f(user#1)", ["user"])["reason"][:40]
    'the query has an arbitrary stateful oper'
    """
    cols = dict(sources) if isinstance(sources, Mapping) else {"input": list(sources)}
    for node in ARBITRARY_STATEFUL:
        if re.search(rf"(^|[\s~]){node}\w*\b", plan, flags=re.M):
            return {"applicable": False, "event_time": None, "watermarked": False, "rule": None,
                    "reason": f"the query has an arbitrary stateful operator ({node}): its state follows the "
                              "user's function, not a batch query's meaning"}
    if _PROCESSING_TIME.search(plan):
        return {"applicable": False, "event_time": None, "watermarked": False, "rule": None,
                "reason": "the query reads processing time (current_timestamp/now): a batch job gives another time"}
    rule = plan_rule(plan, list(cols))
    watermarked = "EventTimeWatermark" in plan
    if not rule.applicable:
        return {"applicable": False, "event_time": None, "watermarked": watermarked, "rule": rule,
                "reason": rule.reason}
    for src, col in rule.watermarked.items():
        if col not in cols.get(src, []):
            return {"applicable": False, "event_time": None, "watermarked": True, "rule": rule,
                    "reason": f"the watermark is on {col}, not a column of source {src}"}
    et: Any = None
    if rule.watermarked:
        et = next(iter(rule.watermarked.values())) if len(cols) == 1 else dict(rule.watermarked)
    return {"applicable": True, "event_time": et, "watermarked": bool(rule.watermarked), "rule": rule,
            "reason": None}


def event_time_ms(v: Any) -> int | None:
    """An input row's event-time value in epoch milliseconds (naive datetimes are UTC).

    Examples
    --------
    >>> import datetime as dt
    >>> event_time_ms(dt.datetime(1970, 1, 1, 0, 0, 2))
    2000
    """
    us = event_time_us(v)
    return None if us is None else us // 1000


def describe_rule(rule: LateRule) -> str:
    """The rule in words, as the event and the check's detail show it.

    >>> describe_rule(LateRule())
    'no stateful operator filters late rows: every input row counts'
    """
    if not rule.operands:
        what = "no stateful operator filters late rows" if rule.operator == "none" else \
            f"{rule.operator} has no event-time key"
        return f"{what}: every input row counts"
    parts = []
    for src, op in sorted(rule.operands.items()):
        if op.kind == "window":
            shape = "tumbling" if op.slide_us == op.size_us else f"sliding by {op.slide_us // 1000} ms"
            parts.append(f"{src}: a row counts in each {shape} {op.size_us // 1000} ms window of {op.column} "
                         "whose end is above the watermark")
        else:
            parts.append(f"{src}: a row whose {op.column} is at or below the watermark is dropped")
    tail = " (in update and append mode; complete mode drops nothing)" if rule.not_in_complete else ""
    return (f"{rule.operator}: " + "; ".join(parts) + ", the watermark being the previous batch's "
            "(Spark's late-events watermark)" + tail)


def _columns(spark: Any, ddl: str) -> list[str]:
    return list(spark.createDataFrame([], ddl).columns)


def evaluate_batch(run_query: Callable[[dict[str, Any]], Any], spark: Any, sources: dict[str, str],
                   batches: Sequence[Mapping[str, Sequence[tuple[Any, ...]]]], watermarks: dict[int, int],
                   plan: str, plain: Callable[[Any], Any], output_mode: str | None = None) -> dict[str, Any]:
    """The batch evaluation of one run (the payload of a ``spark.batch_evaluation`` event).

    ``run_query(dfs)`` applies the user's ``query`` to one DataFrame per source; ``batches`` the
    input per micro-batch (``{source: rows}``); ``watermarks`` the watermark in force per batch
    (ms); ``output_mode`` when known (else both the update/append and the complete table are
    given for an aggregation).
    """
    cols = {n: _columns(spark, ddl) for n, ddl in sources.items()}
    info = analyse_plan(plan, cols)
    out: dict[str, Any] = {"applicable": info["applicable"], "reason": info["reason"],
                           "event_time": info["event_time"],
                           "watermarks": {str(b): w for b, w in sorted(watermarks.items())}}
    if not info["applicable"]:
        return out
    rule: LateRule = info["rule"]
    late, missing = late_watermarks(len(batches), watermarks)
    touched = [b for b in missing if any(batches[b].get(s) for s in rule.operands)]
    out["rule"] = describe_rule(rule)
    if touched:
        out["undecided"] = (f"the watermark of batch {touched[0] - 1} is unknown (no progress report, no offset log "
                            f"entry): the late-events watermark of batch {touched[0]} cannot be told")
        return out
    out["late_watermarks"] = {str(b): w for b, w in sorted(late.items())}
    kept: dict[str, list[tuple[Any, ...]]] = {n: [] for n in sources}
    every: dict[str, list[tuple[Any, ...]]] = {n: [] for n in sources}
    dropped: list[dict[str, Any]] = []
    partial: list[tuple[int, tuple[Any, ...]]] = []
    for b, batch in enumerate(batches):
        for src, rows in batch.items():
            op = rule.operands.get(src)
            for r in rows:
                every[src].append(r)
                verdict = False if op is None else row_dropped(r[cols[src].index(op.column)], op, late[b])
                if verdict is None:
                    partial.append((b, r))
                elif verdict:
                    dropped.append({"batch": b, "source": src, "row": plain(list(r))})
                else:
                    kept[src].append(r)
    out.update(on_time_rows=sum(len(v) for v in kept.values()), dropped=dropped[:MAX_LISTED],
               dropped_rows=len(dropped), partly_counted_rows=len(partial))

    def run(rows: dict[str, list[tuple[Any, ...]]]) -> tuple[list[Any], list[dict[str, Any]]]:
        res = run_query({n: spark.createDataFrame(rows.get(n, []), sources[n]) for n in sources})
        fields = [{"name": f.name, "type": f.dataType.simpleString(), "metadata": dict(f.metadata or {})}
                  for f in res.schema.fields]
        return res.collect(), fields

    modes = ["append", "update", "complete"]
    if rule.not_in_complete:
        modes = [output_mode] if output_mode in ("append", "update") else [] if output_mode else ["append", "update"]
    variants: list[dict[str, Any]] = []
    try:
        if partial:
            rows, fields = _by_threshold(run, rule, batches, late, plan, plain)
        else:
            got, fields = run(kept) if modes else ([], [])
            rows = [plain(r) for r in got]
        if modes:
            variants.append({"late": [], "rows": rows, "modes": modes})
        every_rows: list[Any] | None = None
        if rule.not_in_complete and output_mode in (None, "complete"):
            got, fields = run(every)
            every_rows = [plain(r) for r in got]
            variants.append({"late": [], "rows": every_rows, "modes": ["complete"]})
        if dropped:  # what a wrong rule that counted the dropped rows gives (for mutants; judged by none)
            out["with_dropped"] = every_rows if every_rows is not None else [plain(r) for r in run(every)[0]]
    except _NoWindowColumn as e:
        out["undecided"] = str(e)
        return out
    except Exception as e:  # the query has no batch meaning (a streaming-only operator)
        first = str(e).strip().splitlines()[0] if str(e).strip() else ""
        out.update(applicable=False, reason=f"the query cannot run as a batch job: {type(e).__name__}: {first[:300]}")
        return out
    out.update(fields=fields, variants=variants)
    return out


class _NoWindowColumn(Exception):
    pass


def _window_column(plan: str) -> tuple[str, str] | None:
    """The output column that tells an output row's window, and which part of it.

    ``("w", "struct")``, ``("ws", "start")`` or ``("we", "end")``.
    """
    top = plan.splitlines()[0] if plan else ""
    m = re.search(r"(?<![\w#])\w+#\d+-T\d+ms\.(start|end) AS (\w+)#\d+", top)
    if m:
        return m.group(2), m.group(1)
    if not top.lstrip("~").startswith("Project"):
        m = re.search(r"\[(\w+)#\d+-T\d+ms[,\]]", top)
        return (m.group(1), "struct") if m else None
    m = re.search(r"(?<![\w.#])(\w+)#\d+-T\d+ms(?: AS (\w+)#\d+-T\d+ms)?[,\]]", top)
    return (m.group(2) or m.group(1), "struct") if m else None


def _by_threshold(run: Callable[..., Any], rule: LateRule, batches: Sequence[Mapping[str, Sequence[tuple[Any, ...]]]],
                  late: dict[int, int], plan: str, plain: Callable[[Any], Any]) -> tuple[list[Any], list[dict[str, Any]]]:
    """Sliding windows: one evaluation per distinct late-events watermark.

    A window ending at ``e`` counts the rows whose late-events watermark is below ``e``; one
    evaluation per distinct late-events watermark ``l_j`` over the rows with ``l <= l_j`` gives
    exactly the windows ending in ``(l_j, l_{j+1}]``.
    """
    where = _window_column(plan)
    (src, op), = rule.operands.items()
    if where is None:
        raise _NoWindowColumn("rows of sliding windows count in some of their windows only, and the output has no "
                              "column telling a row's window (select window, window.start or window.end)")
    col, part = where
    levels = sorted({late[b] for b, batch in enumerate(batches) if batch.get(src)})
    out: list[Any] = []
    fields: list[dict[str, Any]] = []
    for j, lj in enumerate(levels):
        upper = levels[j + 1] * 1000 if j + 1 < len(levels) else None
        rows = {n: [r for b, batch in enumerate(batches) for r in batch.get(n, [])
                    if n != src or late[b] <= lj] for n in {n for batch in batches for n in batch}}
        got, fields = run(rows)
        for r in got:
            v = r[col]
            end = event_time_us(v["end"] if part == "struct" else v)
            if end is not None and part == "start":
                end += op.size_us
            if end is not None and end > lj * 1000 and (upper is None or end <= upper):
                out.append(plain(r))
    return out, fields
