"""The main job's building blocks: result rows, sections, and the report writer.

``rollcheck verify`` runs every *section*: a module ``rollcheck/sections/sec_<name>.py`` with
``TITLE: str`` and ``run(ctx: VerifyContext) -> list[Row]``. Each row is one algorithm checked by
one method (pyimpl, Hypothesis, Z3, TLC, Spark) with its verdict and the count of things examined.
A row that examined nothing must say ``inconclusive``.
"""

from __future__ import annotations

import html
import importlib
import json
import pkgutil
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["Row", "VerifyContext", "discover_sections", "write_report", "STATUSES"]

STATUSES = ("pass", "fail", "inconclusive")


@dataclass
class Row:
    algorithm: str
    method: str  # "pyimpl" | "Hypothesis" | "Z3" | "TLC" | "Spark" | "mutants"
    check: str
    status: str  # "pass" | "fail" | "inconclusive"
    count: int = 0
    unit: str = "examples"
    seconds: float = 0.0
    detail: str = ""
    pictures: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"bad status {self.status!r}")
        if self.status == "pass" and self.count == 0:
            self.status = "inconclusive"
            self.detail = (self.detail + "; " if self.detail else "") + "nothing was examined"


@dataclass
class VerifyContext:
    profile: str  # "ci" or "verify"
    quick: bool
    out_dir: Path  # report/ ; sections put pictures and files under it
    seed: int
    log: Callable[[str], None] = print

    def path(self, *parts: str) -> Path:
        p = self.out_dir.joinpath(*parts)
        p.parent.mkdir(parents=True, exist_ok=True)
        return p


def discover_sections() -> list[tuple[str, Any]]:
    """(name, module) of every ``rollcheck.sections.sec_*`` module, in name order."""
    pkg = importlib.import_module("rollcheck.sections")  # plugins by name: sections import the suite, not back

    out = []
    for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda m: m.name):
        if info.name.startswith("sec_"):
            out.append((info.name[4:], importlib.import_module(f"rollcheck.sections.{info.name}")))
    return out


def _md_table(rows: list[Row]) -> str:
    lines = [
        "| algorithm | method | check | result | count | time (s) | detail |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        detail = r.detail.replace("|", "\\|").replace("\n", " ")
        lines.append(
            f"| {r.algorithm} | {r.method} | {r.check} | **{r.status}** | {r.count} {r.unit} "
            f"| {r.seconds:.1f} | {detail} |"
        )
    return "\n".join(lines)


def _matrix(rows: list[Row]) -> tuple[list[str], list[str], dict[tuple[str, str], str]]:
    algos = sorted({r.algorithm for r in rows})
    methods = [m for m in ("pyimpl", "Hypothesis", "Z3", "mutants", "TLC", "Spark") if any(r.method == m for r in rows)]
    methods += sorted({r.method for r in rows} - set(methods))
    cell: dict[tuple[str, str], str] = {}
    for a in algos:
        for m in methods:
            sel = [r for r in rows if r.algorithm == a and r.method == m]
            if not sel:
                continue
            if any(r.status == "fail" for r in sel):
                st = "fail"
            elif any(r.status == "inconclusive" for r in sel):
                st = "inconclusive"
            else:
                st = "pass"
            counts: dict[str, int] = {}
            for r in sel:
                counts[r.unit] = counts.get(r.unit, 0) + r.count
            cell[(a, m)] = st + " (" + ", ".join(f"{v} {k}" for k, v in counts.items()) + ")"
    return algos, methods, cell


def write_report(rows: list[Row], out_dir: Path, meta: dict[str, object]) -> tuple[Path, Path]:
    """Write ``report.md``, ``index.html`` and ``results.json`` under ``out_dir``; return md, html."""
    from rollcheck.pyimpl.patternio import atomic_write_text

    out_dir.mkdir(parents=True, exist_ok=True)
    algos, methods, cell = _matrix(rows)
    md = ["# rollcheck verification report", ""]
    md += [f"- {k}: {v}" for k, v in meta.items()]
    md += ["", "## Algorithm × method", ""]
    md.append("| algorithm | " + " | ".join(methods) + " |")
    md.append("|---|" + "---|" * len(methods))
    for a in algos:
        md.append(f"| {a} | " + " | ".join(cell.get((a, m), "–") for m in methods) + " |")
    md += ["", "## Every check", "", _md_table(rows), ""]
    pics = [(r, p) for r in rows for p in r.pictures]
    if pics:
        md += ["## Pictures", ""]
        for r, p in pics:
            rel = Path(p).relative_to(out_dir) if Path(p).is_absolute() and out_dir in Path(p).parents else Path(p)
            md.append(f"### {r.algorithm}: {r.check}\n\n![{r.check}]({rel})\n")
    md_path = out_dir / "report.md"
    atomic_write_text(md_path, "\n".join(md))

    esc = html.escape
    h = [
        "<!doctype html><html><head><meta charset='utf-8'><title>rollcheck report</title>",
        "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
        "td,th{border:1px solid #999;padding:4px 8px;font-size:90%}.pass{background:#d9f2d9}"
        ".fail{background:#f7c6c6}.inconclusive{background:#fbe8b0}img{max-width:900px}</style>",
        "</head><body><h1>rollcheck verification report</h1><ul>",
    ]
    h += [f"<li>{esc(str(k))}: {esc(str(v))}</li>" for k, v in meta.items()]
    h.append("</ul><h2>Algorithm × method</h2><table><tr><th>algorithm</th>")
    h += [f"<th>{esc(m)}</th>" for m in methods]
    h.append("</tr>")
    for a in algos:
        h.append(f"<tr><td>{esc(a)}</td>")
        for m in methods:
            c = cell.get((a, m), "–")
            h.append(f"<td class='{c.split(' ')[0]}'>{esc(c)}</td>")
        h.append("</tr>")
    h.append("</table><h2>Every check</h2><table><tr><th>algorithm</th><th>method</th><th>check</th>"
             "<th>result</th><th>count</th><th>time (s)</th><th>detail</th></tr>")
    for r in rows:
        h.append(
            f"<tr><td>{esc(r.algorithm)}</td><td>{esc(r.method)}</td><td>{esc(r.check)}</td>"
            f"<td class='{r.status}'>{r.status}</td><td>{r.count} {esc(r.unit)}</td>"
            f"<td>{r.seconds:.1f}</td><td>{esc(r.detail)}</td></tr>"
        )
    h.append("</table>")
    if pics:
        h.append("<h2>Pictures</h2>")
        for r, p in pics:
            rel = Path(p).relative_to(out_dir) if Path(p).is_absolute() and out_dir in Path(p).parents else Path(p)
            h.append(f"<h3>{esc(r.algorithm)}: {esc(r.check)}</h3><img src='{esc(str(rel))}'>")
    h.append("</body></html>")
    html_path = out_dir / "index.html"
    atomic_write_text(html_path, "\n".join(h))
    atomic_write_text(out_dir / "results.json", json.dumps([asdict(r) for r in rows], indent=1))
    return md_path, html_path
