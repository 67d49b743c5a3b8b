"""The live terminal view of a matrix (``spark matrix``, ``flink matrix``): a table on stderr.

On a terminal the table (one row per configuration, one column per failure: the core's
:func:`rollcheck.infra.matrix.terminal_table`) is redrawn whenever a cell starts or ends;
otherwise one line per finished cell goes to stderr. stdout is left alone (``--json`` prints
exactly one document there).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from typing import Any

from rollcheck.infra.matrix import cell_word, terminal_table

__all__ = ["MatrixView", "matrix_table"]


def matrix_table(results: Sequence[Mapping[str, Any]], planned: Sequence[Any],
                 running: Mapping[tuple[str, str], str], *, title: str = "spark matrix",
                 row_header: str = "query · state store") -> Any:
    """A :class:`rich.table.Table` of the matrix so far."""
    return terminal_table(results, planned, running, title=title, row_header=row_header)


class MatrixView:
    """Context manager: ``update(results, planned, running)`` redraws (terminal) or logs (pipe)."""

    def __init__(self, title: str = "spark matrix", row_header: str = "query · state store") -> None:
        self.live: Any = None
        self.seen: set[tuple[str, str]] = set()
        self.title, self.row_header = title, row_header

    def __enter__(self) -> MatrixView:
        if sys.stderr.isatty():
            from rich.console import Console
            from rich.live import Live

            self.live = Live(console=Console(stderr=True), refresh_per_second=2, transient=False)
            self.live.__enter__()
        return self

    def update(self, results: list[dict[str, Any]], planned: list[Any],
               running: dict[tuple[str, str], str]) -> None:
        """Redraw the table (terminal) or log each newly finished cell (pipe)."""
        if self.live is not None:
            self.live.update(matrix_table(results, planned, running, title=self.title,
                                          row_header=self.row_header))
            return
        for r in results:
            key = (str(r["row"]), str(r["column"]))
            if key not in self.seen:
                self.seen.add(key)
                word = cell_word(r)[1]
                print(f"[{len(self.seen)}/{len(planned)}] {r['row']} · {r['column']}: {word} — "
                      f"{str(r['reason'])[:160]}", file=sys.stderr, flush=True)

    def __exit__(self, *exc: object) -> None:
        if self.live is not None:
            self.live.__exit__(None, None, None)
