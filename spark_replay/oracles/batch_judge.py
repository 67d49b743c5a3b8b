"""The output tables the batch-equivalence oracles compare, and the judgement of one batch run.

Rows canonicalised across releases and JSON (:func:`canon_row`), the final table of an output
(:func:`final_table`: the last row per KEY) and the judgement of a recording's output against one
batch evaluation (``_judge``) — shared by ``batch-equivalent`` (:mod:`rollcheck.spark_replay.oracles.checks`)
and the upgrade's evaluation (:mod:`rollcheck.spark_replay.oracles.upgrade_eval`).
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections import Counter
from collections.abc import Sequence
from typing import Any

from rollcheck.pyimpl.verdict import Check
from rollcheck.spark_replay.oracles.batch_eval import event_time_ms

__all__ = ["canon_row", "final_table"]


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

    Parameters
    ----------
    row : dict
        The row.
    columns : Sequence of str, optional
        The columns kept; None for all.

    Returns
    -------
    str
        The canonical string.

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
    """The last row per key (rows in output order) as canonical strings.

    Parameters
    ----------
    rows : Sequence of dict
        The output rows, in order.
    key : Sequence of str
        The KEY columns.
    columns : Sequence of str, optional
        The columns compared; None for all.

    Returns
    -------
    dict
        Key as JSON -> canonical row.
    """
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
    """The output column that carries a row's event-time bound.

    And where it was learnt (the streaming result's schema: a batch job's carries no event-time
    metadata).
    """
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


def _variant(ev: dict[str, Any], mode: str | None) -> dict[str, Any] | None:
    """The evaluation the run is judged against.

    By Spark's lateness rule, the one for the run's output mode (an event from before the rule: its
    only evaluation, when it had no late row).
    """
    variants = ev.get("variants") or []
    if "rule" not in ev:
        return variants[0] if variants and not ev.get("late") else None
    return next((v for v in variants if mode in (v.get("modes") or [])), None)


def _judge(name: str, run: str, ev: dict[str, Any], output: list[dict[str, Any]], header: dict[str, Any],
           seq: int) -> Check | None:
    """One run's output against the batch job over the rows Spark's lateness rule keeps.

    None when it agrees.
    """
    cfg = header.get("config") or {}
    key = [str(k) for k in cfg.get("key") or []]
    mode = cfg.get("output_mode")
    v = _variant(ev, mode)
    if v is None:
        return Check.unchecked(name, f"the {run} run's batch evaluation has none for {mode} mode by Spark's lateness "
                                     "rule (recorded before the rule: record the query again)")
    names = [f["name"] for f in ev.get("fields") or []]
    cols = [c for c in names if not output or c in output[0]]
    if not set(key) <= set(cols):
        return Check.not_applicable(name, f"the {run} output's rows do not carry the query's columns "
                                          f"{key} (a sink of the user's own)")
    rule = f" ({ev['rule']})" if ev.get("rule") else ""
    if mode in ("update", "complete"):
        got, want = final_table(output, key, cols), final_table(v["rows"], key, cols)
        for k in sorted(set(got) | set(want)):
            if got.get(k) != want.get(k):
                return Check.violated(name, f"{run} run: key {k} is {got.get(k) or 'missing'} in the final table; the "
                                            f"batch job over the rows Spark's lateness rule keeps gives "
                                            f"{want.get(k) or 'no row'}{rule}", offending_seq=seq)
        return None
    bound, where = _bound_column(ev, header)
    if bound is None:
        return Check.not_applicable(name, "append mode, and neither Spark's plan (event-time metadata of an output "
                                          "column) nor the module (EVENT_TIME = \"column\") tells a row's event-time "
                                          "bound")
    wms = [int(w) for w in (ev.get("watermarks") or {}).values() if w is not None]
    last = max(wms) if wms else 0
    have = Counter(canon_row(r, cols) for r in output)
    want_n = Counter(canon_row(r, cols) for r in v["rows"])
    # copies written by the user's own sink are judged by the sink checks (its declared guarantee)
    own_sink = bool(cfg.get("user_sink"))
    for row in sorted(set(have) | set(want_n)):
        if have.get(row, 0) > want_n.get(row, 0) and not (own_sink and want_n.get(row, 0) > 0):
            return Check.violated(name, f"{run} run: output row {row} is there {have[row]} time(s); the batch job "
                                        f"over the rows Spark's lateness rule keeps gives it {want_n.get(row, 0)} "
                                        f"time(s){rule}", offending_seq=seq)
        ms = _ms(_value(json.loads(row), bound))
        if ms is not None and ms <= last and have.get(row, 0) < want_n.get(row, 0):
            return Check.violated(name, f"{run} run: row {row} is final by the last watermark ({bound} <= "
                                        f"{last} ms, bound from {where}) and the batch job gives it "
                                        f"{want_n.get(row, 0)} time(s); the output has it {have.get(row, 0)} "
                                        f"time(s){rule}", offending_seq=seq)
    return None
