"""Release-aware matrices: the reproducer run on V and on the reference release R, and Flink's
failure-free run on R shared by a configuration's cells.

Fast: the processes are stand-ins (a fake runner deciding by the interpreter it is given, as the
tests of :mod:`rollcheck.infra.matrix` do), so the shapes are exact: with ``--engine-version``
a finding's ``reproducer_run`` is keyed by release (``{"V": run, "R": run}``) on both adapters, the
single-run shape stays without it, and the tables say "reproduced on V / not on R". The Flink
adapter groups the cells of one job configuration (every failure, every release under test) for
one failure-free run on R, leaves a single-cell configuration and the word count alone, and hands
the run to every cell's recording.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from rollcheck.flink_replay import matrix as fm
from rollcheck.flink_replay.releases import PINNED
from rollcheck.infra.matrix import Minimised, Recording, Replayed, reproduced_words, terminal_table
from rollcheck.infra.matrix.cells import GenericCell
from rollcheck.infra.matrix.html import render_html
from rollcheck.pyimpl.verdict import Check, Report

ROOT = Path(__file__).resolve().parents[1]
JOB = str(ROOT / "examples" / "flink_jobs" / "keyed_totals.py")


class FakeRunner:
    """Shows the finding only with the interpreter of ``shows_on``."""

    def __init__(self, shows_on: str):
        self.shows_on = shows_on
        self.argvs: list[list[str]] = []

    def run(self, argv: list[str], timeout: float, log: Path) -> tuple[int | None, str]:
        self.argvs.append(argv)
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text("", encoding="utf-8")
        if self.shows_on in argv[0]:
            return 1, 'KEY ["acct-1"]: final row [3], the failure-free run ends with [5]\nLOST row: [1]\n'
        return 0, "no difference\n"


class _Env:
    def __init__(self, version: str | None):
        self.python = Path(f"/py/flink-{version or 'default'}/bin/python")


def _flink_finding(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, cell: fm.Cell,
                   **kw: Any) -> tuple[dict[str, Any], FakeRunner]:
    import rollcheck.flink_replay.environment as environment

    monkeypatch.setattr(environment, "find_flink", lambda v=None: _Env(v))
    adapter = fm.FlinkAdapter(shrink_runs=0, run_reproducer=True, **kw)
    runner = FakeRunner("flink-2.2.1")
    rep = Report([Check.violated("output-exactly-once", 'KEY ["acct-1"]: final row [3], reference [5]')])
    replayed = Replayed(rep, {"config": {"records": 600, "fail_at_record": 300}})
    return adapter.finding(cell, {}, replayed, runner, tmp_path), runner  # type: ignore[arg-type]


def test_flink_reproducer_runs_on_v_and_on_r(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    cell = fm.Cell(JOB, "hashmap", "aligned", "task", None, "2.2.1")
    got, runner = _flink_finding(monkeypatch, tmp_path, cell)
    run = got["reproducer_run"]
    assert list(run) == ["2.2.1", PINNED]
    assert run["2.2.1"]["reproduced"] is True and run[PINNED]["reproduced"] is False
    assert [a[0] for a in runner.argvs] == ["/py/flink-2.2.1/bin/python", f"/py/flink-{PINNED}/bin/python"]
    assert all(a[1:] == ["-I", got["reproducer"]] for a in runner.argvs)
    assert reproduced_words(run) == f"reproduced on 2.2.1 / not on {PINNED}"
    got, _ = _flink_finding(monkeypatch, tmp_path, cell, reference_version="1.20.5")
    assert list(got["reproducer_run"]) == ["2.2.1", "1.20.5"]


def test_flink_reproducer_keeps_the_single_run_without_engine_version(monkeypatch: pytest.MonkeyPatch,
                                                                      tmp_path: Path) -> None:
    got, runner = _flink_finding(monkeypatch, tmp_path, fm.Cell(JOB, "hashmap", "aligned", "task", None))
    run = got["reproducer_run"]
    assert set(run) == {"exit", "seconds", "shows", "reproduced"} and run["reproduced"] is False
    assert [a[0] for a in runner.argvs] == ["/py/flink-default/bin/python"]


def test_spark_reproducer_runs_on_v_and_on_r(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import rollcheck.spark_replay.matrix.reproducer as sr
    import rollcheck.spark_replay.matrix.run as sm
    from rollcheck.spark_replay.matrix.plan import Cell, MatrixOptions

    monkeypatch.setattr(sr, "reproducer_python", lambda v=None: Path(f"/py/pyspark-{v}/bin/python"))
    seen: list[Any] = []

    def fake_minimise(cell: Any, opts: Any, result: Any, run: Any, argv_for: Any, root_cause: Any) -> dict[str, Any]:
        seen.append(opts.run_reproducer)
        script = tmp_path / "r.reproducer.py"
        script.write_text("", encoding="utf-8")
        return {"reproducer": str(script), "minimised": Minimised(None, "rows", 1, 1, batches=(1, 1)).to_json()}

    monkeypatch.setattr(sr, "minimise_and_write", fake_minimise)
    opts = MatrixOptions(modules=["q.py"], out=tmp_path, engine_versions=["3.5.3"], reference_version="3.5.9")
    cell = Cell("q.py", "hdfs", "task", None, "3.5.3")
    adapter = sm.SparkAdapter(opts, [cell])
    runner = FakeRunner("pyspark-3.5.3")
    got = adapter.finding(cell, {}, Replayed(Report([])), runner, tmp_path)  # type: ignore[arg-type]
    assert seen == [False]  # the single run is not made: the two below replace it
    assert list(got["reproducer_run"]) == ["3.5.3", "3.5.9"]
    assert got["reproducer_run"]["3.5.3"]["reproduced"] and not got["reproducer_run"]["3.5.9"]["reproduced"]
    assert runner.argvs[0][:3] == ["/py/pyspark-3.5.3/bin/python", "-I", got["reproducer"]]
    assert runner.argvs[1][0] == "/py/pyspark-3.5.9/bin/python"


def test_tables_say_where_it_reproduced(tmp_path: Path) -> None:
    entry = {"engine": "flink", "module": "j", "row": "apache-flink 2.2.1 | j", "column": "task",
             "verdict": "not-conformant", "attributed_to": "engine", "reason": "finding: release-differential",
             "reproducer": str(tmp_path / "r.py"),
             "reproducer_run": {"2.2.1": {"reproduced": True, "seconds": 20.0},
                                "2.3.0": {"reproduced": False, "seconds": 21.5}}}
    planned = [GenericCell("j", "apache-flink 2.2.1 | j", "task")]
    page = render_html([entry], planned, tmp_path, done=True, title="flink matrix", row_header="release | job")
    assert "reproduced on 2.2.1 / not on 2.3.0 in 41.5 s" in page
    from rich.console import Console

    console = Console(record=True, width=200)
    console.print(terminal_table([entry], planned, {}, title="flink matrix", row_header="release | job"))
    assert "reproducer: reproduced on 2.2.1 / not on 2.3.0" in console.export_text()
    single = {**entry, "reproducer_run": {"exit": 1, "seconds": 3.0, "shows": ["KEY x"], "reproduced": True}}
    assert "shows it in 3.0 s" in render_html([single], planned, tmp_path, done=True, title="t", row_header="r")


def test_flink_matrix_shares_the_run_on_r_per_configuration(monkeypatch: pytest.MonkeyPatch,
                                                            tmp_path: Path) -> None:
    """Two failures x two releases under test of one job configuration: one run on R for the four
    cells (R's run depends on neither); the word count and the reference release's own row: none."""
    planned = fm.cells([JOB, "wordcount"], ["hashmap"], ["aligned"], ["task", "twice"], [None],
                       ["2.2.1", "1.20.5", PINNED])
    adapter = fm.FlinkAdapter()
    adapter.plan(planned)
    groups = {c.ident: adapter.group(c) for c in planned}
    job = [c for c in planned if c.module == JOB and c.engine_version != PINNED]
    assert len(job) == 4 and len({groups[c.ident] for c in job}) == 1 and groups[job[0].ident] is not None
    assert all(groups[c.ident] is None for c in planned if c.module == "wordcount" or c.engine_version == PINNED)
    assert adapter.describe(job[0])[0]["reference_version"] == PINNED
    assert "release-differential against 2.3.0" in adapter.caption() and adapter.meta()["reference_version"] == PINNED
    alone = fm.FlinkAdapter()
    alone.plan(planned[:1])
    assert alone.group(planned[0]) is None  # a single cell runs R's run inside its own recording

    made: list[dict[str, Any]] = []

    def fake_reference(cfg: dict[str, Any], run: Path) -> dict[str, Any]:
        made.append(cfg)
        return {"kind": "flink.release_reference", "engine_version": cfg["reference_version"],
                "final_state": "FINISHED", "lines": []}

    monkeypatch.setattr(fm, "release_reference", fake_reference)
    prep = adapter.prepare(str(groups[job[0].ident]), job, None, tmp_path)  # type: ignore[arg-type]
    assert len(made) == 1 and made[0]["reference_version"] == PINNED and prep.context["engine_version"] == PINNED
    handed: list[Any] = []

    def fake_record(trace: Path, cfg: Any, shared: Any = None) -> dict[str, Any]:
        handed.append(shared)
        raise fm.InconclusiveError("stand-in")

    monkeypatch.setattr(fm, "record_job", fake_record)
    rec = adapter.record(job[1], prep.context, None, tmp_path)  # type: ignore[arg-type]
    assert isinstance(rec, Recording) and handed == [prep.context]
