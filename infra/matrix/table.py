"""The words and colours of a cell, and the terminal table (every engine's).

Examples
--------
>>> cell_word({"verdict": "not-conformant", "expected_by_engine": True})
('expected', 'not-conformant (expected by the engine)')
>>> cell_word({"verdict": "not-conformant", "attributed_to": "engine"})
('not-conformant', 'not-conformant (FINDING)')
>>> cell_word({"verdict": "not-conformant", "attributed_to": "module"})
('not-conformant', "not-conformant (the module's)")
>>> cost_words({"wall_seconds": 41.27, "cpu_seconds": 60.0, "shared": {"engine": "warm", "reference": "reused"}})
'41.3 s wall, 60.0 s CPU; warm engine, reference reused'
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rollcheck.infra.matrix.cells import MatrixCell, axes, cell_key, entry_key
from rollcheck.infra.matrix.reproducer import reproduced_words

__all__ = ["cell_word", "cost_words", "summary_line", "terminal_table", "STYLES"]

#: rich styles of the terminal table, per :func:`cell_word` key.
STYLES = {"conformant": "bold green", "not-conformant": "bold red", "inconclusive": "yellow",
          "expected": "bold dark_orange", "running": "blue", "pending": "dim"}


def cell_word(entry: Mapping[str, Any]) -> tuple[str, str]:
    """``(key, label)`` of a decided cell.

    The key picks the colour (``conformant``, ``expected``, ``not-conformant``,
    ``inconclusive``), the label is what the tables print.
    """
    v = str(entry["verdict"])
    if v != "not-conformant":
        return v, v
    if entry.get("expected_by_engine"):
        return "expected", "not-conformant (expected by the engine)"
    if entry.get("attributed_to") == "module":
        return "not-conformant", "not-conformant (the module's)"
    return "not-conformant", "not-conformant (FINDING)"


def cost_words(entry: Mapping[str, Any]) -> str:
    """What a decided cell cost and shared, in words ("" when the entry carries no account)."""
    parts: list[str] = []
    wall, cpu = entry.get("wall_seconds"), entry.get("cpu_seconds")
    if wall is None and cpu is None:
        return ""
    if wall is not None:
        parts.append(f"{float(wall):.1f} s wall")
    if cpu is not None:
        parts.append(f"{float(cpu):.1f} s CPU")
    shared = entry.get("shared") or {}
    more = [f"{shared['engine']} engine"] if shared.get("engine") else []
    more += [f"reference {shared['reference']}"] if shared.get("reference") else []
    return ", ".join(parts) + (f"; {', '.join(more)}" if more else "")


def summary_line(summary: Mapping[str, int]) -> str:
    """The summary in words.

    >>> summary_line({"conformant": 1, "not_conformant": 2, "inconclusive": 1, "expected_by_engine": 1,
    ...               "findings": 1})
    '1 conformant, 2 not conformant (1 expected by the engine, 1 finding(s)), 1 inconclusive'
    """
    return (f"{summary['conformant']} conformant, {summary['not_conformant']} not conformant "
            f"({summary.get('expected_by_engine', 0)} expected by the engine, {summary.get('findings', 0)} "
            f"finding(s)), {summary['inconclusive']} inconclusive")


def terminal_table(results: Sequence[Mapping[str, Any]], planned: Sequence[MatrixCell],
                   running: Mapping[tuple[str, str], str], *, title: str, row_header: str,
                   reasons: bool = False) -> Any:
    """A :class:`rich.table.Table`: one row per configuration, one column per failure.

    Cells not decided yet say what runs there (``running``, the preparation's word) or ``·``.
    With ``reasons`` a not-conformant or inconclusive cell also shows the start of its reason.

    Parameters
    ----------
    results : sequence of mapping
        The cell entries so far.
    planned : sequence of MatrixCell
        Every cell of the table.
    running : mapping
        ``(row, column)`` -> the word shown for a cell running now.
    title : str
        The table's title.
    row_header : str
        The first column's header.
    reasons : bool, optional
        Show the start of a reason in the cell.

    Returns
    -------
    rich.table.Table
        The table.
    """
    from rich.markup import escape
    from rich.table import Table

    rows, cols = axes(planned)
    by = {entry_key(r): r for r in results}
    t = Table(title=f"{title}: {len(results)}/{len(planned)} cells done")
    t.add_column(row_header)
    for c in cols:
        t.add_column(c)
    known = {cell_key(c) for c in planned}
    for row in rows:
        out = []
        for col in cols:
            r = by.get((row, col))
            if r is None:
                busy = running.get((row, col))
                out.append(f"[{STYLES['running']}]{escape(busy)}[/]" if busy else
                           ("[dim]·[/]" if (row, col) in known else ""))
                continue
            key, word = cell_word(r)
            text = f"[{STYLES[key]}]{escape(word)}[/]"
            if reasons and r["verdict"] != "conformant":
                text += f"\n{escape(str(r.get('reason') or '')[:120])}"
            if cost_words(r):
                text += f"\n[dim]{escape(cost_words(r))}[/]"
            if r.get("reproducer_run"):  # "reproduced on V / not on R" (the reproducer run per release)
                text += f"\n[dim]reproducer: {escape(reproduced_words(r['reproducer_run']))}[/]"
            out.append(text)
        t.add_row(row, *out)
    return t
