"""Which input files each micro-batch read, from the checkpoint's file-source logs.

Spark's file source writes, per micro-batch, the files it read into ``sources/<i>/<batch>`` of the
checkpoint (``v1`` then one JSON line per file: ``path``, ``timestamp``, ``batchId``), compacted
every few batches into ``<batch>.compact`` holding every entry so far. That log is what the
restarted query trusts, and it reads the same on every supported release — unlike the progress
reports, whose per-source row counts Spark 3.5 reports as zero for every source in a micro-batch
whose plan lost an idle source's branch. :func:`files_per_batch` turns it into ``{batch: {source:
[input batch numbers]}}`` (rollcheck's input files are named ``batch-<n>.json``, one folder per
source: ``in/<source>/``, or ``in/`` for a query of one source).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from rollcheck.spark_replay.query_module import SINGLE_SOURCE

__all__ = ["files_per_batch"]

_LOG_FILE = re.compile(r"^(\d+)(\.compact)?$")
_INPUT = re.compile(r"/in(?:-ref)?(?:/([^/]+))?/batch-(\d+)\.json$")


def files_per_batch(checkpoint: str | Path) -> dict[int, dict[str, list[int]]]:
    """The input batch numbers of the files each micro-batch read, per source.

    Parameters
    ----------
    checkpoint : path
        A Structured Streaming checkpoint folder of a rollcheck recording.

    Returns
    -------
    dict
        ``{micro-batch: {source: sorted input batch numbers}}``; a micro-batch that read no file
        (a data-less batch) is absent; files not named as rollcheck names them are left out.

    Examples
    --------
    >>> import tempfile
    >>> d = Path(tempfile.mkdtemp()); (d / "sources" / "0").mkdir(parents=True)
    >>> _ = (d / "sources" / "0" / "1").write_text('v1\\n{"path":"file:///w/in/clicks/batch-00001.json","batchId":1}\\n')
    >>> files_per_batch(d)
    {1: {'clicks': [1]}}
    """
    out: dict[int, dict[str, set[int]]] = {}
    root = Path(checkpoint) / "sources"
    if not root.is_dir():
        return {}
    for src in sorted(root.iterdir()):
        if not src.is_dir():
            continue
        for f in sorted(src.iterdir()):
            if not _LOG_FILE.match(f.name):
                continue
            for line in f.read_text(encoding="utf-8", errors="replace").splitlines()[1:]:
                try:
                    entry = json.loads(line)
                except ValueError:
                    continue
                m = _INPUT.search(str(entry.get("path") or "")) if isinstance(entry, dict) else None
                if m is None or not isinstance(entry.get("batchId"), int):
                    continue
                out.setdefault(entry["batchId"], {}).setdefault(m.group(1) or SINGLE_SOURCE, set()).add(int(m.group(2)))
    return {b: {s: sorted(n) for s, n in sorted(per.items())} for b, per in sorted(out.items())}
