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

__all__ = [
    "ALGORITHMS",
    "Row",
    "STATUSES",
    "VerifyContext",
    "canonical_algorithm",
    "discover_sections",
    "environment",
    "format_duration",
    "summary_line",
    "write_report",
]

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


#: The algorithms of the seed papers, in reading order: (name, source, patterns of row algorithms).
#: Rows whose ``algorithm`` matches a pattern are grouped under that name in the report's grid.
ALGORITHMS: list[tuple[str, str, tuple[str, ...]]] = [
    ("Consistent global checkpoints", "FERDiS paper §4.2",
     (r"^consistency$", r"^pattern$", r"^loader$", r"^format")),
    ("Z-paths, Z-cycles, useless checkpoints", "FERDiS paper §5.3",
     (r"^zpaths?$", r"^scc$", r"^z3$", r"^useless")),
    ("Recovery line (R-graph, rollback propagation)", "FERDiS paper §7.2.5",
     (r"^recovery$", r"^recovery-line$", r"^rgraph$", r"^cgraph$", r"^wang")),
    ("Coordinated snapshots (Chandy–Lamport)", "FERDiS paper §5.1",
     (r"chandy", r"^cl[-_ ]", r"snapshot")),
    ("Uncoordinated checkpointing", "FERDiS paper §5.2", (r"^uc$", r"simulate: uc", r"^timer$")),
    ("CIC: BCS (index-based)", "FERDiS paper §5.3, §7.2.2", (r"^bcs",)),
    ("CIC: HMNR (model-based)", "FERDiS paper §5.3, §7.2.2",
     (r"^hmnr", r"^protocols?$", r"simulate: cic", r"^cic")),
    ("Message-log replay", "FERDiS paper §7.2.6, §7.2.8", (r"message-log", r"log-replay")),
    ("Dataflow recovery (simulator)", "FERDiS paper §7.2.4–7.2.6, §9.3",
     (r"^simulate", r"protocol comparison")),
    ("Streaming recovery (Spark Structured Streaming)", "Falkirk Wheel paper §4.5",
     (r"streaming", r"^spark", r"^wordcount", r"^query")),
    ("Falkirk Wheel spans and GC watermark", "Falkirk Wheel paper §3.1–3.4",
     (r"^spans", r"falkirk", r"dataflow")),
    ("Elastic upstream backup", "SPATE paper §4–5", (r"elastic", r"upstream")),
    ("Utilization model and optimal interval", "utilization paper §3–4",
     (r"^interval", r"utilization")),
    ("Total recovery time and CI optimiser", "Chiron paper §III–IV", (r"chiron", r"^trt")),
]


def canonical_algorithm(name: str) -> tuple[str, str]:
    """(algorithm, source) of a row's ``algorithm`` field, or (name, "") when it names none.

    Examples
    --------
    >>> canonical_algorithm("zpath")
    ('Z-paths, Z-cycles, useless checkpoints', 'FERDiS paper §5.3')
    >>> canonical_algorithm("something new")
    ('something new', '')
    """
    import re

    low = name.strip().lower()
    for algo, source, patterns in ALGORITHMS:
        if any(re.search(p, low) for p in patterns):
            return algo, source
    return name, ""


def format_duration(seconds: float) -> str:
    """``16m31s``, ``42.0s``, ``1h02m``.

    Examples
    --------
    >>> format_duration(991), format_duration(42), format_duration(3725)
    ('16m31s', '42.0s', '1h02m')
    """
    if seconds < 60:
        return f"{seconds:.1f}s"
    m, s = divmod(int(round(seconds)), 60)
    if m < 60:
        return f"{m}m{s:02d}s"
    h, m = divmod(m, 60)
    return f"{h}h{m:02d}m"


def summary_line(rows: list[Row], seconds: float) -> str:
    """The verdict in one line, as pytest ends its run.

    Examples
    --------
    >>> summary_line([Row("a", "pyimpl", "x", "pass", 1), Row("b", "TLC", "y", "inconclusive", 0)], 991)
    '2 checks: 1 passed, 0 failed, 1 inconclusive in 16m31s'
    """
    n = {st: sum(r.status == st for r in rows) for st in STATUSES}
    return (f"{len(rows)} checks: {n['pass']} passed, {n['fail']} failed, "
            f"{n['inconclusive']} inconclusive in {format_duration(seconds)}")


def _version(dist: str) -> str:
    from importlib import metadata

    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


