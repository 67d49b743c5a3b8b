"""The at-least-once envelope of a user's ``foreachBatch`` sink (aggregated output).

A ledger read back as balances cannot show copies in its rows: an at-least-once sink that appends
a re-run batch three times used to be called conformant ("changed values, none beyond the rows
handed again"). The recorder now hands the user's sink the run's batches again in a fresh folder,
once more per re-delivery, and the output must equal one of those tables.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rollcheck.pyimpl.attribution import classify_cell
from rollcheck.pyimpl.verdict import Check, Status
from rollcheck.spark_replay.query.user_sink import envelope_check

ROOT = Path(__file__).resolve().parents[1]
TRIPLE = ROOT / "tests" / "spark_queries" / "ledger_triple.py"
LEDGER = ROOT / "tests" / "queries" / "ledger_balances.py"
APPEND = ROOT / "examples" / "queries" / "foreachbatch_append.py"


def test_outside_the_envelope_is_violated_and_attributed_to_the_module() -> None:
    env = {"tables": [[{"u": "a", "b": 5}], [{"u": "a", "b": 8}]], "extra": [{"batch": 1, "as": 4}]}
    data = {"changed": {'["a"]': 1}, "lost": {}, "extra_copies": {}, "redelivered_after_failure": {'["a"]': 1},
            "handed_within_attempt": {}, "handed_again_without_failure": {}, "sink_guarantee": "at-least-once"}
    c = envelope_check("output-at-least-once", env, [{"u": "a", "b": 14}], 9, data)
    assert c.status is Status.VIOLATED and "outside the at-least-once envelope" in c.detail
    from rollcheck.pyimpl.verdict import Report

    cell = classify_cell(Report([Check.held("commit", "ok", examined=3), c]))
    assert cell["expected_by_engine"] is False and cell["attributed_to"] == "module", cell
    assert envelope_check("output-at-least-once", None, [], 9, data).status is Status.UNCHECKED


@pytest.mark.spark
@pytest.mark.slow
def test_real_spark_triple_append_is_outside_the_envelope(tmp_path: Path) -> None:
    from rollcheck.spark_replay.query.record import QueryConfig, record_query, session_conf
    from rollcheck.spark_replay.replay.conformance import replay_file
    from rollcheck.spark_replay.session import spark_session

    declared = tmp_path / "ledger_declared.py"
    declared.write_text(LEDGER.read_text().replace('KEY = ["user"]\n', 'KEY = ["user"]\nSINK_GUARANTEE = "at-least-once"\n'))
    runs = [("triple", TRIPLE, "sink"), ("triple-task", TRIPLE, "task"), ("ledger", declared, "sink"),
            ("append", APPEND, "sink")]
    reps = {}
    with spark_session(conf=session_conf()) as spark:
        for name, mod, failure in runs:
            trace = tmp_path / f"{name}.jsonl"
            record_query(QueryConfig(str(mod), failure=failure, fail_at_batch=1, seed=3), trace, spark=spark)
            reps[name] = replay_file(trace)
    c = reps["triple"].check("output-at-least-once")
    assert c is not None and c.status is Status.VIOLATED, reps["triple"].summary()
    assert "outside the at-least-once envelope" in c.detail and c.data["envelope"]["matched"] is None
    assert reps["triple"].exit_code == 1
    cell = classify_cell(reps["triple"])
    assert cell["attributed_to"] == "module" and cell["expected_by_engine"] is False, cell
    # a task failure strikes before the sink: it is handed every batch once, and keeps exactly-once
    c = reps["triple-task"].check("output-at-least-once")
    assert c.status is Status.HELD and "envelope" not in c.data, reps["triple-task"].summary()
    assert reps["triple-task"].exit_code == 0
    c = reps["ledger"].check("output-at-least-once")
    assert c.status is Status.HELD and "within the at-least-once envelope" in c.detail, reps["ledger"].summary()
    assert c.data["envelope"]["matched"] >= 1 and reps["ledger"].exit_code == 0
    c = reps["append"].check("output-at-least-once")
    assert c.status is Status.HELD and "envelope" not in c.data, reps["append"].summary()  # rows counted
    assert reps["append"].exit_code == 0
