"""A Flink finding that is wrong with or without the failure gets a reproducer that shows it.

``release-differential`` and ``batch-equivalent`` judge Flink's failure-free run itself; the
script carries the expected final table (:func:`rollcheck.flink_replay.reproducer.expected_of`)
and compares the failure-free run with it. Fast tests: the expected table from constructed traces,
and the generated script's ``main`` with its ``run`` replaced by a stand-in that writes committed
rows (pyflink is not needed).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from rollcheck.flink_replay.matrix import Cell
from rollcheck.flink_replay.reproducer import SHOWS, expected_of, write_reproducer
from rollcheck.pyimpl.verdict import Check, Report

US = "\x1f"


def _trace(tmp: Path, events: list[dict[str, Any]]) -> Path:
    path = tmp / "t.jsonl"
    events = [{**e, "seq": i} for i, e in enumerate(events, 1)]  # the trace reader wants seq 1, 2, ...
    header = {"format": "rollcheck.trace/1", "key": [0]}  # a user's job's trace: its KEY's positions
    path.write_text("\n".join(json.dumps(x) for x in [header, *events]) + "\n",
                    encoding="utf-8")
    return path


REL = {"seq": 7, "kind": "flink.release_reference", "engine_version": "2.3.0", "final_state": "FINISHED",
       "lines": [US.join(["1", '["a"]', '["a", 1]']), US.join(["2", '["a"]', '["a", 3]']),
                 US.join(["1", '["b"]', '["b", 5]'])]}
BATCH = {"seq": 6, "kind": "flink.batch_output", "final_state": "FINISHED",
         "subtasks": [[US.join(['["a"]', '["a", 3]'])], [US.join(['["b"]', '["b", 4]'])]]}


def test_release_differential_expects_the_reference_releases_final_rows(tmp_path: Path) -> None:
    got = expected_of(_trace(tmp_path, [BATCH, REL]), {"release-differential", "batch-equivalent"})
    assert got == {"from": "the failure-free run on apache-flink 2.3.0", "key": [0], "columns": None,
                   "rows": [["a", 3], ["b", 5]]}


def test_batch_equivalent_expects_the_batch_run_unless_a_key_is_split(tmp_path: Path) -> None:
    got = expected_of(_trace(tmp_path, [BATCH]), {"batch-equivalent"})
    assert got == {"from": "the same job in Flink's BATCH mode", "key": [0], "columns": None,
                   "rows": [["a", 3], ["b", 4]]}
    split = dict(BATCH, subtasks=[[US.join(['["a"]', '["a", 1]'])], [US.join(['["a"]', '["a", 3]'])]])
    assert expected_of(_trace(tmp_path, [split]), {"batch-equivalent"}) is None
    assert expected_of(_trace(tmp_path, [BATCH, REL]), {"output-exactly-once"}) is None
    assert expected_of(None, {"batch-equivalent"}) is None


def _script(tmp: Path, expected: dict[str, Any] | None) -> dict[str, Any]:
    job = tmp / "job.py"  # no pyflink import at the top: the stand-in run needs none
    job.write_text("KEY = [0]\n\n\ndef records(seed):\n    return [('a', 1), ('b', 5)]\n\n\n"
                   "def job(env, source):\n    return source\n")
    cell = Cell(str(job), "hashmap", "aligned", "task", None)
    rep = Report([Check.violated("release-differential", "differ")])
    path = write_reproducer(cell, {"interval_ms": 300, "parallelism": 2, "fail_at_record": 10}, tmp / "r.py", rep,
                            records=None, expected=expected)
    ns: dict[str, Any] = {"__name__": "not_main"}
    exec(compile(path.read_text(), str(path), "exec"), ns)
    return ns


def _fake_run(ref_rows: dict[str, list[Any]], fail_ref: bool = False):
    def run(ns: Any, recs: Any, out: str, par: int, fail: bool, restore: Any = None, restarts: bool = True) -> None:
        if fail_ref and not fail:
            raise RuntimeError("java.lang.IllegalStateException: boom\nat ...")
        os.makedirs(os.path.join(out, "tx"), exist_ok=True)
        with open(os.path.join(out, "tx", "part-0"), "w") as f:
            for k, rows in ref_rows.items():
                for n, row in enumerate(rows, 1):
                    f.write(json.dumps([n, [k], row]) + "\n")
    return run


@pytest.mark.parametrize("rows, fail_ref, exit_, lines", [
    ({"a": [["a", 1], ["a", 3]], "b": [["b", 5]]}, False, 0, []),
    ({"a": [["a", 1], ["a", 2]], "b": [["b", 5]]}, False, 1, ['KEY ["a"]: final row ["a", 2] in the failure-free run; '
                                                           'the failure-free run on apache-flink 2.3.0 gives ["a", 3]']),
    ({"a": [["a", 3]]}, False, 1, ['KEY ["b"]: final row missing in the failure-free run; the failure-free run on '
                                   'apache-flink 2.3.0 gives ["b", 5]']),
    ({"a": [["a", 3]], "b": [["b", 5]]}, True, 1,
     ["JOB FAILED in the failure-free run: java.lang.IllegalStateException: boom"]),
])
def test_the_script_compares_the_failure_free_run_with_the_expected_table(
        rows: dict[str, list[Any]], fail_ref: bool, exit_: int, lines: list[str], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    ns = _script(tmp_path, {"from": "the failure-free run on apache-flink 2.3.0", "key": [0], "columns": None,
                            "rows": [["a", 1], ["a", 3], ["b", 5]]})  # the last row of a KEY counts
    ns["run"] = _fake_run(rows, fail_ref)
    monkeypatch.setattr(sys, "argv", ["r.py"])
    assert ns["main"]() == exit_
    shown = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith(SHOWS)]
    if fail_ref:  # and every KEY is then missing from the failure-free run
        assert shown[0] == lines[0] and any(x.startswith('KEY ["b"]: final row missing in the failure-free run') for x in shown)
    else:
        assert shown == lines


def test_without_an_expected_table_only_the_two_runs_are_compared(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    ns = _script(tmp_path, None)
    assert ns["EXPECTED"] is None
    ns["run"] = _fake_run({"a": [["a", 1], ["a", 2]]})
    monkeypatch.setattr(sys, "argv", ["r.py"])
    assert ns["main"]() == 0
    assert "not reproduced" in capsys.readouterr().out
