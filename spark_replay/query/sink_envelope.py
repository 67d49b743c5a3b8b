"""The at-least-once envelope of a query's own ``foreachBatch`` sink (recorded after the run).

Where the module's ``read_output`` does not return one row per write (a ledger read back as
balances), extra copies cannot be counted in its result. The envelope bounds it instead: after the
run, the user's own ``sink`` is handed the run's batches again in a fresh folder, each batch that the
trace shows re-delivered after a failure once more per re-delivery (under a batch id the run never
used, so that the sink takes it for new data), and the folder is read back with ``read_output``.
With ``M`` re-deliveries there are ``M + 1`` tables: table ``m`` holds the first ``m`` extra
handings (in the order the run made them). An at-least-once sink's output must equal one of them
(:func:`rollcheck.spark_replay.query.user_sink.user_sink_output` judges it).

:func:`record_envelope` emits one ``spark.sink_envelope`` event: ``tables`` (``read_output``'s rows
per table), ``batches`` (the batch ids handed, in order), ``extra`` (``[{"batch": b, "as": id}]``,
the extra handings in order); or ``error`` (why it could not be built: the replay is then
*unchecked*, never conformant).

The batches handed are the rows the run first handed the sink for each batch id (its
``spark.sink_written`` events), as a DataFrame of the query's result schema.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["MAX_EXTRA", "handings_of", "record_envelope", "envelope_plan"]

#: At most this many extra handings are replayed (tables ``0 .. MAX_EXTRA``); more: ``error``.
MAX_EXTRA = 12


def handings_of(events: list[dict[str, Any]]) -> tuple[dict[int, list[Any]], list[int]]:
    """The first rows handed per batch id.

    And the batch ids re-delivered after a failure (one per re-delivery, in the order the run made
    them), from a trace's events.

    A later handing of a batch is a re-delivery after a failure when its attempt differs from the
    batch's previous handing and a ``failure`` event lies between them (as
    :func:`rollcheck.spark_replay.query.user_sink.sink_handings` counts them).

    Examples
    --------
    >>> ev = [{"seq": 1, "kind": "spark.sink_written", "batch": 0, "attempt": 1, "rows": [{"u": 1}]},
    ...       {"seq": 2, "kind": "failure"},
    ...       {"seq": 3, "kind": "spark.sink_written", "batch": 0, "attempt": 2, "rows": [{"u": 1}]},
    ...       {"seq": 4, "kind": "spark.sink_written", "batch": 1, "attempt": 2, "rows": []}]
    >>> handings_of(ev)
    ({0: [{'u': 1}], 1: []}, [0])
    """
    first: dict[int, list[Any]] = {}
    last: dict[int, dict[str, Any]] = {}
    redelivered: list[int] = []
    fails = sorted(int(e["seq"]) for e in events if str(e.get("kind", "")).rsplit(".", 1)[-1] == "failure")
    for e in sorted(events, key=lambda e: int(e.get("seq", 0))):
        if str(e.get("kind", "")).rsplit(".", 1)[-1] != "sink_written":
            continue
        b = int(e["batch"])
        prev = last.get(b)
        last[b] = e
        if prev is None:
            first[b] = list(e.get("rows") or [])
            continue
        if e.get("attempt", 1) != prev.get("attempt", 1) and \
                any(int(prev["seq"]) < s < int(e["seq"]) for s in fails):
            redelivered.append(b)
    return dict(sorted(first.items())), redelivered


def envelope_plan(batches: list[int], redelivered: list[int], m: int) -> list[tuple[int, int]]:
    """Table ``m``'s handings ``(batch, id handed as)``.

    Every batch in order, each of the first ``m`` re-deliveries right after its batch, under fresh
    ids past the run's.

    Examples
    --------
    >>> envelope_plan([0, 1, 2], [1, 1], 0)
    [(0, 0), (1, 1), (2, 2)]
    >>> envelope_plan([0, 1, 2], [1, 1], 2)
    [(0, 0), (1, 1), (1, 3), (1, 4), (2, 2)]
    """
    fresh = max(batches, default=-1) + 1
    extra: dict[int, list[int]] = {}
    for i, b in enumerate(redelivered[:m]):
        extra.setdefault(b, []).append(fresh + i)
    return [h for b in batches for h in [(b, b), *((b, x) for x in extra.get(b, []))]]


def _convert(value: Any, typ: str) -> Any:
    """A JSON value of the trace back to the Python value Spark takes for a column of ``typ``."""
    if value is None:
        return None
    if typ == "timestamp" or typ == "timestamp_ntz":
        return dt.datetime.fromisoformat(str(value))
    if typ == "date":
        return dt.date.fromisoformat(str(value))
    if typ.startswith("decimal"):
        return decimal.Decimal(str(value))
    if typ == "binary":
        return bytes.fromhex(str(value))
    return value


def _frame(spark: Any, rows: list[Any], fields: list[dict[str, Any]] | None) -> Any:
    """The rows as a DataFrame of the result schema (``fields``: name and Spark type per column)."""
    if not fields:
        return spark.createDataFrame(rows) if rows else None
    ddl = ", ".join(f"`{f['name']}` {f['type']}" for f in fields)
    data = [tuple(_convert(r.get(f["name"]), f["type"]) for f in fields) for r in rows]
    return spark.createDataFrame(data, schema=ddl)


def _read_events(path: Path) -> list[dict[str, Any]]:
    events = []
    for line in path.read_text(encoding="utf-8").splitlines()[1:]:
        try:
            e = json.loads(line)
        except ValueError:
            continue
        if isinstance(e, dict):
            events.append(e)
    return events


def record_envelope(spark: Any, uq: Any, root: Path, trace: Path, emit: Callable[..., Any],
                    fields: list[dict[str, Any]] | None, read_output: Callable[[Any, Path], Any]) -> None:
    """Build the envelope of an at-least-once user sink and emit ``spark.sink_envelope``.

    Does nothing for a query without its own sink or not declared at-least-once.

    Parameters
    ----------
    spark : SparkSession
        The recording's session.
    uq : UserQuery
        The user's query module (``has_sink``, ``sink_guarantee``, ``call``).
    root : Path
        The recording's work folder (the envelope's folders go under ``root/envelope``).
    trace : Path
        The trace written so far (its ``spark.sink_written`` and ``failure`` events are read).
    emit : callable
        ``emit(kind, **fields)`` of the trace writer.
    fields : list of dict, optional
        The query result's schema (``notes["stream_fields"]``): ``name`` and ``type`` per column.
    read_output : callable
        ``read_output(uq, folder)`` (the recorder's, with its checks of the module's answer).
    """
    if not getattr(uq, "has_sink", False) or getattr(uq, "sink_guarantee", None) != "at-least-once":
        return
    first, redelivered = handings_of(_read_events(trace))
    batches = sorted(first)
    kind = "spark.sink_envelope"
    if len(redelivered) > MAX_EXTRA:
        emit(kind, error=f"{len(redelivered)} re-deliveries after a failure (the envelope replays at most "
                         f"{MAX_EXTRA})", batches=batches, redelivered=redelivered)
        return
    base = root / "envelope"
    tables: list[Any] = []
    try:
        frames = {b: _frame(spark, rows, fields) for b, rows in first.items()}
        for m in range(len(redelivered) + 1):
            out = base / f"table-{m}"
            shutil.rmtree(out, ignore_errors=True)
            out.mkdir(parents=True)
            for b, as_id in envelope_plan(batches, redelivered, m):
                if frames[b] is not None:
                    uq.call("sink", frames[b], as_id, str(out))
            tables.append(read_output(uq, out))
    except Exception as e:  # the user's sink or read_output on the envelope: say why, judge nothing
        emit(kind, error=f"{type(e).__name__}: {str(e)[:300]}", batches=batches, redelivered=redelivered)
        return
    finally:
        shutil.rmtree(base, ignore_errors=True)
    plan = envelope_plan(batches, redelivered, len(redelivered))
    emit(kind, tables=tables, batches=batches,
         extra=[{"batch": b, "as": x} for b, x in plan if x != b])
