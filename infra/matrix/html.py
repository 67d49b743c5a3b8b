"""The matrix's HTML table (every engine's): one row per configuration, one column per failure.

Each decided cell shows its verdict in words and colour (:func:`~rollcheck.infra.matrix.table.cell_word`),
the start of its reason, and relative links to its trace, checks, witness and reproducer (with
whether the reproducer showed the finding, when it was run, and how far the finding was
minimised); cells not decided yet say ``running…``, the preparation's word, or ``pending``. Until the matrix ends the page reloads
itself every 10 s.
"""

from __future__ import annotations

import contextlib
import html
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rollcheck.infra.matrix.cells import MatrixCell, axes, cell_key, entry_key
from rollcheck.infra.matrix.document import summarize
from rollcheck.infra.matrix.finding import minimised_words
from rollcheck.infra.matrix.reproducer import per_release, reproduced_words
from rollcheck.infra.matrix.table import cell_word, cost_words, summary_line
from rollcheck.pyimpl.patternio import atomic_write_text

__all__ = ["render_html", "write_html", "COLORS"]

COLORS = {"conformant": "#2e7d32", "not-conformant": "#c62828", "inconclusive": "#757575",
          "expected": "#ef6c00", "running": "#1565c0", "pending": "#e0e0e0"}
_LINKS = (("trace", "trace"), ("checks", "checks"), ("witness", "witness"), ("reproducer", "reproducer"))


def _rel(path: str | None, out: Path) -> str | None:
    if not path:
        return None
    with contextlib.suppress(ValueError):
        return os.path.relpath(path, out)
    return path


def _reproducer_note(r: Mapping[str, Any]) -> str:
    run, parts = r.get("reproducer_run"), []
    if run and per_release(run):
        parts.append(f'{reproduced_words(run)} in {sum(float(x.get("seconds") or 0) for x in run.values()):.1f} s')
    elif run:
        parts.append(f'{reproduced_words(run)} in {run.get("seconds")} s')
    if r.get("minimised"):
        parts.append(minimised_words(r["minimised"]))
    return f' ({"; ".join(parts)})' if parts else ""


def _total_words(results: Sequence[Mapping[str, Any]]) -> str:
    """The cells' cost together: wall and CPU seconds, cells in a warm engine."""
    done = [r for r in results if r.get("cpu_seconds") is not None or r.get("wall_seconds") is not None]
    if not done:
        return ""
    wall = sum(float(r.get("wall_seconds") or 0) for r in done)
    cpu = sum(float(r.get("cpu_seconds") or 0) for r in done)
    warm = sum(1 for r in done if (r.get("shared") or {}).get("engine") == "warm")
    reused = sum(1 for r in done if (r.get("shared") or {}).get("reference") == "reused")
    return (f"Cells: {wall:.1f} s wall, {cpu:.1f} s CPU; {warm} of {len(done)} in a warm engine, "
            f"{reused} with a reference kept from an earlier run.")


