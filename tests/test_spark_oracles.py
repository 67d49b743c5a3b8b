"""Oracles that do not trust the engine's own failure-free run (``spark_replay/oracles/checks.py``).

Fast tests judge hand-made events (the plan analysis, late rows with and without, append mode's
event-time bound, a failed or swallowed recovery, two releases). The slow tests record the query
with deliberately late rows (``tests/queries/late_rows.py``) once with a task failure, show the
replay conformant with every oracle, and show each oracle catching its mutants
(``spark_replay/oracles/tampers.py``) — including the lost on-time row that the failure-free
reference cannot see (``output-exactly-once`` holds on that mutant).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from rollcheck.spark_replay.oracles.checks import (
    analyse_plan,
    batch_equivalent,
    recovery_succeeded,
    release_differential,
)
from rollcheck.spark_replay.oracles.tampers import CAUGHT_BY, ORACLE_TAMPERS
from rollcheck.spark_replay.replay.conformance import replay_file, replay_trace
from rollcheck.spark_replay.trace import parse_trace_text, read_trace

ROOT = Path(__file__).resolve().parent.parent
RC = [sys.executable, "-m", "rollcheck.cli.main"]
LATE = str(ROOT / "tests" / "queries" / "late_rows.py")

STREAM_PLAN = """~Project [window#11-T5000ms.start AS start#12, user#1, n#4L]
+- ~Aggregate [window#11-T5000ms, user#1], [window#11-T5000ms, user#1, count(1) AS n#4L]
   +- ~EventTimeWatermark 4032c16a-9c4d-4e25-9af6-e0afe8eae570, ts#0: timestamp, 5 seconds
      +- StreamingRelation FileSource[/x], [ts#0, user#1], name=<Unassigned>"""


def _hdr(mode: str = "update", key: list[str] | None = None, **cfg: Any) -> dict[str, Any]:
    return {"source": "spark", "job": "query", "engine_version": "4.3.0",
            "config": {"key": key or ["k"], "output_mode": mode, **cfg}}


def _ev(seq: int, kind: str, **f: Any) -> dict[str, Any]:
    return {"seq": seq, "kind": kind, **f}


def _evaluation(seq: int, run: str, variants: list[list[dict[str, Any]]], late: int = 0,
                fields: list[dict[str, Any]] | None = None, **extra: Any) -> dict[str, Any]:
    return _ev(seq, "spark.batch_evaluation", run=run, applicable=True, reason=None, event_time="ts",
               watermarks={"0": 0, "1": 10000}, on_time_rows=5, late=[{"batch": 1, "row": []}] * late,
               fields=fields or [{"name": "k", "type": "string", "metadata": {}},
                                 {"name": "n", "type": "bigint", "metadata": {}}],
               variants=[{"late": [], "rows": v} for v in variants], **extra)


# ----------------------------------------------------------------------------- the plan
def test_plan_analysis_follows_renames_to_the_input_column() -> None:
    plan = """~Join Inner, (click_ts#20-T20000ms >= imp_ts#18-T20000ms)
:- ~EventTimeWatermark a174dbde-90b3-457f-b227-264725ea1697, click_ts#20: timestamp, 20 seconds
:  +- ~Project [ts#14 AS click_ts#20, ad#16]
:     +- StreamingRelation FileSource[/t], [ts#14, side#15, ad#16], name=<Unassigned>
+- EventTimeWatermark imp_ts#18: timestamp, 20 seconds
   +- Project [ts#14 AS imp_ts#18, ad#16 AS imp_ad#19]
      +- StreamingRelation FileSource[/t], [ts#14, side#15, ad#16], name=<Unassigned>"""
    got = analyse_plan(plan, ["ts", "side", "ad"])
    assert (got["applicable"], got["event_time"], got["watermarked"], got["reason"]) == (True, "ts", True, None)
    assert got["rule"].operator == "Join" and got["rule"].operands["input"].column == "ts"


@pytest.mark.parametrize("plan, why", [
    ("FlatMapGroupsInPandasWithState _running(user#33)#35, [user#33]\n+- LogicalRDD [user#33], false",
     "arbitrary stateful operator (FlatMapGroupsInPandasWithState)"),
    ("~TransformWithStateInPandas f(k#1)\n+- StreamingRelation x, [k#1]", "arbitrary stateful operator"),
    ("Project [current_timestamp() AS now#3, k#1]\n+- StreamingRelation x, [k#1]", "processing time"),
    ("~EventTimeWatermark t#9: timestamp, 5 seconds\n+- Project [cast(s#1 as timestamp) AS t#9]\n"
     "   +- StreamingRelation x, [s#1]", "a column computed from the input"),
])
def test_plan_without_batch_meaning_is_not_applicable(plan: str, why: str) -> None:
    got = analyse_plan(plan, ["user", "k", "s"])
    assert got["applicable"] is False and why in got["reason"]


# ----------------------------------------------------------------------------- batch-equivalent
def test_update_mode_equal_to_the_batch_job_holds_and_a_lost_key_is_a_violation() -> None:
    rows = [{"k": "a", "n": 2}, {"k": "b", "n": 1}]
    ok = [_ev(1, "spark.output_final", rows=[{"k": "a", "n": 1}, *rows]), _evaluation(2, "final", [rows])]
    assert batch_equivalent(_hdr(), ok).status.value == "held"
    lost = [_ev(1, "spark.output_final", rows=rows[:1]), _evaluation(2, "final", [rows])]
    c = batch_equivalent(_hdr(), lost)
    assert c.status.value == "violated" and '["b"]' in c.detail and c.offending_seq == 1


def test_an_evaluation_from_before_the_rule_with_late_rows_is_not_decided() -> None:
    """Such an event holds subsets of late rows, not the rule's one table: inconclusive, never a guess."""
    without, with_ = [{"k": "a", "n": 2}], [{"k": "a", "n": 3}]
    c = batch_equivalent(_hdr(), [_ev(1, "spark.output_final", rows=without),
                                  _evaluation(2, "final", [without, with_], late=1)])
    assert c.status.value == "unchecked" and "record the query again" in c.detail


def test_append_mode_needs_an_event_time_bound_then_judges_final_rows() -> None:
    fields = [{"name": "k", "type": "string", "metadata": {}}, {"name": "t", "type": "timestamp", "metadata": {}}]
    rows = [{"k": "a", "t": "1970-01-01T00:00:05"}, {"k": "b", "t": "1970-01-01T00:00:30"}]
    no_bound = batch_equivalent(_hdr("append"), [_ev(1, "spark.output_final", rows=rows[:1]),
                                                 _evaluation(2, "final", [rows], fields=fields)])
    assert no_bound.status.value == "not-applicable" and "EVENT_TIME" in no_bound.detail
    # the module names the bound: row a (t=5 s <= last watermark 10 s) must be there, b need not be
    hdr = _hdr("append", event_time="t")
    assert batch_equivalent(hdr, [_ev(1, "spark.output_final", rows=rows[:1]),
                                  _evaluation(2, "final", [rows], fields=fields)]).status.value == "held"
    lost = batch_equivalent(hdr, [_ev(1, "spark.output_final", rows=rows[1:]),
                                  _evaluation(2, "final", [rows], fields=fields)])
    assert lost.status.value == "violated" and "final by the last watermark" in lost.detail
    extra = batch_equivalent(hdr, [_ev(1, "spark.output_final", rows=[*rows, rows[0]]),
                                   _evaluation(2, "final", [rows], fields=fields)])
    assert extra.status.value == "violated" and "2 time(s)" in extra.detail
    # Spark's plan tells the bound: event-time metadata on the output column
    meta = [fields[0], {**fields[1], "metadata": {"spark.watermarkDelayMs": 5000}}]
    assert batch_equivalent(_hdr("append"), [_ev(1, "spark.output_final", rows=rows[1:]),
                                             _evaluation(2, "final", [rows], fields=meta)]).status.value == "violated"


def test_not_applicable_evaluation_says_why() -> None:
    ev = _ev(2, "spark.batch_evaluation", run="final", applicable=False, reason="the query has an arbitrary "
             "stateful operator (X)")
    c = batch_equivalent(_hdr(), [_ev(1, "spark.output_final", rows=[]), ev])
    assert c.status.value == "not-applicable" and "arbitrary stateful" in c.detail


# ----------------------------------------------------------------------------- the other two
def test_release_differential_names_both_releases() -> None:
    ref = _ev(2, "spark.reference", output=[{"k": "a", "n": 2}])
    same = _ev(1, "spark.release_reference", engine_version="4.3.0", output=[{"k": "a", "n": 2}])
    hdr = {**_hdr(), "engine_version": "3.5.9"}
    assert release_differential(hdr, [same, ref]).status.value == "held"
    other = _ev(1, "spark.release_reference", engine_version="4.3.0", output=[{"k": "a", "n": 3}])
    c = release_differential(hdr, [other, ref])
    assert c.status.value == "violated" and "3.5.9" in c.detail and "4.3.0" in c.detail
    assert release_differential(_hdr(), [ref]).status.value == "not-applicable"
    missing = {**hdr, "config": {**hdr["config"], "reference_version": "4.3.0"}}
    assert release_differential(missing, [ref]).status.value == "unchecked"


def _recovery(tail: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [_ev(1, "spark.attempt_start", attempt=1), _ev(2, "spark.batch_planned", batch=0),
            _ev(3, "spark.batch_committed", batch=0), _ev(4, "spark.batch_planned", batch=1),
            _ev(5, "failure", batch=1), _ev(6, "spark.attempt_start", attempt=2), *tail]


def test_recovery_succeeded_held_failed_and_swallowed() -> None:
    done = _recovery([_ev(7, "spark.batch_committed", batch=1), _ev(8, "end", status="done")])
    assert recovery_succeeded(_hdr(), done).status.value == "held"
    failed = _recovery([_ev(7, "spark.recovery_failed", checkpoint="/ck", exception="org.apache.spark.SparkException",
                            message="[CANNOT_LOAD_STATE_STORE] boom", user_code=False),
                        _ev(8, "end", status="recovery-failed")])
    c = recovery_succeeded(_hdr(), failed)
    assert c.status.value == "violated" and "/ck" in c.detail and "SparkException" in c.detail
    assert c.offending_seq == 7
    swallowed = _recovery([_ev(7, "end", status="done")])  # the exception swallowed: nothing committed
    c = recovery_succeeded(_hdr(), swallowed)
    assert c.status.value == "violated" and "[1]" in c.detail
    assert recovery_succeeded(_hdr(), done[:4] + done[6:]).status.value == "not-applicable"


# ----------------------------------------------------------------------------- recorded
@pytest.fixture(scope="module")
def late_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import subprocess

    out = tmp_path_factory.mktemp("oracles") / "late.jsonl"
    r = subprocess.run([*RC, "spark", "record", "query", "--module", LATE, "--out", str(out),
                        "--fail-at-batch", "3", "--failure", "task", "--json"],
                       capture_output=True, text=True, cwd=ROOT, timeout=1800)
    assert r.returncode == 0, r.stderr[-3000:]
    return out


@pytest.mark.slow


@pytest.mark.engines
@pytest.mark.spark
def test_recorded_late_rows_are_batch_equivalent(late_trace: Path) -> None:
    rep = replay_file(late_trace)
    checks = {c.name: c for c in rep.checks}
    assert rep.verdict.value == "conformant", [(c.name, c.status.value, c.detail) for c in rep.checks]
    assert checks["batch-equivalent"].status.value == "held"
    assert checks["recovery-succeeded"].status.value == "held"
    ev = [e for e in read_trace(late_trace).events if e["kind"] == "spark.batch_evaluation"]
    assert {e["run"] for e in ev} == {"reference", "final"}
    final = next(e for e in ev if e["run"] == "final")
    # t=21 s and t=3 s arrive in batch 2 below its watermark (23 s) but Spark's rule compares their
    # windows' ends (30 s, 10 s) with the previous batch's watermark (7 s): both count
    assert final["event_time"] == "ts" and final["dropped_rows"] == 0 and final["late_watermarks"]["2"] == 1704067207000
    assert set(final["watermark_source"].values()) == {"progress"}


@pytest.mark.slow


@pytest.mark.engines
@pytest.mark.spark
@pytest.mark.parametrize("how", ["drop-on-time-row", "swallow-recovery-exception", "fail-recovery"])
def test_each_oracle_catches_its_mutants(late_trace: Path, how: str) -> None:
    trace = read_trace(late_trace)
    lines, seq = ORACLE_TAMPERS[how](trace)
    rep = replay_file_text("\n".join(lines) + "\n")
    checks = {c.name: c for c in rep.checks}
    caught = checks[CAUGHT_BY[how]]
    assert caught.status.value == "violated", (how, caught.detail)
    assert caught.offending_seq == seq, (how, caught.offending_seq, seq, caught.detail)
    if how == "drop-on-time-row":  # lost in every run: the failure-free reference cannot see it
        assert checks["output-exactly-once"].status.value == "held"


def replay_file_text(text: str) -> Any:
    return replay_trace(parse_trace_text(text.encode()))


def test_tampers_refuse_traces_without_what_they_change() -> None:
    t = parse_trace_text((json.dumps({"format": "rollcheck.trace/1", **_hdr()}) + "\n").encode())
    for how in ORACLE_TAMPERS:
        with pytest.raises(Exception, match="trace"):
            ORACLE_TAMPERS[how](t)


@pytest.mark.slow


@pytest.mark.engines
@pytest.mark.spark
def test_restart_failing_with_the_engines_exception_is_a_finding(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The query's state files vanish between the failure and the restart: Spark's restart fails
    with its own exception; the recording records it (not exit 2, not inconclusive) and the replay
    names the exception and the checkpoint."""
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

    monkeypatch.setattr(query_drive, "run_once", corrupting)  # where drive() looks it up
    trace = tmp_path / "t.jsonl"
    with spark_session(conf=qmod.session_conf()) as spark:
        res = qmod.record_query(qmod.QueryConfig(str(ROOT / "tests" / "queries" / "windowed_agg.py"), batches=4,
                                                 failure="sink", fail_at_batch=2), trace, spark=spark)
    assert res["status"] == "recovery-failed"
    rep = replay_file(trace)
    c = {x.name: x for x in rep.checks}["recovery-succeeded"]
    assert rep.verdict.value == "violated" and c.status.value == "violated", c.detail
    assert res["checkpoint"] in c.detail and "engine's exception" in c.detail
    failed = read_trace(trace).of_kind("spark.recovery_failed")[0]
    assert c.offending_seq == failed["seq"] and failed["user_code"] is False


def test_append_bound_of_a_window_column_is_its_end() -> None:
    """Spark's plan marks the window struct as event time: a window is final once its end is at or
    below the last watermark (10 s here): [0, 5) must be there, [10, 15) need not be yet."""
    win = {"name": "window", "type": "struct<start:timestamp,end:timestamp>",
           "metadata": {"spark.watermarkDelayMs": 5000}}
    fields = [win, {"name": "n", "type": "bigint", "metadata": {}}]
    w0 = {"window": {"start": "1970-01-01T00:00:00", "end": "1970-01-01T00:00:05"}, "n": 2}
    w1 = {"window": {"start": "1970-01-01T00:00:10", "end": "1970-01-01T00:00:15"}, "n": 1}
    hdr = _hdr("append", key=["window"])
    ok = batch_equivalent(hdr, [_ev(1, "spark.output_final", rows=[w0]),
                                _evaluation(2, "final", [[w0, w1]], fields=fields, stream_fields=fields)])
    assert ok.status.value == "held", ok.detail
    lost = batch_equivalent(hdr, [_ev(1, "spark.output_final", rows=[w1]),
                                  _evaluation(2, "final", [[w0, w1]], fields=fields, stream_fields=fields)])
    assert lost.status.value == "violated" and "window.end" in lost.detail


def test_releases_differing_only_in_late_rows_they_counted_is_no_finding() -> None:
    """One release counted a late row and the other did not: both within the watermark's one-way
    guarantee (batch-equivalent's evaluations); any other difference says which release agrees."""
    hdr = {**_hdr(), "engine_version": "3.5.9"}
    ev = _evaluation(3, "reference", [[{"k": "a", "n": 2}], [{"k": "a", "n": 3}]], late=1)
    ref = _ev(2, "spark.reference", output=[{"k": "a", "n": 2}])
    late_counted = _ev(1, "spark.release_reference", engine_version="4.3.0", output=[{"k": "a", "n": 3}])
    c = release_differential(hdr, [late_counted, ref, ev])
    assert c.status.value == "held" and "late rows" in c.detail
    wrong = _ev(1, "spark.release_reference", engine_version="4.3.0", output=[{"k": "a", "n": 7}])
    c = release_differential(hdr, [wrong, ref, ev])
    assert c.status.value == "violated" and "3.5.9 agrees" in c.detail


def _record_on(version: str, reference: str, out: Path) -> dict[str, Any]:
    import subprocess

    from rollcheck.spark_replay import releases

    if not (releases.cache_root() / "spark" / f"pyspark-{version}" / releases.STAMP).exists():
        r = subprocess.run([sys.executable, "-m", "pip", "index", "versions", "pyspark"], capture_output=True,
                           text=True, timeout=180)
        if r.returncode != 0:
            pytest.skip("pip cannot reach the package index to install pyspark " + version)
    r = subprocess.run([*RC, "spark", "record", "query", "--module", str(ROOT / "benchmarks" / "engine_bugs" /
                                                                       "modules" / "spark_49829_window_join.py"),
                        "--out", str(out), "--engine-version", version, "--reference-version", reference, "--json"],
                       capture_output=True, text=True, cwd=ROOT, timeout=3000)
    assert r.returncode == 0, r.stderr[-3000:]
    rp = subprocess.run([*RC, "spark", "replay", str(out), "--json"], capture_output=True, text=True, cwd=ROOT,
                        timeout=600)
    rep = json.loads(rp.stdout)
    return {"exit": rp.returncode, **rep, "by_name": {c["name"]: c for c in rep["checks"]}}


@pytest.mark.slow


@pytest.mark.engines
@pytest.mark.spark
def test_oracles_find_spark_49829_that_the_failure_free_reference_cannot(tmp_path: Path) -> None:
    """SPARK-49829 on pyspark 3.5.3 (fixed on the 3.5 line since): the window-join query loses
    matches in every run. output-exactly-once compares two equally empty tables and holds; batch-equivalent
    names the lost row and release-differential (against 3.5.9) says 3.5.9 agrees with the batch
    job. On 3.5.9 the same recording is conformant."""
    bad = _record_on("3.5.3", "3.5.9", tmp_path / "affected.jsonl")
    assert bad["exit"] == 1 and bad["conformant"] is False
    assert bad["by_name"]["output-exactly-once"]["status"] == "held"
    be = bad["by_name"]["batch-equivalent"]
    assert be["status"] == "violated" and "final by the last watermark" in be["detail"]
    rd = bad["by_name"]["release-differential"]
    assert rd["status"] == "violated" and "3.5.3" in rd["detail"] and "3.5.9 agrees" in rd["detail"]
    good = _record_on("3.5.9", "3.5.9", tmp_path / "fixed.jsonl")
    assert good["exit"] == 0 and good["conformant"] is True
    assert good["by_name"]["batch-equivalent"]["status"] == "held"


def test_copies_written_by_the_users_own_sink_are_left_to_the_sink_checks() -> None:
    fields = [{"name": "k", "type": "string", "metadata": {}}, {"name": "t", "type": "timestamp", "metadata": {}}]
    rows = [{"k": "a", "t": "1970-01-01T00:00:05"}]
    copies = [_ev(1, "spark.output_final", rows=rows * 2), _evaluation(2, "final", [rows], fields=fields)]
    assert batch_equivalent(_hdr("append", event_time="t"), copies).status.value == "violated"
    assert batch_equivalent(_hdr("append", event_time="t", user_sink=True), copies).status.value == "held"
    alien = [_ev(1, "spark.output_final", rows=[{"k": "z", "t": "1970-01-01T00:00:05"}, *rows]),
             _evaluation(2, "final", [rows], fields=fields)]
    assert batch_equivalent(_hdr("append", event_time="t", user_sink=True), alien).status.value == "violated"


def test_with_the_users_own_sink_the_failure_free_run_is_judged() -> None:
    rows = [{"k": "a", "n": 2}, {"k": "b", "n": 1}]
    events = [_ev(1, "spark.reference", output=rows), _evaluation(2, "reference", [rows]),
              _ev(3, "spark.output_final", rows=rows[:1]), _evaluation(4, "final", [rows])]
    assert batch_equivalent(_hdr(), events).status.value == "violated"
    assert batch_equivalent(_hdr(user_sink=True), events).status.value == "held"
    events[0] = _ev(1, "spark.reference", output=rows[:1])
    assert batch_equivalent(_hdr(user_sink=True), events).status.value == "violated"
