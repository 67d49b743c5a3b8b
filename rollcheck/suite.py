"""The main job's building blocks: result rows, sections, and the report writer.

``rollcheck verify`` runs every *section*: a module ``rollcheck/sections/sec_<name>.py`` with
``TITLE: str`` and ``run(ctx: VerifyContext) -> list[Row]`` (optionally ``PARTS``, names of parts
the scheduler runs side by side, each call running ``ctx.part``). Each row is one algorithm checked by
one method (pyimpl, Hypothesis, Z3, TLC, Spark) with its verdict and the count of things examined.
A row that examined nothing must say ``inconclusive``.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rollcheck.pyimpl.verdict import Check, Status, Verdict, decide

__all__ = [
    "ALGORITHMS",
    "Row",
    "STATUSES",
    "VerifyContext",
    "canonical_algorithm",
    "discover_sections",
    "environment",
    "environment_failure",
    "exit_code",
    "format_duration",
    "plural",
    "summary_line",
]

STATUSES = ("pass", "fail", "inconclusive")

#: An ``OSError`` of the machine, not of the code under test: the text a crashed row's detail
#: carries when the disk filled up, a quota ran out or the folder became read-only.
_ENVIRONMENT_FAILURE = re.compile(
    r"\[Errno (28|122|30)\]|No space left on device|Disk quota exceeded|Read-only file system")


def environment_failure(text: str) -> str | None:
    """The environment failure ``text`` reports (disk full, quota, read-only), or None.

    Examples
    --------
    >>> environment_failure("OSError: [Errno 28] No space left on device: 'report/x.png'")
    'disk full'
    >>> environment_failure("AssertionError: orphan m36") is None
    True
    """
    m = _ENVIRONMENT_FAILURE.search(text or "")
    if m is None:
        return None
    if m.group(1) == "122" or "quota" in m.group(0).lower():
        return "disk quota exceeded"
    if m.group(1) == "30" or "Read-only" in m.group(0):
        return "read-only file system"
    return "disk full"


def _check_from_status(name: str, status: str, count: int, detail: str) -> Check:
    """The one check a row built from the legacy ``status`` word stands for.

    ``pass`` is a check that held after examining ``count`` things (none examined: unchecked);
    ``fail`` a violation, unless its detail names an environment failure (a full disk is not a
    finding: unchecked); ``inconclusive`` an unchecked check.
    """
    if status not in STATUSES:
        raise ValueError(f"bad status {status!r} (one of {', '.join(STATUSES)})")
    if status == "pass":
        return Check.held(name, detail, examined=count)
    if status == "fail":
        env = environment_failure(detail)
        if env is not None:
            return Check.unchecked(name, f"environment failure ({env}), not a finding: {detail}")
        return Check.violated(name, detail or "failed", examined=count or None)
    return Check.unchecked(name, detail or "not examined")


class Row:
    """One algorithm checked by one method: its checks, the verdict they earn, and its evidence.

    The row's ``status`` is :func:`rollcheck.pyimpl.verdict.decide` over its checks, in the
    words of a verify row (``pass`` / ``fail`` / ``inconclusive``). A section builds a row either
    from its checks (``checks=[...]``) or, as most do, from one status word, which stands for one
    check named after the row (see ``_check_from_status``): a ``pass`` that examined nothing
    (``count == 0``) is inconclusive, and a ``fail`` whose detail names a full disk is an
    environment failure, inconclusive too.

    Parameters
    ----------
    algorithm, method, check : str
        What was checked, how (``pyimpl``, ``Hypothesis``, ``Z3``, ``TLC``, ``Spark``, ...), and
        the check's one-line description.
    status : str, optional
        ``pass`` / ``fail`` / ``inconclusive``; omitted when ``checks`` are given (given with
        them, it must agree with their verdict).
    count, unit : int, str
        How many things were examined (``"examples"``, ``"states"``, ...).
    seconds : float
        Wall time of the row.
    detail : str
        One line a reader needs to judge the row.
    pictures : list of str
        Pictures showing the row's evidence (copied into the report's ``pictures/``).
    checks : list of Check, optional
        The row's checks.
    captions : list of str, optional
        One caption per picture (what to look at); else the caption stored in the PNG.
    section : str
        The verify section that produced the row (set by the scheduler).

    Examples
    --------
    >>> Row("zpath", "Hypothesis", "no Z-cycle", "pass", 0).status
    'inconclusive'
    >>> Row("bcs", "pyimpl", "p", "fail", 1, detail="OSError: [Errno 28] No space left on device").status
    'inconclusive'
    >>> Row("bcs", "TLC", "t", checks=[Check.held("inv", "ok", examined=9)]).status
    'pass'
    """

    def __init__(self, algorithm: str, method: str, check: str, status: str | None = None, count: int = 0,
                 unit: str = "examples", seconds: float = 0.0, detail: str = "",
                 pictures: list[str] | None = None, *, checks: list[Check] | None = None,
                 captions: list[str] | None = None, section: str = "") -> None:
        self.algorithm = algorithm
        self.method = method  # "pyimpl" | "Hypothesis" | "Z3" | "TLC" | "Spark" | "mutants" | ...
        self.check = check
        self.count = int(count)
        self.unit = unit
        self.seconds = float(seconds)
        self.detail = detail
        self.pictures = [str(p) for p in (pictures or [])]
        self.captions = list(captions or [])
        self.section = section
        if checks is None:
            if status is None:
                raise ValueError(f"row {check!r}: give a status or its checks")
            checks = [_check_from_status(check, status, self.count, detail)]
            if status == "pass" and self.count == 0:
                self.detail = (detail + "; " if detail else "") + "nothing was examined"
            env = environment_failure(detail) if status == "fail" else None
            if env is not None:
                self.detail = f"environment failure ({env}), not a finding: {detail}"
        else:
            checks = list(checks)
            for c in checks:
                if not isinstance(c, Check):
                    raise TypeError(f"row {check!r}: checks must be Check objects, not {type(c).__name__}")
            if status is not None and status != decide(checks).word("row"):
                raise ValueError(f"row {check!r}: status {status!r} disagrees with its checks "
                                 f"({decide(checks).word('row')})")
        self.checks: list[Check] = checks

    @property
    def verdict(self) -> Verdict:
        """:func:`decide` over the row's checks."""
        return decide(self.checks)

    @property
    def status(self) -> str:
        """``pass`` / ``fail`` / ``inconclusive``: the verdict in a verify row's words."""
        return self.verdict.word("row")

    @status.setter
    def status(self, value: str) -> None:
        # a section that overrules its row (a recording that did not finish) replaces its checks
        self.checks = [_check_from_status(self.check, value, self.count, self.detail)]

    @property
    def environment_failure(self) -> str | None:
        """The environment failure (disk full, ...) that left this row unchecked, if any."""
        for c in self.checks:
            if c.status is Status.UNCHECKED and c.detail.startswith("environment failure"):
                return environment_failure(c.detail) or "environment"
        return None

    def to_json(self) -> dict[str, Any]:
        """The row as ``results.json`` holds it."""
        return {"algorithm": self.algorithm, "method": self.method, "check": self.check,
                "status": self.status, "count": self.count, "unit": self.unit,
                "seconds": round(self.seconds, 3), "detail": self.detail, "pictures": list(self.pictures),
                "captions": list(self.captions), "section": self.section,
                "checks": [c.to_json() for c in self.checks]}

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Row) and self.to_json() == other.to_json()

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (f"Row({self.algorithm!r}, {self.method!r}, {self.check!r}, {self.status!r}, {self.count}, "
                f"{self.unit!r})")


