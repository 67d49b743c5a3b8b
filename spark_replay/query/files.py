"""The files of a query recording: the work folder, the input files, the default sink, the output.

:func:`prepare_workdir` makes the work folder (only a folder marked :data:`WORK_MARKER` is ever
replaced) with one JSON Lines input file per batch (strictly increasing modification times fix
Spark's file order) and the checkpoint, output and marker folders (:class:`WorkPaths`). A query of
several sources (``SOURCES``) reads one folder per source, fed batch by batch (:func:`feed_inputs`:
batch *b*'s files appear when batch *b* - 1 runs), so that a source without rows in batch *b* has
no new data in Spark's micro-batch *b*;
:func:`default_sink` is rollcheck's idempotent sink (``batch-<id>.json`` replaced atomically),
:func:`read_output` reads back what the sink wrote (the module's own ``read_output`` if it has
one); :func:`plain` and :func:`json_value` turn Spark values into JSON-able data.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import math
import os
import shutil
import time
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from rollcheck.pyimpl.errors import InvalidInputError, UserCodeTimeout
from rollcheck.spark_replay.query.module import SINGLE_SOURCE, Batch, UserQuery

__all__ = ["WORK_MARKER", "WorkPaths", "prepare_workdir", "feed_inputs", "plain", "json_value", "canon_json",
           "default_sink", "default_read", "read_output"]

#: A file that marks a work folder as rollcheck's (only such a folder is ever replaced).
WORK_MARKER = ".rollcheck-work"


def json_value(v: Any) -> Any:
    """``v`` as a JSON value (timestamps and decimals as Spark writes them, rows as lists)."""
    if isinstance(v, dt.datetime):
        if v.tzinfo is not None:
            v = v.astimezone(dt.UTC).replace(tzinfo=None)
        return v.strftime("%Y-%m-%dT%H:%M:%S.%f")
    if isinstance(v, dt.date):
        return v.isoformat()
    if isinstance(v, decimal.Decimal):
        return str(v)
    if isinstance(v, dict):
        return {str(k): json_value(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [json_value(x) for x in v]
    return v


def plain(v: Any) -> Any:
    """A Spark value as JSON-able data: rows to dicts, timestamps to ISO strings (UTC).

    A double that is not finite becomes Spark's JSON spelling, the string ``"NaN"``,
    ``"Infinity"`` or ``"-Infinity"`` (a trace is strict JSON, which has no such numbers).

    Examples
    --------
    >>> plain({"t": dt.datetime(2024, 1, 1, 0, 0, 5), "n": [1, (2, 3)]})
    {'t': '2024-01-01T00:00:05', 'n': [1, [2, 3]]}
    >>> plain([float("nan"), float("-inf"), 1.5])
    ['NaN', '-Infinity', 1.5]
    """
    if isinstance(v, float) and not math.isfinite(v):
        return "NaN" if math.isnan(v) else ("Infinity" if v > 0 else "-Infinity")
    if hasattr(v, "asDict"):
        return {k: plain(x) for k, x in v.asDict(recursive=False).items()}
    if isinstance(v, dt.datetime):
        return v.isoformat()
    if isinstance(v, dt.date):
        return v.isoformat()
    if isinstance(v, decimal.Decimal):
        return str(v)
    if isinstance(v, bytes | bytearray):
        return v.hex()
    if isinstance(v, dict):
        return {str(k): plain(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [plain(x) for x in v]
    return v


def canon_json(x: Any) -> str:
    """``x`` as canonical JSON (sorted keys, no spaces)."""
    return json.dumps(x, sort_keys=True, separators=(",", ":"), default=str)


@dataclass
class WorkPaths:
    """The folders of one recording (``root``: its work folder)."""

    root: Path

    @property
    def inputs(self) -> Path:
        """The input folder of a one-source query (shared by the reference and the failure run)."""
        return self.root / "in"

    def inputs_of(self, ref: bool = False) -> Path:
        """The folder the run reads: ``in``.

        With several sources one per run (each fed batch by batch), ``in-ref`` for the reference
        run, each holding a folder per source.
        """
        return self.root / ("in-ref" if ref and self.multi else "in")

    @property
    def staged(self) -> Path:
        """Every source's input files, written before the run (several sources only)."""
        return self.root / "staged"

    @cached_property
    def layout(self) -> dict[str, Any]:
        """``{"sources": [...], "batches": n, "multi": bool}`` (``inputs.json``)."""
        f = self.root / "inputs.json"
        if not f.is_file():
            return {"sources": [SINGLE_SOURCE], "batches": len(list(self.inputs.glob("batch-*.json"))),
                    "multi": False}
        return dict(json.loads(f.read_text(encoding="utf-8")))

    @property
    def multi(self) -> bool:
        """Whether the query reads more than one source."""
        return bool(self.layout.get("multi"))

    @property
    def n_batches(self) -> int:
        """The number of input batches."""
        return int(self.layout["batches"])

    def checkpoint(self, ref: bool = False) -> Path:
        """The checkpoint folder of the run (``ref``: the reference run)."""
        return self.root / ("ref-checkpoint" if ref else "checkpoint")

    def out(self, ref: bool = False) -> Path:
        """The output folder of the run (``ref``: the reference run)."""
        return self.root / ("ref-out" if ref else "out")

    @property
    def markers(self) -> Path:
        """The folder of the run's marker files."""
        return self.root / "markers"


