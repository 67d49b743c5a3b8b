"""A requested Flink failure strikes for any job, where asked, and unaligned cells prove channel state.

The job ``tests/flink_jobs/branches_slow_side.py`` feeds two branches from its source: a slow map
at parallelism 1 and a keyed sum into the module's own sink. With 40 records and the failure at
the last one, the input ends before two checkpoints completed: the pace step sees no record after
them, so before the source tap's strike at a checkpoint's completion the failure never struck
(``failure-observed`` unchecked, exit 3). The shipped recording of that run
(``branches-last-record.jsonl``, subtask 1 after checkpoint 2, unaligned; 176 s) is replayed and
tampered per parameter without Flink; one ``slow`` test records it again (about 80-180 s).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rollcheck.flink_replay.checks.strike import CHANNELS, STRUCK
from rollcheck.flink_replay.checks.user_replay import replay_job
from rollcheck.flink_replay.job.strike import local_threshold, slowdown_s
from rollcheck.pyimpl.verdict import Status

ROOT = Path(__file__).resolve().parent.parent
JOB = ROOT / "tests" / "flink_jobs" / "branches_slow_side.py"
TRACE = ROOT / "tests" / "flink_jobs" / "branches-last-record.jsonl"
CLI = [sys.executable, "-m", "rollcheck.cli.main"]


def _lines() -> list[dict]:
    return [json.loads(x) for x in TRACE.read_text().splitlines() if x.strip()]


def _write(tmp_path: Path, objs: list[dict]) -> Path:
    out = tmp_path / "t.jsonl"
    out.write_text("".join(json.dumps(o) + "\n" for o in objs))
    return out


def test_every_subtask_reaches_its_failure_point() -> None:
    # 41 records at parallelism 2: splits of 20 and 21; record 41 is reachable by the smaller one
    assert local_threshold(41, 41, 2) == 20
    assert local_threshold(1, 40, 2) == 1
    assert slowdown_s(39, 40, 10.0) == 0.5 and slowdown_s(0, 10 ** 6, 10.0) == 0.05


def test_shipped_recording_proves_where_and_the_channel_state() -> None:
    rep = replay_job(TRACE)
    assert rep.verdict.value == "inconclusive", rep.summary()
    assert rep.check("failure-observed").status is Status.HELD
    struck = rep.check(STRUCK)
    assert struck is not None and struck.status is Status.HELD, struck
    assert "subtask 1" in struck.detail and "after checkpoint" in struck.detail
    # the input had ended: the restored checkpoint 2 was taken aligned, with nothing in flight (its
    # _metadata says so, as Flink's statistics did): not an unaligned test, said so, not a pass
    ch = rep.check(CHANNELS)
    assert ch is not None and ch.status is Status.UNCHECKED and "held no data in flight" in ch.detail, ch


@pytest.mark.parametrize(("field", "value", "check", "status"), [
    ("subtask", 0, STRUCK, Status.VIOLATED),            # struck elsewhere than asked
    ("after_checkpoint", 1, STRUCK, Status.VIOLATED),   # struck before the checkpoint asked for
    ("after_checkpoint", None, STRUCK, Status.UNCHECKED),
])
def test_tampered_failure_placement_is_caught(field: str, value: object, check: str, status: Status,
                                              tmp_path: Path) -> None:
    objs = _lines()
    fail = next(o for o in objs if o.get("kind") == "failure")
    if value is None:
        del fail[field]
    else:
        fail[field] = value
    rep = replay_job(_write(tmp_path, objs))
    got = rep.check(check)
    assert got is not None and got.status is status, got
    assert rep.verdict.value != "conformant"


@pytest.mark.parametrize("how", ["filled", "drop", "other-checkpoint"])
def test_tampered_channel_state_is_not_a_pass(how: str, tmp_path: Path) -> None:
    objs = _lines()
    ch = next(o for o in objs if o.get("kind") == "flink.channel_state")
    if how == "filled":  # data in flight held: the check passes; emptied again, it does not
        ch.update(input_bytes=1170, output_bytes=0, holders=["ab/0 of 2: in 1170 B (1 handles), out 0 B"])
        assert replay_job(_write(tmp_path, objs)).check(CHANNELS).status is Status.HELD
        ch.update(input_bytes=0, holders=[])
    elif how == "drop":
        pass  # written below without the event
    else:
        ch["checkpoint"] = int(ch["checkpoint"]) + 7
    path = _write(tmp_path, objs)
    if how == "drop":  # keep the seq numbering: rebuild it from the tampered list
        seqd = _lines()
        seqd = [o for o in seqd if o.get("kind") != "flink.channel_state"]
        for i, o in enumerate(seqd[1:]):
            o["seq"] = i + 1
        path = _write(tmp_path, seqd)
    rep = replay_job(path)
    got = rep.check(CHANNELS)
    want = Status.VIOLATED if how == "other-checkpoint" else Status.UNCHECKED
    assert got is not None and got.status is want, got
    assert rep.verdict.value != "conformant"


def test_old_traces_get_no_new_checks() -> None:
    rep = replay_job(ROOT / "tests" / "flink_jobs" / "ledger-task.jsonl")
    assert rep.check(STRUCK) is None and rep.check(CHANNELS) is None


@pytest.mark.parametrize(("args", "needle"), [
    (["--fail-subtask", "2"], "--fail-subtask 2"),
    (["--fail-after-checkpoint", "0"], "--fail-after-checkpoint 0"),
])
def test_unreachable_failure_points_are_refused_before_flink(args: list[str], needle: str,
                                                             tmp_path: Path) -> None:
    r = subprocess.run([*CLI, "flink", "record", "job", "--module", str(JOB), "--out", str(tmp_path / "t.jsonl"),
                        "--fail-at-record", "10", "--failure", "task", *args], capture_output=True, text=True,
                       timeout=120, cwd=ROOT)
    assert r.returncode == 2, r.stderr
    assert needle in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "t.jsonl").exists()


@pytest.mark.slow
def test_failure_at_the_last_record_strikes_for_real(tmp_path: Path) -> None:
    out = tmp_path / "t.jsonl"
    r = subprocess.run([*CLI, "flink", "record", "job", "--module", str(JOB), "--out", str(out),
                        "--checkpoints", "unaligned", "--fail-at-record", "40", "--failure", "task",
                        "--rate", "400"], capture_output=True, text=True, timeout=900, cwd=ROOT,
                       env=dict(os.environ, RECORDS="40"))
    assert r.returncode == 0, r.stderr[-2000:]
    rep = replay_job(out)
    assert rep.check("failure-observed").status is Status.HELD, rep.summary()
    assert rep.verdict.value in ("conformant", "inconclusive"), rep.summary()


def test_unaligned_rescaled_cell_restored_data_in_flight() -> None:
    # the matrix cell of the brief (unaligned, rescale 2:1, task; 193 s): decided, not inconclusive
    rep = replay_job(ROOT / "tests" / "flink_jobs" / "branches-unaligned-rescale-2-1.jsonl")
    assert rep.verdict.value == "conformant", rep.summary()
    ch = rep.check(CHANNELS)
    assert ch is not None and ch.status is Status.HELD and "restored at 1 (redistributed)" in ch.detail, ch
