"""Deliberately broken copies of a recorded Flink trace, one per replay check they must trip.

:data:`TAMPER_NAMES` lists them (``rollcheck flink tamper --how``). Both engines' tamper modules
share one file-level interface: :data:`TAMPER_NAMES` and :func:`tamper_file`
(``rollcheck.spark_replay.tamper`` has the same two).

See docs/internals/flink-checks.md#tamper for what each tamper does.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rollcheck.pyimpl.errors import InvalidInputError
from rollcheck.pyimpl.jsonio import decode_utf8, loads_json_line, read_input_bytes

__all__ = ["TAMPERS", "TAMPER_NAMES", "tamper", "tamper_file"]

TAMPERS = {"older-restore": "restore-latest-completed", "barrier-after-snapshot": "barrier-alignment",
           "drop-failure": "failure-observed", "lose-key": "keyed-state-restored-once",
           "duplicate-key": "keyed-state-restored-once", "wrong-owner": "keyed-state-restored-once",
           "duplicate-row": "output-exactly-once", "lose-user-key-group": "user-state-restored-once",
           "duplicate-user-key-group": "user-state-restored-once", "corrupt-user-state": "user-state-restored-once",
           "abandon-user-state": "user-state-restored-once", "lose-source-record": "operator-state-restored"}


def _keyed_restores(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rs = [e for e in events if e["kind"] == "flink.restore" and e.get("attempt", 0) > 0
          and e["task"] == "keyed" and e.get("keys")]
    if not rs:
        raise InvalidInputError("the trace has no key-by-key keyed restore after a failure")
    return rs


def _key_tamper(events: list[dict[str, Any]], how: str) -> list[dict[str, Any]]:
    """Change the restored keys of the first restoring keyed subtasks (see the module docstring)."""
    rs = _keyed_restores(events)
    src = rs[0]
    key = sorted(src["keys"])[0]
    value = src["keys"][key]
    others = [e for e in rs if e["attempt"] == src["attempt"] and e["subtask"] != src["subtask"]]
    if how == "lose-key":
        del src["keys"][key]
    elif not others:
        raise InvalidInputError("the restore has a single keyed subtask: no other subtask to move a key to")
    elif how == "duplicate-key":
        others[0]["keys"][key] = value
    else:  # wrong-owner: the key moves to another subtask
        del src["keys"][key]
        others[0]["keys"][key] = value
    return events


def _user_tamper(events: list[dict[str, Any]], how: str) -> list[dict[str, Any]]:
    """Change the restored keyed state of a user operator (see the module docstring)."""
    rs = [e for e in events if e["kind"] == "flink.user_state" and e["phase"] == "restore"
          and e.get("attempt", 0) > 0 and any(e["states"].values())]
    if not rs:
        raise InvalidInputError("the trace has no restored keyed state of a user operator after a failure")
    src = rs[0]
    state = next(st for st, keys in sorted(src["states"].items()) if keys)
    key = sorted(src["states"][state])[0]
    group = src["states"][state][key][0]
    if how == "corrupt-user-state":
        g, v = src["states"][state][key]
        src["states"][state][key] = [g, f"{v}+tampered"]
        return events
    moved = {st: {k: gv for k, gv in keys.items() if gv[0] == group} for st, keys in src["states"].items()}
    if how == "lose-user-key-group":
        for st, keys in moved.items():
            for k in keys:
                del src["states"][st][k]
        return events
    others = [e for e in rs + [e for e in events if e["kind"] == "flink.user_state" and e["phase"] == "restore"]
              if e["attempt"] == src["attempt"] and e["operator"] == src["operator"] and e["subtask"] != src["subtask"]]
    if not others:
        raise InvalidInputError("the restore has a single subtask: no other subtask to hand the key group to")
    for st, keys in moved.items():
        others[0]["states"].setdefault(st, {}).update(keys)
    return events


def _abandon_user_state(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Make a user operator abandon its restored state after the first restore.

    Its snapshots keep the restored values under the old state names and the keys' new values under
    new names (docs/internals/flink-checks.md#tamper).
    """
    rs = [e for e in events if e["kind"] == "flink.user_state" and e["phase"] == "restore"
          and e.get("attempt", 0) > 0 and any(e["states"].values())]
    if not rs:
        raise InvalidInputError("the trace has no restored keyed state of a user operator after a failure")
    def snapshots(op: str, attempt: int) -> list[dict[str, Any]]:
        return [e for e in events if e["kind"] == "flink.user_state" and e["phase"] == "snapshot"
                and e["operator"] == op and e["attempt"] == attempt]

    pair = next(((e["operator"], e["attempt"]) for e in rs if snapshots(e["operator"], e["attempt"])), None)
    if pair is None:
        raise InvalidInputError("the trace has no snapshot of a restored user operator after its restore")
    op, attempt = pair
    restored: dict[str, dict[str, Any]] = {}
    for e in rs:
        if e["operator"] == op and e["attempt"] == attempt:
            for st, keys in e["states"].items():
                restored.setdefault(st, {}).update(keys)
    snaps = snapshots(op, attempt)
    for e in snaps:
        for st, keys in list(e["states"].items()):
            if st in restored:
                e["states"][st + "-reopened"] = keys
                e["states"][st] = {k: gv for k, gv in restored[st].items()}
    return events


