"""Real PySpark runs: one short streaming and one short message-passing record/replay with a failure.

Both go through the CLI (a fresh process each, like a user), are replayed for conformance, and
their traces are tampered with. The streaming run also keeps its checkpoint directory so that the
plain-Python checkpoint reader is compared with Spark's own ``statestore``/``state-metadata``
readers (recorded in the trace as ``state_crosscheck``) and with the trace itself.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rollcheck.spark_replay.checkpoint.reader import CheckpointDir
from rollcheck.spark_replay.jobs.wordcount import WordcountConfig, record_wordcount
from rollcheck.spark_replay.replay.conformance import replay_file
from rollcheck.spark_replay.tamper import delete_forced_checkpoint, drop_commit, move_resume
from rollcheck.spark_replay.trace import read_trace

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parent.parent
RC = [sys.executable, "-m", "rollcheck.cli.main"]


def test_streaming_record_replay_reader_and_tampering(tmp_path):
    """One short streaming run with a sink failure: conformance, the checkpoint reader against
    Spark's readers and the trace, tampered traces, and (same JVM) a sweep's identity.

    Kept as one test so that ``pytest -n 2`` runs one Spark driver per worker, not two.
    """
    out = tmp_path / "wc.jsonl"
    work = tmp_path / "work"
    cfg = WordcountConfig(batches=4, fail_at_batch=2, failure="sink", seed=7, snapshot_every=2)
    res = record_wordcount(cfg, out, workdir=work)
    assert res["status"] == "done"

    # replay through the CLI
    r = subprocess.run([*RC, "spark", "replay", str(out), "--json"], capture_output=True, text=True, cwd=ROOT)
    doc = json.loads(r.stdout)
    assert r.returncode == 0, doc
    assert doc["conformant"] and not doc["truncated"]
    t = read_trace(out)
    restart = t.of_kind("spark.restart")[0]
    assert restart["resume_batch"] == 2 and set(restart["restored_versions"].values()) == {2}
    assert [e["batch"] for e in t.of_kind("failure")] == [2]
    observed = next(c for c in doc["checks"] if c["name"] == "failure-observed")
    assert observed["ok"] is True and observed["status"] == "held"

    # the plain-Python checkpoint reader against Spark's readers and the trace
    cross = t.of_kind("spark.state_crosscheck")[0]
    assert cross["agree"] and cross["spark_rows"] == cross["rows"] > 0
    ck = CheckpointDir(work / "checkpoint")
    assert sorted(ck.commits()) == [0, 1, 2, 3] == sorted(ck.offsets())
    files = ck.source_files(0)
    planned = {e["batch"]: e["files"] for e in t.of_kind("spark.batch_planned")}
    assert {b: [Path(f).name for f in fs] for b, fs in files.items()} == planned
    state = ck.state(0)
    assert state == ck.state(0, use_snapshots=False)  # snapshot + deltas == all deltas
    for part in ck.partitions(0):
        for v, kinds in ck.state_versions(0, part).items():
            if "snapshot" in kinds:
                snap = {k: val for k, val in ck.read_state_file(0, part, v, "snapshot")}
                assert snap == ck.state(0, v, use_snapshots=False)[part]
    rows = sorted(([*k, *v] for part in state.values() for k, v in part.items()), key=repr)
    assert rows == sorted(t.of_kind("spark.final_state")[0]["rows"], key=repr)
    assert ck.operators()[0]["operatorInfo"]["operatorName"] == "stateStoreSave"
    from rollcheck.spark_replay.checkpoint.check import check_checkpoint

    v = check_checkpoint(work / "checkpoint", spark=False)
    assert v["valid"] and v["last_committed"] == 3 and v["operators"][0]["rows"] == cross["rows"]

    # tampered copies are flagged at their first offending event
    for tamper in (drop_commit, move_resume):
        lines, seq = tamper(t)
        p = tmp_path / f"{tamper.__name__}.jsonl"
        p.write_text("\n".join(lines) + "\n")
        bad = replay_file(p)
        assert not bad.conformant and bad.first_offending_seq == seq

    # a seeded sweep on Spark equals the single-process run
    from rollcheck.spark_replay.jobs.sweep import run_sweep

    sw = run_sweep("properties", 5, 4, partitions=4)
    assert sw["identical"] is True and sw["violations"] == [] and sw["checked"] == 4 * 8


def test_wordcount_task_failure_really_fails_a_task(tmp_path):
    """The task failure used to be optimised away (a vacuous pass). Now the injecting filter is in
    the physical plan, a task of the batch raises, the query fails and restarts; without the
    failure event the same trace replays as inconclusive."""
    out = tmp_path / "wc-task.jsonl"
    res = record_wordcount(WordcountConfig(batches=3, fail_at_batch=1, failure="task", seed=2,
                                           crosscheck=False), out)
    assert res["status"] == "done"
    t = read_trace(out)
    assert [(e["mode"], e["batch"]) for e in t.of_kind("failure")] == [("task", 1)]
    assert "BatchEvalPython" in t.of_kind("spark.plan")[0]["physical"]
    assert len(t.of_kind("spark.attempt_start")) == 2 and t.of_kind("spark.restart")[0]["resume_batch"] == 1
    r = replay_file(out)
    assert r.conformant is True, [c.to_json() for c in r.checks if c.ok is False]
    # the side channel has no duplicate: the task failed before the sink ran
    assert "0 duplicate" in next(c.detail for c in r.checks if c.name == "side-channel-duplicates")


def test_nhop_record_replay_with_failure(tmp_path):
    out = tmp_path / "nhop.jsonl"
    private_tmp = tmp_path / "tmp"  # the recorder's temporary folders go here: it must end empty
    private_tmp.mkdir()
    r = subprocess.run([*RC, "spark", "record", "nhop", "--protocol", "hmnr", "--out", str(out),
                        "--processes", "3", "--rounds", "4", "--fail-process", "P1", "--fail-round", "3",
                        "--topology", "cyclic", "--seed", "4", "--json"],
                       capture_output=True, text=True, cwd=ROOT, env={**os.environ, "TMPDIR": str(private_tmp)})
    assert r.returncode == 0, r.stderr[-2000:]
    t = read_trace(out)
    assert t.of_kind("failure") and t.of_kind("recovery") and t.of_kind("end")
    assert t.header["config"]["engine"] == "spark"
    r = subprocess.run([*RC, "spark", "replay", str(out), "--json"], capture_output=True, text=True, cwd=ROOT)
    doc = json.loads(r.stdout)
    assert r.returncode == 0 and doc["conformant"], doc
    names = {c["name"] for c in doc["checks"]}
    assert {"forced-checkpoints", "no-useless-checkpoints", "recovery-line", "outputs-failure-free",
            "tlc-trace"} <= names
    if any(e["kind"] == "checkpoint" and e.get("forced") for e in t.events):
        lines, seq = delete_forced_checkpoint(t)
        p = tmp_path / "t.jsonl"
        p.write_text("\n".join(lines) + "\n")
        bad = replay_file(p)
        assert not bad.conformant and bad.first_offending_seq == seq
    assert list(private_tmp.iterdir()) == []  # no temporary folder left behind



@pytest.mark.skipif(os.environ.get("ROLLCHECK_PROFILE") != "verify",
                    reason="two driver JVMs: run with ROLLCHECK_PROFILE=verify (and by rollcheck verify)")
def test_wordcount_kill_of_the_driver(tmp_path):
    out = tmp_path / "wc-kill.jsonl"
    res = record_wordcount(WordcountConfig(batches=3, fail_at_batch=1, failure="kill", seed=4, crosscheck=False), out)
    assert res["status"] == "done" and res["children"] == 2
    t = read_trace(out)
    assert [(e["mode"], e["batch"]) for e in t.of_kind("failure")] == [("kill", 1)]
    r = replay_file(out)
    assert r.conformant is True, [c.to_json() for c in r.checks if c.ok is False]
