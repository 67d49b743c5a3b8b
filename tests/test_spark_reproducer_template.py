"""The Spark reproducer's template: a module of its own, filled line by line."""

import ast
import datetime as dt
import shutil
import subprocess
import sys
from importlib import resources
from pathlib import Path

import pytest

from rollcheck.spark_replay.faults.killpoints import STATE_STORES
from rollcheck.spark_replay.matrix import reproducer

ROOT = Path(__file__).resolve().parents[1]
SOURCE = (ROOT / "examples" / "queries" / "clicks_per_window.py").read_text()
ROWS = [[(dt.datetime(2024, 1, 1, 0, 0, 5), "a", 1)], [], [(dt.datetime(2024, 1, 1, 0, 1, 5), "b", 2)]]


def _template_text():
    return resources.files(reproducer.TEMPLATE_PACKAGE).joinpath(reproducer.TEMPLATE_FILE).read_text()


def _constants(text):
    """The module-level constants of a generated script, evaluated without running it."""
    ns = {"__name__": "reproducer_under_test", "__file__": "reproducer.py"}
    exec(compile(text, "reproducer.py", "exec"), ns)
    return ns


def test_the_template_is_a_lint_clean_module_of_the_package():
    path = Path(str(resources.files(reproducer.TEMPLATE_PACKAGE).joinpath(reproducer.TEMPLATE_FILE)))
    assert path.is_file()
    ruff = shutil.which("ruff") or str(Path(sys.executable).with_name("ruff"))
    r = subprocess.run([ruff, "check", "--config", str(ROOT / "pyproject.toml"), str(path)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    tree = ast.parse(_template_text())
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert imported <= set(sys.stdlib_module_names) | {"pyspark"}, imported


@pytest.mark.parametrize("failure,kill_point,expected", [
    ("task", None, None),
    ("kill", "commit", {"from": "the batch job", "key": [0], "columns": ["word", "n"], "rows": [["a", 2]]}),
])
def test_generated_script_carries_the_finding(failure, kill_point, expected):
    text = reproducer.reproducer_source(SOURCE, ROWS, failure=failure, kill_point=kill_point, fail_at=2,
                                        state_store="rocksdb", title="a title", reason="why it is wrong",
                                        shuffle_partitions=3, master="local[2]", expected=expected)
    assert "filled by rollcheck" not in text and "rollcheck writes" not in text
    assert "import rollcheck" not in text and "from rollcheck" not in text
    ns = _constants(text)
    assert (ns["FAIL_AT"], ns["FAILURE"], ns["KILL_POINT"], ns["MASTER"]) == (2, failure, kill_point, "local[2]")
    assert ns["SPARK_CONF"] == {**reproducer.REPRO_CONF, "spark.sql.shuffle.partitions": "3",
                                **STATE_STORES["rocksdb"]}
    assert ns["EXPECTED"] == expected
    assert ns["USER_SOURCE"] == reproducer.module_with_rows(SOURCE, ROWS)
    doc = ast.get_docstring(ast.parse(text))
    assert doc.startswith("Reproducer: a title\n\nwhy it is wrong\n")
    assert f"once with the failure ({failure}" in doc and "3 micro-batch(es) (2 input rows)" in doc
    assert ("differs from the batch job (EXPECTED below)" in doc) == (expected is not None)


def test_every_placeholder_line_is_there_once():
    lines = _template_text().splitlines()
    placeholders = [x for x in lines if x.endswith("# filled by rollcheck") or "(filled by rollcheck)" in x
                    or "rollcheck writes" in x]
    assert len(placeholders) == len(set(placeholders)) == 9


def test_fill_template_refuses_a_missing_or_repeated_line():
    assert reproducer.fill_template("a\nX = None\nb\n", {"X = None": "X = 1\nY = 2"}) == "a\nX = 1\nY = 2\nb\n"
    with pytest.raises(RuntimeError, match="0 lines"):
        reproducer.fill_template("a\n", {"X = None": "X = 1"})
    with pytest.raises(RuntimeError, match="2 lines"):
        reproducer.fill_template("X = None\nX = None\n", {"X = None": "X = 1"})