def _duplicate_row(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    tx = next((e for e in events if e["kind"] == "flink.sink_output" and e.get("sink") == "tx"), None)
    if tx is None or not tx["lines"]:
        raise InvalidInputError("the trace has no committed transactional output")
    tx["lines"].append(tx["lines"][len(tx["lines"]) // 2])
    return events


def _lose_source_record(head: dict[str, Any], events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Restore one record fewer of the last source (``SOURCES``).

    In the first source subtask after the failure that restored records of that source.
    """
    names = (head.get("sources") or {}).get("names") if isinstance(head.get("sources"), dict) else None
    if not isinstance(names, list) or len(names) < 2:
        raise InvalidInputError("the trace is not of a job with several input streams (no header \"sources\")")
    last = len(names) - 1
    for e in events:
        if e["kind"] == "flink.restore" and e.get("attempt", 0) > 0 and e.get("task") == "source" \
                and len(e.get("per_key") or []) == len(names) and e["per_key"][last] > 0:
            e["per_key"][last] -= 1
            e["records"] = int(e.get("records") or 0) - 1
            return events
    raise InvalidInputError(f"the trace has no source restore after a failure holding records of {names[last]!r}")


def _older_restore(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    restores = [e for e in events if e["kind"] == "flink.restore" and e.get("attempt", 0) > 0]
    if not restores or restores[0]["checkpoint"] is None:
        raise InvalidInputError("the trace has no restore of a checkpoint to make older")
    rid = restores[0]["checkpoint"]
    older = sorted({e["checkpoint"] for e in events if e["kind"] == "flink.checkpoint_completed"
                    and e["checkpoint"] < rid})
    if not older:
        raise InvalidInputError(f"no completed checkpoint older than the restored {rid}")
    for e in restores:
        e["checkpoint"] = older[-1]
    return events


def _barrier_after_snapshot(events: list[dict[str, Any]], mode: str) -> list[dict[str, Any]]:
    """Move barriers of a keyed snapshot to after it.

    Aligned: the last barrier before the snapshot moves to just after it. Unaligned (where the first
    barrier suffices): every barrier and announcement of that snapshot moves after it.
    """
    sources = {(e["attempt"], e["checkpoint"]) for e in events
               if e["kind"] == "flink.snapshot" and e["task"] == "source"}
    kinds = ("flink.barrier",) if mode == "aligned" else ("flink.barrier", "flink.barrier_announcement")
    for e in events:
        if e["kind"] != "flink.snapshot" or e["task"] != "keyed" or (e["attempt"], e["checkpoint"]) not in sources:
            continue
        key = (e["subtask"], e["attempt"], e["checkpoint"])
        i = events.index(e)
        before = [b for b in events[:i] if b["kind"] in kinds
                  and (b["subtask"], b["attempt"], b["checkpoint"]) == key]
        if not before:
            continue
        moved = before[-1:] if mode == "aligned" else before
        rest = [x for x in events if not any(x is m for m in moved)]
        j = next(k for k, x in enumerate(rest) if x is e)
        return rest[:j + 1] + moved + rest[j + 1:]
    raise InvalidInputError("the trace has no keyed snapshot preceded by a barrier")


def _drop_failure(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    # the core recovery the recorder derives from the failure goes with it (a recovery without a
    # failure before it is not a trace)
    kept = [e for e in events if e["kind"] not in ("failure", "recovery")]
    if len(kept) == len(events):
        raise InvalidInputError("the trace has no failure event")
    return kept


def _cut_tail(text: str, lines: list[str], source: str) -> str:
    """The last line of a trace cut mid-line (no newline, not JSON), removed from ``lines``.

    The trace readers take such a line as the recording's end (the trace is *truncated*); the
    tampered copy keeps it as its own last line, so it is truncated there too.
    """
    if len(lines) < 2 or text.endswith(("\n", "\r")):
        return ""
    try:
        loads_json_line(lines[-1], source, len(lines))
    except InvalidInputError:
        return lines.pop()
    return ""


def tamper(src: str | Path, how: str, out: str | Path) -> str:
    """Write a tampered copy of ``src`` to ``out``; returns the check expected to catch it.

    Parameters
    ----------
    src : str or Path
        The recorded Flink trace.
    how : str
        The tampering, one of :data:`TAMPERS`.
    out : str or Path
        The tampered trace to write.

    Returns
    -------
    str
        The name of the check expected to catch it.
    """
    if how not in TAMPERS:
        raise InvalidInputError(f"unknown tampering {how!r} (one of {', '.join(TAMPERS)})")
    # every line under the input bounds of rollcheck.pyimpl.jsonio (nesting, numbers), named by its
    # line: a line nested too deeply is bad input (exit 2), not an internal RecursionError
    source = str(src)
    text = decode_utf8(read_input_bytes(src), source)
    lines = text.splitlines()
    tail = _cut_tail(text, lines, source)  # a recording cut mid-line keeps its cut line, unchanged
    if not lines or not lines[0].strip():
        raise InvalidInputError("empty file or no header on line 1", source=source)
    header = lines[0]
    head = loads_json_line(header, source, 1)
    if not isinstance(head, dict):
        raise InvalidInputError("the header must be a JSON object", source=source, location="line 1")
    events = []
    for n, x in enumerate(lines[1:], start=2):
        if not x.strip():
            continue
        e = loads_json_line(x, source, n)
        if not isinstance(e, dict) or not isinstance(e.get("kind"), str):
            raise InvalidInputError("an event must be a JSON object with a string \"kind\"",
                                    source=source, location=f"line {n}")
        events.append(e)
    cfg = head.get("config")
    mode = cfg.get("checkpoints", "aligned") if isinstance(cfg, dict) else "aligned"
    if how == "older-restore":
        events = _older_restore(events)
    elif how == "barrier-after-snapshot":
        events = _barrier_after_snapshot(events, mode)
    elif how in ("lose-key", "duplicate-key", "wrong-owner"):
        events = _key_tamper(events, how)
    elif how in ("lose-user-key-group", "duplicate-user-key-group", "corrupt-user-state"):
        events = _user_tamper(events, how)
    elif how == "abandon-user-state":
        events = _abandon_user_state(events)
    elif how == "duplicate-row":
        events = _duplicate_row(events)
    elif how == "lose-source-record":
        events = _lose_source_record(head, events)
    else:
        events = _drop_failure(events)
    for n, e in enumerate(events, start=1):
        e["seq"] = n
    tmp = Path(str(out) + ".tmp")
    tmp.write_text(header + "\n" + "".join(json.dumps(e) + "\n" for e in events) + tail)
    tmp.replace(out)
    return TAMPERS[how]


#: The tamperings, by the name ``rollcheck flink tamper --how`` takes.
TAMPER_NAMES = tuple(TAMPERS)


def tamper_file(src: str | Path, how: str, out: str | Path) -> dict[str, Any]:
    """:func:`tamper`, with the result both engines' tamper modules share.

    Parameters
    ----------
    src : str or Path
        The recorded Flink trace.
    how : str
        The tampering, one of :data:`TAMPERS`.
    out : str or Path
        The tampered trace to write.

    Returns
    -------
    dict
        ``{"trace", "how", "expected_check", "expected_first_offending_seq": None}``.
    """
    return {"trace": str(out), "how": how, "expected_check": tamper(src, how, out),
            "expected_first_offending_seq": None}
