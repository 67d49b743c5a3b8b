"""The Spark matrix on several pyspark releases (``spark matrix --engine-version V[,V2...]``).

The fast tests run without Spark: the plan (one group of rows per release), each cell's recording
command (``--engine-version``, ``--reference-version``), its ``config``, the table's row groups in
the HTML, the reproducer's interpreter, and the refusal of a release before any cell runs. The
last test (``spark``, ``slow``: several minutes on a loaded 2-core machine) runs one cell on
pyspark 3.5.9 and one on the pinned 4.3.0 through the command line.
"""

from __future__ import annotations

import json
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

from rollcheck.pyimpl.errors import InvalidInputError
from rollcheck.spark_replay.matrix import run as matrix_mod
from rollcheck.spark_replay.matrix.plan import (
    RELEASE_ROW_HEADER,
    ROW_HEADER,
    parse_versions,
    row_header,
)
from rollcheck.spark_replay.matrix.run import (
    Cell,
    MatrixOptions,
    SparkAdapter,
    _record_argv,
    _shrink_argv,
    plan_cells,
    prepare_releases,
    render_html,
    run_matrix,
)
from rollcheck.spark_replay.releases import pinned_release

ROOT = Path(__file__).resolve().parent.parent
QUERY = ROOT / "examples" / "queries" / "clicks_per_window.py"


def _flag(argv: list[str], flag: str) -> str | None:
    return argv[argv.index(flag) + 1] if flag in argv else None


def test_plan_has_one_group_of_rows_per_release():
    cells = plan_cells(["q.py"], ["hdfs", "rocksdb"], ["task", "sink"], [], ["3.5.9", "4.3.0"])
    assert [c.row for c in cells] == ["pyspark 3.5.9 · q · hdfs"] * 2 + ["pyspark 3.5.9 · q · rocksdb"] * 2 \
        + ["pyspark 4.3.0 · q · hdfs"] * 2 + ["pyspark 4.3.0 · q · rocksdb"] * 2
    assert len({c.ident for c in cells}) == len(cells)  # each release's cells in their own folder
    assert cells[0].config_id == "pyspark3.5.9-q--hdfs" and cells[-1].config_id == "pyspark4.3.0-q--rocksdb"
    assert row_header(cells) == RELEASE_ROW_HEADER
    plain = plan_cells(["q.py"], ["hdfs"], ["task"], [])  # without the flag: as before
    assert [c.row for c in plain] == ["q · hdfs"] and plain[0].config_id == "q--hdfs"
    assert row_header(plain) == ROW_HEADER


def test_versions_are_checked_before_anything_is_installed():
    assert parse_versions("4.3.0,3.5.9,4.3.0") == ["4.3.0", "3.5.9"]
    with pytest.raises(InvalidInputError, match="3.3.0"):
        parse_versions("3.5.9,3.3.0")
    with pytest.raises(InvalidInputError, match="--engine-version"):
        parse_versions("3.5")
    with pytest.raises(InvalidInputError, match="--reference-version"):
        MatrixOptions(["q.py"], reference_version="3.5.9").validate()  # without --engine-version
    with pytest.raises(InvalidInputError, match="--reference-version"):
        MatrixOptions(["q.py"], engine_versions=["3.5.9"], reference_version="2.4.8").validate()
    MatrixOptions(["q.py"], engine_versions=["3.5.9"], reference_version="4.0.1").validate()


def test_every_recording_names_its_release(tmp_path):
    opts = MatrixOptions(["q.py"], engine_versions=["3.5.9"], reference_version="4.0.1")
    cell = plan_cells(["q.py"], ["hdfs"], ["task"], [], ["3.5.9"])[0]
    ref = _record_argv(None, "q.py", "hdfs", opts, tmp_path / "r.jsonl", None, cell.engine_version)
    rec = _record_argv(cell, "q.py", "hdfs", opts, tmp_path / "c.jsonl", tmp_path / "r.jsonl")
    shrink = _shrink_argv(cell, "try1.py", opts, tmp_path / "t.jsonl", 0)
    for argv in (ref, rec, shrink):  # the child reads a typed configuration (spark_replay/matrix/cell.py)
        q = json.loads(Path(argv[-1]).read_text())["query"]
        assert q["engine_version"] == "3.5.9" and q["reference_version"] == "4.0.1", q
    pinned = Cell("q.py", "hdfs", "task")
    plain = MatrixOptions(["q.py"])
    for argv in (_record_argv(None, "q.py", "hdfs", plain, tmp_path / "r.jsonl", None),
                 _record_argv(pinned, "q.py", "hdfs", plain, tmp_path / "c.jsonl", None)):
        q = json.loads(Path(argv[-1]).read_text())["query"]
        assert q["engine_version"] is None and q["reference_version"] is None, q


def test_the_shared_reference_is_per_release():
    cells = plan_cells(["q.py"], ["hdfs"], ["task", "sink"], [], ["3.5.9", "4.3.0"])
    adapter = SparkAdapter(MatrixOptions(["q.py"], engine_versions=["3.5.9", "4.3.0"]), cells)
    groups = {c.engine_version: adapter.group(c) for c in cells}
    assert groups == {"3.5.9": "pyspark3.5.9-q--hdfs", "4.3.0": "pyspark4.3.0-q--hdfs"}


