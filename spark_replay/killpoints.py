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

A *kill point* SIGKILLs the driver (its whole process group, JVM included) right after step 1
(``offsets``), right after step 2 (``state``), right after step 3 (``sink``) or just before step 4
(``commit``). ``state`` and ``sink`` are hit inside the driver's ``foreachBatch`` (the batch's
rows are collected, which runs the tasks and commits the state, then the sink writes); ``offsets``
and ``commit`` are hit from outside by :class:`KillSupervisor`, which watches the checkpoint's
log folders with Linux inotify (a 2 ms polling loop where inotify is unavailable) and kills as
soon as ``offsets/K`` appears, or as soon as Spark creates the temporary file it renames to
``commits/K``.

Whatever the point, the supervisor reads the checkpoint *after* the kill (nothing writes to it
any more) and records, in the trace's ``failure`` event, ``kill_point``, ``checkpoint_logs``
(``{"offsets": k|null, "commits": k|null}``: the highest batch id in each log) and
``state_files`` (how many state files of version K+1 exist). :func:`kill_point_struck` is the
replay's check that the kill struck where it was asked to: if it did not, the run did not
exercise the requested step and the replay is inconclusive, never a pass.

References
----------
Spark Structured Streaming Programming Guide: "Fault Tolerance Semantics", "Recovering from
Failures with Checkpointing", "State Store" (HDFS and RocksDB state store implementations,
"RocksDB State Store Changelog Checkpointing").
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import select
import signal
import struct
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rollcheck.pyimpl.errors import InvalidInputError
from rollcheck.pyimpl.verdict import Check
from rollcheck.spark_replay.watcher import STATE_FILE

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


# ----------------------------------------------------------------------------- checkpoint facts
def _log_ids(folder: Path) -> list[int]:
    try:
        return sorted(int(n) for n in os.listdir(folder) if n.isdigit())
    except FileNotFoundError:
        return []


def checkpoint_logs(checkpoint: str | Path) -> dict[str, int | None]:
    """The highest batch id in the offset and commit logs of a checkpoint (None: empty log).

    Examples
    --------
    >>> import tempfile; d = Path(tempfile.mkdtemp())
    >>> for p in ("offsets/0", "offsets/1", "commits/0", "commits/.1.x.tmp"):
    ...     (d / p).parent.mkdir(exist_ok=True); _ = (d / p).write_text("v1")
    >>> checkpoint_logs(d)
    {'offsets': 1, 'commits': 0}
    >>> import shutil; shutil.rmtree(d)
    """
    ck = Path(checkpoint)
    out: dict[str, int | None] = {}
    for log in ("offsets", "commits"):
        ids = _log_ids(ck / log)
        out[log] = ids[-1] if ids else None
    return out


def state_files_of_version(checkpoint: str | Path, version: int) -> int:
    """How many state files of ``version`` (any operator, partition, store, provider) exist.

    HDFS-backed stores write ``V.delta`` (and ``V.snapshot``); RocksDB writes ``V.zip`` (a
    snapshot, possibly ``V_<uuid>.zip``) and, with changelog checkpointing, ``V.changelog``.
    """
    root = Path(checkpoint) / "state"
    n = 0
    for dirpath, _dirs, files in os.walk(root):
        if "_metadata" in Path(dirpath).parts:
            continue
        for f in files:
            m = STATE_FILE.match(f)
            if m and int(m.group(1)) == version:
                n += 1
    return n


# ----------------------------------------------------------------------------- inotify
_IN_CREATE, _IN_MOVED_TO = 0x100, 0x80


