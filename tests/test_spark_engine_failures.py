"""Engine exceptions are findings against the engine, not the module's failure nor rollcheck's error.

- A failure-free run that fails on the release under test (``--engine-version V``) with the
  engine's exception, while the reference release ran the same module to its end, is recorded as
  ``spark.reference_failed`` and violates ``release-differential`` (naming both releases and the
  exception; exit 1). A module failing on every release stays the module's (exit 2).
- Spark's own state reader failing on the engine's own checkpoint is recorded as
  ``spark.state_read_failed`` and violates ``recovery-succeeded`` (not an internal error, exit 4).

Fast: hand-made failure texts and synthetic traces (no Spark). The recordings on the releases
that have these bugs are the bug zoo's (``benchmarks/engine_bugs``, ``make bench-bugs``).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from rollcheck.spark_replay.oracles.checks import recovery_succeeded, release_differential
from rollcheck.spark_replay.query import record as qmod
from rollcheck.spark_replay.query import state as query_state
from rollcheck.spark_replay.replay.conformance import replay_trace
from rollcheck.spark_replay.trace import parse_trace_text

ROOT = Path(__file__).resolve().parent.parent
MODULE = str(ROOT / "tests" / "queries" / "windowed_agg.py")

JVM_TEXT = ("[STREAM_FAILED] Query [id = 1] terminated with exception: An exception was raised by the Python "
            "Proxy. Return Message: Traceback (most recent call last):\n"
            '  File "/env/lib/python3.11/site-packages/pyspark/sql/utils.py", line 120, in call\n'
            '  File "/src/spark_replay/query/record.py", line 659, in sink\n'
            '  File "/env/lib/python3.11/site-packages/pyspark/sql/dataframe.py", line 1263, in collect\n'
            "py4j.protocol.Py4JJavaError: An error occurred while calling o97.collectToPython.\n"
            ": org.apache.spark.SparkException: Job aborted due to stage failure: java.util.NoSuchElementException: "
            "None.get\n\tat scala.None$.get(Option.scala:529)\n")
PYSPARK_TEXT = ("[STREAM_FAILED] terminated with exception: pyspark.errors.exceptions.captured.PythonException:\n"
                "  An exception was thrown from the Python worker. Please see the stack trace below.\n"
                "Traceback (most recent call last):\n"
                f'  File "{MODULE}", line 30, in session\n'
                "    state.setTimeoutTimestamp(end)\n"
                '  File "/env/lib/python3.11/site-packages/pyspark/sql/streaming/state.py", line 204, '
                "in setTimeoutTimestamp\n"
                "pyspark.errors.exceptions.base.PySparkValueError: [INVALID_TIMEOUT_TIMESTAMP] Timeout timestamp "
                "(19723) cannot be earlier than the current watermark (1000).\n")
USER_TEXT = PYSPARK_TEXT.replace('  File "/env/lib/python3.11/site-packages/pyspark/sql/streaming/state.py", '
                                 "line 204, in setTimeoutTimestamp\n", "").replace(
    "pyspark.errors.exceptions.base.PySparkValueError: [INVALID_TIMEOUT_TIMESTAMP]", "ZeroDivisionError:")
STATE_TEXT = ("An error occurred while calling o120.collectToPython.\n: org.apache.spark.SparkException: "
              "[CANNOT_LOAD_STATE_STORE.UNCATEGORIZED] An error occurred during loading state. SQLSTATE: 58030\n"
              "\tat org.apache.spark.sql.errors.QueryExecutionErrors$.cannotLoadStore(QueryExecutionErrors.scala:2)\n"
              'Caused by: java.lang.NumberFormatException: For input string: ")"\n'
              "\tat java.base/java.lang.Integer.parseInt(Integer.java:652)\n")


@pytest.fixture(scope="module")
def uq() -> qmod.UserQuery:
    return qmod.load_query(MODULE)


# ----------------------------------------------------------------------------- whose exception
def test_whose_exception_is_it(uq: qmod.UserQuery) -> None:
    assert qmod.engine_code_raised(JVM_TEXT, uq)  # Spark's plan raised: no frame of the module
    assert qmod.engine_code_raised(PYSPARK_TEXT, uq)  # pyspark's GroupState raised, called by the module
    assert not qmod.engine_code_raised(USER_TEXT, uq)  # the module's own line raised


@pytest.mark.parametrize(("text", "release_ok", "sink", "engines"), [
    (JVM_TEXT, True, False, True),       # fails on V only: a finding (exit 1)
    (PYSPARK_TEXT, True, False, True),   # pyspark's own code, on V only
    (JVM_TEXT, False, False, False),     # no reference run that succeeded: the module's (exit 2)
    (USER_TEXT, True, False, False),     # the user's function raised: the module's
    (JVM_TEXT, True, True, False),       # the user's sink raised: the module's
])
def test_a_failure_free_run_failing_is_the_engines_only_where_the_reference_release_ran_it(
        uq: qmod.UserQuery, text: str, release_ok: bool, sink: bool, engines: bool) -> None:
    assert qmod.reference_failure_is_engines(text, uq, release_ok=release_ok, sink_raised=sink,
                                             overloaded=False) is engines


def test_the_reference_release_ran_it_only_with_its_output() -> None:
    ok = {"kind": "spark.release_reference", "engine_version": "4.3.0", "output": []}
    assert qmod.release_ran([{"kind": "spark.attempt_start"}, ok])
    assert not qmod.release_ran([{"kind": "spark.attempt_start"}])
    assert not qmod.release_ran([{**ok, "output": None}])


def test_engine_failure_names_the_exception_and_its_cause() -> None:
    f = qmod.engine_failure(STATE_TEXT, "/w/checkpoint")
    assert f["exception"] == "CANNOT_LOAD_STATE_STORE.UNCATEGORIZED" and f["checkpoint"] == "/w/checkpoint"
    assert f["cause"] == 'java.lang.NumberFormatException: For input string: ")"'
    f = qmod.engine_failure(JVM_TEXT, "/ck")
    assert f["exception"] == "java.util.NoSuchElementException"
    assert f["message"].startswith("org.apache.spark.SparkException: Job aborted")  # py4j's ": " dropped


# ----------------------------------------------------------------------------- the state reader
def test_spark_state_reader_failing_is_recorded_not_rollchecks_error(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    def engine_raises(spark: Any, checkpoint: Path) -> dict[str, Any]:
        raise RuntimeError(STATE_TEXT)  # what py4j raises for the JVM's SparkException

    monkeypatch.setattr(query_state, "read_state_stores", engine_raises)
    stores, reason, failed = qmod._state_or_reason(None, tmp_path)
    assert stores == {} and failed is not None and "CANNOT_LOAD_STATE_STORE" in str(reason)
    assert failed["checkpoint"] == str(tmp_path) and "NumberFormatException" in str(failed["cause"])

    def unreadable(spark: Any, checkpoint: Path) -> dict[str, Any]:
        raise qmod.StateUnreadable("no state reader on 3.5")

    monkeypatch.setattr(query_state, "read_state_stores", unreadable)
    assert qmod._state_or_reason(None, tmp_path) == ({}, "no state reader on 3.5", None)

    def full_disk(spark: Any, checkpoint: Path) -> dict[str, Any]:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(query_state, "read_state_stores", full_disk)
    with pytest.raises(Exception, match="space"):  # the machine's fault, not a finding
        qmod._state_or_reason(None, tmp_path)


# ----------------------------------------------------------------------------- the oracles
def _hdr(**cfg: Any) -> dict[str, Any]:
    return {"source": "spark", "job": "query", "seed": 0, "processes": ["driver"], "engine_version": "3.5.3",
            "config": {"module": "q.py", "key": ["k"], "output_mode": "update", "engine_version": "3.5.3",
                       "reference_version": "4.3.0", "failure": "task", "fail_at_batch": 2, "user_sink": False,
                       **cfg}}


RELEASE = {"seq": 1, "kind": "spark.release_reference", "attempt": 0, "engine_version": "4.3.0",
           "output": [{"k": "a", "n": 1}, {"k": "b", "n": 2}], "seconds": 1.0}
REF_FAILED = {"seq": 2, "kind": "spark.reference_failed", "attempt": 1, "engine_version": "3.5.3",
              "checkpoint": "/w/checkpoint-ref", "exception": "java.util.NoSuchElementException",
              "message": "Job aborted", "cause": None, "batches": [], "seconds": 3.0}


def test_release_differential_names_both_releases_and_the_exception() -> None:
    c = release_differential(_hdr(), [RELEASE, REF_FAILED, {"seq": 3, "kind": "end", "status": "reference-failed"}])
    assert c is not None and c.status.value == "violated" and c.offending_seq == 2
    assert all(s in c.detail for s in ("3.5.3", "4.3.0", "NoSuchElementException", "/w/checkpoint-ref", "2 output"))
    ref = {"seq": 2, "kind": "spark.reference", "output": RELEASE["output"]}
    c = release_differential(_hdr(), [RELEASE, ref])  # the broken variant's control: no failure, same table
    assert c is not None and c.status.value == "held"


def test_recovery_succeeded_is_violated_by_the_engines_state_reader_failing() -> None:
    read = {"seq": 2, "kind": "spark.state_read_failed", "run": "reference", "engine_version": "4.0.0",
            "checkpoint": "/w/checkpoint-ref", "exception": "CANNOT_LOAD_STATE_STORE.UNCATEGORIZED",
            "message": "An error occurred during loading state.",
            "cause": 'java.lang.NumberFormatException: For input string: ")"'}
    c = recovery_succeeded(_hdr(), [read, {"seq": 3, "kind": "end", "status": "done"}])
    assert c is not None and c.status.value == "violated" and c.offending_seq == 2
    assert all(s in c.detail for s in ("/w/checkpoint-ref", "CANNOT_LOAD_STATE_STORE", "NumberFormatException"))
    c = recovery_succeeded(_hdr(), [{"seq": 3, "kind": "end", "status": "done"}])
    assert c is not None and c.status.value != "violated"


def _text(events: list[dict[str, Any]]) -> str:
    return "\n".join(json.dumps(x) for x in [{"format": "rollcheck.trace/1", **_hdr()}, *events]) + "\n"


def test_replay_of_a_run_failing_only_on_the_release_under_test_is_a_finding(tmp_path: Path) -> None:
    end = {"seq": 3, "kind": "end", "attempt": 1, "status": "reference-failed"}
    rep = replay_trace(parse_trace_text(_text([RELEASE, REF_FAILED, end]).encode()))
    checks = {c.name: c for c in rep.checks}
    assert rep.verdict.value == "violated"
    assert checks["release-differential"].status.value == "violated"
    # nothing to compare with: not a second (false) finding of the output checks
    assert checks["output-exactly-once"].status.value == "not-applicable"
    assert checks["state-failure-free"].status.value == "not-applicable"
    trace = tmp_path / "t.jsonl"
    trace.write_text(_text([RELEASE, REF_FAILED, end]), encoding="utf-8")
    r = subprocess.run([sys.executable, "-m", "rollcheck.cli.main", "spark", "replay", str(trace), "--json"],
                       capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert r.returncode == 1, r.stderr[-2000:]


def test_without_a_reference_release_the_failure_stays_the_modules(uq: qmod.UserQuery) -> None:
    """The refusal (exit 2) is unchanged where no reference release ran the module to its end."""
    assert not qmod.reference_failure_is_engines(JVM_TEXT, uq, release_ok=qmod.release_ran([]),
                                                 sink_raised=False, overloaded=False)


def test_a_failed_restart_names_the_root_cause() -> None:
    failed = {"seq": 2, "kind": "spark.recovery_failed", "checkpoint": "/w/checkpoint",
              **{k: v for k, v in qmod.engine_failure(STATE_TEXT, "/w/checkpoint").items() if k != "checkpoint"},
              "user_code": False}
    c = recovery_succeeded(_hdr(), [{"seq": 1, "kind": "failure"}, failed,
                                    {"seq": 3, "kind": "end", "status": "recovery-failed"}])
    assert c is not None and c.status.value == "violated"
    assert "CANNOT_LOAD_STATE_STORE" in c.detail and 'NumberFormatException: For input string: ")"' in c.detail
