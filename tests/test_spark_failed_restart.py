"""A restart that fails with the engine's exception is recorded as a restart, and reported truthfully.

SPARK-52553 (``docs/engine-bugs.md``): after the driver is killed at the commit of batch 2, every
restart dies loading its state (``CANNOT_LOAD_STATE_STORE`` caused by ``NumberFormatException``).
The recorder used to write no ``spark.restart`` for such an attempt (a restart is observed at its
first sink call, which never came), so ``failure-observed`` said the trace had no restart after the
failure (inconclusive) and the root cause was ``recovery-line``'s "no recovery". The recorder now
writes a ``spark.restart`` marked ``failed`` with the exception's name before
``spark.recovery_failed`` (:func:`rollcheck.spark_replay.query.run.run_once`): the failure was
observed and recovery exercised, the span model does not judge a restart that restored nothing,
and ``recovery-succeeded`` is the root cause. The trace below has the shape of that recording
(3 batches, 2 partitions, RocksDB with changelog checkpointing).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rollcheck.pyimpl.verdict import Report
from rollcheck.spark_replay.replay.conformance import replay_file, replay_trace
from rollcheck.spark_replay.trace import parse_trace_text, read_trace

ROOT = Path(__file__).resolve().parent.parent

CK = "/w/checkpoint"
CAUSE = 'java.lang.NumberFormatException: For input string: ")"'
HEADER = {"format": "rollcheck.trace/1", "source": "spark", "job": "query", "seed": 0, "processes": ["driver"],
          "engine_version": "4.0.0",
          "config": {"module": "q.py", "batches": None, "seed": 0, "fail_at_batch": 2, "failure": "kill",
                     "master": None, "shuffle_partitions": 2, "max_attempts": 4, "reference": True,
                     "call_timeout": 60.0, "state_store": "rocksdb-changelog", "kill_point": "commit",
                     "engine_version": "4.0.0", "reference_version": None, "cluster": None, "event_time": None,
                     "key": ["doc"], "output_mode": "append", "schema": "doc STRING", "user_sink": False,
                     "sink_guarantee": "exactly-once", "input_batches": 3, "input_rows": 3}}
ROWS = [{"doc": "d0"}, {"doc": "d1"}, {"doc": "d2"}]


def _events(*, restart: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The recording: reference, batches 0-2 (two partitions), the kill at the commit of batch 2,
    a restarted driver whose restart fails (``restart`` None: as the recorder wrote it before)."""
    ev: list[dict[str, Any]] = [
        {"kind": "spark.reference", "attempt": 1, "output": ROWS, "batches": [0, 1, 2], "seconds": 1.0,
         "state": {"0/default": {"count": 3, "decoded": None, "digest": "x"}}},
        {"kind": "spark.attempt_start", "attempt": 1, "pid": 10, "committed": []}]
    for b in range(3):
        ev.append({"kind": "spark.batch_planned", "attempt": 1, "batch": b, "offsets": [{"logOffset": b}],
                   "files": [f"batch-{b:05d}.json"], "watermark_ms": 0})
        ev += [{"kind": "spark.state_committed", "attempt": 1, "batch": b, "partition": p, "version": b + 1,
                "file_kind": "changelog", "file": f"state/0/{p}/{b + 1}.changelog"} for p in (0, 1)]
        ev.append({"kind": "spark.sink_written", "attempt": 1, "batch": b, "rows": [ROWS[b]]})
        if b < 2:
            ev.append({"kind": "spark.batch_committed", "attempt": 1, "batch": b})
    ev.append({"kind": "failure", "attempt": 1, "processes": ["driver"], "mode": "kill", "batch": 2,
               "kill_point": "commit", "checkpoint_logs": {"offsets": 2, "commits": 1}, "state_files": 2})
    ev.append({"kind": "spark.attempt_start", "attempt": 2, "pid": 11, "committed": [0, 1]})
    if restart is not None:
        ev.append({"kind": "spark.restart", "attempt": 2, **restart})
    ev += [{"kind": "spark.query_error", "attempt": 2, "message": "[STREAM_FAILED] Query terminated with exception"},
           {"kind": "spark.recovery_failed", "attempt": 2, "checkpoint": CK, "exception": "CANNOT_LOAD_STATE_STORE",
            "message": "[CANNOT_LOAD_STATE_STORE] An error occurred during loading state.", "cause": CAUSE,
            "user_code": False},
           {"kind": "spark.output_final", "attempt": 2, "rows": ROWS},
           {"kind": "end", "attempt": 2, "status": "recovery-failed"}]
    return [{"seq": i, **e} for i, e in enumerate(ev, 1)]


