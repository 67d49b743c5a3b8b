"""Oracles that do not trust the engine's own failure-free run (``docs/your-query.md``, section 4).

``output-exactly-once`` compares a run with the failure-free run of the same engine: a bug that
happens with or without a failure (a window that never fires, a watermark that evicts live
state, a join that drops a match) makes the reference just as wrong. Three checks judge the
engine against something else:

``batch-equivalent``
    The final output table equals the same ``query`` evaluated as a *batch* job
    (``spark.createDataFrame(rows, SCHEMA)`` then ``query(df)``, in the recording's own session
    and release) over the input rows that were on time when they arrived. A row of data batch
    *b* whose event time is above the watermark Spark reported in force for batch *b* (the
    ``spark.progress`` events; the offset log's ``batchWatermarkMs`` where a killed driver took
    the progress with it) must count. A row at or below it is *late*: Spark drops it only where
    the state it would update is already evicted (a window still open takes it; the programming
    guide guarantees one direction only), so the batch job is evaluated without the late rows,
    with all of them, and with each one alone (:func:`evaluate_batch`); a key of the final table
    must equal one of those evaluations for that key, and equal *the* evaluation where they all
    agree. Update and complete mode: the whole final table (last row per ``KEY``). Append mode:
    every batch row whose event-time bound (an output column that carries Spark's event-time
    metadata, a window's ``end``, or the module's ``EVENT_TIME``) is at or below the last
    watermark must be in the output, and no output row may be one the batch job does not give.
    Not applicable, with the reason: arbitrary stateful operators
    (``applyInPandasWithState``, ``transformWithState``, ``flatMapGroupsWithState``),
    processing time, a watermark on a derived column, an append query whose bound nobody tells.
``release-differential``
    With ``--engine-version V``: the failure-free run's final table on V equals the one on the
    reference release R (``--reference-version``, default the pinned one); a difference is a
    violation naming both releases (and, where batch-equivalent applies, which one agrees with
    the batch job).
``recovery-succeeded``
    After an injected failure the query restarts from its own checkpoint. A restart that fails
    with the engine's exception (``spark.recovery_failed``), or ends without committing the
    batches left, is a violation naming the exception and the checkpoint; an exception raised by
    the user's own code is the module's (the recording says so), not the engine's. So is Spark's
    own state reader failing on the engine's checkpoint with the engine's exception
    (``spark.state_read_failed``): the state the engine wrote cannot be reloaded.

A failure-free run that fails on the release under test with the engine's exception (not raised
by the user's functions; pyspark's own code they call is the engine's) while the reference
release ran it to its end (``spark.reference_failed``) violates ``release-differential``, naming
both releases and the exception. A module that fails on the reference release too is the
module's own failure (the recording is refused, exit 2).

The recorder side (:func:`analyse_plan`, :func:`evaluate_batch`) runs inside the recording's
driver; the checks (:func:`oracle_plugins`) read only the trace.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from rollcheck.pyimpl.errors import InvalidInputError
from rollcheck.pyimpl.traces.plugin import TraceCheck
from rollcheck.pyimpl.verdict import Check

__all__ = [
    "ORACLE_CHECKS",
    "ARBITRARY_STATEFUL",
    "analyse_plan",
    "event_time_ms",
    "classify_rows",
    "evaluate_batch",
    "canon_row",
    "final_table",
    "batch_equivalent",
    "release_differential",
    "recovery_succeeded",
    "oracle_plugins",
    "OracleCheck",
]

#: The check names this module adds to every query replay.
ORACLE_CHECKS = ("batch-equivalent", "release-differential", "recovery-succeeded")
#: Logical plan nodes of arbitrary stateful processing (no batch meaning in the oracle's sense).
ARBITRARY_STATEFUL = ("FlatMapGroupsWithState", "FlatMapGroupsInPandasWithState", "TransformWithState",
                      "FlatMapGroupsInR", "FlatMapCoGroupsInPandasWithState")
_PROCESSING_TIME = re.compile(r"\b(current_timestamp|current_date|now|localtimestamp|current_time)\(")
_WATERMARK = re.compile(r"EventTimeWatermark (?:[0-9a-f-]{36}, )?(.+?)#(\d+): \w+, (.+)$")
_ALIAS = re.compile(r"(?<![\w.#])([A-Za-z_][\w]*)#(\d+)(?:-T\d+ms)? AS ([^\s,\]#]+)#(\d+)")
_RELATION = re.compile(r"(?:StreamingRelation|StreamingExecutionRelation|LogicalRDD|LocalRelation).*\[([^\[\]]*)\]")
#: At most this many late rows get an evaluation of their own (each is one small batch job).
MAX_SINGLE_LATE = 8


# ----------------------------------------------------------------------------- recorder side
def analyse_plan(plan: str, columns: Sequence[str]) -> dict[str, Any]:
    """What the streaming query's analysed plan tells the oracle: ``{"applicable": bool,
    "reason": str|None, "event_time": input column|None, "watermarked": bool}``.

    Examples
    --------
    >>> p = '''~Aggregate [window#11-T20000ms]
    ... +- ~EventTimeWatermark 4032c16a-9c4d-4e25-9af6-e0afe8eae570, ts#0: timestamp, 20 seconds
    ...    +- StreamingRelation FileSource[/x], [ts#0, page#1], name=<Unassigned>'''
    >>> analyse_plan(p, ["ts", "page"])["event_time"]
    'ts'
    >>> analyse_plan("FlatMapGroupsInPandasWithState f(user#1)", ["user"])["reason"][:40]
    'the query has an arbitrary stateful oper'
    """
    for node in ARBITRARY_STATEFUL:
        if re.search(rf"(^|[\s~]){node}\w*\b", plan, flags=re.M):
            return {"applicable": False, "event_time": None, "watermarked": False,
                    "reason": f"the query has an arbitrary stateful operator ({node}): its state follows the "
                              "user's function, not a batch query's meaning"}
    if _PROCESSING_TIME.search(plan):
        return {"applicable": False, "event_time": None, "watermarked": False,
                "reason": "the query reads processing time (current_timestamp/now): a batch job gives another time"}
    marks = [(m.group(1), int(m.group(2))) for m in (_WATERMARK.search(x) for x in plan.splitlines()) if m]
    if not marks:
        return {"applicable": True, "event_time": None, "watermarked": False, "reason": None}
    alias: dict[int, tuple[str, int]] = {}
    for m in _ALIAS.finditer(plan):
        alias[int(m.group(4))] = (m.group(1), int(m.group(2)))
    inputs: set[tuple[str, int]] = set()
    for m in _RELATION.finditer(plan):
        for a in m.group(1).split(","):
            a = a.strip()
            if "#" in a:
                name, _, num = a.rpartition("#")
                if num.isdigit():
                    inputs.add((name, int(num)))
    found: set[str] = set()
    for name, num in marks:
        seen = 0
        while num in alias and seen < 100:
            name, num = alias[num]
            seen += 1
        if (name, num) not in inputs or name not in columns:
            return {"applicable": False, "event_time": None, "watermarked": True,
                    "reason": f"the watermark is on {marks[0][0]}, a column computed from the input (not an "
                              "input column): the oracle cannot tell an input row's event time"}
        found.add(name)
    if len(found) > 1:
        return {"applicable": False, "event_time": None, "watermarked": True,
                "reason": f"watermarks on several input columns ({', '.join(sorted(found))})"}
    return {"applicable": True, "event_time": found.pop(), "watermarked": True, "reason": None}


def event_time_ms(v: Any) -> int | None:
    """An input row's event-time value in epoch milliseconds (naive datetimes are UTC, as the
    recorder writes them); None for a value that is not a time.

    Examples
    --------
    >>> event_time_ms(dt.datetime(1970, 1, 1, 0, 0, 2))
    2000
    """
    if isinstance(v, dt.datetime):
        if v.tzinfo is not None:
            v = v.astimezone(dt.UTC).replace(tzinfo=None)
        return int((v - dt.datetime(1970, 1, 1)).total_seconds() * 1000)
    if isinstance(v, dt.date):
        return event_time_ms(dt.datetime(v.year, v.month, v.day))
    return None


def classify_rows(batches: Sequence[Sequence[tuple[Any, ...]]], column: int | None,
                  watermarks: dict[int, int]) -> tuple[list[tuple[Any, ...]], list[tuple[int, tuple[Any, ...]]]]:
    """Split the input into rows on time (event time above the watermark in force in their
    batch) and late rows ``(batch, row)``. Without an event-time column every row is on time.

    Examples
    --------
    >>> t = lambda s: dt.datetime(1970, 1, 1, 0, 0, s)
    >>> on, late = classify_rows([[(t(5),)], [(t(1),), (t(9),)]], 0, {0: 0, 1: 2000})
    >>> len(on), late
    (2, [(1, (datetime.datetime(1970, 1, 1, 0, 0, 1),))])
    """
    on: list[tuple[Any, ...]] = []
    late: list[tuple[int, tuple[Any, ...]]] = []
    for b, rows in enumerate(batches):
        wm = int(watermarks.get(b, 0) or 0)
        for r in rows:
            ms = None if column is None else event_time_ms(r[column])
            if column is not None and wm > 0 and (ms is None or ms <= wm):
                late.append((b, r))
            else:
                on.append(r)
    return on, late


def evaluate_batch(run_query: Callable[[Any], Any], spark: Any, schema: str, columns: Sequence[str],
                   batches: Sequence[Sequence[tuple[Any, ...]]], watermarks: dict[int, int],
                   plan: str, plain: Callable[[Any], Any]) -> dict[str, Any]:
    """The batch evaluations of one run (the payload of a ``spark.batch_evaluation`` event).

    ``run_query(df)`` applies the user's ``query``; ``plan`` is the streaming query's analysed
    plan (:func:`analyse_plan`); ``watermarks`` the watermark in force per batch (ms).
    """
    info = analyse_plan(plan, columns)
    out: dict[str, Any] = {"applicable": info["applicable"], "reason": info["reason"],
                           "event_time": info["event_time"],
                           "watermarks": {str(b): w for b, w in sorted(watermarks.items())}}
    if not info["applicable"]:
        return out
    col = list(columns).index(info["event_time"]) if info["event_time"] else None
    on, late = classify_rows(batches, col, watermarks)
    out.update(on_time_rows=len(on), late=[{"batch": b, "row": plain(list(r))} for b, r in late])

    def run(rows: list[tuple[Any, ...]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        df = spark.createDataFrame(rows, schema)
        res = run_query(df)
        fields = [{"name": f.name, "type": f.dataType.simpleString(), "metadata": dict(f.metadata or {})}
                  for f in res.schema.fields]
        return [plain(r) for r in res.collect()], fields

    variants: list[dict[str, Any]] = []
    try:
        rows0, fields = run(on)
        variants.append({"late": [], "rows": rows0})
        if late:
            variants.append({"late": list(range(len(late))), "rows": run(on + [r for _, r in late])[0]})
            if len(late) > 1:
                for i, (_, r) in enumerate(late[:MAX_SINGLE_LATE]):
                    variants.append({"late": [i], "rows": run([*on, r])[0]})
    except Exception as e:  # the query has no batch meaning (a streaming-only operator)
        first = str(e).strip().splitlines()[0] if str(e).strip() else ""
        out.update(applicable=False, reason=f"the query cannot run as a batch job: {type(e).__name__}: {first[:300]}")
        return out
    out.update(fields=fields, variants=variants)
    return out


# ----------------------------------------------------------------------------- replay side
_TS = re.compile(r"^(\d{4}-\d{2}-\d{2})[T ](\d{2}:\d{2}:\d{2})(\.\d+)?(Z|[+-]00:?00)?$")


def _norm(v: Any) -> Any:
    if isinstance(v, str):
        m = _TS.match(v)
        if m:
            frac = (m.group(3) or ".0")[1:].ljust(6, "0")[:6]
            return f"{m.group(1)}T{m.group(2)}.{frac}"
        return v
    if isinstance(v, float):  # a sum of doubles may differ in its last bits with the order of its terms
        return int(v) if v.is_integer() else float(f"{v:.12g}")
    if isinstance(v, dict):
        return {k: _norm(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_norm(x) for x in v]
    return v


def canon_row(row: dict[str, Any], columns: Sequence[str] | None = None) -> str:
    """A row as a canonical string (timestamps in one notation), limited to ``columns``.

    Examples
    --------
    >>> canon_row({"t": "2024-01-01 00:00:05", "n": 2.0}) == canon_row({"t": "2024-01-01T00:00:05.000", "n": 2})
    True
    >>> canon_row({"avg": 0.1 + 0.2}) == canon_row({"avg": 0.3})
    True
    """
    cols = sorted(row) if columns is None else list(columns)
    return json.dumps({c: _norm(row.get(c)) for c in cols}, sort_keys=True, separators=(",", ":"), default=str)


def final_table(rows: Sequence[dict[str, Any]], key: Sequence[str],
                columns: Sequence[str] | None = None) -> dict[str, str]:
    """The last row per key (rows in output order) as canonical strings."""
    out: dict[str, str] = {}
    for r in rows:
        out[json.dumps([_norm(r.get(k)) for k in key], default=str)] = canon_row(r, columns)
    return out


def _ms(v: Any) -> int | None:
    if isinstance(v, str):
        m = _TS.match(v)
        if m:
            return event_time_ms(dt.datetime.fromisoformat(f"{m.group(1)}T{m.group(2)}{m.group(3) or ''}"))
    return None


def _bound_column(ev: dict[str, Any], header: dict[str, Any]) -> tuple[str | None, str]:
    """The output column that carries a row's event-time bound, and where it was learnt (the
    streaming result's schema: a batch job's carries no event-time metadata)."""
    fields = ev.get("stream_fields") or ev.get("fields") or []
    for f in fields:
        if "spark.watermarkDelayMs" in (f.get("metadata") or {}):
            if str(f.get("type", "")).startswith("struct<start:"):
                return f"{f['name']}.end", "Spark's plan (event-time metadata of a window)"
            return str(f["name"]), "Spark's plan (event-time metadata)"
    named = (header.get("config") or {}).get("event_time")
    if isinstance(named, str) and named:
        return named, "the module's EVENT_TIME"
    return None, ""


def _value(row: dict[str, Any], col: str) -> Any:
    if "." in col and col not in row:
        head, _, tail = col.partition(".")
        inner = row.get(head)
        return inner.get(tail) if isinstance(inner, dict) else None
    return row.get(col)


def _covered(late: int, singles: int, touching: int) -> bool:
    """Whether the evaluations (none, all, each late row alone) cover every subset of the late rows
    that change one key or row: always for up to two late rows, else when every late row was
    evaluated alone and at most one of them changes it.

    Examples
    --------
    >>> _covered(2, 2, 2), _covered(5, 5, 1), _covered(5, 5, 2), _covered(9, 8, 1)
    (True, True, False, False)
    """
    return late <= 2 or (singles == late and touching <= 1)


def _judge(name: str, run: str, ev: dict[str, Any], output: list[dict[str, Any]], header: dict[str, Any],
           seq: int, undecided: list[str]) -> Check | None:
    """One run's output against its batch evaluations; None when it agrees. A key (or row) that
    agrees with no evaluation while untried subsets of its late rows remain is added to
    ``undecided`` instead of being called a violation."""
    cfg = header.get("config") or {}
    key = [str(k) for k in cfg.get("key") or []]
    mode = cfg.get("output_mode")
    variants = ev.get("variants") or []
    names = [f["name"] for f in ev.get("fields") or []]
    cols = [c for c in names if not output or c in output[0]]
    if not set(key) <= set(cols):
        return Check.not_applicable(name, f"the {run} output's rows do not carry the query's columns "
                                          f"{key} (a sink of the user's own)")
    late = ev.get("late") or []
    singles = [i for i, v in enumerate(variants) if len(v.get("late") or []) == 1]
    if mode in ("update", "complete"):
        got = final_table(output, key, cols)
        tables = [final_table(v["rows"], key, cols) for v in variants]
        for k in sorted(set(got) | set().union(*[set(t) for t in tables])):
            options = {t.get(k) for t in tables}
            if got.get(k) in options:
                continue
            touching = sum(1 for i in singles if tables[i].get(k) != tables[0].get(k))
            if late and not _covered(len(late), len(singles), touching):
                undecided.append(f"{run} key {k}")
                continue
            want = tables[0].get(k)
            return Check.violated(name, f"{run} run: key {k} is {got.get(k) or 'missing'} in the final table; the "
                                        f"batch job over the on-time rows gives {want or 'no row'}"
                                        + (f" ({len(late)} late row(s) considered with and without)" if late else ""),
                                  offending_seq=seq)
        return None
    bound, where = _bound_column(ev, header)
    if bound is None:
        return Check.not_applicable(name, "append mode, and neither Spark's plan (event-time metadata of an output "
                                          "column) nor the module (EVENT_TIME = \"column\") tells a row's event-time "
                                          "bound")
    wms = [int(w) for w in (ev.get("watermarks") or {}).values() if w is not None]
    last = max(wms) if wms else 0
    have = Counter(canon_row(r, cols) for r in output)
    counts = [Counter(canon_row(r, cols) for r in v["rows"]) for v in variants]
    # copies written by the user's own sink are judged by the sink checks (its declared guarantee)
    own_sink = bool(cfg.get("user_sink"))
    for row in sorted(set(have) | set().union(*[set(c) for c in counts])):
        lo = min(c.get(row, 0) for c in counts)
        hi = max(c.get(row, 0) for c in counts)
        touching = sum(1 for i in singles if counts[i].get(row, 0) != counts[0].get(row, 0))
        if late and not _covered(len(late), len(singles), touching) and (have.get(row, 0) > hi or have.get(row, 0) < lo):
            undecided.append(f"{run} row {row}")
            continue
        if have.get(row, 0) > hi and not (own_sink and hi > 0):  # a user's sink: its copies are its own
            return Check.violated(name, f"{run} run: output row {row} is there {have[row]} time(s); the batch job "
                                        f"over the on-time rows gives it {hi} time(s)", offending_seq=seq)
        ms = _ms(_value(json.loads(row), bound))
        if ms is not None and ms <= last and have.get(row, 0) < lo:
            return Check.violated(name, f"{run} run: row {row} is final by the last watermark ({bound} <= "
                                        f"{last} ms, bound from {where}) and the batch job gives it {lo} time(s); "
                                        f"the output has it {have.get(row, 0)} time(s)", offending_seq=seq)
    return None


def _events(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [e for e in events if e.get("kind") in (kind, "spark." + kind)]


def batch_equivalent(header: dict[str, Any], events: list[dict[str, Any]]) -> Check | None:
    """``batch-equivalent`` (module docstring); None when the recording has no batch evaluation
    (a trace from before this oracle)."""
    name = "batch-equivalent"
    evals = _events(events, "batch_evaluation")
    if not evals:
        return None
    ref = next(iter(_events(events, "reference")), None)
    fin = next(iter(_events(events, "output_final")), None)
    outputs = {"reference": None if ref is None else (ref.get("output"), int(ref["seq"])),
               "final": None if fin is None else (fin.get("rows"), int(fin["seq"]))}
    judged: list[str] = []
    undecided: list[str] = []
    seen: set[str] = set()
    own_sink = bool((header.get("config") or {}).get("user_sink"))
    for ev in evals:
        run = str(ev.get("run"))
        if not ev.get("applicable"):
            return Check.not_applicable(name, str(ev.get("reason")))
        got = outputs.get(run)
        if got is None or got[0] is None:
            continue
        if own_sink and run == "final" and "reference" in seen:
            # what the user's sink made of the failure is the sink checks' (its declared guarantee)
            continue
        seen.add(run)
        output = list(got[0])
        bad = _judge(name, run, ev, output, header, got[1], undecided)
        if bad is not None:
            return bad
        judged.append(f"{run} ({len(output)} row(s); {ev.get('on_time_rows')} input row(s) on time, "
                      f"{len(ev.get('late') or [])} late)")
    if not judged:
        return Check.unchecked(name, "batch evaluations recorded but no output of the same run to judge")
    if undecided:
        return Check.unchecked(name, f"{len(undecided)} key(s)/row(s) agree with no evaluation and several late rows "
                                     f"touch them, not every subset of which was evaluated: {undecided[0]}")
    return Check.held(name, "equal to the query run as a batch job over the on-time input: " + "; ".join(judged),
                      examined=len(judged))


def release_differential(header: dict[str, Any], events: list[dict[str, Any]]) -> Check | None:
    """``release-differential`` (module docstring)."""
    name = "release-differential"
    rel = _events(events, "release_reference")
    mine = header.get("engine_version") or "the recording's release"
    if not rel:
        want = (header.get("config") or {}).get("reference_version")
        if want and want != mine:
            return Check.unchecked(name, f"no failure-free run on the reference release {want} in the trace")
        return Check.not_applicable(name, f"one release ({mine}): no --engine-version other than the reference")
    r = rel[0]
    other = r.get("engine_version")
    failed = next(iter(_events(events, "reference_failed")), None)
    if failed is not None:  # fails on the release under test, ran to its end on the reference release
        cause = f" (caused by {failed['cause']})" if failed.get("cause") else ""
        return Check.violated(name, f"the failure-free run on pyspark {failed.get('engine_version') or mine} failed "
                                    f"with the engine's exception {failed.get('exception')}: {failed.get('message')}"
                                    f"{cause} (checkpoint {failed.get('checkpoint')}, batches committed "
                                    f"{failed.get('batches')}); on {other} the same run ran to its end "
                                    f"({len(r.get('output') or [])} output row(s))",
                              offending_seq=int(failed["seq"]))
    ref = next((e for e in _events(events, "reference")), None)
    if ref is None:
        return Check.unchecked(name, f"no failure-free run on {mine} to compare with {other}'s")
    key = [str(k) for k in (header.get("config") or {}).get("key") or []]
    ev = next((e for e in _events(events, "batch_evaluation") if e.get("run") == "reference"
               and e.get("applicable") and e.get("variants")), None)
    cols = None if ev is None else [f["name"] for f in ev.get("fields") or []]
    a, b = final_table(ref.get("output") or [], key, cols), final_table(r.get("output") or [], key, cols)
    if a == b:
        return Check.held(name, f"the failure-free final table on pyspark {mine} equals the one on {other} "
                                f"({len(a)} key(s))", examined=max(1, len(a)))
    differ = sorted((set(a) ^ set(b)) | {x for x in a if x in b and a[x] != b[x]})
    if ev is not None and (header.get("config") or {}).get("output_mode") in ("update", "complete"):
        tables = [final_table(v["rows"], key, cols) for v in ev["variants"]]
        allowed = [k for k in differ if a.get(k) in {t.get(k) for t in tables} and b.get(k) in {t.get(k) for t in tables}]
        if len(allowed) == len(differ) and ev.get("late"):
            return Check.held(name, f"pyspark {mine} and {other} differ only at {len(differ)} key(s) where late "
                                    f"rows count on one and not the other (e.g. {differ[0]}): both agree with the "
                                    "batch job with or without those late rows (the watermark's guarantee holds in "
                                    "one direction only)", examined=max(1, len(a)))
    k = differ[0]
    which = ""
    if ev is not None:
        want = final_table(ev["variants"][0]["rows"], key, cols).get(k)
        which = (f"; the batch job over the on-time rows gives {want or 'no row'}: "
                 + (f"{mine} agrees" if a.get(k) == want else f"{other} agrees" if b.get(k) == want
                    else "neither agrees"))
    return Check.violated(name, f"pyspark {mine} and {other} give different final tables: key {k} is "
                                f"{a.get(k) or 'missing'} on {mine} and {b.get(k) or 'missing'} on {other}{which}",
                          offending_seq=int(ref["seq"]))


def recovery_succeeded(header: dict[str, Any], events: list[dict[str, Any]]) -> Check | None:
    """``recovery-succeeded`` (module docstring)."""
    name = "recovery-succeeded"
    failed = _events(events, "recovery_failed")
    if failed:
        f = failed[0]
        who = "the user's code" if f.get("user_code") else "the engine"
        cause = f" (caused by {f['cause']})" if f.get("cause") else ""
        check = Check.violated(name, f"the restart from checkpoint {f.get('checkpoint')} failed with {who}'s "
                                     f"exception: {f.get('exception')}: {f.get('message')}{cause}",
                               offending_seq=int(f["seq"]))
        return check
    unreadable = next(iter(_events(events, "state_read_failed")), None)
    if unreadable is not None:  # the engine's own reader could not reload the engine's own checkpoint
        cause = f" (caused by {unreadable['cause']})" if unreadable.get("cause") else ""
        return Check.violated(name, f"Spark's own state reader failed on the engine's checkpoint "
                                    f"{unreadable.get('checkpoint')} ({unreadable.get('run')} run, pyspark "
                                    f"{unreadable.get('engine_version') or header.get('engine_version')}) with the "
                                    f"engine's exception {unreadable.get('exception')}: {unreadable.get('message')}"
                                    f"{cause}: state the engine wrote cannot be reloaded",
                              offending_seq=int(unreadable["seq"]))
    failures = [e for e in events if e.get("kind") == "failure"]
    if not failures:
        return Check.not_applicable(name, "no failure in the run: no recovery to check")
    end = next((e for e in events if e.get("kind") == "end"), None)
    if end is None:
        return None  # end-of-run says the recording stopped
    last_fail = max(int(e["seq"]) for e in failures)
    starts = [e for e in _events(events, "attempt_start") if int(e["seq"]) > last_fail]
    if not starts:
        return Check.violated(name, "the query was not restarted after the failure", offending_seq=int(end["seq"]))
    planned = {int(e["batch"]) for e in _events(events, "batch_planned")}
    committed_after = {int(e["batch"]) for e in _events(events, "batch_committed") if int(e["seq"]) > last_fail}
    committed = {int(e["batch"]) for e in _events(events, "batch_committed")}
    left = sorted(planned - committed)
    if end.get("status") != "done" or left:
        return Check.violated(name, f"the restart from the checkpoint did not finish: batches {left} never "
                                    f"committed (end status {end.get('status')!r})", offending_seq=int(end["seq"]))
    return Check.held(name, f"{len(starts)} restart(s) from the checkpoint; {len(committed_after)} batch(es) "
                            "committed after the last failure and the run finished", examined=len(starts))


_MALFORMED = (TypeError, ValueError, KeyError, AttributeError, IndexError)


class OracleCheck(TraceCheck):
    """One oracle as a plug-in: ``fn(header, events) -> Check | None`` over the trace's own events
    (not the core events the adapter derived), after the last event."""

    def __init__(self, name: str, header: dict[str, Any], fn: Callable[..., Check | None],
                 source: str | None = None):
        self.name = name
        self.header = header
        self.fn = fn
        self.source = source
        self.events: list[dict[str, Any]] = []

    def on_event(self, v: Any, line: int, obj: dict[str, Any]) -> None:
        if not obj.get("derived"):
            self.events.append(obj)

    def finish(self, v: Any, results: dict[str, Check]) -> Check | None:
        try:
            return self.fn(self.header, self.events)
        except _MALFORMED as e:
            raise InvalidInputError(f"{self.name}: the trace's records this check reads are malformed "
                                    f"({type(e).__name__}: {e})", source=self.source) from None


def oracle_plugins(header: dict[str, Any], source: str | None) -> list[TraceCheck]:
    """The three oracles as trace plug-ins (each reads the trace's own events)."""
    return [OracleCheck("batch-equivalent", header, batch_equivalent, source),
            OracleCheck("release-differential", header, release_differential, source),
            OracleCheck("recovery-succeeded", header, recovery_succeeded, source)]