@dataclass
class VerifyContext:
    """What a section's ``run(ctx)`` gets: the run's settings, where to write, how to log.

    ``part`` is set when the section declares ``PARTS`` (names of independent parts the
    scheduler may run side by side): the part this call runs; None runs them all.
    """

    profile: str  # "ci" or "verify"
    quick: bool
    out_dir: Path  # report/ ; sections put pictures and files under it
    seed: int
    log: Callable[[str], None] = print
    part: str | None = None

    def runs(self, part: str) -> bool:
        """Whether this call runs ``part`` of its section."""
        return self.part is None or self.part == part

    def path(self, *parts: str) -> Path:
        """The file ``out_dir/parts...``, its parent folder created."""
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


def exit_code(statuses: list[str]) -> int:
    """The exit code of a list of rows' statuses: 1 a row failed, 3 no row or one inconclusive, else 0.

    It is :func:`rollcheck.pyimpl.verdict.decide` over one check per row (``pass`` held, ``fail``
    violated, ``inconclusive`` unchecked).

    Examples
    --------
    >>> exit_code(["pass", "inconclusive", "fail"]), exit_code(["pass", "inconclusive"]), exit_code([])
    (1, 3, 3)
    >>> exit_code(["pass", "pass"])
    0
    >>> exit_code(["passed"])
    Traceback (most recent call last):
    ...
    ValueError: bad status 'passed' (one of pass, fail, inconclusive)
    """
    return decide(_row_check(k, s) for k, s in enumerate(statuses)).exit_code


