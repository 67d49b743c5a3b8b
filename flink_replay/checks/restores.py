"""``restore-latest-completed``: every restore of a recorded Flink run, the second one included.

A recorded run may restore more than once: ``--failure twice`` strikes again right after the first
recovery, ``--failure during-restore`` while the first restore is still under way. Each attempt that
restores (``flink.restore`` events with ``attempt`` > 0) must restore one checkpoint in all its tasks,
and that checkpoint must be the latest one completed before the attempt restarted (the
``RESTARTING`` job state before it when the trace has one, else its first restore), and not older
than any checkpoint completed before the failure that caused it.

References
----------
Carbone et al., "Lightweight Asynchronous Snapshots for Distributed Dataflows", §4.3 (recovery
restarts every task from the last completed snapshot); Apache Flink documentation, "Checkpointing"
(a job restarts from the latest completed checkpoint).
"""

from __future__ import annotations

from typing import Any

from rollcheck.pyimpl.verdict import Check

__all__ = ["NAME", "restore_latest_completed"]

NAME = "restore-latest-completed"

_FAILURES = ("failure", "flink.failure_during_restore")


def _attempts(restores: list[dict[str, Any]]) -> dict[int, list[dict[str, Any]]]:
    out: dict[int, list[dict[str, Any]]] = {}
    for e in sorted(restores, key=lambda e: e["seq"]):
        out.setdefault(int(e["attempt"]), []).append(e)
    return out


def restore_latest_completed(events: list[dict[str, Any]], *, no_failure: str = "unchecked") -> Check:
    """Check every restoring attempt of ``events`` (see the module docstring).

    Parameters
    ----------
    events
        The trace's events in ``seq`` order.
    no_failure
        What a run without a failure event gives: ``"unchecked"`` (the word count's replay, which
        always asks for a failure) or ``"not-applicable"`` (a user's job, which may run without one).

    Examples
    --------
    >>> ev = [{"seq": 1, "kind": "flink.checkpoint_completed", "checkpoint": 1},
    ...       {"seq": 2, "kind": "failure"},
    ...       {"seq": 3, "kind": "flink.restore", "attempt": 1, "checkpoint": 1},
    ...       {"seq": 4, "kind": "flink.checkpoint_completed", "checkpoint": 2},
    ...       {"seq": 5, "kind": "failure", "second": "twice"},
    ...       {"seq": 6, "kind": "flink.restore", "attempt": 2, "checkpoint": 1}]
    >>> c = restore_latest_completed(ev)
    >>> c.status.value, c.offending_seq
    ('violated', 6)
    >>> restore_latest_completed(ev[:4]).status.value
    'held'
    """
    failure = next((e for e in events if e["kind"] == "failure"), None)
    restores = [e for e in events if e["kind"] == "flink.restore" and e.get("attempt", 0) > 0]
    if failure is None:
        if no_failure == "not-applicable":
            return Check.not_applicable(NAME, "no failure in the run")
        return Check.unchecked(NAME, "no restore after a failure: no failure event")
    if not restores:
        return Check.unchecked(NAME, "no restore after the failure")
    completed = [e for e in events if e["kind"] == "flink.checkpoint_completed"]
    restarts = [e for e in events if e["kind"] == "flink.job_state" and e.get("state") == "RESTARTING"]
    failures = [e for e in events if e["kind"] in _FAILURES]
    told: list[str] = []
    previous = -1
    for attempt, group in _attempts(restores).items():
        first = group[0]
        ids = {e["checkpoint"] for e in group}
        if len(ids) != 1:
            return Check.violated(NAME, f"attempt {attempt}: tasks restored different checkpoints "
                                  f"{sorted(map(str, ids))}", offending_seq=first["seq"])
        rid = ids.pop()
        restart = next((e for e in reversed(restarts) if previous < e["seq"] < first["seq"]), None)
        limit = restart["seq"] if restart is not None else first["seq"]
        cause = next((e for e in reversed(failures) if e["seq"] < first["seq"]), failure)
        before_restart = [e["checkpoint"] for e in completed if e["seq"] < limit]
        before_failure = [e["checkpoint"] for e in completed if e["seq"] < cause["seq"]]
        latest = max(before_restart) if before_restart else None
        if rid != latest or (before_failure and (rid is None or rid < max(before_failure))):
            return Check.violated(
                NAME, f"attempt {attempt} restored checkpoint {rid}, but the latest completed before it restarted "
                f"was {latest} (before the failure at seq {cause['seq']}: "
                f"{max(before_failure) if before_failure else None})", offending_seq=first["seq"])
        told.append(f"attempt {attempt}: checkpoint {rid}")
        previous = first["seq"]
    return Check.held(NAME, f"every restore took the latest checkpoint completed before its restart "
                      f"({'; '.join(told)}; {len(completed)} completed in the run)", examined=len(told))