def render_html(results: Sequence[Mapping[str, Any]], planned: Sequence[MatrixCell], out: Path, *, done: bool,
                title: str, row_header: str, legend: str = "", caption: str = "",
                running: Mapping[tuple[str, str], str] | None = None,
                skipped: Sequence[Mapping[str, Any]] = ()) -> str:
    """The page (module docstring); links are relative to ``out``, the page's folder.

    Parameters
    ----------
    results : sequence of mapping
        The cell entries so far.
    planned : sequence of MatrixCell
        Every cell of the table.
    out : Path
        The page's folder.
    done : bool
        Whether the matrix ended (else the page reloads itself).
    title, row_header, legend, caption : str
        The page's title, first column's header, legend and summary line's addition.
    running : mapping, optional
        ``(row, column)`` -> the word shown for a cell running now.
    skipped : sequence of mapping, optional
        The cells not run, with their ``reason``.

    Returns
    -------
    str
        The HTML.
    """
    rows, cols = axes(planned)
    by = {entry_key(r): r for r in results}
    known = {cell_key(c) for c in planned}
    busy = running or {}

    def td(row: str, col: str) -> str:
        r = by.get((row, col))
        if r is None:
            if (row, col) in busy:
                return (f'<td class="cell v-running" style="background:{COLORS["running"]}">'
                        f'{html.escape(busy[(row, col)])}…</td>')
            word = "pending" if (row, col) in known else "not run"
            return f'<td class="cell v-pending" style="background:{COLORS["pending"]}">{word}</td>'
        key, label = cell_word(r)
        links = [f'<a href="{html.escape(_rel(r.get(k), out) or "")}">{name}</a>' for k, name in _LINKS if r.get(k)]
        if r.get("reproducer") and links:
            links[-1] += html.escape(_reproducer_note(r))
        reason = str(r.get("reason") or "")
        return (f'<td class="cell v-{key}" style="background:{COLORS[key]}" title="{html.escape(reason)}">'
                f'<b>{html.escape(label)}</b><br><small>{" · ".join(links)}</small>'
                f'<div class="why">{html.escape(reason[:300])}</div>'
                f'<div class="cost">{html.escape(cost_words(r))}</div></td>')

    head = "".join(f"<th>{html.escape(c)}</th>" for c in cols)
    body = "".join(f'<tr><td class="row">{html.escape(row)}</td>{"".join(td(row, c) for c in cols)}</tr>'
                   for row in rows)
    status = "finished" if done else f"running: {len(results)} of {len(planned)} cells done"
    gone = "".join(f"<li>{html.escape(str(x.get('row') or x.get('name') or x.get('module')))}: "
                   f"{html.escape(str(x.get('reason', '')))}</li>" for x in skipped)
    gone = f'<p>Not run:</p><ul id="skipped">{gone}</ul>' if gone else ""
    legend_html = f"<p>{html.escape(legend)}</p>" if legend else ""
    caption_html = f" {html.escape(caption)}" if caption else ""
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>rollcheck {html.escape(title)}</title>
{'' if done else '<meta http-equiv="refresh" content="10">'}
<style>
body {{ font-family: system-ui, sans-serif; margin: 1.5em; }}
table {{ border-collapse: collapse; }}
th, td {{ border: 1px solid #bbb; padding: .4em .6em; vertical-align: top; font-size: 13px; }}
td.cell {{ color: white; min-width: 9em; max-width: 16em; }}
td.cell a {{ color: white; }}
td.v-pending {{ color: #666; }}
td.cell .why {{ font-size: 80%; opacity: .9; }}
td.cell .cost {{ font-size: 75%; opacity: .8; }}
.legend span {{ display: inline-block; padding: .2em .5em; color: white; margin-right: .5em; }}
</style></head><body>
<h1>rollcheck {html.escape(title)}</h1>
<p id="status">{html.escape(status)} — {html.escape(summary_line(summarize(results)))}.{caption_html}</p>
<p id="cost">{html.escape(_total_words(results))}</p>
<p class="legend"><span style="background:{COLORS['conformant']}">conformant</span>
<span style="background:{COLORS['expected']}">not conformant, expected by the engine's documentation</span>
<span style="background:{COLORS['not-conformant']}">not conformant: a finding, or the module's</span>
<span style="background:{COLORS['inconclusive']}">inconclusive</span></p>
<p>Exit status 0 only when every cell is conformant; an explanation of a not-conformant cell
(expected by the engine) does not make it a pass.</p>
<table id="matrix"><thead><tr><th>{html.escape(row_header)}</th>{head}</tr></thead>
<tbody>{body}</tbody></table>
{gone}
{legend_html}
</body></html>
"""


def write_html(results: Sequence[Mapping[str, Any]], planned: Sequence[MatrixCell], path: Path,
               **kw: Any) -> Path:
    """:func:`render_html` written atomically to ``path`` (links relative to its folder).

    Parameters
    ----------
    results : sequence of mapping
        The cell entries so far.
    planned : sequence of MatrixCell
        Every cell of the table.
    path : Path
        The page's file.
    **kw
        As :func:`render_html` (``done`` True by default).

    Returns
    -------
    Path
        ``path``.
    """
    path = Path(path)
    kw.setdefault("done", True)
    atomic_write_text(path, render_html(results, planned, path.parent, **kw))
    return path
