"""Whose fault an exception inside a Flink check is: the trace's (malformed events) or rollcheck's.

A check of ``flink replay`` that raises ``TypeError``, ``KeyError``, ``ValueError`` ... was handed
either events that are not what the recorder writes (bad input: exit 2) or well-formed events it
mishandled (a bug in rollcheck: exit 4). :func:`malformed_reason` tells them apart by checking the
events against the recorder's format: every field each kind always carries, the JSON type of every
field, and the rows of the sinks. It is strict (anything it does not recognise is malformed), so an
error is blamed on rollcheck only when every event is as the recorder writes it.
:func:`check_error` turns the exception into the error to raise.

Examples
--------
>>> ok = [{"seq": 1, "kind": "flink.job_state", "state": "RUNNING", "t": 0.1}]
>>> malformed_reason({}, ok) is None
True
>>> malformed_reason({}, [{"seq": 1, "kind": "flink.job_state", "t": 0.1}])
'seq 1 (flink.job_state): no field "state"'
>>> type(check_error("x", TypeError("bad operand"), {}, ok, None)).__name__
'InternalError'
"""

from __future__ import annotations

import json
from typing import Any

from rollcheck.pyimpl.errors import InternalError, InvalidInputError, RollcheckError

__all__ = ["REQUIRED", "malformed_reason", "check_error"]

SEP = "\x1f"

#: The fields the recorder writes on every event of a kind (besides ``seq`` and ``kind``).
REQUIRED: dict[str, tuple[str, ...]] = {
    "failure": ("failed_task", "failure", "processes", "record", "t"),
    "flink.barrier": ("attempt", "channel", "checkpoint", "gate", "subtask", "t", "task"),
    "flink.barrier_announcement": ("attempt", "checkpoint", "subtask", "t", "task"),
    "flink.batch_output": ("final_state", "reason", "subtasks"),
    "flink.channel_state": ("checkpoint", "holders", "input_bytes", "output_bytes", "reason", "t"),
    "flink.checkpoint_completed": ("checkpoint", "duration_ms", "persisted_bytes", "t", "type"),
    "flink.failure_during_restore": ("failed_task", "failure", "in_attempt", "phase", "processes",
                                     "record", "second", "subtask", "t"),
    "flink.job_state": ("state", "t"),
    "flink.notify_complete": ("attempt", "checkpoint", "subtask", "t", "task"),
    "flink.recovery_failed": ("checkpoint", "exception", "final_state", "message", "restarts", "t",
                              "user_code"),
    "flink.release_reference": ("engine_version", "final_state", "lines", "seconds"),
    "flink.restore": ("attempt", "checkpoint", "records", "subtask", "t", "task"),
    "flink.restore_interrupted": ("attempt", "checkpoint", "key_groups", "keys", "max_parallelism",
                                  "parallelism", "records", "subtask", "t", "task"),
    "flink.restore_reported": ("checkpoint", "t"),
    "flink.sink_commit": ("file", "lines", "t"),
    "flink.sink_output": ("lines", "sink"),
    "flink.snapshot": ("attempt", "checkpoint", "inflight_records", "records", "subtask", "t", "task"),
    "flink.task_finished": ("attempt", "records", "subtask", "t", "task"),
    "flink.taskmanager_lost": ("t", "taskmanager"),
    "flink.user_state": ("attempt", "backend", "checkpoint", "key_groups", "max_parallelism", "name",
                         "operator", "parallelism", "phase", "states", "subtask", "t"),
}

_INT = ("attempt", "channel", "duration_ms", "gate", "generation", "in_attempt", "inflight_records",
        "max_parallelism", "parallelism", "persisted_bytes", "records", "restarts", "subtask", "seq", "input_bytes", "output_bytes",
        "source_record")
_STR = ("backend", "engine_version", "exception", "failed_task", "failure", "file", "final_state",
        "message", "name", "operator", "phase", "second", "sink", "state", "task", "taskmanager",
        "type", "kind", "source", "where")


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _json_text(s: Any) -> bool:
    if not isinstance(s, str):
        return False
    try:
        json.loads(s)
    except ValueError:
        return False
    return True


def _row(row: Any, keyed: bool, sink: Any) -> str | None:
    """Why a row of sink ``sink`` is not as the recorder writes it (None when it is).

    The user's own sink's rows (``user``, ``user-reference``) are JSON values, the keys handed to it
    (``handed-*``) JSON texts, the others ``N<US>KEY<US>ROW`` (a user's job) or ``WORD,COUNT`` (the
    word count).
    """
    if sink in ("user", "user-reference"):
        return None
    if isinstance(sink, str) and sink.startswith("handed-"):
        return None if _json_text(row) else f"row {str(row)[:60]!r} is not JSON text"
    if not isinstance(row, str):
        return f"a row is {type(row).__name__}, not text"
    if keyed or SEP in row:
        parts = row.split(SEP)
        if len(parts) != 3 or not parts[0].isdigit() or not all(map(_json_text, parts[1:])):
            return f"row {row[:60]!r} is not N<US>KEY<US>ROW"
        return None
    word, comma, count = row.rpartition(",")
    if not comma or not word or not count.isdigit():
        return f"row {row[:60]!r} is not WORD,COUNT"
    return None


