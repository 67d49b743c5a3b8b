"""When the injected failure strikes: the plan the pace step follows, the arming the source tap reads.

The pace step (:func:`pipelines.pace_class`) counts its own subtask's records. Once a subtask
passed its share of record K (``ceil(K / parallelism)``, never more than the smallest split holds,
so every subtask can reach it), the failure waits for the checkpoints it is to follow: two completed
by default, checkpoint C with ``fail_after_checkpoint``, and in unaligned mode one that persisted
data in flight (the REST poller marks those: ``inflight-N``), for at most ``inflight_wait_s``.
Meanwhile the pace step slows its records down so that the rest of its input lasts that long.

If the input ends first (a slow branch elsewhere holds the job open, a small input), the pace
step sees no more records: the ``armed`` file it wrote tells rollcheck's source tap, which runs in
the same task, to strike at the next checkpoint completion instead (a bounded source's task stays
until its final checkpoint completed). Either way the failure strikes once (``failure.json`` is
created exclusively) in the task of rollcheck's own step, in the subtask ``fail_subtask`` when given.

This module runs in the PyFlink environment (``.venv-flink``), imported by ``pipelines``; like
it, it imports only the standard library.
"""

from __future__ import annotations

import os
import time

__all__ = ["make_strike_plan", "local_threshold", "slowdown_s", "ARMED"]

#: the file the pace step writes when its subtask reached the failure point (read by RollcheckTap)
ARMED = "armed"


def local_threshold(fail_at: int, records: int, par: int) -> int:
    """The subtask-local record count at which a subtask reaches record ``fail_at``.

    Parameters
    ----------
    fail_at : int
        The record the failure strikes at, over all subtasks.
    records : int
        The records of the input.
    par : int
        The source's parallelism.

    Returns
    -------
    int
        The local count, at least 1.

    Examples
    --------
    >>> local_threshold(200, 400, 2)
    100
    >>> local_threshold(401, 401, 2)  # the smaller split (200 records) still reaches it
    200
    """
    share = -(-int(fail_at) // par)
    smallest = max(1, int(records) // par)
    return max(1, min(share, smallest))


def slowdown_s(n: int, split: int, window_s: float) -> float:
    """Seconds the pace step sleeps per record while the failure waits.

    The rest of the split (``split - n`` records) lasts ``window_s``, at least 50 ms and at most 0.5 s
    a record (a task blocked longer would delay the checkpoints the failure waits for).

    Parameters
    ----------
    n : int
        The records of the split passed so far.
    split : int
        The split's records.
    window_s : float
        The time the rest of the split should last, s.

    Returns
    -------
    float
        Seconds per record.

    Examples
    --------
    >>> slowdown_s(10, 20, 10.0)
    0.5
    >>> slowdown_s(0, 1000, 10.0)
    0.05
    """
    left = max(1, int(split) - int(n))
    return min(0.5, max(0.05, window_s / left))


def make_strike_plan(cfg: dict) -> dict:
    """The plan of one job's failure.

    Returns
    -------
    dict
        ``local_at`` (the subtask-local record count), ``ready(names, subtask)`` (the run folder's
        names say the failure may strike in this subtask), ``arm(subtask, value, n)`` (tell the source
        tap) and ``wait_s(n)`` (the slowdown while it waits).
    """
    run_dir = cfg["run_dir"]
    par = int(cfg["parallelism"])
    records = int(cfg["records"])
    fail_at = int(cfg.get("fail_at_record") or 1)
    kind = cfg.get("failure") or "task"
    if kind in ("during-restore", "twice"):
        kind = "task"  # their first failure is a task failure
    only = cfg.get("fail_subtask")
    only = None if only is None else int(only)
    after = int(cfg.get("fail_after_checkpoint") or 0)
    need = 1 if after else 2
    inflight = cfg.get("checkpoints") == "unaligned" and bool(cfg.get("inflight_wait_s", 0))
    wait_inflight = float(cfg.get("inflight_wait_s") or 0.0)
    window = max(10.0, 20 * int(cfg.get("interval_ms", 300)) / 1000.0) + wait_inflight
    split = max(1, records // par)
    armed_path = os.path.join(run_dir, ARMED)
    # recovery-time runs time their failure themselves (just before a trigger, on an absolute
    # schedule): the pace step's old 50 ms pause, no strike at a checkpoint's completion
    timed = cfg.get("schedule") == "absolute" or bool(cfg.get("fail_before_trigger"))
    armed_at: list[float] = []

    def mine(subtask) -> bool:
        return only is None or subtask == only

    def ready(names: list[str], subtask) -> bool:
        if not mine(subtask):
            return False
        done = sorted(int(f[len("completed-"):]) for f in names
                      if f.startswith("completed-") and f[len("completed-"):].isdigit())
        if len(done) < need or (after and done[-1] < after):
            return False
        if inflight and f"inflight-{done[-1]}" not in names:
            return bool(armed_at) and time.time() > armed_at[0] + wait_inflight
        return True

    def arm(subtask, value: int, n: int) -> None:
        if timed or not mine(subtask):
            return
        if not armed_at:
            armed_at.append(time.time())
        if os.path.exists(armed_path):
            return
        deadline_ms = int((armed_at[0] + wait_inflight) * 1000) if inflight else 0
        line = f"{kind} {-1 if only is None else only} {need} {after} {deadline_ms}\n"
        tmp = f"{armed_path}.{os.getpid()}.{subtask}"
        with open(tmp, "w") as fh:
            fh.write(line)
        os.replace(tmp, armed_path)

    def wait_s(n: int) -> float:
        return 0.05 if timed else slowdown_s(n, split, window)

    return {"local_at": local_threshold(fail_at, records, par), "ready": ready, "arm": arm, "wait_s": wait_s,
            "mine": mine}
