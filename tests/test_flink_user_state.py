"""The keyed state of a user's own Flink operators, key by key, across a rescaled restore (issue 23).

A stored real run (``keyed_totals.py`` on RocksDB, failed at parallelism 2 and restored at 3) whose
user operator (a PyFlink ``KeyedProcessFunction`` with two ``ValueState``s) was logged key by key by
``RollcheckStateLog`` at every snapshot and after the restore; tampered copies of it are the
mutants: a restore that loses one key group, hands one key group to two subtasks, or changes one
key's state. No Flink runs here (about 1 s in all).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from rollcheck.flink_replay.checks.replay import read_flink_trace
from rollcheck.flink_replay.checks.rescale import USER, user_state_check
from rollcheck.flink_replay.checks.tamper import tamper
from rollcheck.flink_replay.checks.user_replay import replay_job
from rollcheck.pyimpl.verdict import Status

ROOT = Path(__file__).resolve().parent.parent
TRACE = ROOT / "tests" / "flink_jobs" / "job-rocksdb-rescale-2-3.jsonl"


def test_real_rescaled_restore_holds_key_by_key() -> None:
    rep = replay_job(TRACE)
    assert rep.verdict.value == "conformant", rep.summary()
    c = rep.check(USER)
    assert c is not None and c.status is Status.HELD
    # 12 accounts x 2 states ("total", "count"), every one restored once; some changed subtask
    assert c.examined == 24 and "rescaled 2 -> 3" in c.detail
    moved = int(re.search(r"(\d+) changed subtask", c.detail).group(1))  # type: ignore[union-attr]
    assert 0 < moved < 24 and "recomputed from the key for 24" in c.detail


@pytest.mark.parametrize(("how", "word"), [("lose-user-key-group", "lost state"),
                                            ("duplicate-user-key-group", "restored twice"),
                                            ("corrupt-user-state", "restored as"),
                                            ("abandon-user-state", "the restored state was abandoned")])
def test_broken_restores_are_caught(how: str, word: str, tmp_path: Path) -> None:
    out = tmp_path / f"{how}.jsonl"
    assert tamper(TRACE, how, out) == USER
    rep = replay_job(out)
    c = rep.check(USER)
    assert c is not None and c.status is Status.VIOLATED and word in c.detail, c.detail
    assert c.offending_seq is not None and rep.verdict.value == "violated"
    # rollcheck's own keyed tap and outputs are untouched: the user check alone finds it
    assert rep.root_cause is not None and rep.root_cause.name == USER


def test_key_in_the_wrong_subtask_is_caught() -> None:
    header, events, _ = read_flink_trace(TRACE)
    rs = [e for e in events if e["kind"] == "flink.user_state" and e["phase"] == "restore" and e["attempt"] > 0]
    a, b = rs[0], next(e for e in rs if e["subtask"] != rs[0]["subtask"])
    state = sorted(a["states"])[0]
    key = sorted(a["states"][state])[0]
    b["states"][state][key] = a["states"][state].pop(key)   # moved, not duplicated
    c = user_state_check(header, events)
    assert c.status is Status.VIOLATED and "its owner at parallelism 3" in c.detail


def test_unreadable_or_missing_state_is_not_a_pass() -> None:
    header, events, _ = read_flink_trace(TRACE)
    err = [*events, {"seq": 10 ** 6, "kind": "flink.user_state_error", "error": "snapshot: IllegalStateException"}]
    assert user_state_check(header, err).status is Status.UNCHECKED
    no_snaps = [e for e in events if not (e["kind"] == "flink.user_state" and e["phase"] == "snapshot")]
    assert user_state_check(header, no_snaps).status is Status.UNCHECKED
    no_log = [e for e in events if e["kind"] != "flink.user_state"]
    assert user_state_check(header, no_log).status is Status.NOT_APPLICABLE   # a job without keyed operators
    old = {k: v for k, v in header.items() if k != "user_state_log"}
    c = user_state_check(old, no_log)
    assert c.status is Status.NOT_APPLICABLE and "recorded without" in c.detail
    no_failure = [e for e in events if e["kind"] != "failure"]
    assert user_state_check(header, no_failure).status is Status.NOT_APPLICABLE


def test_the_word_count_is_not_its_business() -> None:
    header = json.loads(TRACE.read_text().splitlines()[0])
    header["job"] = "wordcount"
    assert user_state_check(header, []).status is Status.NOT_APPLICABLE


FINDING = ROOT / "tests" / "data" / "flink_findings" / "pyflink-keyed-reduce-2.3.0.jsonl"


def test_pyflinks_keyed_reduce_abandons_its_restored_state() -> None:
    """A real apache-flink 2.3.0 recording of benchmarks/engine_bugs/findings/pyflink_keyed_reduce.py
    (a task failure at record 300): PyFlink's ``KeyedStream.reduce`` names its state with a new UUID
    in every ``open()``, so after the restore each subtask sums into a new, empty state. The root
    cause names both state names; the output and the BATCH run disagree with the restored job."""
    rep = replay_job(FINDING)
    c = rep.check(USER)
    assert c is not None and c.status is Status.VIOLATED, c
    assert "the restored state was abandoned" in c.detail and c.detail.count("'_reduce_state") == 2
    assert rep.root_cause is not None and rep.root_cause.name == USER
    for name in ("output-exactly-once", "batch-equivalent"):
        got = rep.check(name)
        assert got is not None and got.status is Status.VIOLATED, got
    ok = rep.check("restore-latest-completed")
    assert ok is not None and ok.status is Status.HELD
