"""The report of ``rollcheck verify``: ``index.html``, ``report.md`` and ``results.json``.

A reader finds any failure from the top of the page in one click: the page opens with the verdict,
the run in words (quick or full, profile, seed), a table of contents, and the lists of failed and
inconclusive checks, each linking to its row. The algorithm × method grid links every cell to its
evidence (the cell's worst row). Each section is a collapsible block (open when something in it
failed) listing failures first, then inconclusive checks, then killed mutants, then the rest; a
row's pictures sit under it, each a figure with alt text and a caption that says what to look at.
Every path is relative to the report folder: pictures are copied into ``pictures/`` unless they
are already inside the report, and absolute paths in a row's detail are rewritten.

A picture's caption comes from the row (``Row.captions``) or else from the PNG itself: the drawing
functions store the caption as the PNG's ``Description`` text and a short alt text as its
``Title`` (``rollcheck.pyimpl.render.save_figure``).
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

from rollcheck.suite import ALGORITHMS, Row, canonical_algorithm, plural

__all__ = ["picture_text", "write_report"]

_ORDER = {"fail": 0, "inconclusive": 1}
_METHODS = ("pyimpl", "Hypothesis", "Z3", "mutants", "TLC", "Spark", "Flink", "fuzz", "your system")


def picture_text(path: Path) -> tuple[str, str]:
    """(alt text, caption) stored in a PNG by the drawing functions; ("", "") when it has none."""
    try:
        from PIL import Image

        with Image.open(path) as im:
            text = dict(getattr(im, "text", {}) or {})
    except Exception:  # noqa: BLE001  (not a PNG, or unreadable: no stored text)
        return "", ""
    return str(text.get("Title", "")), str(text.get("Description", ""))


def _killed_mutant(r: Row) -> bool:
    return r.method == "mutants" and " killed by " in f" {r.check} "


def _row_order(r: Row) -> int:
    return _ORDER.get(r.status, 3 if not _killed_mutant(r) else 2)


def _copy_pictures(rows: list[Row], out_dir: Path) -> None:
    """Copy every picture a row shows into ``out_dir/pictures/`` and point the row at the copy.

    A picture already inside the report stays where it is; one that does not exist is dropped and
    said in the row's detail (never a broken image in the page).
    """
    pic_dir = out_dir / "pictures"
    root = out_dir.resolve()
    for r in rows:
        kept: list[str] = []
        caps: list[str] = []
        for k, p in enumerate(r.pictures):
            src = Path(p)
            if not src.is_absolute():
                src = (out_dir / src) if (out_dir / src).exists() else src.resolve()
            cap = r.captions[k] if k < len(r.captions) else ""
            if not src.is_file():
                r.detail += f"{'; ' if r.detail else ''}picture {src.name} was not drawn"
                continue
            try:
                rel = src.resolve().relative_to(root)
            except ValueError:
                pic_dir.mkdir(parents=True, exist_ok=True)
                target = pic_dir / src.name
                k2 = 1
                while target.exists() and target.resolve() != src.resolve():
                    target = pic_dir / f"{src.stem}-{k2}{src.suffix}"
                    k2 += 1
                shutil.copyfile(src, target)
                rel = target.relative_to(out_dir)
            kept.append(rel.as_posix())
            caps.append(cap)
        r.pictures = kept
        r.captions = caps


_ABS_PATH = re.compile(r"(?<![\w.~-])(/(?:[\w.@+~-]+/)*[\w.@+~-]+)")


def _relative_text(text: str, out_dir: Path) -> str:
    """``text`` with absolute paths made relative to the report (inside it or the checkout).

    Temporary files that are gone are cut to their name.
    """
    root = out_dir.resolve()
    cwd = Path.cwd().resolve()

    def sub(m: re.Match[str]) -> str:
        p = Path(m.group(1))
        try:
            return p.resolve().relative_to(root).as_posix()
        except (ValueError, OSError):
            pass
        try:
            p.resolve().relative_to(cwd)
            return os.path.relpath(p.resolve(), root)
        except (ValueError, OSError):
            pass
        if len(p.parts) > 2 and p.parts[1] in ("tmp", "var", "home", "root", "work", "Users", "private"):
            return f"(temporary) {p.name}" if p.parts[1] in ("tmp", "var", "private") else p.name
        return m.group(1)

    return _ABS_PATH.sub(sub, text)


def _cells(rows: list[Row]) -> tuple[list[tuple[str, str]], list[str], dict[tuple[str, str], list[int]]]:
    """Grid: (algorithm, source) rows, method columns, and the row indices in each cell."""
    algos: list[tuple[str, str]] = []
    cell: dict[tuple[str, str], list[int]] = {}
    for i, r in enumerate(rows):
        algo, source = canonical_algorithm(r.algorithm)
        if (algo, source) not in algos:
            algos.append((algo, source))
        cell.setdefault((algo, r.method), []).append(i)
    order = {name: k for k, (name, _, _) in enumerate(ALGORITHMS)}
    algos.sort(key=lambda a: (order.get(a[0], len(order)), a[0]))
    methods = [m for m in _METHODS if any(r.method == m for r in rows)]
    methods += sorted({r.method for r in rows} - set(methods))
    return algos, methods, cell


def _cell_status(rows: list[Row], idx: list[int]) -> str:
    sts = {rows[i].status for i in idx}
    return "fail" if "fail" in sts else ("inconclusive" if "inconclusive" in sts else "pass")


def _cell_text(rows: list[Row], idx: list[int]) -> str:
    """``pass — 2 checks; examined 14 sub-checks, 3 examples`` (pluralised)."""
    counts: dict[str, int] = {}
    for i in idx:
        counts[rows[i].unit] = counts.get(rows[i].unit, 0) + rows[i].count
    # a row counting the checks it ran (a replay's) counts "sub-checks": not the grid's checks
    examined = ", ".join(plural(v, "sub-checks" if k == "checks" else k) for k, v in counts.items())
    return f"{_cell_status(rows, idx)} — {plural(len(idx), 'checks')}; examined {examined}"


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "x"


def _figures(r: Row, out_dir: Path) -> list[tuple[str, str, str]]:
    """(path relative to the report, alt, caption) of each picture of a row."""
    out = []
    for k, p in enumerate(r.pictures):
        cap = r.captions[k] if k < len(r.captions) else ""
        alt, stored = picture_text(out_dir / p)
        if cap:
            stored = cap
        cap = cap or stored or (f"The evidence of this check ({r.status}); read it with the row's detail: "
                                f"{r.detail[:300]}" if r.detail else f"The evidence of this check ({r.status}).")
        alt = alt or f"Picture of {r.algorithm}, {r.method}: {r.check}"
        out.append((p, alt, cap))
    return out


_STYLE = """
body{font-family:system-ui,sans-serif;margin:1.5em auto;max-width:1200px;padding:0 1em;line-height:1.4}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #aaa;padding:3px 7px;font-size:90%;
vertical-align:top}.pass{background:#d9f2d9}.fail{background:#f7c6c6}.inconclusive{background:#fbe8b0}
.verdict{font-size:140%;padding:.4em 1em;display:inline-block;border-radius:4px}
nav ol{columns:2}figure{margin:.6em 0 1.2em 0;border:1px solid #ccc;padding:.5em;background:#fafafa}
figure img{max-width:100%;height:auto}figcaption{font-size:92%;margin-top:.3em}
details.section{border:1px solid #bbb;border-radius:4px;margin:.6em 0;padding:.3em .8em}
details.section>summary{cursor:pointer;font-weight:bold;padding:.2em 0}
td.detail{max-width:36em;overflow-wrap:anywhere}a.cell{color:inherit;text-decoration:none;display:block}
a.cell:hover{text-decoration:underline}:target{outline:3px solid #36c}
"""

# Opens the section of a linked row (for browsers that do not do it on fragment navigation) and
# counts what the page could not show: the browser test reads these attributes.
_SCRIPT = """
function openTarget(){var h=location.hash.slice(1);if(!h)return;var e=document.getElementById(h);
while(e){if(e.tagName==='DETAILS'){e.open=true;}e=e.parentElement;}
var t=document.getElementById(h);if(t){t.scrollIntoView();}}
window.addEventListener('hashchange',openTarget);
window.addEventListener('load',function(){openTarget();var imgs=document.images,bad=0;
for(var i=0;i<imgs.length;i++){if(!imgs[i].complete||imgs[i].naturalWidth===0){bad++;}}
var links=document.querySelectorAll('a[href^="#"]'),dead=0;
for(var j=0;j<links.length;j++){var id=links[j].getAttribute('href').slice(1);
if(id&&!document.getElementById(id)){dead++;}}
document.body.setAttribute('data-images',String(imgs.length));
document.body.setAttribute('data-images-broken',String(bad));
document.body.setAttribute('data-links-dead',String(dead));
document.body.setAttribute('data-rendered','yes');});
"""


def _linkify(text: str, out_dir: Path) -> str:
    """Escaped ``text`` with report-relative file names turned into links."""
    parts = re.split(r"([\w./-]+\.(?:py|json|jsonl|png|md|tla|cfg|log|txt))", text)
    out = []
    for k, part in enumerate(parts):
        if k % 2 == 1 and not part.startswith("/") and ".." not in part and (out_dir / part).is_file():
            out.append(f"<a href='{html.escape(part)}'>{html.escape(part)}</a>")
        else:
            out.append(html.escape(part))
    return "".join(out)


def write_report(rows: list[Row], out_dir: Path, meta: dict[str, Any]) -> tuple[Path, Path]:
    """Write ``report.md``, ``index.html`` and ``results.json`` under ``out_dir``; return md, html.

    ``meta`` holds ``verdict`` (the summary line), ``words`` (the run in words: name → text,
    shown in the header), ``versions`` (tool → version), ``section_titles`` and
    ``section_seconds`` (by section name) and machine-readable fields kept in ``results.json``
    (``profile``, ``quick``, ``seed``, ...).

    Parameters
    ----------
    rows : list of Row
        The run's rows (their details made relative to ``out_dir``).
    out_dir : Path
        The report folder (created if missing).
    meta : dict
        The run's facts, as said.

    Returns
    -------
    tuple of (Path, Path)
        ``report.md`` and ``index.html``.
    """
    from rollcheck.pyimpl.patternio import atomic_write_text

    out_dir.mkdir(parents=True, exist_ok=True)
    _copy_pictures(rows, out_dir)
    for r in rows:
        r.detail = _relative_text(r.detail, out_dir)
    meta = dict(meta)
    layout = _Layout(rows, out_dir, meta)
    md_path = out_dir / "report.md"
    atomic_write_text(md_path, "\n".join(_markdown(layout)) + "\n")
    html_path = out_dir / "index.html"
    atomic_write_text(html_path, "\n".join(_html(layout)) + "\n")
    doc = {"verdict": layout.verdict, **{str(k): v for k, v in meta.items() if k not in ("verdict",)},
           "rows": [r.to_json() for r in rows]}
    atomic_write_text(out_dir / "results.json", json.dumps(doc, indent=1, default=str))
    for f in (md_path, html_path, out_dir / "results.json"):
        f.chmod(0o644)
    return md_path, html_path


class _Layout:
    """What both pages show: the run in words, the sections and rows, the grid and the anchors.

    The sections come with their rows in order, then the failed and inconclusive rows, the
    algorithm × method grid and every row's anchor.
    """

    def __init__(self, rows: list[Row], out_dir: Path, meta: dict[str, Any]):
        self.rows, self.out_dir = rows, out_dir
        self.versions = dict(meta.get("versions") or {})
        words = dict(meta.get("words") or {})
        self.verdict = str(meta.get("verdict", ""))
        self.titles = dict(meta.get("section_titles") or {})
        self.secs = dict(meta.get("section_seconds") or {})
        if "total_time" in meta:
            words.setdefault("total time", str(meta["total_time"]))
        if "generated" in meta:
            words.setdefault("generated", str(meta["generated"]))
        self.words = words
        self.ids = {id(r): f"row-{i + 1}" for i, r in enumerate(rows)}
        sections: list[str] = []
        for r in rows:
            if r.section not in sections:
                sections.append(r.section)
        self.sections = sections
        self.by_section = {s: sorted((r for r in rows if r.section == s), key=_row_order) for s in sections}
        self.failed = [r for r in rows if r.status == "fail"]
        self.inconclusive = [r for r in rows if r.status == "inconclusive"]
        self.algos, self.methods, self.cells = _cells(rows)

    def sec_title(self, s: str) -> str:
        return str(self.titles.get(s) or s or "checks")

    def sec_counts(self, s: str) -> str:
        got = self.by_section[s]
        nf = sum(r.status == "fail" for r in got)
        ni = sum(r.status == "inconclusive" for r in got)
        t = f", {self.secs[s]:.0f} s" if s in self.secs else ""
        return f"{plural(len(got), 'checks')}: {nf} failed, {ni} inconclusive{t}"


def _markdown(lay: _Layout) -> list[str]:
    """The lines of ``report.md``."""
    md = ["# rollcheck verification report", "", f"**{lay.verdict}**", ""]
    md += [f"- {k}: {v}" for k, v in lay.words.items()]
    if lay.versions:
        md.append("- versions: " + ", ".join(f"{k} {v}" for k, v in lay.versions.items()))
    md += ["", "## Contents", ""]
    if lay.failed:
        md.append(f"- [Failed checks ({len(lay.failed)})](#failed)")
    if lay.inconclusive:
        md.append(f"- [Inconclusive checks ({len(lay.inconclusive)})](#inconclusive)")
    md.append("- [Algorithm × method](#grid)")
    for s in lay.sections:
        md.append(f"- [{lay.sec_title(s)}](#sec-{_slug(s)}) — {lay.sec_counts(s)}")
    for anchor, title, sel in (("failed", "Failed checks", lay.failed), ("inconclusive", "Inconclusive checks", lay.inconclusive)):
        if sel:
            md += ["", f"## <a id=\"{anchor}\"></a>{title}", ""]
            md += [f"- [{r.algorithm} / {r.method} / {r.check}](#{lay.ids[id(r)]}): {r.detail}" for r in sel]
    md += ["", "## <a id=\"grid\"></a>Algorithm × method", "", "Each cell links to its evidence (its worst check).", ""]
    md.append("| algorithm | source | " + " | ".join(lay.methods) + " |")
    md.append("|---|---|" + "---|" * len(lay.methods))
    for a, src in lay.algos:
        cols = []
        for m in lay.methods:
            idx = lay.cells.get((a, m))
            if not idx:
                cols.append("–")
                continue
            worst = min(idx, key=lambda i: (_row_order(lay.rows[i]), i))
            cols.append(f"[{_cell_text(lay.rows, idx)}](#{lay.ids[id(lay.rows[worst])]})")
        md.append(f"| {a} | {src} | " + " | ".join(cols) + " |")
    for s in lay.sections:
        md += ["", f"## <a id=\"sec-{_slug(s)}\"></a>{lay.sec_title(s)}", "", f"{lay.sec_counts(s)}; log: [logs/{s}.log](logs/{s}.log)"
               if (lay.out_dir / "logs" / f"{s}.log").is_file() else lay.sec_counts(s), ""]
        md += ["| | algorithm | method | check | result | examined | time (s) | detail |",
               "|---|---|---|---|---|---|---|---|"]
        figs: list[str] = []
        for r in lay.by_section[s]:
            d = r.detail.replace("|", "\\|").replace("\n", " ")
            md.append(f"| <a id=\"{lay.ids[id(r)]}\"></a> | {r.algorithm} | {r.method} | {r.check} | **{r.status}** | "
                      f"{plural(r.count, r.unit)} | {r.seconds:.1f} | {d} |")
            for p, alt, cap in _figures(r, lay.out_dir):
                figs.append(f"![{alt}]({p})\n\n*{r.check}* — {cap}\n")
        if figs:
            md += ["", *figs]
    return md


def _html(lay: _Layout) -> list[str]:
    """The lines of ``index.html``."""
    esc = html.escape
    vclass = "fail" if lay.failed else ("inconclusive" if lay.inconclusive or not lay.rows else "pass")
    h = ["<!doctype html><html lang='en'><head><meta charset='utf-8'>",
         "<meta name='viewport' content='width=device-width, initial-scale=1'>",
         f"<title>rollcheck report: {esc(lay.verdict)}</title><style>{_STYLE}</style>",
         f"<script>{_SCRIPT}</script></head><body>",
         "<header><h1>rollcheck verification report</h1>",
         f"<p class='verdict {vclass}' id='verdict'>{esc(lay.verdict)}</p><ul>"]
    h += [f"<li><b>{esc(str(k))}</b>: {esc(str(v))}</li>" for k, v in lay.words.items()]
    h.append("</ul>")
    if lay.versions:
        h.append("<details><summary>versions</summary><ul>"
                 + "".join(f"<li>{esc(str(k))} {esc(str(v))}</li>" for k, v in lay.versions.items())
                 + "</ul></details>")
    h.append("</header><nav id='contents'><h2>Contents</h2><ol>")
    if lay.failed:
        h.append(f"<li><a href='#failed'>Failed checks ({len(lay.failed)})</a></li>")
    if lay.inconclusive:
        h.append(f"<li><a href='#inconclusive'>Inconclusive checks ({len(lay.inconclusive)})</a></li>")
    h.append("<li><a href='#grid'>Algorithm × method</a></li>")
    for s in lay.sections:
        cls = "fail" if any(r.status == "fail" for r in lay.by_section[s]) else ""
        h.append(f"<li><a href='#sec-{_slug(s)}' class='{cls}'>{esc(lay.sec_title(s))}</a> — {esc(lay.sec_counts(s))}</li>")
    h.append("</ol></nav>")
    for anchor, title, sel in (("failed", "Failed checks", lay.failed), ("inconclusive", "Inconclusive checks", lay.inconclusive)):
        if sel:
            h.append(f"<section id='{anchor}'><h2>{title}</h2><ul>")
            h += [f"<li><a href='#{lay.ids[id(r)]}'>{esc(r.algorithm)} / {esc(r.method)} / {esc(r.check)}</a>: "
                  f"{_linkify(r.detail, lay.out_dir)}</li>" for r in sel]
            h.append("</ul></section>")
    h.append("<section id='grid'><h2>Algorithm × method</h2><p>Each cell links to its evidence: the cell's "
             "worst check (a failure if there is one) in its section below.</p><table><tr><th>algorithm</th>"
             "<th>source</th>" + "".join(f"<th>{esc(m)}</th>" for m in lay.methods) + "</tr>")
    for a, src in lay.algos:
        h.append(f"<tr><td>{esc(a)}</td><td>{esc(src)}</td>")
        for m in lay.methods:
            idx = lay.cells.get((a, m))
            if not idx:
                h.append("<td>–</td>")
                continue
            worst = min(idx, key=lambda i: (_row_order(lay.rows[i]), i))
            h.append(f"<td class='{_cell_status(lay.rows, idx)}'><a class='cell' href='#{lay.ids[id(lay.rows[worst])]}' "
                     f"title='{esc(lay.rows[worst].check)}'>{esc(_cell_text(lay.rows, idx))}</a></td>")
        h.append("</tr>")
    h.append("</table></section>")
    for s in lay.sections:
        got = lay.by_section[s]
        bad = any(r.status == "fail" for r in got)
        log = (f"; log: <a href='logs/{esc(s)}.log'>logs/{esc(s)}.log</a>"
               if (lay.out_dir / "logs" / f"{s}.log").is_file() else "")
        h.append(f"<details class='section' id='sec-{_slug(s)}'{' open' if bad else ''}><summary>"
                 f"{esc(lay.sec_title(s))} — {esc(lay.sec_counts(s))}</summary><p>Failures first, then inconclusive "
                 f"checks, then killed mutants{log}.</p><table><tr><th>algorithm</th><th>method</th><th>check</th>"
                 "<th>result</th><th>examined</th><th>s</th><th>detail</th></tr>")
        for r in got:
            h.append(f"<tr id='{lay.ids[id(r)]}'><td>{esc(r.algorithm)}</td><td>{esc(r.method)}</td><td>{esc(r.check)}</td>"
                     f"<td class='{r.status}'>{r.status}</td><td>{esc(plural(r.count, r.unit))}</td>"
                     f"<td>{r.seconds:.1f}</td><td class='detail'>{_linkify(r.detail, lay.out_dir)}</td></tr>")
            row_figs = _figures(r, lay.out_dir)
            if row_figs:
                h.append("<tr><td colspan='7'>")
                for p, alt, cap in row_figs:
                    h.append(f"<figure><img src='{esc(p)}' alt='{esc(alt)}'><figcaption><b>{esc(r.check)}</b>: "
                             f"{esc(cap)}</figcaption></figure>")
                h.append("</td></tr>")
        h.append("</table></details>")
    h.append("</body></html>")
    return h