def _row_check(k: int, status: str) -> Check:
    """Row ``k``'s verdict as the one check it stands for in the verdict of a run."""
    if status not in STATUSES:
        raise ValueError(f"bad status {status!r} (one of {', '.join(STATUSES)})")
    status_of = {"pass": Status.HELD, "fail": Status.VIOLATED, "inconclusive": Status.UNCHECKED}
    return Check(f"row {k}", status_of[status], f"row {k}: {status}")


def summary_line(rows: list[Row], seconds: float) -> str:
    """The verdict in one line, as pytest ends its run.

    Parameters
    ----------
    rows : list of Row
        The run's rows.
    seconds : float
        The run's wall time.

    Returns
    -------
    str
        The line.

    Examples
    --------
    >>> summary_line([Row("a", "pyimpl", "x", "pass", 1), Row("b", "TLC", "y", "inconclusive", 0)], 991)
    '2 checks: 1 passed, 0 failed, 1 inconclusive in 16m31s'
    """
    n = {st: sum(r.status == st for r in rows) for st in STATUSES}
    return (f"{plural(len(rows), 'checks')}: {n['pass']} passed, {n['fail']} failed, "
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


def plural(n: int, word: str) -> str:
    """``n`` and ``word``, singular for one: ``1 pattern``, ``2 patterns``, ``1 failure run``.

    ``word`` is given in the plural (a row's unit) or the singular; both come out right.

    Parameters
    ----------
    n : int
        The count.
    word : str
        The noun, singular or plural.

    Returns
    -------
    str
        ``n`` and the noun in its right number.

    Examples
    --------
    >>> plural(1, "patterns"), plural(2, "pattern"), plural(1, "failure runs"), plural(0, "check")
    ('1 pattern', '2 patterns', '1 failure run', '0 checks')
    >>> plural(1, "assignments"), plural(3, "status"), plural(1, "states")
    ('1 assignment', '3 statuses', '1 state')
    """
    w = word.strip()
    if n == 1:
        if w.endswith("ies"):
            return f"{n} {w[:-3]}y"
        if w.endswith("ses") and w[:-2].endswith(("ss", "us")):
            return f"{n} {w[:-2]}"
        if w.endswith("s") and not w.endswith(("ss", "us")):
            return f"{n} {w[:-1]}"
        return f"{n} {w}"
    if w.endswith("s") and not w.endswith(("ss", "us")):
        return f"{n} {w}"
    if w.endswith(("ss", "us", "x", "ch", "sh")):
        return f"{n} {w}es"
    if w.endswith("y") and w[-2:-1] not in "aeiou":
        return f"{n} {w[:-1]}ies"
    return f"{n} {w}s"
