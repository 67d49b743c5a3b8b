"""The Spark hunt adapter: its fault schedules, its cells, its differentials and outcomes.

Fast tests use the bug zoo's SPARK-47840 module as a program and two real failure-free recordings
of it (pyspark 3.5.1, affected; 3.5.2, fixed: ``tests/data/spark``). The ``spark`` tests run real
programs through the adapter.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

from rollcheck.infra.hunt.adapter import HuntCell, Program
from rollcheck.spark_replay.hunt.adapter import (
    FAULT,
    FREE,
    PARTITIONS,
    PROVIDERS_DIFF,
    SparkHuntAdapter,
)
from rollcheck.spark_replay.hunt.faults import BatchShape, FaultSchedule, draw_schedules
from rollcheck.spark_replay.hunt.oracles import partitioning_differential, provider_differential
from rollcheck.spark_replay.hunt.outcomes import outcome_of_entry, outcome_of_free, refusal
from rollcheck.spark_replay.matrix.plan import plan_cells

ROOT = Path(__file__).resolve().parent.parent
ZOO = ROOT / "benchmarks" / "engine_bugs" / "modules" / "spark_47840_union_literal_key.py"
DATA = Path(__file__).parent / "data" / "spark"
AFFECTED = DATA / "spark-47840-complete-3.5.1.jsonl"
FIXED = DATA / "spark-47840-complete-3.5.2.jsonl"
ALL = ["task", "sink", "kill", "retry", "twice", "during-recovery"]


def _program(text: str | None = None, ops: tuple[str, ...] = ()) -> Program:
    return Program(id="P0003", text=text if text is not None else ZOO.read_text(), operators=ops, spec={})


def test_cells_failure_free_first_then_drawn_faults_then_differentials(tmp_path: Path) -> None:
    a = SparkHuntAdapter(failures=["task", "kill"], providers=["hdfs", "rocksdb"], seed=5, out=tmp_path)
    cells = a.cells(_program(), 5)
    kinds = [c.params["kind"] for c in cells]
    assert kinds[:2] == [FREE, FREE] and kinds[-2:] == [PROVIDERS_DIFF, PARTITIONS]
    assert kinds.count(FAULT) == 1  # one drawn schedule per program by default
    two = SparkHuntAdapter(failures=["task", "kill"], providers=["hdfs"], seed=5, out=tmp_path, faults=2)
    assert [c.params["kind"] for c in two.cells(_program(), 5)].count(FAULT) == 2
    assert [c.key for c in cells] == [c.key for c in a.cells(_program(), 5)]  # the same seed, the same cells
    assert len({c.key for c in cells}) == len(cells)
    n = a.shape(_program()).n
    for c in cells:
        if c.params["kind"] == FAULT:
            s = FaultSchedule.from_params(json.loads(json.dumps(c.params)))  # JSON-able, read back
            assert s.failure in ("task", "kill") and 0 <= s.batch < n
            # the cell is a matrix cell: the matrix plans the same column
            planned = plan_cells([str(ZOO)], [s.provider], [s.failure], [s.kill_point] if s.kill_point else [])
            assert s.cell(str(ZOO)).column in {p.column for p in planned}
    a.close()


def test_the_zoo_programs_input_gives_every_anchor() -> None:
    shape = SparkHuntAdapter(out=Path("unused"), seed=0).shape(_program())
    assert shape.n == 6 and shape.idle  # one source idle in some batches (the bug's condition)
    assert set(shape.anchors()) == {"first-data", "last", "after-idle", "partly-idle"}


def test_a_batch_with_one_input_idle_is_an_anchor() -> None:
    """A failure in a batch where one input has rows and another none: the restart replans that
    input as an empty relation (the corner of SPARK-57003, which a restart into it shows)."""
    shape = BatchShape.of([{"a": [1], "b": [2]}, {"a": [3]}, {"b": [4]}, {}], ("a", "b"))
    assert shape.anchors()["partly-idle"] == [1, 2] and 3 not in shape.data
    seen = {(s.anchor, s.batch) for seed in range(40)
            for s in draw_schedules(shape, ["kill"], ["hdfs"], seed=seed, salt="P0001")}
    assert {b for a, b in seen if a == "partly-idle"} == {1, 2}


def test_schedules_reach_every_kind_anchor_and_the_second_failure() -> None:
    shape = BatchShape(n=6, data=(0, 1, 3, 4), idle=(0, 2, 3, 5))
    seen = [s for seed in range(25) for s in draw_schedules(shape, ALL, ["hdfs", "rocksdb"], seed=seed, salt="P0001")]
    assert {s.failure for s in seen} >= {"task", "sink", "kill", "retry"}
    assert {s.failure for s in seen} & {"twice", "during-recovery"}
    assert {s.anchor for s in seen} == {"first-data", "last", "after-idle", "partly-idle"}
    assert {s.provider for s in seen} == {"hdfs", "rocksdb"}
    assert any(s.schedule for s in seen if s.failure == "retry")
    for s in seen:  # every drawn retry schedule can strike at its batch
        if s.failure == "retry" and s.schedule:
            from rollcheck.spark_replay.faults.retry import RetrySchedule

            RetrySchedule.parse(s.schedule).validate(s.batch)


def test_provider_and_partitioning_differentials() -> None:
    assert provider_differential({"hdfs": FIXED, "rocksdb": FIXED}).status.value == "held"
    c = provider_differential({"hdfs": FIXED, "rocksdb": AFFECTED})
    assert c.status.value == "violated" and "rocksdb" in c.detail and "ad-" in c.detail
    assert provider_differential({"hdfs": FIXED, "rocksdb": None}).status.value == "unchecked"
    assert provider_differential({"hdfs": FIXED, "rocksdb": AFFECTED}, ("source", "agg-first")).status.value == \
        "not-applicable"
    assert provider_differential({"a": FIXED, "b": AFFECTED}, (), "df.agg(F.last('x'))").status.value == \
        "not-applicable"
    assert partitioning_differential(FIXED, AFFECTED).status.value == "violated"
    assert partitioning_differential(FIXED, FIXED).status.value == "held"


def test_failure_free_outcome_and_release_differential() -> None:
    from rollcheck.spark_replay.trace import read_trace

    fixed_rows = next(e for e in read_trace(FIXED).events if e["kind"] == "spark.output_final")["rows"]
    good = outcome_of_free(FIXED, {"engine_version": "3.5.2", "output": fixed_rows})
    assert good.verdict == "conformant" and good.checks["release-differential"] == "held"
    assert good.checks["output-exactly-once"] == "not_applicable"  # it is the failure-free run
    bad = outcome_of_free(AFFECTED, {"engine_version": "3.5.2", "output": fixed_rows})
    assert bad.verdict == "violated" and bad.attributed_to == "engine"
    assert {n for n, s in bad.checks.items() if s == "violated"} == \
        {"batch-equivalent", "complete-key-unique", "release-differential"}


def test_matrix_entry_as_outcome() -> None:
    entry = {"verdict": "not-conformant", "attributed_to": None, "expected_by_engine": False, "trace": None,
             "reason": "finding: output-exactly-once", "seconds": 12.5, "cpu_seconds": 3.0,
             "shared": {"engine": "warm"},
             "check_statuses": [{"name": "output-exactly-once", "status": "violated"},
                                {"name": "batch-equivalent", "status": "not-applicable"}]}
    o = outcome_of_entry(entry)
    assert (o.verdict, o.attributed_to, o.seconds, o.shared) == ("violated", "engine", 12.5, {"engine": "warm"})
    assert o.checks == {"output-exactly-once": "violated", "batch-equivalent": "not_applicable"}
    assert outcome_of_entry({**entry, "verdict": "inconclusive", "attributed_to": None}).verdict == "inconclusive"
    assert outcome_of_entry({**entry, "attributed_to": "module"}).attributed_to == "user"


def test_refusals_are_told_from_failures() -> None:
    assert refusal("rollcheck: error: P.py: query: query(df) raised AnalysisException: [UNRESOLVED_COLUMN]") == \
        "rejected"
    assert refusal("rollcheck: error: P.py: query: Spark refused the query: AnalysisException: Append output mode "
                   "not supported when there are streaming aggregations") == "rejected"
    assert refusal("rollcheck: error: P.py: query: the query failed on its own (not an injected failure): "
                   "[STREAM_FAILED] None.get") == "failed"
    assert refusal("rollcheck: inconclusive: timed out") is None


def test_newer_releases_from_the_package_index(monkeypatch: pytest.MonkeyPatch) -> None:
    from rollcheck.spark_replay.hunt import reproduce as hunt_reproduce

    answer = SimpleNamespace(returncode=0, stdout="pyspark (4.1.1)\nAvailable versions: 4.1.1, 4.1.0, 4.0.1, "
                                                  "3.5.8, 3.5.7, 3.5.1, 3.4.4, 2.4.8\n")
    monkeypatch.setattr(hunt_reproduce.subprocess, "run", lambda *a, **k: answer)
    assert hunt_reproduce.newer_releases("3.5.1") == ["3.5.8", "4.1.1"]
    assert hunt_reproduce.newer_releases("4.1.0") == ["4.1.1"]

    def offline(*a: object, **k: object) -> None:
        raise subprocess.TimeoutExpired("pip", 30)

    monkeypatch.setattr(hunt_reproduce.subprocess, "run", offline)
    assert hunt_reproduce.newer_releases("3.5.1") == []


def test_reproducer_of_a_failure_free_finding_is_standalone(tmp_path: Path) -> None:
    from rollcheck.infra.hunt.adapter import CellOutcome

    a = SparkHuntAdapter(out=tmp_path, seed=0)
    o = CellOutcome("violated", {"batch-equivalent": "violated"}, trace=str(AFFECTED), detail="batch-equivalent")
    script = a.reproducer(_program(), HuntCell("hdfs/none", {"kind": FREE, "provider": "hdfs"}), o,
                          tmp_path / "F1.reproducer.py")
    text = script.read_text()
    assert "import rollcheck" not in text and "from rollcheck" not in text
    compile(text, str(script), "exec")
    with pytest.raises(ValueError, match="retry"):
        a.reproducer(_program(), HuntCell("hdfs/retry@b1", {"kind": FAULT, "failure": "retry", "provider": "hdfs",
                                                           "batch": 1}), o, tmp_path / "F2.py")


REJECTED = '''
SCHEMA = "ts TIMESTAMP, k STRING"
OUTPUT_MODE = "append"
KEY = ["k"]

import datetime as dt

def batches(seed):
    return [[(dt.datetime(2024, 1, 1, 0, 0, b), f"k{b % 2}")] for b in range(3)]

def query(df):
    return df.groupBy("k").count()   # append mode, an aggregation without a watermark: Spark refuses it
'''


@pytest.mark.spark
def test_a_program_spark_refuses_is_rejected_in_every_cell(tmp_path: Path) -> None:
    a = SparkHuntAdapter(failures=["task"], providers=["hdfs"], seed=0, out=tmp_path)
    p = _program(REJECTED)
    module = tmp_path / "P0003.py"
    module.write_text(REJECTED)
    try:
        got = list(a.run(p, module, a.cells(p, 0), tmp_path / "work"))
    finally:
        a.close()
    assert got and {o.verdict for _, o in got} == {"rejected"}, [(c.key, o.verdict, o.detail) for c, o in got]
    assert "append" in got[0][1].detail.lower() or "watermark" in got[0][1].detail.lower()
