"""Chaos-testing users' own Structured Streaming queries (``rollcheck spark record query``).

The library in ``tests/queries`` is written only against the documented module contract. One Spark
session (module-scoped) records the in-process cases one after another; the kill case runs
through the CLI (its drivers are child processes). ``make test`` records one failure mode per
query plus the checks that must flag or be inconclusive; the full matrix (every query under task,
sink and kill) runs with ``ROLLCHECK_PROFILE=verify``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rollcheck.pyimpl.errors import InvalidInputError
from rollcheck.spark_replay.query.record import QueryConfig, load_query, record_query
from rollcheck.spark_replay.replay.checks import StreamView, output_exactly_once
from rollcheck.spark_replay.replay.conformance import replay_file
from rollcheck.spark_replay.trace import read_trace

QUERIES = Path(__file__).parent / "queries"
ROOT = Path(__file__).resolve().parent.parent
RC = [sys.executable, "-m", "rollcheck.cli.main"]
FULL = os.environ.get("ROLLCHECK_PROFILE") == "verify"
LIBRARY = ["windowed_agg", "dedup", "stream_join", "pandas_state"]

#: Input batches per recording in ``make test`` (the full matrix uses all six).
N = 6 if FULL else 4
#: (query, failure, batch) recorded in the shared session for every run of the tests; the last
#: asks for a task failure in the data-less batch after the input (no task reads a file there).
CASES = [("windowed_agg", "task", 2), ("dedup", "sink", 1), ("stream_join", "task", 3),
         ("pandas_state", "sink", 2), ("append_sink", "sink", 2), ("windowed_agg", "task", N)]
if FULL:
    CASES += [(q, m, 2) for q in LIBRARY for m in ("task", "sink")
              if (q, m, 2) not in CASES]


def _q(name: str) -> str:
    return str(QUERIES / f"{name}.py")


# ----------------------------------------------------------------------------- without Spark
def _module(tmp_path: Path, text: str) -> str:
    p = tmp_path / "q.py"
    p.write_text(text, encoding="utf-8")
    return str(p)


GOOD = '''
SCHEMA = "user STRING, n INT"
OUTPUT_MODE = "update"
KEY = ["user"]
def batches(seed):
    return [[("a", 1)], [("b", 2)]]
def query(df):
    return df.groupBy("user").count()
'''


@pytest.mark.parametrize("edit, where", [
    (lambda s: s.replace('KEY = ["user"]', ""), "KEY"),
    (lambda s: s.replace('OUTPUT_MODE = "update"', 'OUTPUT_MODE = "upsert"'), "OUTPUT_MODE"),
    (lambda s: s.replace('KEY = ["user"]', 'KEY = "user"'), "KEY"),
    (lambda s: s.replace('[("a", 1)]', '[("a", 1, 3)]'), "batches(seed)[0][0]"),
    (lambda s: s + "\ndef sink(df, b, d):\n    pass\n", "sink"),
    (lambda s: s.replace("def query", "query = 3\ndef _q"), "query"),
])
def test_contract_violations_are_named(tmp_path, edit, where):
    spec = _module(tmp_path, edit(GOOD))
    with pytest.raises(InvalidInputError) as e:
        record_query(QueryConfig(spec), tmp_path / "t.jsonl")
    assert e.value.location == where and "q.py" in str(e.value)
    assert not (tmp_path / "t.jsonl").exists()


def test_cli_refuses_bad_input_up_front_with_exit_2(tmp_path):
    spec = _module(tmp_path, GOOD)
    for extra, needle in ((["--fail-at-batch", "5", "--failure", "task"], "beyond the input"),
                          (["--failure", "task"], "together")):
        r = subprocess.run([*RC, "spark", "record", "query", "--module", spec, "--out", str(tmp_path / "t.jsonl"),
                            *extra], capture_output=True, text=True, cwd=ROOT)
        assert r.returncode == 2 and needle in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert load_query(spec).columns == ["user", "n"]
    r = subprocess.run([*RC, "spark", "checkpoint", str(tmp_path)], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 2 and "not a Structured Streaming checkpoint folder" in r.stderr


# ----------------------------------------------------------------------------- with Spark
@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """Record every case in one Spark session; ``{(query, mode, batch): (summary, replay)}``."""
    from rollcheck.spark_replay.checkpoint.check import check_checkpoint
    from rollcheck.spark_replay.query.record import session_conf
    from rollcheck.spark_replay.session import spark_session

    d = tmp_path_factory.mktemp("queries")
    out: dict = {}
    with spark_session(conf=session_conf()) as spark:
        for q, mode, k in CASES:
            trace = d / f"{q}-{mode}-{k}.jsonl"
            res = record_query(QueryConfig(_q(q), batches=N, failure=mode, fail_at_batch=k, seed=1), trace,
                               spark=spark)
            res["validation"] = check_checkpoint(res["checkpoint"], session=spark)
            out[(q, mode, k)] = (res, replay_file(trace))
    return out


def _failed(r) -> list:
    return [c.to_json() for c in r.checks if c.ok is False or c.status.value == "unchecked"]


@pytest.mark.spark
@pytest.mark.parametrize("case", [c for c in CASES if c[0] != "append_sink" and c[2] != N])
def test_library_query_recovers_under_failure(recorded, case):
    res, r = recorded[case]
    assert res["status"] == "done" and r.conformant is True, _failed(r)
    names = {c.name for c in r.checks}
    assert {"failure-observed", "commit-protocol", "resume-prediction", "output-exactly-once",
            "state-failure-free", "statestore-crosscheck"} <= names
    t = read_trace(res["trace"])
    fail = [e for e in t.events if e["kind"] == "failure"]
    assert [(e["mode"], e["batch"]) for e in fail] == [case[1:]]
    assert t.of_kind("spark.restart")[0]["resume_batch"] == case[2]
    v = res["validation"]  # `spark checkpoint` on the kept folder: window/join/dedup state included
    assert v["valid"] and v["operators"] and all(o["reader_agrees"] for o in v["operators"]), v
    assert all(o["rows"] > 0 for o in v["operators"])


@pytest.mark.spark
def test_task_failure_is_in_the_physical_plan_and_fires(recorded):
    """The injected filter survives optimisation (a Python UDF evaluated in the plan) and fails a
    task of the chosen batch: the query really failed and restarted."""
    res, r = recorded[("windowed_agg", "task", 2)]
    t = read_trace(res["trace"])
    plan = t.of_kind("spark.plan")[0]["physical"]
    assert "BatchEvalPython" in plan and "inject" in plan
    assert len(t.of_kind("spark.attempt_start")) == 2


@pytest.mark.spark
def test_non_idempotent_sink_duplicate_is_named(recorded):
    res, r = recorded[("append_sink", "sink", 2)]
    assert r.conformant is False and r.exit_code == 1
    c = next(c for c in r.checks if c.name == "output-exactly-once")
    assert c.ok is False and "duplicate" in c.detail and "of batch 2" in c.detail, c.detail
    t = read_trace(res["trace"])
    second = [e for e in t.of_kind("spark.sink_written") if e["batch"] == 2][1]
    assert r.first_offending_seq == second["seq"]
    # the state and commit protocol are fine: only the sink is at fault
    assert all(x.ok is not False for x in r.checks if x.name != "output-exactly-once")


@pytest.mark.spark
def test_failure_that_cannot_fire_is_inconclusive(recorded, tmp_path):
    """A task failure requested at the data-less batch (no input rows, no task reads a file):
    nothing fails, and the replay says inconclusive (exit 3), never conformant."""
    res, r = recorded[("windowed_agg", "task", N)]
    assert res["status"] == "done"
    assert r.conformant is None and r.exit_code == 3
    assert r.check("failure-observed").status.value == "unchecked"
    proc = subprocess.run([*RC, "spark", "replay", res["trace"], "--json"], capture_output=True, text=True,
                          cwd=ROOT)
    assert proc.returncode == 3 and json.loads(proc.stdout)["conformant"] is None


@pytest.mark.spark
def test_output_check_catches_a_lost_row(recorded, tmp_path):
    res, _ = recorded[("dedup", "sink", 1)]
    t = read_trace(res["trace"])
    fin = t.of_kind("spark.output_final")[0]
    fin["rows"].pop()
    c = output_exactly_once(StreamView.read(t.header, t.events, None, ("sink", 1), None))
    assert c.ok is False and "lost" in c.detail


@pytest.mark.spark
@pytest.mark.parametrize("query", ["windowed_agg"] + (["dedup", "stream_join", "pandas_state", "append_sink"]
                                                      if FULL else []))
def test_kill_of_the_driver_through_the_cli(tmp_path, query):
    out = tmp_path / "kill.jsonl"
    r = subprocess.run([*RC, "spark", "record", "query", "--module", _q(query), "--out", str(out),
                        "--fail-at-batch", "2", "--failure", "kill", "--seed", "3", "--batches", str(N),
                        "--json"],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-3000:]
    doc = json.loads(r.stdout)
    assert doc["children"] == 2 and Path(doc["checkpoint"]).is_dir()
    rp = subprocess.run([*RC, "spark", "replay", str(out), "--json"], capture_output=True, text=True, cwd=ROOT)
    rep = json.loads(rp.stdout)
    if query == "append_sink":
        assert rp.returncode == 1 and any("duplicate" in c["detail"] for c in rep["checks"] if not c["ok"])
    else:
        assert rp.returncode == 0 and rep["conformant"] is True, rep
    t = read_trace(out)
    assert [e["mode"] for e in t.of_kind("failure")] == ["kill"]
    assert {e["attempt"] for e in t.of_kind("spark.attempt_start")} == {1, 2}
    # Spark's state reader was compared in the shared session above; here rollcheck's decoder alone
    # (one JVM less) unless the full matrix runs
    ck = subprocess.run([*RC, "spark", "checkpoint", doc["checkpoint"], "--json", *([] if FULL else ["--no-spark"])],
                        capture_output=True, text=True, cwd=ROOT)
    val = json.loads(ck.stdout)
    assert ck.returncode == 0 and val["valid"] and val["last_committed"] >= N - 1, val