def _nested(k: str, v: Any) -> str | None:
    """Why field ``k``'s container value is not as the recorder writes it."""
    if k in ("key_groups", "per_key"):
        return None if isinstance(v, list) and all(map(_is_int, v)) else "not a list of integers"
    if k in ("processes", "holders"):
        return None if isinstance(v, list) and all(isinstance(x, str) for x in v) else "not a list of texts"
    if k == "keys":
        ok = isinstance(v, dict) and all(_json_text(x) and _is_int(n) for x, n in v.items())
        return None if ok else "not a mapping of JSON keys to counts"
    if k == "states":
        ok = isinstance(v, dict) and all(isinstance(s, dict) and all(
            isinstance(e, list) and len(e) == 2 and isinstance(e[1], str) for e in s.values()) for s in v.values())
        return None if ok else "not a mapping of states to {key: [value, namespace]}"
    if k == "subtasks":
        if not isinstance(v, list) or not all(isinstance(x, list) for x in v):
            return "not a list of lists of rows"
        for rows in v:
            for r in rows:
                if not isinstance(r, str) or len(r.split(SEP)) != 2 or not all(map(_json_text, r.split(SEP))):
                    return f"row {str(r)[:60]!r} is not KEY<US>ROW"
        return None
    return f"unknown field {k!r}"


def _field(kind: str, k: str, v: Any, keyed: bool, sink: Any = None) -> str | None:
    """Why field ``k`` of an event of ``kind`` is not as the recorder writes it."""
    if k in _INT:
        return None if _is_int(v) else "not an integer"
    if k in _STR:
        return None if isinstance(v, str) else "not text"
    if k in ("checkpoint", "record", "after_checkpoint"):
        return None if v is None or _is_int(v) else "neither an integer nor null"
    if k in ("t", "seconds"):
        return None if isinstance(v, (int, float)) and not isinstance(v, bool) else "not a number"
    if k == "reason":
        return None if v is None or isinstance(v, str) else "neither text nor null"
    if k in ("user_code", "derived"):
        return None if isinstance(v, bool) else "not true/false"
    if k == "lines":
        if kind == "flink.sink_commit":
            return None if _is_int(v) else "not an integer"
        if not isinstance(v, list):
            return "not a list of rows"
        return next((w for w in (_row(r, keyed, sink) for r in v) if w), None)
    return _nested(k, v)


def malformed_reason(header: dict[str, Any], events: list[dict[str, Any]]) -> str | None:
    """The first way ``events`` differ from what the Flink recorder writes, or None.

    Parameters
    ----------
    header : dict
        The trace's header (a user's job, with ``key_format``, writes keyed rows).
    events : list of dict
        The Flink events a check read.

    Returns
    -------
    str or None
        ``"seq S (KIND): field F: reason"``, or None when every event is well-formed.
    """
    if not isinstance(header, dict):
        return "the header is not an object"
    keyed = "key_format" in header
    for e in events:
        if not isinstance(e, dict):
            return f"an event is {type(e).__name__}, not an object"
        kind, seq = e.get("kind"), e.get("seq")
        if kind == "end":
            continue
        if kind not in REQUIRED:
            return f"seq {seq}: unknown kind {kind!r}"
        for k in REQUIRED[kind]:
            if k not in e:
                return f'seq {seq} ({kind}): no field "{k}"'
        for k, v in e.items():
            why = _field(str(kind), k, v, keyed, e.get("sink"))
            if why is not None:
                return f"seq {seq} ({kind}): field {k!r}: {why}"
    return None


def check_error(name: str, e: BaseException, header: dict[str, Any], events: list[dict[str, Any]],
                source: Any) -> RollcheckError:
    """The error to raise for exception ``e`` of check ``name`` on ``events``.

    Bad input (:class:`InvalidInputError`, exit 2) when ``e`` is one already or the events are
    malformed (:func:`malformed_reason`); otherwise :class:`InternalError` (exit 4), naming rollcheck.
    """
    why = f"{type(e).__name__}: {e}"
    if not isinstance(e, InvalidInputError):
        shape = malformed_reason(header, events)
        if shape is None:
            return InternalError(f"{name}: rollcheck's check raised {why} on events that are as the recorder "
                                 "writes them (a bug in rollcheck, not in the trace)")
        why = f"{shape}; {why}"
    return InvalidInputError(f"{name}: the trace's Flink events are malformed ({why})", source=source)
