"""The files of a query recording: the work folder, the input files, the default sink, the output.

:func:`prepare_workdir` makes the work folder (only a folder marked :data:`WORK_MARKER` is ever
replaced) with one JSON Lines input file per batch (strictly increasing modification times fix
Spark's file order) and the checkpoint, output and marker folders (:class:`WorkPaths`);
:func:`default_sink` is rollcheck's idempotent sink (``batch-<id>.json`` replaced atomically),
:func:`read_output` reads back what the sink wrote (the module's own ``read_output`` if it has
one); :func:`plain` and :func:`json_value` turn Spark values into JSON-able data.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rollcheck.pyimpl.errors import InvalidInputError, UserCodeTimeout
from rollcheck.spark_replay.query_module import UserQuery

__all__ = ["WORK_MARKER", "WorkPaths", "prepare_workdir", "plain", "json_value", "canon_json", "default_sink",
           "default_read", "read_output"]

#: A file that marks a work folder as rollcheck's (only such a folder is ever replaced).
WORK_MARKER = ".rollcheck-work"


def json_value(v: Any) -> Any:
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

    Examples
    --------
    >>> plain({"t": dt.datetime(2024, 1, 1, 0, 0, 5), "n": [1, (2, 3)]})
    {'t': '2024-01-01T00:00:05', 'n': [1, [2, 3]]}
    """
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
    return json.dumps(x, sort_keys=True, separators=(",", ":"), default=str)


@dataclass
class WorkPaths:
    root: Path

    @property
    def inputs(self) -> Path:
        return self.root / "in"

    def checkpoint(self, ref: bool = False) -> Path:
        return self.root / ("ref-checkpoint" if ref else "checkpoint")

    def out(self, ref: bool = False) -> Path:
        return self.root / ("ref-out" if ref else "out")

    @property
    def markers(self) -> Path:
        return self.root / "markers"


def prepare_workdir(root: Path, rows: list[list[tuple[Any, ...]]], columns: list[str]) -> WorkPaths:
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
    base = time.time() - 3600  # strictly increasing modification times fix the file order
    for b, batch in enumerate(rows):
        f = paths.inputs / f"batch-{b:05d}.json"
        with open(f, "w", encoding="utf-8") as fh:
            for r in batch:
                fh.write(json.dumps(dict(zip(columns, map(json_value, r), strict=True))) + "\n")
        os.utime(f, (base + b, base + b))
    return paths


def default_sink(rows: list[dict[str, Any]], batch_id: int, out_dir: str) -> None:
    """rollcheck's idempotent sink: the batch's rows replace ``batch-<id>.json`` atomically."""
    p = Path(out_dir) / f"batch-{batch_id:05d}.json"
    tmp = p.with_name("." + p.name + ".tmp")
    tmp.write_text(json.dumps(sorted(rows, key=canon_json)), encoding="utf-8")
    os.replace(tmp, p)


def default_read(out_dir: str) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for f in sorted(Path(out_dir).glob("batch-*.json")):
        rows.extend(json.loads(f.read_text(encoding="utf-8")))
    return rows


def read_output(uq: UserQuery, out_dir: Path) -> list[dict[str, Any]]:
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
