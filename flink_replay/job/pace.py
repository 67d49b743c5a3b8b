"""The pace step of rollcheck's Flink jobs: it paces the source and injects the failures.

:func:`pace_class` returns the ``Pace`` map function of a job's configuration: it paces the
source to ``rate`` records/s (or, for recovery-time runs, to an absolute arrival schedule with a
service-rate cap), raises the injected failure once at the K-th record of its subtask (where and
when :mod:`strike` says), and the second failure of ``during-restore`` / ``twice``.

The class is defined inside a function: PyFlink pickles it by value for the workers.

This module runs in the PyFlink environment (``.venv-flink``), imported by ``pipelines``; like
it, it imports only the standard library, ``pyflink`` and its sibling ``job_*`` modules.
"""

from __future__ import annotations

import json
import os
import signal
import time
import uuid

if __package__:  # imported as rollcheck.flink_replay (tests, the recorder's helpers)
    from .strike import make_strike_plan
else:  # run by main.py in the PyFlink environment: this folder is on sys.path
    from strike import make_strike_plan  # type: ignore[no-redef]

__all__ = ["pace_class", "strike_plan"]


def _task_info(runtime_context, method: str, java: str) -> int | None:
    """``method()`` of PyFlink's runtime context, or of the task information Flink 2 moved it to.

    The runtime context's thread mode still has ``get_attempt_number`` and
    ``get_index_of_this_subtask`` up to 1.20; else ``getTaskInfo().getAttemptNumber()`` (PyFlink 2.x's
    embedded context still calls the removed methods). None when neither answers (the trace then
    cannot prove the kill point).
    """
    try:
        return int(getattr(runtime_context, method)())
    except Exception:  # noqa: BLE001 - 2.x thread mode: the Java context lacks the old method
        pass
    j_ctx = getattr(runtime_context, "_runtime_context", None)
    try:
        return int(getattr(j_ctx.getTaskInfo(), java)())  # type: ignore[union-attr]
    except Exception:  # noqa: BLE001
        return None


def pace_class(cfg: dict):
    """The ``Pace`` map function of this job's configuration (a class, pickled by value)."""
    from pyflink.datastream.functions import MapFunction, RuntimeContext

    run_dir = cfg["run_dir"]
    par = int(cfg["parallelism"])
    rate = float(cfg["rate"])
    fail_at = cfg.get("fail_at_record")
    failure, second = _failures(cfg)
    marker = os.path.join(run_dir, "failure.json")
    marker2 = os.path.join(run_dir, "failure2.json")
    per_subtask_rate = rate / par
    absolute = cfg.get("schedule") == "absolute"
    cap = cfg.get("source_cap")
    cap_per_subtask = float(cap) / par if cap else None
    fail_before_trigger = bool(cfg.get("fail_before_trigger"))
    # recovery-time runs: the failure waits until every subtask drained its initial backlog
    all_caught_up = bool(cfg.get("fail_after_all_caught_up"))
    interval_s = int(cfg["interval_ms"]) / 1000.0
    # a storage fault (tests of recovery-succeeded): the checkpoints' state files vanish with the
    # injected failure, so the restart from the engine's own checkpoint fails with its exception
    lose_files = bool(cfg.get("lose_checkpoint_files"))
    strike = strike_plan(cfg)

    class Pace(MapFunction):
        """Paces the source to ``rate`` records/s and raises once at the K-th record.

        ``schedule: absolute`` (recovery-time runs): record v of a split is due at
        t0 + (v - split start)/rate_per_subtask, records whose due time passed (after a restart)
        are emitted at most at ``source_cap`` records/s, and every emission is logged.
        """

        def _second(self, what: str, value) -> None:
            """Raise the second failure once (one marker file for all subtasks)."""
            _second_failure(marker2, {"failure": second, "phase": what, "value": value,
                                      "attempt": self.attempt, "subtask": self.subtask, "pid": os.getpid()})

        def open(self, runtime_context: RuntimeContext) -> None:
            self.attempt = _task_info(runtime_context, "get_attempt_number", "getAttemptNumber")
            self.subtask = _task_info(runtime_context, "get_index_of_this_subtask", "getIndexOfThisSubtask")
            self.restarted = os.path.exists(marker)
            if second == "during-restore" and self.restarted and not os.path.exists(marker2):
                self._second("during-restore", None)
            self.n = 0
            self.t0: float | None = None
            self.last = 0.0
            self.start: int | None = None
            self.caught_up = False
            self.log = None
            if absolute:
                gen = 1 if os.path.exists(marker) else 0
                path = os.path.join(run_dir, f"pace-gen{gen}-{uuid.uuid4().hex[:10]}.jsonl")
                self.log = open(path, "a", buffering=1)  # noqa: SIM115 - closed in close()

        def close(self) -> None:
            if self.log is not None:
                self.log.close()

        def _split_start(self, v: int) -> int:
            if self.start is None:
                self.start = _first_of_split(run_dir, marker, v)
            return self.start

        def map(self, value):
            now = time.time()
            self.n += 1
            if absolute:
                if self.t0 is None:
                    self.t0 = _first_t0(run_dir, float(cfg.get("calibrate_s", 0.0)))
                due = self.t0 + (int(value) - self._split_start(int(value))) / per_subtask_rate
                at = max(due, self.last + 1.0 / cap_per_subtask) if cap_per_subtask else due
            else:
                if self.t0 is None:
                    self.t0 = now
                due = at = self.t0 + self.n / per_subtask_rate
            if at > now:
                time.sleep(at - now)
            self.last = max(at, now)
            if self.log is not None:
                self.log.write(f"{int(value)} {due:.6f} {self.last:.6f}\n")
                if self.last - due <= 0.05:
                    if not self.caught_up and all_caught_up and not os.path.exists(marker):
                        open(os.path.join(run_dir, f"caught-up-{uuid.uuid4().hex[:10]}"), "w").close()
                    self.caught_up = True
            if absolute and not self.caught_up:
                return value  # the initial backlog is not drained yet: no failure before that
            if second == "twice" and self.restarted and self.n >= 10 and not os.path.exists(marker2):
                self._second("after-recovery", int(value))
            if fail_at is not None and self.n >= strike["local_at"] and not os.path.exists(marker):
                _strike(run_dir, marker, strike, int(value), self.n, self.subtask, self.attempt, par=par,
                        all_caught_up=all_caught_up, before_trigger=fail_before_trigger, interval_s=interval_s,
                        failure=failure, lose_files=lose_files)
            return value

    return Pace


