"""One shape of expected table for both engines' findings (``rollcheck.infra.matrix.finding.ExpectedTable``).

Both builders (Spark's ``expected_table``, Flink's ``expected_of``) give it, both writers refuse
another one, and both reproducer templates compare their failure-free run with the same table.
Fast: constructed traces, the generated scripts' comparisons run without pyspark or pyflink.
"""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from rollcheck.flink_replay.matrix import Cell
from rollcheck.flink_replay.reproducer import SHOWS as FLINK_SHOWS
from rollcheck.flink_replay.reproducer import expected_of, write_reproducer
from rollcheck.infra.matrix.finding import EXPECTED_KEYS, ExpectedTable
from rollcheck.pyimpl.verdict import Check, Report
from rollcheck.spark_replay.matrix.reproducer import SHOWS as SPARK_SHOWS
from rollcheck.spark_replay.matrix.reproducer import expected_table, reproducer_source

US = "\x1f"
#: One table, as both engines' reproducers carry it: KEY the first column.
TABLE = ExpectedTable.named("the reference release", ["user"], [{"user": "ann", "total": 7},
                                                                {"user": "bob", "total": 3}])


def _trace(tmp: Path, header: dict[str, Any], events: list[dict[str, Any]]) -> Path:
    path = tmp / "t.jsonl"
    events = [{**e, "seq": i} for i, e in enumerate(events, 1)]
    path.write_text("\n".join(json.dumps(x) for x in [header, *events]) + "\n", encoding="utf-8")
    return path


def test_both_builders_give_the_one_shape(tmp_path: Path) -> None:
    spark = expected_table(_trace(tmp_path, {"format": "rollcheck.trace/1", "config": {"key": ["user"]}}, [
        {"kind": "spark.release_reference", "engine_version": "3.5.4",
         "output": [{"user": "ann", "total": 7}, {"user": "bob", "total": 3}]}]), {"release-differential"})
    flink = expected_of(_trace(tmp_path, {"format": "rollcheck.trace/1", "key": [0]}, [
        {"kind": "flink.release_reference", "engine_version": "2.3.0", "final_state": "FINISHED",
         "lines": [US.join(["1", '["ann"]', '["ann", 7]']), US.join(["1", '["bob"]', '["bob", 3]'])]}]),
        {"release-differential"})
    assert spark is not None and flink is not None
    for doc in (spark, flink):
        assert tuple(doc) == EXPECTED_KEYS and ExpectedTable.from_json(doc).to_json() == doc
        assert doc["key"] == [0] and doc["rows"] == [["ann", 7], ["bob", 3]]
    assert spark["columns"] == ["user", "total"] and flink["columns"] is None


@pytest.mark.parametrize("bad", [
    {"from": "x", "table": {'["a"]': '["a", 3]'}},  # Flink's former shape
    {"from": "x", "key": ["user"], "columns": None, "rows": [{"user": "a"}]},  # Spark's former shape
    {"from": "x", "key": [2], "columns": ["a", "b"], "rows": []},
    {"from": "x", "key": [0], "columns": ["a", "b"], "rows": [["a"]]},
])
def test_another_shape_is_refused(bad: dict[str, Any], tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="expected table"):
        ExpectedTable.from_json(bad)
    with pytest.raises(ValueError, match="expected table"):
        reproducer_source("X = 1\n", [[]], failure="task", kill_point=None, fail_at=0, state_store="hdfs",
                          title="t", reason="r", expected=bad)
    with pytest.raises(ValueError, match="expected table"):
        _flink_script(tmp_path, bad)


def _flink_script(tmp: Path, expected: dict[str, Any]) -> dict[str, Any]:
    job = tmp / "job.py"
    job.write_text("KEY = [0]\n\n\ndef records(seed):\n    return [('ann', 7)]\n\n\n"
                   "def job(env, source):\n    return source\n")
    path = write_reproducer(Cell(str(job), "hashmap", "aligned", "task", None),
                            {"interval_ms": 300, "parallelism": 1, "fail_at_record": 1}, tmp / "r.py",
                            Report([Check.violated("release-differential", "differ")]), expected=expected)
    ns: dict[str, Any] = {"__name__": "not_main"}
    exec(compile(path.read_text(), str(path), "exec"), ns)
    return ns


def _flink_run(rows: list[list[Any]]):
    def run(ns: Any, recs: Any, out: str, par: int, fail: bool, restore: Any = None, restarts: bool = True) -> None:
        os.makedirs(os.path.join(out, "tx"), exist_ok=True)
        with open(os.path.join(out, "tx", "part-0"), "w") as f:
            f.writelines(json.dumps([1, [r[0]], r]) + "\n" for r in rows)
    return run


@pytest.mark.parametrize("rows, shown", [
    ([["ann", 7], ["bob", 3]], []),
    ([["ann", 6], ["bob", 3]], ["ann"]),
    ([["ann", 7]], ["bob"]),
])
def test_both_templates_compare_with_the_one_table(rows: list[list[Any]], shown: list[str], tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    spark: dict[str, Any] = {"__name__": "not_main"}
    exec(compile(reproducer_source("X = 1\n", [[]], failure="task", kill_point=None, fail_at=0, state_store="hdfs",
                                   title="t", reason="r", expected=TABLE.to_json()), "r.py", "exec"), spark)
    assert spark["compare_expected"]([{"user": u, "total": t} for u, t in rows]) == len(shown)
    out = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith(SPARK_SHOWS)]
    assert [ln.split("KEY ")[1].split(":")[0] for ln in out] == [f'["{u}"]' for u in shown]

    flink = _flink_script(tmp_path, TABLE.to_json())
    flink["run"] = _flink_run(rows)
    monkeypatch.setattr(sys, "argv", ["r.py"])
    assert flink["main"]() == (1 if shown else 0)
    out = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith(FLINK_SHOWS)]
    assert [ln.split(":")[0] for ln in out] == [f'KEY ["{u}"]' for u in shown]


def test_a_double_that_is_not_finite_is_written_so_the_script_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    flink_doc = expected_of(_trace(tmp_path, {"format": "rollcheck.trace/1", "key": [0]}, [
        {"kind": "flink.batch_output", "final_state": "FINISHED", "subtasks": [[US.join(['["ann"]', '["ann", NaN]'])]]}]),
        {"batch-equivalent"})
    assert flink_doc is not None and math.isnan(flink_doc["rows"][0][1])
    ns = _flink_script(tmp_path, flink_doc)
    assert math.isnan(ns["EXPECTED"]["rows"][0][1])
    ns["run"] = _flink_run([["ann", float("nan")]])
    monkeypatch.setattr(sys, "argv", ["r.py"])
    assert ns["main"]() == 0, capsys.readouterr().out


def test_a_query_without_key_expects_one_row(capsys: pytest.CaptureFixture[str]) -> None:
    """A global aggregate (KEY empty): the table is its one (last) row."""
    table = ExpectedTable.named("the batch job", [], [{"n": 3}])
    assert table.to_json() == {"from": "the batch job", "key": [], "columns": ["n"], "rows": [[3]]}
    ns: dict[str, Any] = {"__name__": "not_main"}
    exec(compile(reproducer_source("X = 1\n", [[]], failure="task", kill_point=None, fail_at=0, state_store="hdfs",
                                   title="t", reason="r", expected=table.to_json()), "r.py", "exec"), ns)
    assert ns["compare_expected"]([{"n": 1}, {"n": 3}]) == 0
    capsys.readouterr()
    assert ns["compare_expected"]([{"n": 2}]) == 1
    assert capsys.readouterr().out.startswith("WRONG row of KEY []")
