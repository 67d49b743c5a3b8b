"""State store providers and driver kill points of a recorded Structured Streaming query.

A micro-batch of Structured Streaming goes through four durable steps, in this order
(``docs/spark-matrix.md``; Spark's *Structured Streaming Programming Guide*, sections
"Recovering from Failures with Checkpointing" and "Fault Tolerance Semantics"):

1. the **offset log** entry ``offsets/K`` (the input range of batch K) is written;
2. the tasks run the batch and each **state store** commits version K+1
   (``state/<op>/<partition>/K+1.delta`` for the HDFS-backed store, ``K+1.zip`` or
   ``K+1.changelog`` for RocksDB);
3. the **sink** receives the batch (``foreachBatch`` here);
4. the **commit log** entry ``commits/K`` is written.

Details: ``docs/internals/spark-faults.md`` (section ``killpoints``).

References
----------
Spark Structured Streaming Programming Guide: "Fault Tolerance Semantics", "Recovering from
Failures with Checkpointing", "State Store" (HDFS and RocksDB state store implementations,
"RocksDB State Store Changelog Checkpointing").
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from rollcheck.pyimpl.errors import InvalidInputError
from rollcheck.pyimpl.verdict import Check
from rollcheck.spark_replay.checkpoint.logs import checkpoint_logs, state_files_of_version
from rollcheck.spark_replay.faults.cluster import (
    CLUSTER_FAILURES,
    SECOND_FAILURES,
    SECOND_KILL,
    executor_struck,
    recovery_kill_filter,
    second_failure_struck,
)
from rollcheck.spark_replay.faults.inotify import Inotify as _Inotify
from rollcheck.spark_replay.faults.retry import (
    RETRY_DONE,
    RETRY_FAILED,
    RETRY_RESTART,
    retry_facts,
    retry_restart_batch,
    retry_task,
)
from rollcheck.spark_replay.faults.retry_check import retry_struck

__all__ = [
    "KILL_POINTS",
    "STATE_STORES",
    "DEFAULT_KILL_POINT",
    "state_store_conf",
    "validate_options",
    "checkpoint_logs",
    "state_files_of_version",
    "KillSupervisor",
    "kill_tree",
    "record_kill",
    "kill_point_struck",
    "KILL_REQUEST",
    "CLUSTER_FAILURES",
    "RETRY_FAILED",
    "RETRY_DONE",
    "RETRY_RESTART",
    "retry_restart_batch",
    "retry_task",
    "retry_facts",
    "executor_struck",
    "retry_struck",
    "SECOND_FAILURES",
    "SECOND_KILL",
    "recovery_kill_filter",
    "second_failure_struck",
    "FAILURE_CHECKS",
]

#: The kill points, in the order of the micro-batch protocol.
KILL_POINTS = ("offsets", "state", "sink", "commit")
#: A kill without a kill point strikes after the sink wrote (the recorder's historical behaviour).
DEFAULT_KILL_POINT = "sink"
#: The marker file (in the recording's ``markers`` folder) by which the driver asks to be killed.
KILL_REQUEST = "kill-requested"

_PKG = "org.apache.spark.sql.execution.streaming.state."
#: State store providers by their short name, with the Spark settings that select them.
STATE_STORES: dict[str, dict[str, str]] = {
    "hdfs": {"spark.sql.streaming.stateStore.providerClass": _PKG + "HDFSBackedStateStoreProvider"},
    "rocksdb": {"spark.sql.streaming.stateStore.providerClass": _PKG + "RocksDBStateStoreProvider",
                "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "false"},
    "rocksdb-changelog": {"spark.sql.streaming.stateStore.providerClass": _PKG + "RocksDBStateStoreProvider",
                          "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true"},
}


def state_store_conf(name: str) -> dict[str, str]:
    """The Spark SQL settings that select state store provider ``name``.

    Examples
    --------
    >>> state_store_conf("rocksdb-changelog")["spark.sql.streaming.stateStore.providerClass"].rsplit(".", 1)[1]
    'RocksDBStateStoreProvider'
    >>> state_store_conf("leveldb")
    Traceback (most recent call last):
    ...
    rollcheck.pyimpl.errors.InvalidInputError: --state-store: unknown state store 'leveldb'; use one of hdfs, rocksdb, rocksdb-changelog
    """
    if name not in STATE_STORES:
        raise InvalidInputError(f"unknown state store {name!r}; use one of {', '.join(STATE_STORES)}",
                                location="--state-store")
    return dict(STATE_STORES[name])


def validate_options(failure: str | None, kill_point: str | None, state_store: str) -> None:
    """Check the state store and kill point flags (a kill point needs ``--failure kill``).

    Parameters
    ----------
    failure : str or None
        The ``--failure`` requested.
    kill_point : str or None
        The ``--kill-point`` requested.
    state_store : str
        The ``--state-store`` requested.

    Examples
    --------
    >>> validate_options("kill", "commit", "rocksdb")
    >>> validate_options("task", "commit", "hdfs")
    Traceback (most recent call last):
    ...
    rollcheck.pyimpl.errors.InvalidInputError: --kill-point: a kill point needs --failure kill (got task)
    """
    state_store_conf(state_store)
    if kill_point is None:
        return
    if kill_point not in KILL_POINTS:
        raise InvalidInputError(f"unknown kill point {kill_point!r}; use one of {', '.join(KILL_POINTS)}",
                                location="--kill-point")
    if failure != "kill":
        raise InvalidInputError(f"a kill point needs --failure kill (got {failure})", location="--kill-point")


# ----------------------------------------------------------------------------- the supervisor
@dataclass
class KillSupervisor:
    """Waits for a driver child and SIGKILLs its process group at the kill point (module docstring).

    Parameters
    ----------
    checkpoint : Path
        The query's checkpoint folder (the run under test, not the reference run's).
    markers : Path
        The recording's marker folder: the driver creates :data:`KILL_REQUEST` there to be
        killed (kill points ``state`` and ``sink``); ``failed`` is created when the kill fires.
    batch : int, optional
        The batch to kill in (None: never kill, only wait).
    kill_point : str
        One of :data:`KILL_POINTS`.
    poll : float
        The polling period where inotify is not available (and for folders not yet created).
    """

    checkpoint: Path
    markers: Path
    batch: int | None
    kill_point: str = DEFAULT_KILL_POINT
    poll: float = 0.002
    fired: dict[str, Any] | None = None
    timings: list[float] = field(default_factory=list)
    _pending: dict[str, Any] | None = None
    _ino: _Inotify | None = None
    _watching: bool = False
    _no_inotify: bool = False

    def _external_hit(self, names: list[str]) -> bool:
        k = self.batch
        if self.kill_point == "offsets":
            return str(k) in names
        if self.kill_point == "commit":  # the temporary file renamed to commits/K, or K itself
            return any(n == str(k) or (n.startswith(f".{k}.") and ".tmp" in n) for n in names)
        return False

    def watch(self, proc: subprocess.Popen[bytes]) -> bool:
        """One round of supervision (blocks about 10 ms).

        Kill ``proc`` and its JVM now if the driver asked for it (kill points ``state`` and
        ``sink``) or the external kill point was reached; True when it killed. The facts of the kill
        are kept for :meth:`take`.
        """
        request = self.markers / KILL_REQUEST
        if request.exists():
            asked = _request_facts(request)
            request.unlink()
            self._kill(proc, asked)
            return True
        external = self.fired is None and self.batch is not None and self.kill_point in ("offsets", "commit")
        if not external:
            time.sleep(0.01)
            return False
        log_dir = self.checkpoint / ("offsets" if self.kill_point == "offsets" else "commits")
        if self._ino is None and not self._no_inotify:
            self._ino = _Inotify.open()
            self._no_inotify = self._ino is None
        if self._ino is not None and not self._watching and log_dir.is_dir():
            self._watching = self._ino.watch(log_dir)
            if self._watching and self._external_hit(os.listdir(log_dir)):  # created before the watch
                self._kill(proc)
                return True
        if self._ino is not None and self._watching:
            if self._external_hit([n for _d, n in self._ino.read(0.01)]):
                self._kill(proc)
                return True
            return False
        deadline = time.monotonic() + 0.01
        while time.monotonic() < deadline:  # no inotify (or no folder yet): poll every 2 ms
            try:
                names = os.listdir(log_dir)
            except FileNotFoundError:
                names = []
            if self._external_hit(names):
                self._kill(proc)
                return True
            time.sleep(self.poll)
        return False

    def wait(self, proc: subprocess.Popen[bytes]) -> dict[str, Any] | None:
        """Supervise ``proc`` until it ends or is killed.

        The kill's facts (``kill_point``, ``checkpoint_logs``, ``state_files``, ``batch``) or None.
        """
        try:
            while proc.poll() is None:
                if self.watch(proc):
                    return self.take()
            return None
        finally:
            self.close()

    def take(self) -> dict[str, Any] | None:
        """The facts of the kill that just happened (once), or None."""
        out, self._pending = self._pending, None
        return out

    def close(self) -> None:
        """Stop watching and release the inotify reader."""
        if self._ino is not None:
            self._ino.close()
            self._ino = None
            self._watching = False

    def _kill(self, proc: subprocess.Popen[bytes], asked: dict[str, Any] | None = None) -> None:
        t0 = time.perf_counter()
        kill_tree(proc)
        self.timings.append(time.perf_counter() - t0)
        self.close()
        try:  # the kill fires once per recording: the driver's own guard uses the same marker
            fd = os.open(self.markers / "failed", os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            os.close(fd)
        except FileExistsError:
            pass
        batch = (asked or {}).get("batch", self.batch)
        self.fired = {"batch": batch, "kill_point": (asked or {}).get("kill_point", self.kill_point),
                      "checkpoint_logs": checkpoint_logs(self.checkpoint),
                      "state_files": state_files_of_version(self.checkpoint, (batch or 0) + 1)}
        self._pending = self.fired


def _request_facts(request: Path) -> dict[str, Any] | None:
    """The batch and kill point a driver's kill request names.

    A JSON object; a request holding only the driver's pid, as
    :func:`~rollcheck.spark_replay.supervise.request_kill` writes, names none: the supervisor's own
    batch and kill point apply.

    >>> import tempfile; p = Path(tempfile.mkdtemp()) / KILL_REQUEST
    >>> _ = p.write_text('{"batch": 2, "kill_point": "before-retry"}'); _request_facts(p)
    {'batch': 2, 'kill_point': 'before-retry'}
    >>> _ = p.write_text("4242"); _request_facts(p) is None
    True
    """
    import json

    try:
        got = json.loads(request.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(got, dict):
        return None
    return {k: got[k] for k in ("batch", "kill_point") if k in got}


def _descendants(pid: int) -> list[int]:
    """Every descendant of ``pid`` (psutil's process tree; none when ``pid`` is gone)."""
    try:
        return [c.pid for c in psutil.Process(pid).children(recursive=True)]
    except psutil.Error:
        return []


def kill_tree(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL a driver and everything it started, at once.

    The process groups of its descendants (Spark's JVM runs in a group of its own) first, then the
    driver's group; then reap it.

    A driver whose JVM outlived it by even a few milliseconds could still write the checkpoint,
    and the kill would not have struck where the trace says.
    """
    groups: list[int] = []
    for p in [*_descendants(proc.pid), proc.pid]:
        with contextlib.suppress(OSError):
            g = os.getpgid(p)
            if g not in groups and g != os.getpgrp():
                groups.append(g)
    for g in groups:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(g, signal.SIGKILL)
    for p in _descendants(proc.pid) + [proc.pid]:  # a member outside those groups
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(p, signal.SIGKILL)
    kill_group = getattr(proc, "kill_group", None)
    if callable(kill_group):
        kill_group()
    proc.wait()


def record_kill(trace: str | Path, checkpoint: str | Path, fired: dict[str, Any], mode: str = "kill") -> int:
    """Append the kill to the trace the killed driver wrote.

    First what the checkpoint held at the kill and the driver had not recorded yet (its watcher's
    events, as the killed attempt), then the ``failure`` event with the kill's facts (``mode``:
    ``kill``, or the second kill of ``twice`` / ``during-recovery``). Returns the failure's ``seq``.

    Parameters
    ----------
    trace : str or Path
        The trace the killed driver wrote.
    checkpoint : str or Path
        The query's checkpoint folder.
    fired : dict
        The kill's facts.
    mode : str, optional
        ``kill``, ``twice`` or ``during-recovery``.

    Returns
    -------
    int
        The failure event's seq.
    """
    from rollcheck.spark_replay.checkpoint.watcher import CheckpointWatcher
    from rollcheck.spark_replay.trace import TraceWriter

    w = TraceWriter(trace)  # cuts an incomplete line the killed driver may have left
    try:
        w.attempt = max(1, w.attempt - 1)  # the killed driver's attempt
        CheckpointWatcher(Path(checkpoint), w, w.previous).poll_now()
        return w.emit("failure", processes=["driver"], mode=mode, **fired)
    finally:
        w.close()


# ----------------------------------------------------------------------------- the replay's check
def _base(kind: str) -> str:
    return kind.split(".", 1)[1] if kind.startswith("spark.") else kind


def kill_point_struck(header: dict[str, Any], events: list[dict[str, Any]]) -> Check:
    """The kill struck where it was asked to, as the checkpoint at the moment of the kill shows.

    With batch K and kill point P, the ``failure`` event must say ``kill_point`` P and its
    ``checkpoint_logs`` must hold ``offsets`` K and ``commits`` K-1 (None for K = 0); ``offsets``
    and ``state`` strike before the sink wrote batch K (no ``sink_written`` of K in the killed
    attempt), ``sink`` and ``commit`` after it; ``offsets`` strikes before any state file of
    version K+1 exists, ``state`` after (unless the query keeps no state at all). A kill that
    struck elsewhere did not exercise the requested step: the check is *unchecked* (the replay is
    inconclusive), since it says nothing about Spark. Not applicable without a requested kill.

    Parameters
    ----------
    header : dict
        The trace's header.
    events : list of dict
        The trace's recorded events.

    Returns
    -------
    Check
        Held, unchecked, or not applicable without a requested kill.

    Examples
    --------
    >>> h = {"config": {"failure": "kill", "fail_at_batch": 2, "kill_point": "offsets"}}
    >>> f = {"seq": 9, "kind": "failure", "mode": "kill", "batch": 2, "attempt": 1,
    ...      "kill_point": "offsets", "checkpoint_logs": {"offsets": 2, "commits": 1}, "state_files": 0}
    >>> kill_point_struck(h, [f]).status.value
    'held'
    >>> kill_point_struck(h, [{**f, "checkpoint_logs": {"offsets": 2, "commits": 2}}]).detail[:40]
    'the kill struck after commits/2 was writ'
    """
    name = "kill-point"
    cfg = header.get("config") or {}
    point = cfg.get("kill_point")
    if cfg.get("failure") != "kill":
        return Check.not_applicable(name, "no driver kill requested")
    point = point or DEFAULT_KILL_POINT
    k = cfg.get("fail_at_batch")
    if not isinstance(k, int) or isinstance(k, bool):
        return Check.unchecked(name, f"the header's fail_at_batch is {k!r}, not a batch id")
    kills = [e for e in events if e.get("kind") == "failure" and e.get("mode") == "kill" and e.get("batch") == k]
    if not kills:
        return Check.unchecked(name, f"no kill at batch {k} in the trace: kill point {point} not exercised")
    f = kills[0]
    if "checkpoint_logs" not in f:
        return Check.unchecked(name, f"the kill (seq {f['seq']}) has no checkpoint_logs: where it struck is "
                                     f"not recorded (a trace from an older recorder)")
    if f.get("kill_point", DEFAULT_KILL_POINT) != point:
        return Check.unchecked(name, f"the kill (seq {f['seq']}) struck at {f.get('kill_point')}, "
                                     f"not at the requested {point}")
    logs = f.get("checkpoint_logs") or {}
    want_commit = k - 1 if k > 0 else None
    if logs.get("commits") != want_commit:
        late = isinstance(logs.get("commits"), int) and (want_commit is None or logs["commits"] > want_commit)
        return Check.unchecked(name, f"the kill struck {'after' if late else 'before'} commits/"
                                     f"{logs.get('commits') if late else want_commit} was written (commit log at "
                                     f"{logs.get('commits')}, offset log at {logs.get('offsets')}): not at {point}")
    if logs.get("offsets") != k:
        return Check.unchecked(name, f"the kill struck with the offset log at {logs.get('offsets')}, not at "
                                     f"batch {k}: not at {point}")
    att = f.get("attempt")
    sunk = any(_base(e.get("kind", "")) == "sink_written" and e.get("batch") == k and e.get("attempt") == att
               and e["seq"] < f["seq"] for e in events)
    if point in ("offsets", "state") and sunk:
        return Check.unchecked(name, f"the sink had written batch {k} when the kill struck: not at {point}")
    if point in ("sink", "commit") and not sunk:
        return Check.unchecked(name, f"the sink had not written batch {k} when the kill struck: not at {point}")
    nstate = int(f.get("state_files") or 0)
    stateful = any(_base(e.get("kind", "")) == "state_committed" for e in events) or bool(
        next((e.get("stores") for e in events if _base(e.get("kind", "")) == "state_final"), None))
    if point == "offsets" and nstate:
        return Check.unchecked(name, f"{nstate} state file(s) of version {k + 1} existed at the kill: the "
                                     f"batch had already run, not at offsets")
    if point == "state" and stateful and not nstate:
        return Check.unchecked(name, f"no state file of version {k + 1} existed at the kill: the state store "
                                     f"had not committed, not at state")
    where = {"offsets": f"after offsets/{k} was written, before any state of version {k + 1}",
             "state": f"after the state stores committed version {k + 1} ({nstate} file(s))"
                      if stateful else "after the batch ran (the query keeps no state), before the sink",
             "sink": f"after the sink wrote batch {k}, before commits/{k}",
             "commit": f"after the sink wrote batch {k}, as commits/{k} was being written (not yet there)"}[point]
    return Check.held(name, f"the kill (seq {f['seq']}) struck {where}: offset log at {logs.get('offsets')}, "
                            f"commit log at {logs.get('commits')}", examined=1)


#: The check that proves from the trace where each of these failures struck, by failure mode
#: (registered in the query replay's plug-ins next to ``kill-point``).
FAILURE_CHECKS: dict[str, tuple[str, Any]] = {
    "executor": ("executor-lost", executor_struck),
    "retry": ("task-retried", retry_struck),
    "twice": ("second-failure", second_failure_struck),
    "during-recovery": ("second-failure", second_failure_struck),
}
