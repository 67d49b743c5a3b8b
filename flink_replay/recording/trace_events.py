"""The raw observations of a recorded Flink run as timed trace events.

Each reader turns one kind of observation in a run folder into ``(t_us, rank, event)`` triples
(microseconds of one JVM clock, a tie-break rank):

- the Java taps' ``tap-*.jsonl`` (``flink.restore`` / ``flink.snapshot`` /
  ``flink.notify_complete`` / ``flink.task_finished``) and the user's keyed operators'
  ``ustate-*.jsonl`` (``flink.user_state``);
- Flink's DEBUG log of the barrier handler (``flink.barrier``, ``flink.barrier_announcement``) and
  the JobManager's log (``flink.taskmanager_lost``);
- the REST API's checkpoint statistics and job states (``flink.checkpoint_completed``,
  ``flink.job_state``, ``flink.restore_reported``);
- the injected failures (``failure``, ``flink.failure_during_restore``) and the restored
  checkpoint's channel state (``flink.channel_state``).
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rollcheck.flink_replay.recording.run_folder import LOG4J

__all__ = ["Timed", "observed_events", "failure_events", "source_of_record"]

#: ``(t_us, rank, event)``: an event at its time (microseconds), ties broken by the rank
Timed = list[tuple[int, int, dict[str, Any]]]

_BARRIER = re.compile(r"^(\S+) (.*): Received barrier from channel InputChannelInfo\{gateIdx=(\d+), "
                      r"inputChannelIdx=(\d+)\} @ (\d+)\.")
_ANNOUNCE = re.compile(r"^(\S+) (.*): Triggering checkpoint (\d+) on the barrier announcement")
_TM_LOST = re.compile(r"^(\S+ \S+) INFO .*JobMaster .*TaskManager with id (\S+) is no longer reachable")
_SUBTASK = re.compile(r"\((\d+)/(\d+)\)#(\d+)")
_TAP_TASK = {"tap-source": "source", "tap-keyed": "keyed"}
_RANK = {"barrier": 0, "restore": 1, "snapshot": 2, "complete": 3, "finish": 3}


def _parse_log_time(s: str, pattern: str) -> int:
    """Microseconds since the epoch of a barrier-log timestamp (UTC).

    ``pattern`` is the log4j date pattern the log was written with: ``SSSSSS`` (a fixed
    6-digit fraction) or ``nnnnnn``, which log4j 2.25 prints as the nanosecond of the second
    without leading zeros.
    """
    whole, _, frac = s.partition(".")
    d = datetime.strptime(whole, "%Y-%m-%dT%H:%M:%S").replace(tzinfo=UTC)
    us = int(frac) // 1000 if "nnnnnn" in pattern else int(frac.ljust(6, "0")[:6])
    return int(d.timestamp()) * 1_000_000 + us


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    out = []
    for line in path.read_text(errors="replace").splitlines():
        if line.strip():
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                break
    return out


def _channel_state_event(run: Path) -> dict[str, Any] | None:
    """``flink.channel_state``: the data in flight the restored checkpoint held.

    From the job process's reading of its ``_metadata`` (``channel-state.json``); None when it did not
    read one.
    """
    path = run / "channel-state.json"
    if not path.exists():
        return None
    cs = json.loads(path.read_text())
    return {"kind": "flink.channel_state", "checkpoint": cs.get("checkpoint"),
            "input_bytes": int(cs.get("input_bytes") or 0), "output_bytes": int(cs.get("output_bytes") or 0),
            "holders": [str(h) for h in cs.get("holders") or []], "reason": cs.get("error")}


def _strike_fields(fi: dict[str, Any]) -> dict[str, Any]:
    """Where and when the injected failure struck, as ``failure.json`` says.

    The operator, its subtask, the attempt, ``where`` (at a ``record`` in the pace step, or at a
    ``checkpoint-complete`` notification in the source tap) and the latest checkpoint completed before
    it (recordings before these fields have none).
    """
    out: dict[str, Any] = {}
    for k in ("operator", "where"):
        if isinstance(fi.get(k), str):
            out[k] = fi[k]
    for k in ("subtask", "after_checkpoint"):
        if isinstance(fi.get(k), int) and not isinstance(fi.get(k), bool):
            out[k] = fi[k]
    if isinstance(fi.get("attempt"), int):
        out["in_attempt"] = fi["attempt"]
    return out


def source_of_record(layout: dict[str, Any] | None, value: Any) -> dict[str, Any]:
    """``{"source": name, "source_record": i}`` of sequence number ``value`` of a multi-source job.

    ``layout`` is the job process's ``sources``, with ``order`` (one character per record); ``{}`` for
    a one-source job or a number outside the sequence.

    Parameters
    ----------
    layout : dict or None
        The job's ``sources`` layout (``names``, ``order``); None: one source.
    value : object
        The record's sequence number.

    Returns
    -------
    dict
        ``source`` and ``source_record``, or ``{}``.

    Examples
    --------
    >>> source_of_record({"names": ["a", "b"], "order": "0100"}, 3)
    {'source': 'a', 'source_record': 2}
    """
    if not layout or not isinstance(value, int) or not 0 <= value < len(layout.get("order") or ""):
        return {}
    order = layout["order"]
    return {"source": layout["names"][ord(order[value]) - 48], "source_record": order.count(order[value], 0, value)}


def observed_events(run: Path, info: dict[str, Any]) -> Timed:
    """The taps', the logs' and the REST API's events of run folder ``run`` (``info``: its ``run.json``).

    In the order the trace builder merges them (ties keep this order).

    Parameters
    ----------
    run : Path
        The run folder.
    info : dict
        Its ``run.json``.

    Returns
    -------
    Timed
        The events with their times.
    """
    return [*_tap_events(run), *_user_state_events(run), *_barrier_events(run, info),
            *_taskmanager_lost(run), *_rest_events(info)]


def _tap_events(run: Path) -> Timed:
    """The Java taps' restores, snapshots, checkpoint notifications and task ends."""
    timed: Timed = []
    for f in sorted(run.glob("tap-*.jsonl")):
        for ev in _read_jsonl(f):
            base: dict[str, Any] = {"task": _TAP_TASK[ev["tap"]], "subtask": ev["subtask"], "attempt": ev["attempt"]}
            if "parallelism" in ev:
                base["parallelism"] = ev["parallelism"]
            # the keyed tap's keyed state: every key with its value, and the key groups Flink gave
            # the subtask (a rescaled restore is checked key by key)
            keyed: dict[str, Any] = {k: ev[k] for k in ("keys", "key_groups", "max_parallelism") if k in ev}
            per_key: dict[str, Any] = {"per_key": ev["per_key"]} if "per_key" in ev else {}
            e: dict[str, Any]
            if ev["ev"] == "restore":
                e = {"kind": "flink.restore", **base, "checkpoint": ev["checkpoint"], **per_key,
                     "records": ev["seen"], **keyed}
            elif ev["ev"] == "snapshot":
                e = {"kind": "flink.snapshot", **base, "checkpoint": ev["checkpoint"], **per_key,
                     "records": ev["seen"], "inflight_records": 0, **keyed}
            elif ev["ev"] == "finish":
                e = {"kind": "flink.task_finished", **base, **per_key, "records": ev["seen"], **keyed}
            elif ev["ev"] == "complete":
                e = {"kind": "flink.notify_complete", **base, "checkpoint": ev["checkpoint"]}
            else:
                continue
            timed.append((ev["t_us"], _RANK[ev["ev"]], e))
    return timed


