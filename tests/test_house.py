"""The house rules of the source tree: module and function sizes, short numpydoc docstrings.

Each rule is a small function over source text, shown to catch a planted violation, then run over
every package folder (the ``templates/`` of reproducers are data: they are checked by ruff as code
but their size follows the program they render).
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ("pyimpl", "infra", "properties", "tla", "spark_replay", "flink_replay", "rollcheck")
MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 100
MAX_MODULE_DOC_LINES = 25
MAX_DOC_PROSE_LINES = 12
#: ruff's pydocstyle rules under the numpy convention, less the imperative mood and magic methods
RUFF_DOC = ["--select", "D", "--ignore", "D401,D105", "--config", 'lint.pydocstyle.convention="numpy"']
_SECTION = re.compile(r"^\s*(Parameters|Other Parameters|Returns|Yields|Receives|Raises|Warns|"
                      r"Warnings|See Also|Notes|References|Examples|Attributes|Methods)\s*$")


def sources() -> list[Path]:
    """Every Python module of the package folders, the reproducer templates left out."""
    return sorted(p for folder in FOLDERS for p in (ROOT / folder).rglob("*.py")
                  if "templates" not in p.parts and "__pycache__" not in p.parts)


def long_module(text: str) -> int | None:
    """The line count of a module over :data:`MAX_MODULE_LINES`, else None."""
    n = len(text.splitlines())
    return n if n > MAX_MODULE_LINES else None


def long_functions(text: str) -> list[tuple[str, int]]:
    """``(name, lines)`` of every function over :data:`MAX_FUNCTION_LINES` lines."""
    return [(node.name, node.end_lineno - node.lineno + 1) for node in ast.walk(ast.parse(text))
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.end_lineno is not None
            and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES]


def prose_lines(doc: str) -> int:
    """Lines of a docstring before its first numpydoc section (a header underlined by dashes)."""
    lines = doc.splitlines()
    for i, line in enumerate(lines[:-1]):
        if _SECTION.match(line) and set(lines[i + 1].strip()) == {"-"}:
            return i
    return len(lines)


def long_docstrings(text: str) -> list[tuple[str, int]]:
    """``(where, lines)`` of a module docstring over :data:`MAX_MODULE_DOC_LINES` lines and of the
    prose of a class or function docstring over :data:`MAX_DOC_PROSE_LINES` lines."""
    tree = ast.parse(text)
    found = []
    doc = ast.get_docstring(tree)
    if doc and len(doc.splitlines()) > MAX_MODULE_DOC_LINES:
        found.append(("module", len(doc.splitlines())))
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            doc = ast.get_docstring(node)
            if doc and prose_lines(doc) > MAX_DOC_PROSE_LINES:
                found.append((node.name, prose_lines(doc)))
    return found


_PLANTED_FUNCTION = "def f():\n" + "    x = 1\n" * 100
_PLANTED_DOC = '"""' + "line\n" * 30 + '"""\n\ndef g():\n    """One.\n\n' + "    more\n" * 13 + \
    '\n    Returns\n    -------\n    int\n' + "    fine\n" * 20 + '    """\n'


def test_the_rules_catch_what_they_are_for():
    assert long_module("x = 1\n" * 501) == 501 and long_module("x = 1\n" * 500) is None
    assert long_functions(_PLANTED_FUNCTION) == [("f", 101)]
    assert long_functions(_PLANTED_FUNCTION.replace("    x = 1\n", "", 1)) == []
    assert long_docstrings(_PLANTED_DOC) == [("module", 30), ("g", 16)]
    assert prose_lines("One.\n\nParameters\n----------\nx : int\n") == 2


@pytest.mark.parametrize("rule", [long_module, long_functions, long_docstrings],
                         ids=lambda r: r.__name__)
def test_the_tree_keeps_the_rule(rule):
    broken = {}
    for path in sources():
        found = rule(path.read_text(encoding="utf-8"))
        if found:
            broken[str(path.relative_to(ROOT))] = found
    assert not broken, f"{rule.__name__}: {broken}"


def test_ruff_docstring_rules_catch_a_wrapped_summary(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text('"""A module."""\n\n\ndef f(x):\n    """A summary that wraps\n    onto a second line."""\n'
                   '    return x\n')
    res = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", *RUFF_DOC, str(bad)],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 1 and "D205" in res.stdout, res.stdout + res.stderr


def test_docstrings_are_numpydoc():
    res = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", *RUFF_DOC, *FOLDERS],
                         capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr
