"""Faults only a cluster has, and the second kill: their injections and the replay's checks.

:func:`executor_struck` proves an executor loss (``executor``), :func:`second_failure_struck` the
second kill of ``twice`` / ``during-recovery`` (:func:`recovery_kill_filter` strikes the latter);
the ``retry`` failure's schedule and check are :mod:`rollcheck.spark_replay.faults.retry` and
:mod:`rollcheck.spark_replay.faults.retry_check`. Each check reads the trace alone; a failure that
did not strike where asked is *unchecked* (the replay inconclusive), never a pass.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rollcheck.pyimpl.verdict import Check
from rollcheck.spark_replay.supervise import KILL_REQUEST

__all__ = ["CLUSTER_FAILURES", "executor_struck", "SECOND_FAILURES", "SECOND_KILL", "recovery_kill_filter",
           "second_failure_struck"]


def _base(kind: str) -> str:
    return kind.split(".", 1)[1] if kind.startswith("spark.") else kind


#: The failures that strike somewhere else than the driver's own run: ``executor`` (one executor
#: JVM SIGKILLed, the driver goes on) and ``retry`` (a task fails after its state store committed
#: and Spark retries it; the driver is then restarted after the next batch).
CLUSTER_FAILURES = ("executor", "retry")


def _requested_failure(header: dict[str, Any], mode: str) -> tuple[int | None, str | None]:
    cfg = header.get("config") or {}
    if cfg.get("failure") != mode:
        return None, f"no {mode} failure requested"
    k = cfg.get("fail_at_batch")
    if not isinstance(k, int) or isinstance(k, bool):
        return None, f"the header's fail_at_batch is {k!r}, not a batch id"
    return k, None


def executor_struck(header: dict[str, Any], events: list[dict[str, Any]]) -> Check:
    """``executor-lost``: an executor JVM was SIGKILLed in batch K and the query went on.

    The ``spark.failure`` event (mode ``executor``, an engine-level failure: the driver goes on)
    must name the executor id and pid, say that the process was gone, and carry Spark's own record
    of the loss (the executor listed as removed, with its reason, by the driver's status store);
    its ``checkpoint_logs`` must show offset log K and commit log K-1 (the kill struck after the
    state stores committed, before the sink). A batch committed after the kill in the same attempt
    shows the killed executor's state store partitions were loaded elsewhere, from the checkpoint.
    A kill that did not happen or was not seen by Spark is *unchecked*.

    Parameters
    ----------
    header : dict
        The trace's header.
    events : list of dict
        The trace's recorded events.

    Returns
    -------
    Check
        The ``executor-lost`` check.

    Examples
    --------
    >>> h = {"config": {"failure": "executor", "fail_at_batch": 1}}
    >>> f = {"seq": 5, "kind": "spark.failure", "mode": "executor", "batch": 1, "attempt": 1, "executor_id": "0",
    ...      "pid": 42, "process_gone": True, "removed": True, "remove_reason": "Command exited with code 137",
    ...      "checkpoint_logs": {"offsets": 1, "commits": 0}, "kill_point": "state"}
    >>> c = {"seq": 9, "kind": "spark.batch_committed", "batch": 2, "attempt": 1}
    >>> executor_struck(h, [f, c]).status.value
    'held'
    >>> executor_struck(h, [{**f, "removed": False}, c]).status.value
    'unchecked'
    """
    name = "executor-lost"
    k, why = _requested_failure(header, "executor")
    if k is None:
        return (Check.not_applicable(name, why or "") if "requested" in (why or "")
                else Check.unchecked(name, why or ""))
    hit = [e for e in events if _base(e.get("kind", "")) == "failure" and e.get("mode") == "executor"
           and e.get("batch") == k]
    if not hit:
        return Check.unchecked(name, f"no executor was killed in batch {k}: the executor failure was not exercised")
    f = hit[0]
    who = f"executor {f.get('executor_id')} (pid {f.get('pid')})"
    if f.get("executor_id") is None or not isinstance(f.get("pid"), int):
        return Check.unchecked(name, f"the executor failure (seq {f['seq']}) does not say which executor was killed")
    if not f.get("process_gone"):
        return Check.unchecked(name, f"{who} was signalled but its process did not end (seq {f['seq']})")
    if not f.get("removed"):
        return Check.unchecked(name, f"{who} was killed but Spark's driver never listed it as removed "
                                     f"(seq {f['seq']}): the loss was not seen by Spark")
    logs = f.get("checkpoint_logs") or {}
    want_commit = k - 1 if k > 0 else None
    if logs.get("offsets") != k or logs.get("commits") != want_commit:
        return Check.unchecked(name, f"{who} was killed with the offset log at {logs.get('offsets')} and the "
                                     f"commit log at {logs.get('commits')}: not inside batch {k}")
    later = [e for e in events if _base(e.get("kind", "")) == "batch_committed" and e["seq"] > f["seq"]
             and e.get("attempt") == f.get("attempt")]
    if not later:
        return Check.unchecked(name, f"{who} was killed (seq {f['seq']}) but no batch committed after it in the "
                                     "same driver: the query did not go on")
    from rollcheck.spark_replay.checkpoint.watcher import state_key

    stores = {state_key(e) for e in events if _base(e.get("kind", "")) == "state_committed"
              and e.get("version") == k + 1 and e["seq"] < f["seq"]}
    moved = ""
    if stores and any(int(e["batch"]) == k + 1 for e in later):
        # every state store instance, the lost executor's too, was loaded elsewhere and committed again
        again = {state_key(e) for e in events if _base(e.get("kind", "")) == "state_committed"
                 and e.get("version") == k + 2 and e["seq"] > f["seq"] and e.get("attempt") == f.get("attempt")}
        if stores - again:
            return Check.unchecked(name, f"{who} was killed (seq {f['seq']}) but state store(s) "
                                         f"{sorted(stores - again)} never committed version {k + 2} after it: the "
                                         "state was not shown to be reloaded on another executor")
        moved = (f"; all {len(stores)} state store instance(s) committed version {k + 2} after the loss (the lost "
                 f"executor's loaded from the checkpoint's version {k + 1} on the executors left)")
    return Check.held(name, f"{who} SIGKILLed in batch {k} after its state stores committed (seq {f['seq']}); "
                            f"Spark removed it ({f.get('remove_reason')}) and the same driver committed batch(es) "
                            f"{sorted({int(e['batch']) for e in later})} after it{moved}", examined=1)


#: The failures that strike twice: ``twice`` (the driver SIGKILLed after the sink wrote batch K, and
#: again after the restarted driver wrote batch K once more, the batch right after the recovery) and
#: ``during-recovery`` (the driver SIGKILLed after the sink wrote batch K, and again while the
#: restarted driver restores: in the first stage of batch K's re-run, before any stateful task loaded
#: its state store).
SECOND_FAILURES = ("twice", "during-recovery")
#: The marker of the second kill (once per recording).
SECOND_KILL = "second-kill"


def recovery_kill_filter(markers: str | Path, batch: int) -> Any:
    """The filter function through which a restarted ``during-recovery`` driver reads its input.

    In the task that reads batch ``batch``'s file - the batch's first stage, before the shuffle
    to its stateful stage, so before any state store of the restarted query is loaded - it asks
    the supervising parent (once) to SIGKILL the driver and waits for it.

    Parameters
    ----------
    markers : str or Path
        The recording's markers folder.
    batch : int
        The batch whose input file's task asks for the kill.

    Returns
    -------
    callable
        ``hold(path) -> bool``.
    """
    mpath, target = str(markers), f"batch-{batch:05d}.json"

    def hold(path):  # no type hints: PySpark 4 would read them as a pandas UDF
        import os as _os
        import time as _time

        if path and path.endswith(target):
            try:
                fd = _os.open(_os.path.join(mpath, SECOND_KILL), _os.O_CREAT | _os.O_EXCL | _os.O_WRONLY)
            except FileExistsError:
                return True
            _os.close(fd)
            with open(_os.path.join(mpath, KILL_REQUEST), "w", encoding="utf-8") as fh:
                fh.write(str(_os.getpid()))
            _time.sleep(600)
        return True

    return hold


def second_failure_struck(header: dict[str, Any], events: list[dict[str, Any]]) -> Check:
    """``second-failure``: the second kill of ``twice`` / ``during-recovery`` struck where asked.

    Both: a first kill at batch K (mode ``kill``) and then a second ``failure`` of the requested
    mode at batch K in a later driver (attempt), with the offset log at K and the commit log at K-1
    (batch K never committed in between). ``twice``: the later driver had recovered (a ``restart``
    in its attempt before the second kill) and its sink had written batch K again. ``during-recovery``:
    the later driver had started (``attempt_start``) and was killed before it had restored anything
    - no ``restart``, no ``sink_written`` and no ``state_committed`` in its attempt before the kill.
    Anything else is *unchecked*: the requested sequence was not exercised.

    Parameters
    ----------
    header : dict
        The trace's header.
    events : list of dict
        The trace's recorded events.

    Returns
    -------
    Check
        The ``second-failure`` check.

    Examples
    --------
    >>> h = {"config": {"failure": "during-recovery", "fail_at_batch": 2}}
    >>> logs = {"offsets": 2, "commits": 1}
    >>> ev = [{"seq": 5, "kind": "failure", "mode": "kill", "batch": 2, "attempt": 1, "checkpoint_logs": logs},
    ...       {"seq": 6, "kind": "spark.attempt_start", "attempt": 2},
    ...       {"seq": 7, "kind": "failure", "mode": "during-recovery", "batch": 2, "attempt": 2,
    ...        "checkpoint_logs": logs}]
    >>> second_failure_struck(h, ev).status.value
    'held'
    >>> ev.insert(2, {"seq": 6, "kind": "spark.state_committed", "attempt": 2, "version": 3, "partition": 0})
    >>> second_failure_struck(h, ev).detail[:60]
    'the second kill (seq 7) struck after the restarted driver ha'
    """
    name = "second-failure"
    cfg = header.get("config") or {}
    mode = cfg.get("failure")
    if mode not in SECOND_FAILURES:
        return Check.not_applicable(name, "no second failure requested")
    k = cfg.get("fail_at_batch")
    if not isinstance(k, int) or isinstance(k, bool):
        return Check.unchecked(name, f"the header's fail_at_batch is {k!r}, not a batch id")
    fails = [e for e in events if e.get("kind") == "failure" and e.get("batch") == k]
    first = next((e for e in fails if e.get("mode") == "kill"), None)
    second = next((e for e in fails if e.get("mode") == mode), None)
    if first is None or second is None:
        return Check.unchecked(name, f"the {mode} sequence did not happen at batch {k} (failures seen: "
                                     f"{[(e.get('mode'), e.get('batch')) for e in fails] or 'none'})")
    a1, a2 = first.get("attempt"), second.get("attempt")
    if not (isinstance(a1, int) and isinstance(a2, int) and a2 > a1 and second["seq"] > first["seq"]):
        return Check.unchecked(name, f"the second kill (seq {second['seq']}, attempt {a2}) did not strike a later "
                                     f"driver than the first (seq {first['seq']}, attempt {a1})")
    logs = second.get("checkpoint_logs") or {}
    want_commit = k - 1 if k > 0 else None
    if logs.get("offsets") != k or logs.get("commits") != want_commit:
        return Check.unchecked(name, f"the second kill (seq {second['seq']}) struck with the offset log at "
                                     f"{logs.get('offsets')} and the commit log at {logs.get('commits')}, not "
                                     f"inside batch {k}")
    mine = [e for e in events if e.get("attempt") == a2 and first["seq"] < e["seq"] < second["seq"]]
    kinds = [_base(e.get("kind", "")) for e in mine]
    if mode == "twice":
        if "restart" not in kinds:
            return Check.unchecked(name, f"the second kill (seq {second['seq']}) struck before the restarted driver "
                                         "recovered: not in the batch right after the recovery")
        if not any(_base(e.get("kind", "")) == "sink_written" and e.get("batch") == k for e in mine):
            return Check.unchecked(name, f"the restarted driver had not written batch {k} again when the second "
                                         f"kill (seq {second['seq']}) struck")
        return Check.held(name, f"the driver was killed after batch {k} (seq {first['seq']}), recovered, wrote batch "
                                f"{k} again and was killed again (seq {second['seq']}) before commits/{k}",
                          examined=2)
    if "attempt_start" not in kinds:
        return Check.unchecked(name, f"the second kill (seq {second['seq']}) struck before the restarted driver "
                                     "started its query")
    done = sorted({x for x in kinds if x in ("restart", "sink_written", "state_committed")})
    if done:
        return Check.unchecked(name, f"the second kill (seq {second['seq']}) struck after the restarted driver had "
                                     f"restored state ({', '.join(done)} in its attempt): not during the recovery")
    return Check.held(name, f"the driver was killed after batch {k} (seq {first['seq']}); the restarted driver "
                            f"was killed (seq {second['seq']}) while re-running batch {k}, before any state store "
                            "of it was loaded or committed", examined=2)


