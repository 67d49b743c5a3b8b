"""Which input files each micro-batch read, from the checkpoint's offset and file-source logs.

Spark's file source numbers what it reads with a counter of its own: ``sources/<i>/<n>`` (``v1``
then one JSON line per file: ``path``, ``timestamp``, ``batchId`` = *n*, compacted every few
entries into ``<n>.compact``) lists the files of the source's *n*-th read, and the offset log
``offsets/<b>`` holds, per source in plan order, the source's counter at the end of micro-batch
*b* (``{"logOffset": n}``, ``-`` before its first file). Micro-batch *b* read the entries above
the counter of micro-batch *b* - 1 up to its own; a source idle in *b* keeps its counter. These
logs are what a restarted query trusts, and they read the same on every supported release —
unlike the progress reports, whose per-source row counts Spark 3.5 gives as zero for every source
of a micro-batch whose plan lost an idle source's branch. :func:`files_per_batch` turns them into
``{micro-batch: {source: [input batch numbers]}}`` (rollcheck's input files are named
``batch-<n>.json``, one folder per source: ``in/<source>/``, or ``in/`` for a one-source query).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from rollcheck.spark_replay.checkpoint.reader import CheckpointDir
from rollcheck.spark_replay.query.module import SINGLE_SOURCE

__all__ = ["files_per_batch"]

_INPUT = re.compile(r"/in(?:-ref)?(?:/([^/]+))?/batch-(\d+)\.json$")


def _counter(offset: Any) -> int:
    return int(offset["logOffset"]) if isinstance(offset, dict) and "logOffset" in offset else -1


def files_per_batch(checkpoint: str | Path) -> dict[int, dict[str, list[int]]]:
    r"""The input batch numbers of the files each micro-batch read, per source.

    Parameters
    ----------
    checkpoint : path
        A Structured Streaming checkpoint folder of a rollcheck recording (file sources).

    Returns
    -------
    dict
        ``{micro-batch: {source: sorted input batch numbers}}`` for every micro-batch of the
        offset log; a source that read nothing in it is absent (a data-less batch: ``{}``); files
        not named as rollcheck names them are left out.

    Examples
    --------
    >>> import tempfile
    >>> d = Path(tempfile.mkdtemp())
    >>> for folder, name, text in (("offsets", "0", 'v1\n{}\n-\n{"logOffset":0}\n'),
    ...                            ("offsets", "1", 'v1\n{}\n{"logOffset":0}\n{"logOffset":0}\n'),
    ...                            ("sources/0", "0", 'v1\n{"path":"file:///w/in/imps/batch-00001.json","batchId":0}\n'),
    ...                            ("sources/1", "0", 'v1\n{"path":"file:///w/in/clicks/batch-00000.json","batchId":0}\n')):
    ...     (d / folder).mkdir(parents=True, exist_ok=True); _ = (d / folder / name).write_text(text)
    >>> files_per_batch(d)
    {0: {'clicks': [0]}, 1: {'imps': [1]}}
    """
    if not (Path(checkpoint) / "offsets").is_dir():
        return {}
    ck = CheckpointDir(Path(checkpoint))
    offsets = ck.offsets()
    if not offsets:
        return {}
    n_sources = max(len(e.get("sources") or []) for e in offsets.values())
    logs = [ck.source_files(i) for i in range(n_sources)]
    out: dict[int, dict[str, list[int]]] = {}
    before = [-1] * n_sources
    for b in sorted(offsets):
        now = [_counter(o) for o in offsets[b].get("sources") or []] + [-1] * n_sources
        read: dict[str, set[int]] = {}
        for i in range(n_sources):
            for n in range(before[i] + 1, now[i] + 1):
                for path in logs[i].get(n, []):
                    m = _INPUT.search(str(path))
                    if m:
                        read.setdefault(m.group(1) or SINGLE_SOURCE, set()).add(int(m.group(2)))
            before[i] = max(before[i], now[i])
        out[b] = {s: sorted(v) for s, v in sorted(read.items())}
    return out