def strike_plan(cfg: dict) -> dict:
    """When and how the pace step lets the injected failure strike (see :mod:`strike`)."""
    return make_strike_plan(cfg)


def _failures(cfg: dict) -> tuple:
    """``(first, second)``: the failure the pace step injects first and the second one (or None)."""
    failure = cfg.get("failure") or "task"
    # "during-restore" and "twice": the first failure is a task failure; the second strikes while the
    # restarted job restores (in the pace step's open(), which Flink calls while the task initializes
    # its restored operators) or right after the recovery (the restarted subtask's 10th record)
    second = failure if failure in ("during-restore", "twice") else None
    if second is not None:
        failure = "task"
    return failure, second


def _first_t0(run_dir: str, calibrate_s: float) -> float:
    """The common start of the absolute arrival schedule (the first emission of any subtask)."""
    path = os.path.join(run_dir, "t0")
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        for _ in range(1000):
            with open(path) as fh:
                txt = fh.read()
            if txt:
                return float(txt)
            time.sleep(0.001)
        raise RuntimeError("rollcheck: t0 file stayed empty") from None
    # recovery-time runs start with a backlog of ``calibrate_s`` seconds of input: the source
    # drains it at its capped rate, which measures the service rate before any failure
    t = time.time() - calibrate_s
    os.write(fd, repr(t).encode())
    os.close(fd)
    return t


def _first_of_split(run_dir: str, marker: str, v: int) -> int:
    """The first value of this subtask's split: noted by the first run, read back after a restart."""
    starts_dir = os.path.join(run_dir, "splits")
    os.makedirs(starts_dir, exist_ok=True)
    if not os.path.exists(marker):
        open(os.path.join(starts_dir, str(v)), "w").close()
        return v
    starts = sorted(int(x) for x in os.listdir(starts_dir))
    return max(x for x in starts if x <= v)


def _second_failure(marker2: str, info: dict) -> None:
    """Raise the second failure ``info`` (its time added) once (one marker file for all subtasks)."""
    try:
        fd = os.open(marker2, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return
    info = {"t": time.time(), **info}
    os.write(fd, json.dumps(info).encode())
    os.close(fd)
    raise RuntimeError(f"rollcheck: injected second failure ({info['phase']})")


def _strike(run_dir: str, marker: str, strike: dict, value: int, n: int, subtask, attempt, *, par: int,
            all_caught_up: bool, before_trigger: bool, interval_s: float, failure: str, lose_files: bool) -> None:
    """Raise the injected failure at the ``n``-th record (``value``) of ``subtask``, unless it must wait.

    It waits for every subtask's backlog to drain, for the checkpoints the failure waits for, for the
    next checkpoint trigger.
    """
    names = os.listdir(run_dir)
    if all_caught_up and sum(f.startswith("caught-up-") for f in names) < par:
        return  # every subtask drains its initial backlog before the failure
    if not strike["ready"](names, subtask):
        # slow down (not block: a blocked task takes no checkpoint) until the checkpoints the
        # failure waits for completed, so that it strikes before the input ends; the source
        # tap strikes at a checkpoint's completion if the input ends first (arm_failure)
        strike["arm"](subtask, value, n)
        time.sleep(strike["wait_s"](n))
        return
    if before_trigger and _before_trigger(run_dir, names, interval_s):
        return
    _inject(run_dir, marker, names, {"value": value, "local_index": n, "failure": failure, "pid": os.getpid(),
                                     "where": "record", "subtask": subtask, "attempt": attempt}, lose_files)


def _before_trigger(run_dir: str, names: list, interval_s: float) -> bool:
    """Recovery-time runs fail just before the next checkpoint trigger: True while it is not due."""
    snaps = [f for f in names if f.startswith("snapshot-")]
    last = max(os.path.getmtime(os.path.join(run_dir, f)) for f in snaps)
    return time.time() < last + interval_s * 0.92


def _inject(run_dir: str, marker: str, names: list, info: dict, lose_files: bool) -> None:
    """Raise the injected failure at record ``info["value"]`` once.

    Its marker file says where and when; the checkpoints' state files are lost first when asked.
    Returns when the failure already struck.
    """
    try:
        fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return
    done = [int(f[len("completed-"):]) for f in names if f.startswith("completed-")
            and f[len("completed-"):].isdigit()]
    info = {"t": time.time(), **info, "after_checkpoint": max(done) if done else None, "operator": "rollcheck-pace"}
    os.write(fd, json.dumps(info).encode())
    os.close(fd)
    if lose_files:
        for root, _dirs, files in os.walk(os.path.join(run_dir, "checkpoints")):
            for f in files:
                if f != "_metadata":
                    try:
                        os.unlink(os.path.join(root, f))
                    except OSError:
                        pass
    if info["failure"] == "taskmanager":
        # thread mode: this function runs inside the TaskManager's JVM process
        os.kill(os.getpid(), signal.SIGKILL)
    raise RuntimeError(f"rollcheck: injected task failure at record {info['value']}")