def _write_rows(f: Path, rows: list[tuple[Any, ...]], columns: list[str], mtime: float) -> None:
    with open(f, "w", encoding="utf-8") as fh:
        for r in rows:
            fh.write(json.dumps(dict(zip(columns, map(json_value, r), strict=True))) + "\n")
    os.utime(f, (mtime, mtime))


def prepare_workdir(root: Path, batches: list[Batch], uq: UserQuery) -> WorkPaths:
    """The work folder of a recording.

    With the input files of every batch (one source: ``in/``; several: ``staged/<source>/``, fed to
    the runs by :func:`feed_inputs`).

    Parameters
    ----------
    root : Path
        The work folder (replaced only when rollcheck's own).
    batches : list of Batch
        The input batches.
    uq : UserQuery
        The loaded query module.

    Returns
    -------
    WorkPaths
        The recording's folders.
    """
    if root.exists():
        if not (root / WORK_MARKER).exists():
            raise InvalidInputError("the work folder exists and is not rollcheck's; remove it or choose "
                                    "another", source=str(root), location="--workdir")
        shutil.rmtree(root)
    paths = WorkPaths(root)
    root.mkdir(parents=True)
    (root / WORK_MARKER).write_text("rollcheck spark record query\n", encoding="utf-8")
    for d in (paths.inputs, paths.out(), paths.out(True), paths.markers):
        d.mkdir()
    (root / "inputs.json").write_text(json.dumps({"sources": list(uq.sources), "batches": len(batches),
                                                  "multi": uq.multi}), encoding="utf-8")
    base = time.time() - 3600  # strictly increasing modification times fix the file order
    if not uq.multi:
        for b, batch in enumerate(batches):
            _write_rows(paths.inputs / f"batch-{b:05d}.json", batch.get(SINGLE_SOURCE, []), uq.columns, base + b)
        return paths
    first = next(iter(uq.sources))
    for name in uq.sources:
        for d in (paths.staged / name, paths.inputs_of(False) / name, paths.inputs_of(True) / name):
            d.mkdir(parents=True)
    for b, batch in enumerate(batches):
        # a batch in which no source moves gets an empty file of the first source: Spark runs no
        # micro-batch without new data, and input batch b must stay Spark's batch b
        for name, rows in (batch or {first: []}).items():
            _write_rows(paths.staged / name / f"batch-{b:05d}.json", rows, uq.source_columns(name), base + b)
    return paths


def feed_inputs(paths: WorkPaths, ref: bool, upto: int) -> None:
    """Make the input files of batches ``0..upto`` visible to the run.

    Several sources: a hard link per staged file, created once; a one-source query's files are all
    there from the start.

    Parameters
    ----------
    paths : WorkPaths
        The recording's folders.
    ref : bool
        The failure-free run's inputs (else the failure run's).
    upto : int
        The last batch made visible.
    """
    if not paths.multi:
        return
    for b in range(min(upto, paths.n_batches - 1) + 1):
        name = f"batch-{b:05d}.json"
        for src in paths.staged.iterdir():
            staged = src / name
            target = paths.inputs_of(ref) / src.name / name
            if not staged.is_file() or target.exists():
                continue
            try:
                os.link(staged, target)
            except FileExistsError:
                pass
            except OSError:  # no hard links here: a copy, renamed into place (Spark skips dot files)
                tmp = target.with_name("." + name + ".tmp")
                shutil.copy2(staged, tmp)
                os.replace(tmp, target)


def default_sink(rows: list[dict[str, Any]], batch_id: int, out_dir: str) -> None:
    """The idempotent sink of rollcheck: the batch's rows replace ``batch-<id>.json`` atomically.

    Parameters
    ----------
    rows : list of dict
        The batch's rows.
    batch_id : int
        The batch id.
    out_dir : str
        The output folder.
    """
    p = Path(out_dir) / f"batch-{batch_id:05d}.json"
    tmp = p.with_name("." + p.name + ".tmp")
    tmp.write_text(json.dumps(sorted(rows, key=canon_json)), encoding="utf-8")
    os.replace(tmp, p)


def default_read(out_dir: str) -> list[dict[str, Any]]:
    """Read back what the default sink wrote to ``out_dir``."""
    rows: list[dict[str, Any]] = []
    for f in sorted(Path(out_dir).glob("batch-*.json")):
        rows.extend(json.loads(f.read_text(encoding="utf-8")))
    return rows


def read_output(uq: UserQuery, out_dir: Path) -> list[dict[str, Any]]:
    """Read the query's output with the module's ``read_output`` or the default reader.

    Parameters
    ----------
    uq : UserQuery
        The loaded query module.
    out_dir : Path
        The output folder.

    Returns
    -------
    list of dict
        The output rows (plain JSON values).
    """
    if not uq.has_sink:
        return default_read(str(out_dir))
    try:
        rows = uq.call("read_output", str(out_dir))
    except UserCodeTimeout:
        raise
    except Exception as e:
        raise InvalidInputError(f"read_output raised {type(e).__name__}: {e}", source=uq.spec,
                                location="read_output") from None
    if not isinstance(rows, list | tuple) or not all(isinstance(r, dict) for r in rows):
        raise InvalidInputError("read_output must return a list of dicts", source=uq.spec,
                                location="read_output")
    return [plain(r) for r in rows]
