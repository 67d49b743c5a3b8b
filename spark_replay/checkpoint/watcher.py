"""Watch a Structured Streaming checkpoint folder and record what Spark writes there.

A :class:`CheckpointWatcher` polls the folder (from a background thread, and synchronously when
the recorder asks, e.g. at each sink call) and appends to a trace, in the order Spark writes them:
``spark.batch_committed`` when ``commits/N`` appears, ``spark.batch_planned`` when
``offsets/N`` appears (with the offsets and the source files of the batch) and
``spark.state_committed`` when a state file version of any operator, partition and store appears
or is rewritten (``specs/spark.md#streaming-trace``), for every state store provider: the
HDFS-backed store's ``V.delta`` and ``V.snapshot``, RocksDB's ``V.zip`` (a snapshot; with
checkpoint format 2 ``V_<id>.zip``) and, with changelog checkpointing, ``V.changelog``. RocksDB's
shared ``SSTs/`` folder and the ``.crc`` companions are not versions.

Which file a *commit* of version V writes depends on the provider (:data:`COMMIT_FILE_KINDS`):
``V.delta`` (HDFS), ``V.zip`` (RocksDB: every commit uploads a snapshot) or ``V.changelog``
(RocksDB with changelog checkpointing: the snapshots are uploaded later by the maintenance thread,
and are no sign of a commit). The restored version of an attempt is one below the first such
file it writes (:meth:`CheckpointWatcher.restored_versions`).

References
----------
Spark Structured Streaming programming guide (checkpointing; the checkpoint folder layout is in
``specs/spark.md#checkpoint-files``).
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from pathlib import Path
from typing import Any

from rollcheck.spark_replay.checkpoint.reader import DEFAULT_STORE, CheckpointDir
from rollcheck.spark_replay.trace import TraceWriter

__all__ = ["CheckpointWatcher", "PREFIX", "COMMIT_FILE_KINDS", "STATE_FILE", "base_kind", "state_key"]

#: Prefix of the engine-specific streaming event kinds (the core ``failure`` and ``end`` have none).
PREFIX = "spark."
#: A state file of one version: ``V.delta``, ``V.snapshot``, ``V.zip``, ``V.changelog`` (RocksDB
#: with checkpoint format 2: ``V_<unique id>.zip`` / ``.changelog``).
STATE_FILE = re.compile(r"^(\d+)(?:_[0-9A-Za-z-]+)?\.(delta|snapshot|zip|changelog)$")
#: Per state store provider (``killpoints.STATE_STORES``), the file kind a commit of a version writes.
COMMIT_FILE_KINDS = {"hdfs": "delta", "rocksdb": "zip", "rocksdb-changelog": "changelog"}


def base_kind(kind: str) -> str:
    """The streaming event kind without the engine prefix.

    Traces recorded before the prefix existed use the bare names.

    Examples
    --------
    >>> base_kind("spark.batch_planned"), base_kind("batch_planned"), base_kind("failure")
    ('batch_planned', 'batch_planned', 'failure')
    """
    return kind[len(PREFIX):] if kind.startswith(PREFIX) else kind


def state_key(e: dict[str, Any]) -> str:
    """The state store instance a ``state_committed`` event (or restored version) refers to.

    ``"<partition>"`` for the default store of operator 0, ``"<op>/<partition>/<store>"`` else.

    Examples
    --------
    >>> state_key({"partition": 1}), state_key({"operator": 0, "partition": 1, "store": "left-x"})
    ('1', '0/1/left-x')
    """
    op = int(e.get("operator", 0))
    store = str(e.get("store", DEFAULT_STORE))
    if op == 0 and store == DEFAULT_STORE:
        return str(e["partition"])
    return f"{op}/{e['partition']}/{store}"


class CheckpointWatcher:
    """Polls a checkpoint folder and records what Spark wrote there (module docstring).

    Parameters
    ----------
    checkpoint : Path
        The query's ``checkpointLocation``.
    writer : TraceWriter
        Where the events go.
    previous : list of dict
        Events already in the trace (a restarted driver does not record them again).
    provider : str
        The state store provider (a key of :data:`COMMIT_FILE_KINDS`): which file kind marks a
        commit, for :meth:`restored_versions`.
    """

    def __init__(self, checkpoint: Path, writer: TraceWriter, previous: list[dict[str, Any]],
                 provider: str = "hdfs"):
        if provider not in COMMIT_FILE_KINDS:
            raise ValueError(f"unknown state store provider {provider!r}")
        self.ck = Path(checkpoint)
        self.w = writer
        self.commit_kind = COMMIT_FILE_KINDS[provider]
        self.lock = threading.Lock()
        self.planned = {e["batch"] for e in previous if base_kind(e["kind"]) == "batch_planned"}
        self.committed = {e["batch"] for e in previous if base_kind(e["kind"]) == "batch_committed"}
        self.state_seen: dict[str, tuple[int, int]] = {
            e["file"]: (e["mtime_ns"], e["size"]) for e in previous
            if base_kind(e["kind"]) == "state_committed"}
        #: Per state instance (:func:`state_key`), the lowest version this attempt committed
        #: (wrote its commit file: :data:`COMMIT_FILE_KINDS`).
        self.written_this_attempt: dict[str, int] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        #: Background polling period (s). Ordering does not depend on it: the sink polls
        #: synchronously before recording, and stopping polls once more.
        self.interval = 0.5

    def _state_files(self) -> list[tuple[int, int, int, str, str, str, os.stat_result]]:
        root = self.ck / "state"
        found: list[tuple[int, int, int, str, str, str, os.stat_result]] = []
        if not root.is_dir():
            return found
        for opdir in root.iterdir():
            if not opdir.name.isdigit():
                continue
            for pdir in opdir.iterdir():
                if not pdir.name.isdigit():
                    continue
                dirs = [(DEFAULT_STORE, pdir)] + [(s.name, s) for s in pdir.iterdir()
                                                  if s.is_dir() and not s.name.startswith(("_", "."))
                                                  and s.name != "SSTs"]  # RocksDB's shared files
                for store, d in dirs:
                    for f in d.iterdir():
                        m = STATE_FILE.match(f.name)
                        if m is None:
                            continue
                        try:
                            st = f.stat()
                        except FileNotFoundError:
                            continue
                        found.append((int(m.group(1)), int(opdir.name), int(pdir.name),
                                      store, f.name, str(f.relative_to(self.ck)), st))
        return found

    def poll(self) -> None:
        """Record what Spark wrote to the checkpoint since the last poll."""
        with self.lock:
            if not self.ck.is_dir():
                return
            reader = CheckpointDir(self.ck)
            # Spark writes commits/N, then offsets/N+1, then the state files of batch N+1: record
            # what one poll finds in that order.
            for b in reader._log_files("commits"):
                if b not in self.committed:
                    self.w.emit(PREFIX + "batch_committed", batch=b)
                    self.committed.add(b)
            offs = reader._log_files("offsets")
            new = [b for b in offs if b not in self.planned]
            if new:
                srcs = reader.source_files(0)
                for b in new:
                    lines = CheckpointDir._log_lines(offs[b])
                    meta = json.loads(lines[0]) if lines else {}
                    self.w.emit(PREFIX + "batch_planned", batch=b,
                                offsets=[json.loads(x) for x in lines[1:] if x != "-"],
                                files=[os.path.basename(p) for p in srcs.get(b, [])],
                                watermark_ms=meta.get("batchWatermarkMs") if isinstance(meta, dict) else None)
                    self.planned.add(b)
            fresh = [x for x in self._state_files() if self.state_seen.get(x[5]) != (x[6].st_mtime_ns, x[6].st_size)]
            for v, op, part, store, name, rel, st in sorted(fresh, key=lambda x: x[:5]):
                self.state_seen[rel] = (st.st_mtime_ns, st.st_size)
                kind = name.rsplit(".", 1)[1]
                ev: dict[str, Any] = {"batch": v - 1, "partition": part, "version": v}
                if op != 0 or store != DEFAULT_STORE:
                    ev.update(operator=op, store=store)
                self.w.emit(PREFIX + "state_committed", **ev, file_kind=kind, file=rel,
                            mtime_ns=st.st_mtime_ns, size=st.st_size)
                if kind == self.commit_kind:
                    key = state_key(ev)
                    prev = self.written_this_attempt.get(key)
                    self.written_this_attempt[key] = v if prev is None else min(prev, v)

    def poll_now(self) -> None:
        """Poll synchronously, retrying if a file is caught between write and rename."""
        for k in range(5):
            try:
                self.poll()
                return
            except (OSError, ValueError):
                if k == 4:
                    raise
                time.sleep(0.05)

    def restored_versions(self) -> dict[str, int]:
        """The state version each instance restored in this attempt.

        One below the first version it committed (its first delta, RocksDB zip or changelog file).
        """
        return {k: v - 1 for k, v in sorted(self.written_this_attempt.items())}

    def new_attempt(self) -> None:
        """Forget which versions the previous attempt wrote (the next restart is judged afresh)."""
        self.written_this_attempt = {}
        self._stop = threading.Event()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.poll()
            except (OSError, ValueError):
                continue  # a file caught mid-rename; the next poll sees it complete

    def start(self) -> None:
        """Start polling the checkpoint in a background thread."""
        self._thread = threading.Thread(target=self._loop, name="rollcheck-watcher", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop polling, after one last poll."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.poll_now()