def _command_output(cmd: list[str], timeout: float = 20.0) -> str:
    import subprocess

    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.SubprocessError):
        return ""
    return (proc.stdout + proc.stderr).strip()


def environment() -> dict[str, str]:
    """Versions of every tool and library a verification run uses, and the commit checked.

    Java and TLC are asked for their own versions; the commit is ``git rev-parse HEAD`` of the
    checkout the package was imported from (``"unknown"`` for an installed wheel).
    """
    import platform
    import re
    import shutil
    from pathlib import Path

    import rollcheck

    env: dict[str, str] = {"rollcheck": rollcheck.__version__, "python": platform.python_version()}
    for dist in ("hypothesis", "z3-solver", "networkx", "numpy", "scipy", "matplotlib", "jsonschema",
                 "pyspark", "rich"):
        env[dist] = _version(dist)
    java = shutil.which("java")
    if java:
        first = _command_output([java, "-version"]).splitlines()
        env["java"] = next((ln for ln in first if "version" in ln), first[0] if first else "unknown")
        try:
            from rollcheck.tla.runner import find_jar

            out = _command_output([java, "-cp", str(find_jar()), "tlc2.TLC", "-version"])
            m = re.search(r"Version\s+([\w.\-]+)", out)
            env["tlc"] = m.group(1) if m else (out.splitlines()[0] if out else "unknown")
        except Exception as e:  # a missing jar is reported, not fatal
            env["tlc"] = f"unavailable ({type(e).__name__})"
    else:
        env["java"] = "not found"
        env["tlc"] = "unavailable (no java)"
    root = Path(rollcheck.__file__).resolve().parents[1]
    commit = _command_output(["git", "-C", str(root), "rev-parse", "HEAD"], timeout=5) if (root / ".git").exists() else ""
    if commit and re.fullmatch(r"[0-9a-f]{40}", commit):
        dirty = _command_output(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"], timeout=5)
        env["commit"] = commit[:12] + (" (with uncommitted changes)" if dirty else "")
    else:
        env["commit"] = "unknown (not a git checkout)"
    return env


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


def _copy_pictures(rows: list[Row], out_dir: Path) -> None:
    """Copy every picture a row shows into ``out_dir/pictures/`` and point the row at the copy.

    A report must not change when a later command overwrites the files it showed, and it holds
    relative paths only.
    """
    import shutil

    pic_dir = out_dir / "pictures"
    for r in rows:
        kept: list[str] = []
        for p in r.pictures:
            src = Path(p)
            if not src.is_absolute():
                src = (out_dir / src) if (out_dir / src).exists() else src.resolve()
            if not src.exists():
                continue
            try:
                rel = src.resolve().relative_to(out_dir.resolve())
            except ValueError:
                pic_dir.mkdir(parents=True, exist_ok=True)
                target = pic_dir / src.name
                k = 1
                while target.exists() and target.resolve() != src.resolve():
                    target = pic_dir / f"{src.stem}-{k}{src.suffix}"
                    k += 1
                shutil.copyfile(src, target)
                rel = target.relative_to(out_dir)
            kept.append(rel.as_posix())
        r.pictures = kept


def _grid(rows: list[Row]) -> tuple[list[tuple[str, str]], list[str], dict[tuple[str, str], str]]:
    algos: list[tuple[str, str]] = []
    by_row: dict[int, str] = {}
    for i, r in enumerate(rows):
        algo, source = canonical_algorithm(r.algorithm)
        by_row[i] = algo
        if (algo, source) not in algos:
            algos.append((algo, source))
    order = {name: k for k, (name, _, _) in enumerate(ALGORITHMS)}
    algos.sort(key=lambda a: (order.get(a[0], len(order)), a[0]))
    methods = [m for m in ("pyimpl", "Hypothesis", "Z3", "mutants", "TLC", "Spark", "fuzz", "your system")
               if any(r.method == m for r in rows)]
    methods += sorted({r.method for r in rows} - set(methods))
    cell: dict[tuple[str, str], str] = {}
    for a, _ in algos:
        for m in methods:
            sel = [r for i, r in enumerate(rows) if by_row[i] == a and r.method == m]
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
            cell[(a, m)] = f"{st} ({len(sel)} check{'s' if len(sel) != 1 else ''}; " + ", ".join(f"{v} {k}" for k, v in counts.items()) + ")"
    return algos, methods, cell


def write_report(rows: list[Row], out_dir: Path, meta: dict[str, object]) -> tuple[Path, Path]:
    """Write ``report.md``, ``index.html`` and ``results.json`` under ``out_dir``; return md, html.

    The first lines answer "is it correct, how thoroughly, with which versions": the verdict line,
    the profile, seed and commit, then the tool versions (``meta["versions"]``, a dict).
    """
    from rollcheck.pyimpl.patternio import atomic_write_text

    out_dir.mkdir(parents=True, exist_ok=True)
    _copy_pictures(rows, out_dir)
    algos, methods, cell = _grid(rows)
    meta = dict(meta)
    versions = meta.pop("versions", {})
    verdict = str(meta.pop("verdict", ""))
    failed = [r for r in rows if r.status == "fail"]
    inconclusive = [r for r in rows if r.status == "inconclusive"]
    md = ["# rollcheck verification report", "", f"**{verdict}**", ""]
    md += [f"- {k}: {v}" for k, v in meta.items()]
    if isinstance(versions, dict) and versions:
        md += ["- versions: " + ", ".join(f"{k} {v}" for k, v in versions.items())]
    for title, sel in (("Failed", failed), ("Inconclusive", inconclusive)):
        if sel:
            md += ["", f"## {title}", ""]
            md += [f"- {r.algorithm} / {r.method} / {r.check}: {r.detail}" for r in sel]
    md += ["", "## Algorithm × method", ""]
    md.append("| algorithm | source | " + " | ".join(methods) + " |")
    md.append("|---|---|" + "---|" * len(methods))
    for a, src in algos:
        md.append(f"| {a} | {src} | " + " | ".join(cell.get((a, m), "–") for m in methods) + " |")
    md += ["", "## Every check", "", _md_table(rows), ""]
    pics = [(r, p) for r in rows for p in r.pictures]
    if pics:
        md += ["## Pictures", ""]
        for r, p in pics:
            md.append(f"### {r.algorithm}: {r.check}\n\n![{r.check}]({p})\n")
    md_path = out_dir / "report.md"
    atomic_write_text(md_path, "\n".join(md))

    esc = html.escape
    vclass = "fail" if failed else ("inconclusive" if inconclusive or not rows else "pass")
    h = [
        "<!doctype html><html><head><meta charset='utf-8'><title>rollcheck report</title>",
        "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
        "td,th{border:1px solid #999;padding:4px 8px;font-size:90%}.pass{background:#d9f2d9}"
        ".fail{background:#f7c6c6}.inconclusive{background:#fbe8b0}img{max-width:900px}"
        ".verdict{font-size:140%;padding:.5em 1em;display:inline-block}</style>",
        "</head><body><h1>rollcheck verification report</h1>",
        f"<p class='verdict {vclass}'>{esc(verdict)}</p><ul>",
    ]
    h += [f"<li>{esc(str(k))}: {esc(str(v))}</li>" for k, v in meta.items()]
    if isinstance(versions, dict) and versions:
        h.append("<li>versions: " + esc(", ".join(f"{k} {v}" for k, v in versions.items())) + "</li>")
    h.append("</ul>")
    for title, sel in (("Failed", failed), ("Inconclusive", inconclusive)):
        if sel:
            h.append(f"<h2>{title}</h2><ul>")
            h += [f"<li>{esc(r.algorithm)} / {esc(r.method)} / {esc(r.check)}: {esc(r.detail)}</li>" for r in sel]
            h.append("</ul>")
    h.append("<h2>Algorithm × method</h2><table><tr><th>algorithm</th><th>source</th>")
    h += [f"<th>{esc(m)}</th>" for m in methods]
    h.append("</tr>")
    for a, src in algos:
        h.append(f"<tr><td>{esc(a)}</td><td>{esc(src)}</td>")
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
            h.append(f"<h3>{esc(r.algorithm)}: {esc(r.check)}</h3><img src='{esc(p)}'>")
    h.append("</body></html>")
    html_path = out_dir / "index.html"
    atomic_write_text(html_path, "\n".join(h))
    doc = {"verdict": verdict, **{str(k): v for k, v in meta.items()}, "versions": versions,
           "rows": [asdict(r) for r in rows]}
    atomic_write_text(out_dir / "results.json", json.dumps(doc, indent=1, default=str))
    for f in (md_path, html_path, out_dir / "results.json"):
        f.chmod(0o644)
    return md_path, html_path
