"""The live terminal view of ``rollcheck spark matrix``: a rich table on stderr while it runs.

On a terminal the table (one row per configuration, one column per failure) is redrawn whenever a
cell starts or ends; otherwise one line per finished cell goes to stderr. stdout is left alone
(``--json`` prints exactly one document there).
"""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["MatrixView", "matrix_table"]

_STYLE = {"conformant": "bold green", "not-conformant": "bold red", "inconclusive": "yellow",
          "expected": "bold dark_orange"}


def matrix_table(results: list[dict[str, Any]], planned: list[Any], running: dict[str, str]) -> Any:
    """A :class:`rich.table.Table` of the matrix so far."""
    from rich.table import Table

    cols: list[str] = []
    rows: list[str] = []
    for c in planned:
        if c.column not in cols:
            cols.append(c.column)
        if c.config_id not in rows:
            rows.append(c.config_id)
    by = {(r["name"] + "--" + r["config"]["state_store"], r["column"]): r for r in results}
    busy = {k.rsplit("/", 1)[0] + "|" + v for k, v in running.items() if "/" in k}
    busy_ref = {k.split(" ")[0] for k in running if k.endswith(" reference")}
    t = Table(title=f"spark matrix: {len(results)}/{len(planned)} cells done", show_lines=False)
    t.add_column("query · state store")
    for c in cols:
        t.add_column(c)
    for cfg in rows:
        cells = []
        for col in cols:
            r = by.get((cfg, col))
            if r is None:
                cells.append("[blue]running[/]" if f"{cfg}|{col}" in busy else
                              ("[dim]reference…[/]" if cfg in busy_ref else "[dim]·[/]"))
                continue
            key = "expected" if r["verdict"] == "not-conformant" and r.get("expected_by_engine") else r["verdict"]
            word = {"expected": "expected", "not-conformant": "FINDING"}.get(key, key)
            cells.append(f"[{_STYLE[key]}]{word}[/]")
        t.add_row(cfg.replace("--", " · "), *cells)
    return t


class MatrixView:
    """Context manager: ``update(results, planned, running)`` redraws (terminal) or logs (pipe)."""

    def __init__(self) -> None:
        self.live: Any = None
        self.seen: set[str] = set()

    def __enter__(self) -> MatrixView:
        if sys.stderr.isatty():
            from rich.console import Console
            from rich.live import Live

            self.live = Live(console=Console(stderr=True), refresh_per_second=2, transient=False)
            self.live.__enter__()
        return self

    def update(self, results: list[dict[str, Any]], planned: list[Any], running: dict[str, str]) -> None:
        if self.live is not None:
            self.live.update(matrix_table(results, planned, running))
            return
        for r in results:
            key = f"{r['name']}|{r['config']['state_store']}|{r['column']}"
            if key not in self.seen:
                self.seen.add(key)
                exp = " (expected by the engine's contract)" if r.get("expected_by_engine") else ""
                print(f"[{len(self.seen)}/{len(planned)}] {r['name']} · {r['config']['state_store']} · "
                      f"{r['column']}: {r['verdict']}{exp} — {r['reason'][:160]}", file=sys.stderr, flush=True)

    def __exit__(self, *exc: object) -> None:
        if self.live is not None:
            self.live.__exit__(None, None, None)