def _user_state_events(run: Path) -> Timed:
    """The user's keyed operators, key by key (RollcheckStateLog): at every snapshot, after restores."""
    timed: Timed = []
    for f in sorted(run.glob("ustate-*.jsonl")):
        for ev in _read_jsonl(f):
            name = re.sub(r" \(\d+/\d+\)#\d+$", "", ev["name"])  # the task name ends with "(i/P)#attempt"
            e = {"kind": "flink.user_state", "phase": ev["ev"], "operator": ev["operator"], "name": name,
                 **{k: ev[k] for k in ("subtask", "attempt", "parallelism", "max_parallelism", "key_groups",
                                       "checkpoint", "backend", "states")}}
            timed.append((ev["t_us"], _RANK[ev["ev"]], e))
    return timed


def _barrier_events(run: Path, info: dict[str, Any]) -> Timed:
    """The keyed task's barriers (and barrier announcements) from Flink's barrier-handler log."""
    timed: Timed = []
    # Flink's log numbers the attempts of each job from 0; a job restored at another parallelism
    # (rescaling) gets the attempt numbers after its predecessor's, as the taps do. The jobs of a
    # rescaled run differ in parallelism, which the log line shows ("(2/3)#0").
    offsets = {j.get("parallelism"): int(j.get("attempt_offset") or 0) for j in info.get("jobs") or []}
    props = run / "log4j.properties"
    pattern = props.read_text() if props.exists() else LOG4J
    for barrier_log in sorted(run.glob("*.log.barriers")):
        for line in barrier_log.read_text(errors="replace").splitlines():
            m = _BARRIER.match(line)
            a = _ANNOUNCE.match(line) if m is None else None
            if a is not None and "rollcheck-keyed" in a.group(2) and (st := _SUBTASK.search(a.group(2))):
                e = {"kind": "flink.barrier_announcement", "task": "keyed", "subtask": int(st.group(1)) - 1,
                     "attempt": int(st.group(3)) + offsets.get(int(st.group(2)), 0), "checkpoint": int(a.group(3))}
                timed.append((_parse_log_time(a.group(1), pattern), _RANK["barrier"], e))
                continue
            if not m or "rollcheck-keyed" not in m.group(2):
                continue
            st = _SUBTASK.search(m.group(2))
            if st is None:
                continue
            e = {"kind": "flink.barrier", "task": "keyed", "subtask": int(st.group(1)) - 1,
                 "attempt": int(st.group(3)) + offsets.get(int(st.group(2)), 0), "gate": int(m.group(3)),
                 "channel": int(m.group(4)),
                 "checkpoint": int(m.group(5))}
            timed.append((_parse_log_time(m.group(1), pattern), _RANK["barrier"], e))
    return timed


