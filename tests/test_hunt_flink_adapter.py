"""The Flink hunt's adapter on a real PyFlink: one generated program planned, then recorded under a
drawn task failure through the matrix's Flink adapter, and judged (about 2 min under load).

The engine-free parts (the mapping of a matrix entry to an outcome, the differentials, the
newest releases of a version list) are checked without Flink.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rollcheck.flink_replay.hunt.adapter import FlinkHuntAdapter, newest_releases
from rollcheck.flink_replay.hunt.cells import differential, outcome_of_entry, reference_table
from rollcheck.infra.hunt.adapter import HuntCell, Program


def test_a_matrix_entry_becomes_an_outcome() -> None:
    entry = {"verdict": "not-conformant", "expected_by_engine": False, "attributed_to": "engine",
             "reason": "output-exactly-once: lost; java.lang.IllegalStateException: x", "seconds": 3.0,
             "check_statuses": [{"name": "output-exactly-once", "status": "violated"},
                                {"name": "release-differential", "status": "not-applicable"}]}
    out = outcome_of_entry(entry)
    assert (out.verdict, out.attributed_to, out.exception) == ("violated", "engine", "java.lang.IllegalStateException")
    assert out.checks == {"output-exactly-once": "violated", "release-differential": "not_applicable"}
    assert outcome_of_entry(dict(entry, expected_by_engine=True)).attributed_to == "user"
    assert outcome_of_entry({"verdict": "inconclusive", "reason": "inconclusive: no"}).verdict == "inconclusive"


def test_differentials_compare_final_tables() -> None:
    same = differential("partitioning-differential", {"parallelism 1": {"a": [1]}, "parallelism 2": {"a": [1]}})
    assert same.verdict == "conformant" and same.checks == {"partitioning-differential": "held"}
    lost = differential("partitioning-differential", {"parallelism 1": {"a": [1], "b": [2]}, "parallelism 2": {"a": [1]}})
    assert lost.verdict == "violated" and "KEY b" in lost.detail and lost.attributed_to == "engine"
    assert differential("provider-differential", {"hashmap": {}, "rocksdb": {}}).verdict == "inconclusive"


def test_newest_releases_of_a_line_and_overall() -> None:
    assert newest_releases(["1.20.1", "1.20.3", "2.3.0", "2.2.0"], "1.20.1") == ["1.20.3", "2.3.0"]
    assert newest_releases(["2.3.0"], "2.3.0") == ["2.3.0"]
    assert newest_releases(["x"], None) == []


def _small_windowed_program(adapter: FlinkHuntAdapter) -> Program:
    for i in range(400):  # the first one-source DataStream program with a window and keyed state
        p = adapter.generate(21, i, {})
        s = p.spec
        if (s["form"] == "ds" and len(s["sources"]) == 1 and s["terminal"] and s["sources"][0]["rows"] <= 120
                and any(st["kind"] == "window" for st in s["stages"])):
            return p
    raise AssertionError("no such program in 400 draws")


@pytest.mark.slow
def test_a_generated_program_planned_and_recorded_under_a_task_failure(tmp_path: Path) -> None:
    from rollcheck.flink_replay.environment import find_flink
    from rollcheck.pyimpl.errors import InconclusiveError

    try:
        find_flink()
    except InconclusiveError as e:
        pytest.skip(f"no PyFlink environment: {e}")
    adapter = FlinkHuntAdapter(failures=["task"], backends=["hashmap"], checkpoints=["aligned"], seed=0)
    program = _small_windowed_program(adapter)
    module = tmp_path / f"{program.id}.py"
    module.write_text(program.text)
    cells = adapter.cells(program, 21)
    wanted = [cells[0], cells[1]]  # plan, then the drawn task failure on hashmap
    assert wanted[0].key == "plan" and wanted[1].key.startswith("hashmap/aligned/task@")
    try:
        got = {c.key: o for c, o in adapter.run(program, module, wanted, tmp_path / "cells")}
    finally:
        adapter.close()
    plan, fault = got[wanted[0].key], got[wanted[1].key]
    assert plan.verdict == "conformant" and plan.checks == {"planned": "held"}, plan
    assert fault.verdict == "conformant", fault
    assert fault.checks["output-exactly-once"] == "held"
    assert fault.checks["batch-equivalent"] == "held"
    table = reference_table(fault.trace)
    assert table, "the failure-free run's final table"
    diff = differential("provider-differential", {"hashmap": table, "again": dict(table)})
    assert diff.verdict == "conformant"
    repro = adapter.reproducer(program, HuntCell("diff:providers", {"kind": "diff", "check": "provider-differential",
                                                                     "compare": {"hashmap": {}, "rocksdb": {}}}),
                               diff, tmp_path / "F1.reproducer.py")
    compile(repro.read_text(), str(repro), "exec")
    assert "import rollcheck" not in repro.read_text()
