"""One schema for a matrix finding's minimised input, whatever the engine (no engine runs).

The core (``rollcheck.infra.matrix``) on a toy adapter whose findings are minimised with the
core's bisection, then each engine's finding builder on stand-in recordings: Spark's
``minimise_and_write`` (the re-recordings decided by a fake root cause) and Flink's
``FlinkAdapter.finding`` (the re-runs decided by a fake replay). Every one gives ``minimised``
with the same keys (:data:`~rollcheck.infra.matrix.MINIMISED_KEYS`), which reads back as a
:class:`~rollcheck.infra.matrix.Minimised`; the HTML table says the same words of each; an
adapter that gives another shape is an internal error, not a detail of the finding.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rollcheck.infra.matrix import (
    MINIMISED_KEYS,
    ChildRunner,
    EngineAdapter,
    GenericCell,
    Minimised,
    Recording,
    Replayed,
    attempt,
    bisect_fewest,
    minimised_words,
    render_html,
    run_matrix,
)
from rollcheck.infra.matrix.run import decide_cell
from rollcheck.pyimpl.errors import InternalError
from rollcheck.pyimpl.verdict import Check, Report

ROOT = Path(__file__).resolve().parents[1]


class ToyFinding(EngineAdapter):
    """Every cell loses a row; a finding shows with at least ``needs`` of its 100 records."""

    engine = "toy"

    def __init__(self, needs: int = 13, shape: str = "core"):
        self.needs, self.shape = needs, shape

    def describe(self, cell):
        """No configuration; the column is the failure."""
        return {}, {"kind": cell.column}, {}

    def record(self, cell, context, runner, out):
        """A trace file of one line."""
        trace = out / f"{cell.ident}.jsonl"
        trace.parent.mkdir(parents=True, exist_ok=True)
        trace.write_text("{}\n")
        return Recording(trace)

    def replay(self, cell, recording):
        """A lost row."""
        return Replayed(Report([Check.violated("output-exactly-once", "row 3 lost")]))

    def finding(self, cell, entry, replayed, runner, out):
        """The core's bisection over 100 records, in the core's schema (or another ``shape``)."""
        if self.shape == "old":  # what the Flink adapter gave before the core's schema
            return {"reproducer": None, "shrink": {"records": 13, "from": 100}}
        if self.shape == "bad":
            return {"reproducer": None, "minimised": {"batches": 1, "rows": 1}}
        best, tries = bisect_fewest(100, lambda n: (n >= self.needs, attempt(n, n >= self.needs)), 8)
        script = out / f"{cell.ident}.repro.py"
        script.write_text("print('LOST row: 3')\n")
        return {"reproducer": str(script), "minimised": Minimised(
            check=replayed.report.root_cause.name, unit="records", kept=best, of=100, fail_at={"record": best // 2},
            runs=len(tries), tries=tuple(tries)).to_json()}


def _schema(m: dict) -> Minimised:
    assert tuple(m) == MINIMISED_KEYS, m
    got = Minimised.from_json(m)
    assert got.to_json() == m
    assert all({"input", "sources_dropped", "shows"} <= set(t) for t in m["tries"]), m["tries"]
    assert m["runs"] == len(m["tries"]) and m["input"]["kept"] <= m["input"]["of"]
    return got


def test_the_core_keeps_the_adapters_minimised_in_one_schema(tmp_path: Path) -> None:
    """A toy adapter's bisection reaches matrix.json and the HTML table in the core's schema."""
    doc = run_matrix(ToyFinding(), [GenericCell("m.py", "r", "task")], tmp_path / "m")
    (cell,) = json.loads((tmp_path / "m" / "matrix.json").read_text())["cells"]
    assert doc["verdict"] == "not-conformant" and "shrink" not in cell
    m = _schema(cell["minimised"])
    assert (m.kept, m.of, m.unit, m.check, m.fail_at) == (13, 100, "records", "output-exactly-once", {"record": 6})
    assert [t["input"] for t in cell["minimised"]["tries"]] == [50, 25, 12, 18, 15, 13]
    assert "13 of 100 records, 6 re-runs" in (tmp_path / "m" / "index.html").read_text()


@pytest.mark.parametrize("shape", ["old", "bad"])
def test_an_adapter_with_another_shape_is_an_internal_error(tmp_path: Path, shape: str) -> None:
    """The engines' former keys (``shrink``, Spark's flat ``minimised``) are refused by the core."""
    with pytest.raises(InternalError, match="minimised"):
        decide_cell(ToyFinding(shape=shape), GenericCell("m.py", "r", "task"), None, ChildRunner(), tmp_path)


def _spark_finding(tmp_path: Path) -> dict:
    """Spark's finding builder on a stand-in for the recordings: the failing batch must hold id 9."""
    from rollcheck.spark_replay.matrix.plan import Cell, MatrixOptions
    from rollcheck.spark_replay.matrix.reproducer import minimise_and_write

    mod = tmp_path / "q.py"
    mod.write_text("SCHEMA = 'id INT'\nOUTPUT_MODE = 'append'\nKEY = ['id']\n\n\n"
                   "def batches(seed):\n    return [[(4 * b + i,) for i in range(4)] for b in range(5)]\n\n\n"
                   "def query(df):\n    return df\n")
    checks = tmp_path / "c.json"
    checks.write_text(json.dumps({"root_cause": "output-exactly-once"}))
    fails: dict[str, bool] = {}

    def run(argv: list[str], timeout: float, log: Path) -> tuple[int | None, str]:
        ns: dict = {}
        exec(Path(argv[argv.index("--module") + 1]).read_text(), ns)
        rows, k = ns["batches"](0), int(argv[argv.index("--fail-at-batch") + 1])
        trace = argv[argv.index("--out") + 1]
        Path(trace).write_text("")
        fails[trace] = (9,) in rows[k]
        return 1, ""

    def argv_for(module: str, trace: Path, fail_at: int) -> list[str]:
        return ["rec", "--module", module, "--out", str(trace), "--fail-at-batch", str(fail_at)]

    opts = MatrixOptions([str(mod)], fail_at_batch=2, out=tmp_path / "s", run_reproducer=False)
    return minimise_and_write(Cell(str(mod), "hdfs", "kill", "commit"), opts,
                              {"checks": str(checks), "reason": "finding: lost"}, run, argv_for,
                              lambda t: "output-exactly-once" if fails[str(t)] else None)


