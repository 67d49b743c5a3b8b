"""Facts of a Structured Streaming checkpoint.

The highest batch id in its offset and commit logs, and how many state files of one version its
state stores wrote (what a kill left behind).
"""

from __future__ import annotations

import os
from pathlib import Path

from rollcheck.spark_replay.checkpoint.watcher import STATE_FILE

__all__ = ["checkpoint_logs", "state_files_of_version"]


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