class _Inotify:
    """A minimal Linux inotify reader (ctypes); ``None``-safe: :meth:`open` returns None where
    inotify is not available, and the caller polls instead."""

    def __init__(self, fd: int, libc: Any):
        self.fd = fd
        self.libc = libc
        self.watches: dict[int, Path] = {}

    @classmethod
    def open(cls) -> _Inotify | None:
        try:
            libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
            fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        except (OSError, AttributeError):
            return None
        return cls(fd, libc) if fd >= 0 else None

    def watch(self, folder: Path) -> bool:
        wd = self.libc.inotify_add_watch(self.fd, str(folder).encode(), _IN_CREATE | _IN_MOVED_TO)
        if wd < 0:
            return False
        self.watches[wd] = folder
        return True

    def read(self, timeout: float) -> list[tuple[Path, str]]:
        r, _, _ = select.select([self.fd], [], [], timeout)
        if not r:
            return []
        try:
            data = os.read(self.fd, 65536)
        except BlockingIOError:
            return []
        out, i = [], 0
        while i + 16 <= len(data):
            wd, _mask, _cookie, n = struct.unpack_from("iIII", data, i)
            name = data[i + 16: i + 16 + n].split(b"\0", 1)[0].decode(errors="replace")
            out.append((self.watches.get(wd, Path()), name))
            i += 16 + n
        return out

    def close(self) -> None:
        os.close(self.fd)


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
        """One round of supervision (blocks about 10 ms): kill ``proc`` and its JVM now if the
        driver asked for it (kill points ``state`` and ``sink``) or the external kill point was
        reached; True when it killed. The facts of the kill are kept for :meth:`take`."""
        request = self.markers / KILL_REQUEST
        if request.exists():
            request.unlink()
            self._kill(proc)
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
        """Supervise ``proc`` until it ends or is killed; the kill's facts (``kill_point``,
        ``checkpoint_logs``, ``state_files``, ``batch``) or None."""
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
        if self._ino is not None:
            self._ino.close()
            self._ino = None
            self._watching = False

    def _kill(self, proc: subprocess.Popen[bytes]) -> None:
        t0 = time.perf_counter()
        kill_tree(proc)
        self.timings.append(time.perf_counter() - t0)
        self.close()
        try:  # the kill fires once per recording: the driver's own guard uses the same marker
            fd = os.open(self.markers / "failed", os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            os.close(fd)
        except FileExistsError:
            pass
        self.fired = {"batch": self.batch, "kill_point": self.kill_point,
                      "checkpoint_logs": checkpoint_logs(self.checkpoint),
                      "state_files": state_files_of_version(self.checkpoint, (self.batch or 0) + 1)}
        self._pending = self.fired


def _descendants(pid: int) -> list[int]:
    """Every descendant of ``pid`` (Linux ``/proc/<pid>/task/<tid>/children``)."""
    out: list[int] = []
    todo = [pid]
    while todo:
        p = todo.pop()
        try:
            tids = os.listdir(f"/proc/{p}/task")
        except OSError:
            continue
        for t in tids:
            try:
                with open(f"/proc/{p}/task/{t}/children", encoding="ascii") as fh:
                    kids = [int(x) for x in fh.read().split()]
            except (OSError, ValueError):
                continue
            out += kids
            todo += kids
    return out


def kill_tree(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL a driver and everything it started, at once: the process groups of its descendants
    (Spark's JVM runs in a group of its own) first, then the driver's group; then reap it.

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
    """Append the kill to the trace the killed driver wrote: first what the checkpoint held at
    the kill and the driver had not recorded yet (its watcher's events, as the killed attempt),
    then the ``failure`` event with the kill's facts (``mode``: ``kill``, or the second kill of
    ``twice`` / ``during-recovery``). Returns the failure's ``seq``."""
    from rollcheck.spark_replay.trace import TraceWriter
    from rollcheck.spark_replay.watcher import CheckpointWatcher

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


# ----------------------------------------------------------------------------- faults only a cluster has
#: The failures that strike somewhere else than the driver's own run: ``executor`` (one executor
#: JVM SIGKILLed, the driver goes on) and ``retry`` (a task fails after its state store committed
#: and Spark retries it; the driver is then restarted after the next batch).
CLUSTER_FAILURES = ("executor", "retry")
#: The marker (in the recording's ``markers`` folder) of the retry failure's failed task attempt.
RETRY_FAILED = "retry-failed"
#: The marker prefix of a task attempt of the retried batch that ran to its end.
RETRY_DONE = "retry-done-"
#: The marker by which a ``retry`` recording's driver asks to be restarted (once).
RETRY_RESTART = "retry-restart"


def retry_restart_batch(fail_at: int, n_input: int) -> int:
    """The batch after whose sink a ``retry`` recording restarts its driver: the next data batch,
    or the retried batch itself when it is the last one.

    >>> retry_restart_batch(2, 6), retry_restart_batch(5, 6)
    (3, 5)
    """
    return fail_at + 1 if fail_at + 1 < n_input else fail_at


def retry_task(markers: str | Path, checkpoint: str | Path, batch: int) -> Any:
    """The ``mapPartitions`` function through which the ``retry`` failure collects batch ``batch``
    in the driver's ``foreachBatch``: it runs in the same task as the batch's last (stateful)
    stage, drains its input - the state store commits version ``batch + 1`` when its output
    iterator is exhausted - and then, in the first task attempt to get there, raises once. Each
    attempt that gets past that point records itself (``retry-done-<partition>-<attempt>``); the
    failing one records, in :data:`RETRY_FAILED`, its partition, stage, attempt and the state
    files of version ``batch + 1`` of its partition that existed when it raised."""
    mpath, ck, version = str(markers), str(checkpoint), batch + 1

    def run(rows):  # no type hints: PySpark 4 would read them as a pandas UDF
        import json as _json
        import os as _os

        from pyspark import TaskContext

        out = list(rows)  # drained: the stateful operator's iterator ended, its store committed
        tc = TaskContext.get()
        part, att, stage = tc.partitionId(), tc.attemptNumber(), tc.stageId()
        files = []
        root = _os.path.join(ck, "state")
        for dirpath, _dirs, names in _os.walk(root):
            parts = _os.path.relpath(dirpath, root).split(_os.sep)  # op/partition[/store]
            if len(parts) >= 2 and parts[1] == str(part) and "_metadata" not in parts:
                files += [n for n in names if n.split(".")[0].split("_")[0] == str(version)
                          and not n.endswith(".crc")]
        facts = {"partition": part, "attempt": att, "stage": stage, "batch": batch, "rows": len(out),
                 "state_files": sorted(files), "pid": _os.getpid()}
        try:
            fd = _os.open(_os.path.join(mpath, RETRY_FAILED), _os.O_CREAT | _os.O_EXCL | _os.O_WRONLY)
        except FileExistsError:
            with open(_os.path.join(mpath, f"{RETRY_DONE}{part}-{att}"), "w", encoding="utf-8") as fh:
                fh.write(_json.dumps(facts))
            return iter(out)
        _os.write(fd, _json.dumps(facts).encode())
        _os.close(fd)
        raise RuntimeError(f"rollcheck: injected task failure in batch {batch} after the state store committed "
                           f"(partition {part}, attempt {att})")

    return run


def retry_facts(markers: str | Path) -> dict[str, Any]:
    """What the ``retry`` failure's task attempts recorded: ``failed_attempt`` (or None) and
    ``succeeded_attempts`` (every attempt that ran to its end)."""
    import json

    m = Path(markers)
    failed = None
    with contextlib.suppress(OSError, ValueError):
        failed = json.loads((m / RETRY_FAILED).read_text(encoding="utf-8"))
    done = []
    for p in sorted(m.glob(RETRY_DONE + "*")):
        with contextlib.suppress(OSError, ValueError):
            done.append(json.loads(p.read_text(encoding="utf-8")))
    return {"failed_attempt": failed, "succeeded_attempts": done}


def _requested_failure(header: dict[str, Any], mode: str) -> tuple[int | None, str | None]:
    cfg = header.get("config") or {}
    if cfg.get("failure") != mode:
        return None, f"no {mode} failure requested"
    k = cfg.get("fail_at_batch")
    if not isinstance(k, int) or isinstance(k, bool):
        return None, f"the header's fail_at_batch is {k!r}, not a batch id"
    return k, None


def executor_struck(header: dict[str, Any], events: list[dict[str, Any]]) -> Check:
    """``executor-lost``: an executor JVM was SIGKILLed in batch K, the driver saw it removed, and
    the query went on in the same driver.

    The ``spark.failure`` event (mode ``executor``: an engine-level failure, not a failure of the
    trace's one process, the driver, which goes on) must name the executor id and pid, say that the
    process was gone, and carry Spark's own record of the loss: the executor listed as inactive,
    with its removal reason, by the driver's status store (Spark's listener of
    ``SparkListenerExecutorRemoved``); its ``checkpoint_logs`` must show that the batch had run
    (offset log at K, commit log at K-1: the kill struck after the state stores committed, before
    the sink). Tasks of a later batch must have run (a batch committed after the kill in the same
    attempt): the killed executor's state store partitions were loaded elsewhere, from the
    checkpoint. A kill that did not happen or was not seen by Spark is *unchecked*.

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
    from rollcheck.spark_replay.watcher import state_key

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


def retry_struck(header: dict[str, Any], events: list[dict[str, Any]]) -> Check:
    """``task-retried``: a task of batch K failed after its state store committed, and Spark ran
    the same partition of the same stage again to success; then the driver was restarted from the
    checkpoint after a later batch.

    The ``failure`` event (mode ``retry``) carries the failed attempt (partition, stage, attempt,
    the state files of version K+1 of its partition when it raised) and the attempts that ran to
    their end: one of them must be the same stage and partition with a higher attempt number. For
    a stateful query the failed attempt must have seen its state file of version K+1 (it failed
    after the commit). A driver restart (a ``restart`` event) must follow, so that the retried
    state was reloaded from the checkpoint. Anything missing is *unchecked*.

    Examples
    --------
    >>> h = {"config": {"failure": "retry", "fail_at_batch": 1}}
    >>> f = {"seq": 5, "kind": "failure", "mode": "retry", "batch": 1, "stateful": True,
    ...      "failed_attempt": {"partition": 0, "stage": 7, "attempt": 0, "state_files": ["2.delta"]},
    ...      "succeeded_attempts": [{"partition": 0, "stage": 7, "attempt": 1, "state_files": ["2.delta"]}]}
    >>> r = {"seq": 9, "kind": "spark.restart", "resume_batch": 2}
    >>> retry_struck(h, [f, r]).status.value
    'held'
    >>> retry_struck(h, [{**f, "succeeded_attempts": []}, r]).status.value
    'unchecked'
    """
    name = "task-retried"
    k, why = _requested_failure(header, "retry")
    if k is None:
        return (Check.not_applicable(name, why or "") if "requested" in (why or "")
                else Check.unchecked(name, why or ""))
    hit = [e for e in events if e.get("kind") == "failure" and e.get("mode") == "retry" and e.get("batch") == k]
    if not hit:
        return Check.unchecked(name, f"no task of batch {k} failed: the retry was not exercised")
    f = hit[0]
    bad = f.get("failed_attempt")
    if not isinstance(bad, dict):
        return Check.unchecked(name, f"the retry failure (seq {f['seq']}) does not record the failed task attempt")
    part, stage, att = bad.get("partition"), bad.get("stage"), bad.get("attempt")
    again = [a for a in f.get("succeeded_attempts") or [] if isinstance(a, dict) and a.get("partition") == part
             and a.get("stage") == stage and isinstance(a.get("attempt"), int) and isinstance(att, int)
             and a["attempt"] > att]
    if not again:
        return Check.unchecked(name, f"partition {part} of stage {stage} failed in attempt {att} (seq {f['seq']}) "
                                     "but no later attempt of it ran to its end: Spark did not retry it")
    if f.get("stateful") and not bad.get("state_files"):
        return Check.unchecked(name, f"the failed attempt of partition {part} saw no state file of version {k + 1}: "
                                     "it did not fail after its state store committed")
    restart = [e for e in events if _base(e.get("kind", "")) == "restart" and e["seq"] > f["seq"]]
    if not restart:
        return Check.unchecked(name, f"the retried batch {k} (seq {f['seq']}) was never followed by a restart from "
                                     "the checkpoint: the retried state was not reloaded")
    return Check.held(name, f"partition {part} of stage {stage} failed in attempt {att} after committing "
                            f"{bad.get('state_files') or 'no state (stateless query)'} and succeeded in attempt "
                            f"{again[0]['attempt']}; the driver was restarted (seq {restart[0]['seq']}, resume batch "
                            f"{restart[0].get('resume_batch')})", examined=1)


#: The failures that strike twice: ``twice`` (the driver SIGKILLed after the sink wrote batch K, and
#: again after the restarted driver wrote batch K once more, the batch right after the recovery) and
#: ``during-recovery`` (the driver SIGKILLed after the sink wrote batch K, and again while the
#: restarted driver restores: in the first stage of batch K's re-run, before any stateful task loaded
#: its state store).
SECOND_FAILURES = ("twice", "during-recovery")
#: The marker of the second kill (once per recording).
SECOND_KILL = "second-kill"


def recovery_kill_filter(markers: str | Path, batch: int) -> Any:
    """The Python function of the filter through which a restarted ``during-recovery`` driver reads
    its input: in the task that reads batch ``batch``'s file - the batch's first stage, before the
    shuffle to its stateful stage, so before any state store of the restarted query is loaded - it
    asks the supervising parent (once) to SIGKILL the driver and waits for it."""
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


#: The check that proves from the trace where each of these failures struck, by failure mode
#: (registered in the query replay's plug-ins next to ``kill-point``).
FAILURE_CHECKS: dict[str, tuple[str, Any]] = {
    "executor": ("executor-lost", executor_struck),
    "retry": ("task-retried", retry_struck),
    "twice": ("second-failure", second_failure_struck),
    "during-recovery": ("second-failure", second_failure_struck),
}