def _flink_finding(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict:
    """Flink's finding builder on a stand-in for the re-runs: the finding shows with >= 37 records."""
    import rollcheck.flink_replay.matrix as fm

    def fake_record(trace: Path, cfg) -> dict:
        trace.write_text(json.dumps({"max_records": dict(cfg)["max_records"]}) + "\n")
        return {}

    def fake_report(trace: Path, module: str) -> Report:
        n = json.loads(Path(trace).read_text())["max_records"]
        return Report([Check.violated("output-exactly-once", "lost") if n >= 37 else Check.held("x", "ok", examined=1)])

    monkeypatch.setattr(fm, "record_job", fake_record)
    monkeypatch.setattr(fm, "_report", fake_report)
    monkeypatch.setattr("rollcheck.flink_replay.reproducer.expected_of", lambda trace, violated: None)
    cell = fm.Cell(str(ROOT / "tests" / "data" / "flink_jobs" / "volatile_totals.py"), "hashmap", "aligned", "task",
                   None)
    rep = Report([Check.violated("output-exactly-once", "KEY x: final row 3, the failure-free run ends with 5")])
    adapter = fm.FlinkAdapter(records=400, shrink_runs=6)
    out = tmp_path / "f"
    out.mkdir()
    return adapter.finding(cell, {"verdict": "not-conformant"},
                           Replayed(rep, {"config": {"records": 400, "fail_at_record": 200}}), ChildRunner(), out)


def test_both_engines_finding_builders_give_the_one_schema(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Spark's and Flink's finding builders, on stand-ins, fill the same keys; the table says both."""
    spark, flink = _spark_finding(tmp_path), _flink_finding(tmp_path, monkeypatch)
    assert "shrink" not in spark and "shrink" not in flink
    s, f = _schema(spark["minimised"]), _schema(flink["minimised"])
    assert (s.unit, s.kept, s.of, s.batches, s.fail_at, s.runs) == ("rows", 1, 20, (1, 5), {"batch": 0}, 5)
    assert (f.unit, f.kept, f.of, f.batches, f.runs) == ("records", 37, 400, None, 6)
    assert f.fail_at == {"record": 18} and "FAIL_AT, SEED, RATE = 18," in Path(flink["reproducer"]).read_text()
    assert f"RECORDS = {f.kept}" in Path(flink["reproducer"]).read_text()
    assert s.check == f.check == "output-exactly-once"
    assert s.trace is not None and f.trace is not None and f.trace.endswith(".shrink-37.jsonl")
    assert minimised_words(spark["minimised"]) == "1 of 20 rows, 1 of 5 batches, 5 re-runs"
    assert minimised_words(flink["minimised"]) == "37 of 400 records, 6 re-runs"
    entries = [{"row": "r", "column": c, "verdict": "not-conformant", "reason": "finding", "reproducer": "x.py",
                "minimised": m} for c, m in (("spark", spark["minimised"]), ("flink", flink["minimised"]))]
    page = render_html(entries, [GenericCell("m", "r", "spark"), GenericCell("m", "r", "flink")], tmp_path, done=True,
                       title="t", row_header="r")
    assert "1 of 20 rows, 1 of 5 batches" in page and "37 of 400 records" in page
