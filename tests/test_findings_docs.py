"""The scripts attached to the engine findings under docs/findings/ stand alone.

A maintainer runs them with a plain PyFlink installation: each attachment imports only the
standard library and what apache-flink installs (``pyflink``, ``cloudpickle``), never rollcheck;
it parses, is ruff-clean, has a usage docstring and exits through ``sys.exit(main())``. The
report draft names every attachment, and the source lines it quotes from PyFlink are the lines
of the PyFlink release installed here. No engine runs: ``--help`` only imports.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FINDINGS = ROOT / "docs" / "findings"
REPORT = FINDINGS / "pyflink-keyed-reduce-state-lost.md"
ATTACHMENTS = ["pyflink-reduce-failure.py", "pyflink-reduce-savepoint.py", "pyflink-reduce-open-twice.py"]
# what `pip install apache-flink` brings besides the standard library
ALLOWED_THIRD_PARTY = {"pyflink", "cloudpickle"}


def _imported_roots(tree: ast.Module) -> set[str]:
    roots = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots.add(node.module.split(".")[0])
    return roots


@pytest.mark.parametrize("name", ATTACHMENTS)
def test_attachment_stands_alone(name: str) -> None:
    path = FINDINGS / name
    text = path.read_text(encoding="utf-8")
    tree = ast.parse(text, filename=name)
    foreign = _imported_roots(tree) - set(sys.stdlib_module_names) - ALLOWED_THIRD_PARTY
    assert not foreign, f"{name} imports {sorted(foreign)}: an attachment needs PyFlink only"
    doc = ast.get_docstring(tree) or ""
    assert "Usage" in doc and f"python {name}" in doc, f"{name}: the docstring says how to run it"
    assert "rollcheck" not in text.lower(), f"{name} speaks rollcheck's vocabulary"
    mains = [n for n in tree.body if isinstance(n, ast.If) and "__main__" in ast.unparse(n.test)]
    assert mains and "sys.exit(main())" in ast.unparse(mains[0]), f"{name}: exits with main()'s code"


def test_attachments_are_ruff_clean() -> None:
    paths = [str(FINDINGS / n) for n in ATTACHMENTS] + [str(FINDINGS / "fixed-name" / "sitecustomize.py")]
    proc = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", *paths],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-1000:]


def test_report_names_every_attachment() -> None:
    text = REPORT.read_text(encoding="utf-8")
    for name in ATTACHMENTS:
        assert f"`{name}`" in text, f"the report does not name {name}"
    for section in ("## Affected releases", "## Steps to reproduce", "## Expected", "## Actual",
                    "## Root cause", "## Proposed fix", "## Compatibility"):
        assert section in text, f"the report has no section {section!r}"
    named = set(re.findall(r"`(pyflink-[\w-]+\.py)`", text))
    missing = sorted(n for n in named if not (FINDINGS / n).exists())
    assert not missing, f"the report names files that do not exist: {missing}"


def _flink_python() -> Path:
    from rollcheck.flink_replay.environment import find_flink
    from rollcheck.pyimpl.errors import InconclusiveError

    try:
        return Path(find_flink().python)
    except InconclusiveError:
        pytest.skip("no PyFlink environment")


def test_report_quotes_the_installed_release_lines() -> None:
    """Each ``N: `code``` the report quotes for the installed release is that line of data_stream.py."""
    python = _flink_python()
    probe = "import pyflink.version as v, pyflink.datastream.data_stream as d; print(v.__version__); print(d.__file__)"
    out = subprocess.run([str(python), "-s", "-c", probe], capture_output=True, text=True, timeout=300,
                         check=True).stdout.split()
    release, source = out[-2], Path(out[-1]).read_text(encoding="utf-8").splitlines()
    rows = re.findall(rf"^\| {re.escape(release)} \|.*$", REPORT.read_text(encoding="utf-8"), re.M)
    if not rows:
        pytest.skip(f"the report quotes no lines of apache-flink {release}")
    quoted = re.findall(r"(\d+): `([^`]+)`", rows[0])
    assert quoted, rows[0]
    for line, code in quoted:
        assert code in source[int(line) - 1], f"{release} data_stream.py:{line} is {source[int(line) - 1]!r}"


@pytest.mark.parametrize("name", ATTACHMENTS)
def test_attachment_imports_resolve_in_pyflink(name: str) -> None:
    """``--help`` imports every module the attachment uses from the installed PyFlink (no JVM)."""
    python = _flink_python()
    proc = subprocess.run([str(python), "-s", str(FINDINGS / name), "--help"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and "usage:" in proc.stdout, proc.stderr[-2000:]