def test_config_carries_the_release():
    cells = plan_cells(["q.py"], ["hdfs"], ["task"], [], ["3.5.9"])
    cfg, _failure, _extra = SparkAdapter(MatrixOptions(["q.py"], engine_versions=["3.5.9"]), cells).describe(cells[0])
    assert cfg["engine_version"] == "3.5.9" and cfg["reference_version"] == pinned_release()
    plain = plan_cells(["q.py"], ["hdfs"], ["task"], [])
    cfg, _failure, _extra = SparkAdapter(MatrixOptions(["q.py"]), plain).describe(plain[0])
    assert cfg["engine_version"] == pinned_release() and "reference_version" not in cfg


class _Rows(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.rows: list[list[str]] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        if tag == "tr":
            self.rows.append([])
        elif tag in ("td", "th") and self.rows:
            self._cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self.rows[-1].append("".join(self._cell).strip())
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def test_html_has_a_group_of_rows_per_release(tmp_path):
    planned = plan_cells(["q.py"], ["hdfs"], ["task"], [], ["3.5.9", "4.3.0"])
    meta = {"seed": 0, "fail_at_batch": 2, "engine_versions": ["3.5.9", "4.3.0"], "reference_version": "4.3.0"}
    text = render_html([], planned, tmp_path, done=False, meta=meta)
    t = _Rows()
    t.feed(text)
    table = [r for r in t.rows if r]
    assert table[0][0] == RELEASE_ROW_HEADER
    assert [r[0] for r in table[1:]] == ["pyspark 3.5.9 · q · hdfs", "pyspark 4.3.0 · q · hdfs"]
    assert "pyspark 3.5.9, 4.3.0" in text


def test_a_release_that_cannot_be_installed_stops_the_matrix_before_any_cell(tmp_path, monkeypatch):
    import rollcheck.spark_replay.releases as releases

    made: list[str] = []

    def environment(version=None):
        made.append(version)
        if version == "3.4.9":
            raise InvalidInputError("pyspark 3.4.9 cannot be installed: No matching distribution found",
                                    location="--engine-version")
        return Path(sys.executable)

    def no_cell(*a, **k):
        raise AssertionError("a cell ran")

    monkeypatch.setattr(releases, "spark_environment", environment)
    monkeypatch.setattr(matrix_mod, "_run_core", no_cell)
    opts = MatrixOptions([str(QUERY)], providers=["hdfs"], failures=["task"], engine_versions=["3.5.9", "3.4.9"],
                         out=tmp_path / "m")
    with pytest.raises(InvalidInputError, match="3.4.9 cannot be installed"):
        run_matrix(opts)
    assert made == ["3.5.9", "3.4.9"] and not (tmp_path / "m").exists()
    made.clear()
    assert prepare_releases(MatrixOptions(["q.py"])) == {} and made == []  # the pinned release: nothing made


def test_cli_refuses_a_release_out_of_range_before_any_cell(tmp_path):
    out = tmp_path / "m"
    r = subprocess.run([sys.executable, "-m", "rollcheck.cli.main", "spark", "matrix", "--module", str(QUERY),
                        "--providers", "hdfs", "--failures", "task", "--engine-version", "3.5.9,3.3.0",
                        "--out", str(out), "--json"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2, r.stderr
    assert "3.3.0" in r.stderr and "Traceback" not in r.stderr and not out.exists()


def test_reproducer_runs_with_the_release_interpreter(monkeypatch, tmp_path):
    import rollcheck.spark_replay.releases as releases
    from rollcheck.spark_replay.matrix.reproducer import reproducer_python

    monkeypatch.setattr(releases, "spark_environment", lambda v=None: tmp_path / f"py-{v}")
    assert reproducer_python("3.5.9") == tmp_path / "py-3.5.9"
    assert reproducer_python(None) == Path(sys.executable)


# ----------------------------------------------------------------------------- two real releases
@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.engines
def test_real_matrix_on_two_releases(tmp_path):
    """clicks_per_window under a task failure on pyspark 3.5.9 and on the pinned 4.3.0: both rows
    conformant, each naming its release (row, config, the recording's trace header)."""
    out = tmp_path / "m"
    r = subprocess.run([sys.executable, "-m", "rollcheck.cli.main", "spark", "matrix", "--module", str(QUERY),
                        "--providers", "hdfs", "--failures", "task", "--engine-version", "3.5.9,4.3.0",
                        "--jobs", "1", "--out", str(out), "--json"], capture_output=True, text=True, timeout=3600)
    assert r.returncode == 0, r.stderr[-3000:]
    doc = json.loads(r.stdout)
    cells = doc["cells"]
    assert [c["row"] for c in cells] == ["pyspark 3.5.9 · clicks_per_window · hdfs",
                                         "pyspark 4.3.0 · clicks_per_window · hdfs"]
    assert [c["config"]["engine_version"] for c in cells] == ["3.5.9", "4.3.0"]
    assert all(c["verdict"] == "conformant" for c in cells), cells
    for c, v in zip(cells, ("3.5.9", "4.3.0"), strict=True):
        header = json.loads(Path(c["trace"]).read_text().splitlines()[0])
        assert header["engine_version"] == v
    html = (out / "index.html").read_text()
    assert "pyspark 3.5.9 · clicks_per_window · hdfs" in html and RELEASE_ROW_HEADER in html
