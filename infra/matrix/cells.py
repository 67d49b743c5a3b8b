"""What a matrix cell says about itself, and the table's axes.

An engine's cell class may carry any fields (Spark: module, provider, failure, kill point; Flink:
module, backend, checkpoint mode, failure, rescaling); the core needs four things of it
(:class:`MatrixCell`): the ``module`` it runs, its table ``row`` (the configuration) and
``column`` (the failure), and ``ident``, its file stem inside the output folder (unique in the
matrix; it may hold a ``/``). :class:`GenericCell` is a ready-made one for a new engine.

Examples
--------
>>> cs = [GenericCell("a.py", "a · x", "crash"), GenericCell("a.py", "a · x", "stall"),
...       GenericCell("b.py", "b · x", "crash")]
>>> axes(cs)
(['a · x', 'b · x'], ['crash', 'stall'])
>>> cs[1].ident, cell_key(cs[1]) == entry_key({"row": "a · x", "column": "stall"})
('a-x/stall', True)
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

__all__ = ["MatrixCell", "GenericCell", "axes", "cell_key", "entry_key", "check_unique"]


@runtime_checkable
class MatrixCell(Protocol):
    """The four things the core reads of an engine's cell."""

    @property
    def module(self) -> str:
        """The query or job module the cell runs (a file or an importable name)."""
        ...

    @property
    def row(self) -> str:
        """The table row: the configuration, everything but the failure."""
        ...

    @property
    def column(self) -> str:
        """The table column: the failure."""
        ...

    @property
    def ident(self) -> str:
        """The cell's file stem inside the output folder (unique within the matrix)."""
        ...


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.]+", "-", text).strip("-") or "cell"


@dataclass(frozen=True)
class GenericCell:
    """A cell for an engine that needs nothing more than free-form dictionaries.

    A module, a row, a column and free-form ``config`` and ``failure`` dictionaries (the JSON
    entry's ``config`` and ``failure``).
    """

    module: str
    row: str
    column: str
    config: Mapping[str, Any] = field(default_factory=dict, hash=False, compare=False)
    failure: Mapping[str, Any] = field(default_factory=dict, hash=False, compare=False)

    @property
    def ident(self) -> str:
        """``<row>/<column>`` with every character that is not a name character made ``-``."""
        return f"{_slug(self.row)}/{_slug(self.column)}"


def cell_key(cell: MatrixCell) -> tuple[str, str]:
    """Where a planned cell sits in the table: ``(row, column)``."""
    return (cell.row, cell.column)


def entry_key(entry: Mapping[str, Any]) -> tuple[str, str]:
    """Where a cell's JSON entry sits in the table: ``(row, column)``."""
    return (str(entry["row"]), str(entry["column"]))


def axes(cells: Iterable[MatrixCell]) -> tuple[list[str], list[str]]:
    """The table's rows and columns, each in the order the cells first name them."""
    rows: list[str] = []
    cols: list[str] = []
    for c in cells:
        if c.row not in rows:
            rows.append(c.row)
        if c.column not in cols:
            cols.append(c.column)
    return rows, cols


def check_unique(cells: Iterable[MatrixCell]) -> str | None:
    """The first ``ident`` or table place two cells share, or None.

    Two such cells would overwrite each other's files or hide each other in the table.

    >>> check_unique([GenericCell("a.py", "r", "c"), GenericCell("b.py", "r", "c")])
    "two cells share the file stem 'r/c'"
    """
    idents: set[str] = set()
    places: set[tuple[str, str]] = set()
    for c in cells:
        if c.ident in idents:
            return f"two cells share the file stem {c.ident!r}"
        if cell_key(c) in places:
            return f"two cells share the table place {cell_key(c)!r}"
        idents.add(c.ident)
        places.add(cell_key(c))
    return None