def _taskmanager_lost(run: Path) -> Timed:
    """Standalone cluster (failure ``taskmanager``): when the JobManager saw the TaskManager go."""
    jm_log = run / "jobmanager.log"
    if jm_log.exists():
        for line in jm_log.read_text(errors="replace").splitlines():
            m = _TM_LOST.match(line)
            if m:
                d = datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f").replace(tzinfo=UTC)
                return [(int(d.timestamp() * 1e6), 5, {"kind": "flink.taskmanager_lost",
                                                       "taskmanager": m.group(2)})]
    return []


def _rest_events(info: dict[str, Any]) -> Timed:
    """The REST API's completed checkpoints, job state transitions and reported restores."""
    timed: Timed = []
    rest = info["rest"]
    for cid, h in sorted(rest["checkpoints"].items(), key=lambda kv: int(kv[0])):
        if h.get("status") == "COMPLETED":
            t = int(h.get("latest_ack_timestamp") or h.get("trigger_timestamp")) * 1000
            timed.append((t, 4, {"kind": "flink.checkpoint_completed", "checkpoint": int(cid),
                                 "type": h.get("checkpoint_type"),
                                 "persisted_bytes": h.get("persisted_data"), "duration_ms": h.get("end_to_end_duration")}))
    jobs = info.get("jobs") or [{"timestamps": info.get("timestamps"), "job_id": info.get("job_id")}]
    for j in jobs:
        for state in ("RUNNING", "FAILING", "RESTARTING", "FINISHED", "FAILED", "CANCELED"):
            ts = (j.get("timestamps") or {}).get(state)
            if ts:
                extra = {"job_id": j["job_id"]} if len(jobs) > 1 else {}
                timed.append((int(ts) * 1000, 5, {"kind": "flink.job_state", "state": state, **extra}))
    for r in rest.get("restored", []):
        if r.get("restore_timestamp"):
            timed.append((int(r["restore_timestamp"]) * 1000, 6, {"kind": "flink.restore_reported",
                                                                   "checkpoint": r.get("id")}))
    return timed


def failure_events(run: Path, info: dict[str, Any], timed: Timed) -> None:
    """Append the injected failures and the restored checkpoint's channel state to ``timed``.

    From ``failure.json`` and ``failure2.json``; a failure during a restore renames the restores of
    the attempt it interrupted.

    Parameters
    ----------
    run : Path
        The run folder.
    info : dict
        Its ``run.json``.
    timed : Timed
        The events so far (appended to; restores renamed).
    """
    marker = run / "failure.json"
    if marker.exists():
        fi = json.loads(marker.read_text())
        # a keyBy connects every task: Flink's failover region is the whole job, every task's
        # state is lost and restored (the task that raised is named separately)
        timed.append((int(fi["t"] * 1e6), 1, {"kind": "failure", "processes": ["source", "keyed"],
                                              "failed_task": "source",
                                              "failure": fi.get("failure", "task"), "record": fi.get("value"),
                                              **_strike_fields(fi),
                                              **source_of_record(info.get("sources"), fi.get("value"))}))
    marker2 = run / "failure2.json"
    if marker2.exists():  # the second failure of "during-restore" / "twice" (job.pace.pace_class)
        f2 = json.loads(marker2.read_text())
        # "twice": a failure of the recovered job, a core failure with its own recovery; "during-restore":
        # the first recovery had not happened yet (it is the restore that completes after it), so for the
        # core model the job failed once and recovered once, and the second failure is Flink's own event
        kind = "failure" if f2.get("failure") == "twice" else "flink.failure_during_restore"
        if kind != "failure" and f2.get("attempt") is not None:
            # the restores of the attempt that failure interrupted: not a recovery (some tasks of that
            # attempt never restored); the recovery is the next attempt's
            for _, _, e in timed:
                if e["kind"] == "flink.restore" and e["attempt"] == int(f2["attempt"]):
                    e["kind"] = "flink.restore_interrupted"
                elif e["kind"] == "flink.user_state" and e["phase"] == "restore" and e["attempt"] == int(f2["attempt"]):
                    e["phase"] = "restore-interrupted"  # the user's keyed operators, likewise
        timed.append((int(f2["t"] * 1e6), 1, {"kind": kind, "processes": ["source", "keyed"],
                                              "failed_task": "source", "failure": "task", "second": f2.get("failure"),
                                              "phase": f2.get("phase"), "in_attempt": f2.get("attempt"),
                                              "subtask": f2.get("subtask"), "record": f2.get("value"),
                                              **source_of_record(info.get("sources"), f2.get("value"))}))
    channels = _channel_state_event(run)
    if channels is not None:
        restored_t = min((t for t, _, e in timed if e["kind"] == "flink.restore" and e["attempt"] > 0), default=None)
        timed.append(((restored_t or int(float(info.get("t_end") or 0) * 1e6)), 2, channels))
