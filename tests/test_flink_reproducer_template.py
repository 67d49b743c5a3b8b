"""The Flink reproducer's template: a module of its own, filled line by line."""

import ast
import shutil
import subprocess
import sys
from importlib import resources
from pathlib import Path

import pytest

from rollcheck.flink_replay import reproducer
from rollcheck.flink_replay.matrix import Cell
from rollcheck.infra.templates import fill_template
from rollcheck.pyimpl.verdict import Check, Report

ROOT = Path(__file__).resolve().parents[1]
JOB = ROOT / "examples" / "flink_jobs" / "keyed_totals.py"


def _template_text() -> str:
    return resources.files(reproducer.TEMPLATE_PACKAGE).joinpath(reproducer.TEMPLATE_FILE).read_text()


def test_the_template_is_a_lint_clean_module_of_the_package() -> None:
    path = Path(str(resources.files(reproducer.TEMPLATE_PACKAGE).joinpath(reproducer.TEMPLATE_FILE)))
    assert path.is_file() and path.parent == ROOT / "flink_replay" / "templates"
    ruff = shutil.which("ruff") or str(Path(sys.executable).with_name("ruff"))
    r = subprocess.run([ruff, "check", "--config", str(ROOT / "pyproject.toml"), str(path)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    tree = ast.parse(_template_text())
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert imported <= set(sys.stdlib_module_names) | {"pyflink"}, imported
    # the module-level code imports nothing but the standard library (importing it runs nothing)
    top = {a.name for n in tree.body if isinstance(n, ast.Import) for a in n.names}
    assert top <= set(sys.stdlib_module_names), top


def test_every_placeholder_line_is_there_once() -> None:
    lines = _template_text().splitlines()
    placeholders = [x for x in lines if x.endswith("# filled by rollcheck") or "(filled by rollcheck)" in x
                    or "rollcheck writes" in x]
    assert len(placeholders) == len(set(placeholders)) == 8


@pytest.mark.parametrize("rescale, records, drop, expected", [
    (None, None, None, None),
    ((2, 3), 25, ["withdrawals"], {"from": "the same job in Flink's BATCH mode", "key": [0], "columns": None,
                                    "rows": [["a", 3]]}),
])
def test_generated_script_carries_the_cell(tmp_path: Path, rescale, records, drop, expected) -> None:
    cell = Cell(str(JOB), "rocksdb", "unaligned", "task", rescale)
    rep = Report([Check.violated("output-exactly-once", 'row 3 of KEY ["a"] committed 2 times')])
    cfg = {"interval_ms": 250, "parallelism": 2, "fail_at_record": 300, "seed": 4, "rate": 300.0,
           **({"rescale": list(rescale)} if rescale else {})}
    path = reproducer.write_reproducer(cell, cfg, tmp_path / "r.py", rep, records=records, fail_at=12,
                                       expected=expected, drop=drop)
    text = path.read_text()
    assert "filled by rollcheck" not in text and "rollcheck writes" not in text
    assert "import rollcheck" not in text and "from rollcheck" not in text
    ns = {"__name__": "not_main"}
    exec(compile(text, str(path), "exec"), ns)  # defines only: main() runs under __main__
    assert ns["JOB"] == JOB.read_text() and ns["EXPECTED"] == expected and ns["DROP"] == list(drop or [])
    assert (ns["BACKEND"], ns["CHECKPOINTS"], ns["INTERVAL_MS"], ns["PAR"], ns["RESCALE"]) == (
        "rocksdb", "unaligned", 250, 2, rescale)
    assert (ns["FAIL_AT"], ns["SEED"], ns["RATE"], ns["RECORDS"]) == (12, 4, 300.0, records)
    doc = ast.get_docstring(ast.parse(text))
    assert doc.startswith(f"Standalone reproducer (pyflink only): {cell.job} under a task failure\n")
    assert "Seen by rollcheck: output-exactly-once: row 3 of KEY" in doc and "python r.py [--records N]" in doc


def test_fill_template_refuses_a_missing_or_repeated_line() -> None:
    assert fill_template("a\nX = None\nb\n", {"X = None": "X = 1\nY = 2"}) == "a\nX = 1\nY = 2\nb\n"
    with pytest.raises(RuntimeError, match="0 lines"):
        fill_template("a\n", {"X = None": "X = 1"})
    with pytest.raises(RuntimeError, match="2 lines"):
        fill_template("X = None\nX = None\n", {"X = None": "X = 1"})
