"""Deliberately broken copies of a recorded Flink trace, one per replay check they must trip.

- ``older-restore``: every operator restore after the failure names an older completed
  checkpoint (caught by ``restore-latest-completed``);
- ``barrier-after-snapshot``: one barrier arrival of an aligned keyed snapshot is moved to just
  after that snapshot (caught by ``barrier-alignment``);
- ``drop-failure``: the ``failure`` event (and the core ``recovery`` derived from it) is removed
  (``failure-observed`` is unchecked: the replay is inconclusive).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rollcheck.pyimpl.errors import InvalidInputError

__all__ = ["TAMPERS", "tamper"]

TAMPERS = {"older-restore": "restore-latest-completed", "barrier-after-snapshot": "barrier-alignment",
           "drop-failure": "failure-observed"}


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
    """Aligned: move the last barrier before a keyed snapshot to just after it. Unaligned (where
    the first barrier suffices): move every barrier and announcement of that snapshot after it."""
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


def tamper(src: str | Path, how: str, out: str | Path) -> str:
    """Write a tampered copy of ``src`` to ``out``; returns the check expected to catch it."""
    if how not in TAMPERS:
        raise InvalidInputError(f"unknown tampering {how!r} (one of {', '.join(TAMPERS)})")
    lines = Path(src).read_text().splitlines()
    header, events = lines[0], [json.loads(x) for x in lines[1:] if x.strip()]
    mode = json.loads(header).get("config", {}).get("checkpoints", "aligned")
    if how == "older-restore":
        events = _older_restore(events)
    elif how == "barrier-after-snapshot":
        events = _barrier_after_snapshot(events, mode)
    else:
        events = _drop_failure(events)
    for n, e in enumerate(events, start=1):
        e["seq"] = n
    tmp = Path(str(out) + ".tmp")
    tmp.write_text(header + "\n" + "".join(json.dumps(e) + "\n" for e in events))
    tmp.replace(out)
    return TAMPERS[how]
