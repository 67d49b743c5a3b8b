"""Deliberately broken traces: the replay must call each one non-conformant at the right event.

Each function takes a parsed trace and returns ``(lines, seq)``: the text lines of a tampered trace
(sequence numbers renumbered so that the file stays well-formed; event kinds are matched with or
without the ``spark.`` prefix) and the ``seq`` of the first event
that the tampering makes wrong - the event a correct replay must name as first offending:

- :func:`drop_commit`: delete the ``batch_committed`` of a batch (the next ``batch_planned`` - or,
  for the last batch, the first end-of-run record - becomes wrong);
- :func:`move_resume`: shift the resume batch of the first ``restart`` (the restart is wrong);
- :func:`delete_forced_checkpoint`: delete a forced ``checkpoint`` (the delivery it preceded is
  wrong: the protocol would force a checkpoint there);
- :func:`drop_retried_state`: in a ``retry`` recording, delete the state files of version K+1 that
  the retried partition committed (the retried task's state is lost: the restart that resumed
  after batch K from that state is wrong).

Both engines' tamper modules share one file-level interface: :data:`TAMPER_NAMES` and
:func:`tamper_file` (``rollcheck.flink_replay.checks.tamper`` has the same two).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rollcheck.pyimpl.errors import InvalidInputError
from rollcheck.spark_replay.checkpoint.watcher import base_kind
from rollcheck.spark_replay.trace import Trace

_END = ("final_state", "sink_final", "side_channel", "state_crosscheck", "end")

__all__ = ["drop_commit", "move_resume", "delete_forced_checkpoint", "drop_retried_state", "TAMPERS",
           "TAMPER_NAMES", "tamper_file", "to_lines"]


def to_lines(header: dict[str, Any], events: list[dict[str, Any]]) -> list[str]:
    """Serialise with fresh sequence numbers 1, 2, ...

    Parameters
    ----------
    header : dict
        The trace's header.
    events : list of dict
        The events (their ``_line`` dropped).

    Returns
    -------
    list of str
        The JSON lines, header first.
    """
    out = [json.dumps(header)]
    for k, e in enumerate(events, 1):
        d = {kk: v for kk, v in e.items() if kk != "_line"}
        d["seq"] = k
        out.append(json.dumps(d))
    return out


def _delete(trace: Trace, idx: int) -> tuple[list[str], int]:
    events = trace.events[:idx] + trace.events[idx + 1:]
    return to_lines(trace.header, events), idx + 1  # the next event takes the deleted one's seq


def drop_commit(trace: Trace, batch: int | None = None) -> tuple[list[str], int]:
    """Delete the commit of ``batch`` (default: the first committed batch).

    Parameters
    ----------
    trace : Trace
        The trace read.
    batch : int, optional
        The batch whose commit is deleted; None for the first committed batch.

    Returns
    -------
    tuple of (list of str, int)
        The tampered lines and the seq a correct replay must name first.
    """
    for k, e in enumerate(trace.events):
        if base_kind(e["kind"]) == "batch_committed" and (batch is None or e.get("batch") == batch):
            b = int(e["batch"])
            lines, _ = _delete(trace, k)
            rest = trace.events[k + 1:]
            nxt = next((j for j, x in enumerate(rest)
                        if (base_kind(x["kind"]) == "batch_planned" and x.get("batch") == b + 1)
                        or base_kind(x["kind"]) in _END), None)
            if nxt is None:
                raise InvalidInputError("nothing after the dropped commit would be wrong")
            return lines, k + 1 + nxt
    raise InvalidInputError("the trace has no batch_committed event to drop")


def move_resume(trace: Trace, delta: int = 1) -> tuple[list[str], int]:
    """Shift the first restart's ``resume_batch`` by ``delta``.

    Parameters
    ----------
    trace : Trace
        The trace read.
    delta : int, optional
        How far ``resume_batch`` moves.

    Returns
    -------
    tuple of (list of str, int)
        The tampered lines and the seq a correct replay must name first.
    """
    events = [dict(e) for e in trace.events]
    for k, e in enumerate(events):
        if base_kind(e["kind"]) == "restart" and isinstance(e.get("resume_batch"), int):
            e["resume_batch"] += delta
            return to_lines(trace.header, events), k + 1
    raise InvalidInputError("the trace has no restart with a resume batch")


def delete_forced_checkpoint(trace: Trace) -> tuple[list[str], int]:
    """Delete the first forced checkpoint."""
    for k, e in enumerate(trace.events):
        if e["kind"] == "checkpoint" and e.get("forced"):
            return _delete(trace, k)
    raise InvalidInputError("the trace has no forced checkpoint")


def drop_retried_state(trace: Trace) -> tuple[list[str], int]:
    """Delete every ``state_committed`` of version K+1 of the retried partition.

    The partition is the one whose task failed after its commit and was retried (the ``retry``
    failure's ``failed_attempt``): the trace of a recovery that lost the retried task's state.
    The first ``restart`` after the failure is wrong: the span model cannot resume at batch K+1
    without that version.
    """
    fail = next((e for e in trace.events if e["kind"] == "failure" and e.get("mode") == "retry"
                 and isinstance(e.get("failed_attempt"), dict)), None)
    if fail is None:
        raise InvalidInputError("the trace has no retry failure with its failed task attempt")
    part, version = fail["failed_attempt"].get("partition"), int(fail["batch"]) + 1
    drop = {k for k, e in enumerate(trace.events) if base_kind(e["kind"]) == "state_committed"
            and e.get("partition") == part and e.get("version") == version}
    if not drop:
        raise InvalidInputError(f"the trace has no state commit of version {version} of partition {part}")
    kept = [e for k, e in enumerate(trace.events) if k not in drop]
    at = next((k for k, e in enumerate(kept) if base_kind(e["kind"]) == "restart" and e["seq"] > fail["seq"]), None)
    if at is None:
        raise InvalidInputError("nothing after the dropped state would be wrong: the trace has no restart "
                                "after the retry")
    return to_lines(trace.header, kept), at + 1


TAMPERS = {"drop-commit": drop_commit, "move-resume": move_resume,
           "delete-forced-checkpoint": delete_forced_checkpoint, "drop-retried-state": drop_retried_state}
#: The tamperings, by the name ``rollcheck spark tamper --how`` takes.
TAMPER_NAMES = tuple(TAMPERS)


def tamper_file(src: str | Path, how: str, out: str | Path) -> dict[str, Any]:
    """Write a tampered copy of the trace ``src`` to ``out`` (atomically).

    The interface both engines' tamper modules share.

    Parameters
    ----------
    src : str or Path
        The trace to tamper with.
    how : str
        One of :data:`TAMPERS`.
    out : str or Path
        The tampered copy's path.

    Returns
    -------
    dict
        ``{"trace": out, "how": how, "expected_check": None, "expected_first_offending_seq": seq}``:
        the event a correct replay must name first (which check names it depends on the trace).
    """
    from rollcheck.pyimpl.patternio import atomic_write_text
    from rollcheck.spark_replay.trace import read_trace

    if how not in TAMPERS:
        raise InvalidInputError(f"unknown tampering {how!r} (one of {', '.join(TAMPERS)})", location="--how")
    lines, seq = TAMPERS[how](read_trace(src))
    atomic_write_text(Path(out), "\n".join(lines) + "\n")
    return {"trace": str(out), "how": how, "expected_check": None, "expected_first_offending_seq": seq}
