"""A Spark finding that is wrong with or without the failure gets a reproducer that shows it.

``release-differential`` and ``batch-equivalent`` judge Spark's failure-free run itself, so a
reproducer that only compares the run with the failure against the failure-free run shows
nothing for them. The reproducer carries the expected final table
(:func:`rollcheck.spark_replay.matrix.reproducer.expected_table`) and compares the failure-free run with it,
per KEY. Fast tests: the expected table from constructed traces; the generated script's comparison
run on its own (the script is executed without its ``main``, pyspark is not needed).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rollcheck.spark_replay.matrix.reproducer import SHOWS, expected_table, reproducer_source

QUERY = '''SCHEMA = "ts TIMESTAMP, user STRING, amount INT"
OUTPUT_MODE = "update"
KEY = ("user",)


def batches(seed):
    return []


def query(df):
    return df.groupBy("user").sum("amount")
'''


def _trace(tmp: Path, mode: str, events: list[dict[str, Any]]) -> Path:
    header = {"format": "rollcheck.trace/1", "engine": "spark", "engine_version": "3.5.3",
              "config": {"key": ["user"], "output_mode": mode}}
    path = tmp / "t.jsonl"
    events = [{**e, "seq": i} for i, e in enumerate(events, 1)]  # the trace reader wants seq 1, 2, ...
    path.write_text("\n".join(json.dumps(x) for x in [header, *events]) + "\n", encoding="utf-8")
    return path


REF_R = {"seq": 9, "kind": "spark.release_reference", "engine_version": "3.5.4",
         "output": [{"user": "ann", "total": 7}, {"user": "bob", "total": 3}]}
BATCH = {"seq": 8, "kind": "spark.batch_evaluation", "run": "reference", "applicable": True, "late": [],
         "fields": [{"name": "user"}, {"name": "total"}],
         "variants": [{"rows": [{"user": "ann", "total": 7}, {"user": "bob", "total": 4}]}]}


def test_release_differential_expects_the_reference_releases_run(tmp_path: Path) -> None:
    got = expected_table(_trace(tmp_path, "append", [BATCH, REF_R]), {"release-differential"})
    assert got is not None and got["from"] == "the failure-free run on pyspark 3.5.4"
    assert got["rows"] == [["ann", 7], ["bob", 3]] and got["key"] == [0] and got["columns"] == ["user", "total"]


def test_batch_equivalent_expects_the_batch_job_in_update_mode_only(tmp_path: Path) -> None:
    got = expected_table(_trace(tmp_path, "update", [BATCH]), {"batch-equivalent"})
    assert got is not None and got["rows"] == [["ann", 7], ["bob", 4]]
    assert "batch job" in got["from"]
    # append: the batch job gives rows the stream may rightly not have emitted yet
    assert expected_table(_trace(tmp_path, "append", [BATCH]), {"batch-equivalent"}) is None
    # late rows: several evaluations, no one expected table
    late = dict(BATCH, late=[[0, 1]], variants=BATCH["variants"] * 2)
    assert expected_table(_trace(tmp_path, "update", [late]), {"batch-equivalent"}) is None


def test_a_finding_of_the_failure_compares_the_two_runs_only(tmp_path: Path) -> None:
    assert expected_table(_trace(tmp_path, "update", [BATCH, REF_R]), {"output-exactly-once"}) is None


def _script(expected: dict[str, Any] | None) -> dict[str, Any]:
    text = reproducer_source(QUERY, [[]], failure="task", kill_point=None, fail_at=0, state_store="hdfs",
                             title="t", reason="r", expected=expected)
    ns: dict[str, Any] = {"__name__": "not_main"}
    exec(compile(text, "reproducer.py", "exec"), ns)  # defines the functions; main() does not run
    return ns


EXPECTED = {"from": "the failure-free run on pyspark 3.5.4", "key": [0], "columns": ["user", "total", "last"],
            "rows": [["ann", 7, "2024-01-01T00:00:05.000000"], ["bob", 3, "2024-01-01T00:00:09.000000"]]}


def test_the_reproducer_prints_every_wrong_missing_and_extra_key(capsys: pytest.CaptureFixture[str]) -> None:
    ns = _script(EXPECTED)
    assert ns["EXPECTED"] == EXPECTED
    same = [{"user": "bob", "total": 3.0, "last": "2024-01-01 00:00:09"},  # other notations, same values
            {"user": "ann", "total": 7, "last": "2024-01-01T00:00:05Z"}]
    assert ns["compare_expected"](same) == 0
    capsys.readouterr()
    assert ns["compare_expected"]([{"user": "ann", "total": 6, "last": "2024-01-01 00:00:05"},
                                   {"user": "cid", "total": 1, "last": "2024-01-01 00:00:09"}]) == 3
    out = capsys.readouterr().out.splitlines()
    shown = [ln for ln in out if ln.startswith(SHOWS)]
    assert [ln.split(" row")[0] for ln in shown] == ["WRONG", "MISSING", "EXTRA"]
    assert '"total": 6' in shown[0] and '"total": 7' in shown[0] and "pyspark 3.5.4" in shown[0]
    assert out[-1].startswith("3 KEY(s) of the failure-free run differ from the failure-free run on pyspark 3.5.4")


def test_without_an_expected_table_the_script_is_as_before() -> None:
    ns = _script(None)
    assert ns["EXPECTED"] is None
    text = reproducer_source(QUERY, [[]], failure="task", kill_point=None, fail_at=0, state_store="hdfs",
                             title="t", reason="r")
    assert "nowhere: the finding shows in the run with the failure" in text