FAILED: dict[str, Any] = {"resume_batch": None, "restored_versions": {}, "failed": True, "exception": "CANNOT_LOAD_STATE_STORE"}


def _replay(events: list[dict[str, Any]]) -> tuple[Report, dict[str, Any]]:
    text = "\n".join(json.dumps(x) for x in [HEADER, *events]) + "\n"
    rep = replay_trace(parse_trace_text(text.encode()))
    return rep, {c.name: c for c in rep.checks}


def test_a_failed_restart_is_a_restart_and_the_engines_failure_is_the_root_cause() -> None:
    events = _events(restart=FAILED)
    restart = next(e for e in events if e["kind"] == "spark.restart")
    rep, c = _replay(events)
    assert c["failure-observed"].status.value == "held", c["failure-observed"].detail
    assert f"restarted (seq {restart['seq']})" in c["failure-observed"].detail
    assert "CANNOT_LOAD_STATE_STORE" in c["failure-observed"].detail
    # the span model does not judge a restart that restored nothing (no false resume violation)
    assert c["resume-prediction"].status.value == "held" and "1 failed restart" in c["resume-prediction"].detail
    assert c["recovery-succeeded"].status.value == "violated" and CAUSE in c["recovery-succeeded"].detail
    assert c["recovery-line"].status.value == "held", c["recovery-line"].detail
    assert rep.verdict.value == "violated" and rep.root_cause is not None
    assert rep.root_cause.name == "recovery-succeeded"


def test_without_the_failed_restart_the_failure_looks_unrecovered() -> None:
    """The trace as the recorder wrote it before: no restart after the failure (the control)."""
    rep, c = _replay(_events(restart=None))
    assert c["failure-observed"].status.value == "unchecked"
    assert "no restart after it" in c["failure-observed"].detail
    assert rep.root_cause is not None and rep.root_cause.name == "recovery-line"


def test_a_restart_not_marked_failed_is_judged_by_the_span_model() -> None:
    """The ``failed`` mark is what keeps the span model off: without it the empty restore is a
    resume violation (Spark resumed at None with no state)."""
    rep, c = _replay(_events(restart={k: v for k, v in FAILED.items() if k != "failed"}))
    assert c["resume-prediction"].status.value == "violated"


@pytest.mark.spark
def test_the_recorder_writes_the_failed_restart(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A real recording: the query's state files vanish between the injected sink failure and the
    in-process restart, whose query then fails with the engine's exception; the trace has the
    restart, marked failed, before ``spark.recovery_failed``, and failure-observed holds."""
    from rollcheck.spark_replay.query import drive as query_drive
    from rollcheck.spark_replay.query import record as qmod
    from rollcheck.spark_replay.session import spark_session

    real = query_drive.run_once

    def corrupting(*args: Any, **kw: Any) -> str:
        out = real(*args, **kw)
        if out == "failed":
            for f in (args[3].checkpoint() / "state").rglob("*.delta"):
                f.unlink()
        return out

    monkeypatch.setattr(query_drive, "run_once", corrupting)
    trace = tmp_path / "t.jsonl"
    with spark_session(conf=qmod.session_conf()) as spark:
        res = qmod.record_query(qmod.QueryConfig(str(ROOT / "tests" / "queries" / "windowed_agg.py"), batches=4,
                                                 failure="sink", fail_at_batch=2), trace, spark=spark)
    assert res["status"] == "recovery-failed"
    t = read_trace(trace)
    restart = t.of_kind("spark.restart")
    failed = t.of_kind("spark.recovery_failed")
    assert len(restart) == 1 and restart[0]["failed"] is True and restart[0]["attempt"] == 2
    assert restart[0]["exception"] == failed[0]["exception"] and restart[0]["seq"] < failed[0]["seq"]
    rep = replay_file(trace)
    c = {x.name: x for x in rep.checks}
    assert c["failure-observed"].status.value == "held", c["failure-observed"].detail
    assert c["resume-prediction"].status.value == "held", c["resume-prediction"].detail
    assert rep.root_cause is not None and rep.root_cause.name == "recovery-succeeded"
