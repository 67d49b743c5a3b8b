"""``restore-latest-completed`` checks every restoring attempt (:mod:`rollcheck.flink_replay.checks.restores`).

Before, only the first attempt after the failure was examined: under ``--failure twice`` or
``during-restore`` the second restore could take any checkpoint unseen. The mutants below change
only the second restore, on real apache-flink 2.3.0 recordings of keyed_totals.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rollcheck.cli.main import main
from rollcheck.flink_replay.checks.restores import restore_latest_completed
from rollcheck.flink_replay.checks.user_replay import restore_check
from rollcheck.pyimpl.verdict import Status

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "flink_oracles"


def _load(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    lines = path.read_text(encoding="utf-8").splitlines()
    return json.loads(lines[0]), [json.loads(x) for x in lines[1:]]


def _last_attempt(events: list[dict[str, Any]]) -> int:
    return max(e["attempt"] for e in events if e["kind"] == "flink.restore")


@pytest.mark.parametrize("kind", ["twice", "during-restore"])
def test_every_restoring_attempt_of_a_real_run_is_examined(kind: str) -> None:
    _, ev = _load(DATA / f"keyed-totals-{kind}-2.3.0.jsonl")
    c = restore_check(ev)
    assert c.status is Status.HELD, c.detail
    assert f"attempt {_last_attempt(ev)}: checkpoint 2" in c.detail
    assert c.examined == (2 if kind == "twice" else 1)


@pytest.mark.parametrize("kind", ["twice", "during-restore"])
def test_a_second_restore_of_an_older_checkpoint_is_caught(kind: str, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """Mutant: the attempt after the second failure restores checkpoint 1 although 2 was complete."""
    h, ev = _load(DATA / f"keyed-totals-{kind}-2.3.0.jsonl")
    last = _last_attempt(ev)
    bad = [dict(e, checkpoint=1) if e["kind"] == "flink.restore" and e["attempt"] == last else e for e in ev]
    c = restore_check(bad)
    assert c.status is Status.VIOLATED
    assert f"attempt {last} restored checkpoint 1" in c.detail and "was 2" in c.detail
    first = min(e["seq"] for e in bad if e["kind"] == "flink.restore" and e["attempt"] == last)
    assert c.offending_seq == first
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in [h, *bad]) + "\n", encoding="utf-8")
    assert main(["flink", "replay", str(path), "--json", "--no-tlc"]) == 1
    got = {x["name"]: x for x in json.loads(capsys.readouterr().out)["checks"]}
    assert got["restore-latest-completed"]["status"] == "violated"


def test_tasks_of_the_second_attempt_restoring_different_checkpoints_are_caught() -> None:
    _, ev = _load(DATA / "keyed-totals-twice-2.3.0.jsonl")
    second = [e for e in ev if e["kind"] == "flink.restore" and e["attempt"] == 2]
    bad = [dict(e, checkpoint=1) if e is second[-1] else e for e in ev]
    c = restore_check(bad)
    assert c.status is Status.VIOLATED and "attempt 2: tasks restored different checkpoints" in c.detail


def test_a_restart_event_bounds_what_the_attempt_could_restore() -> None:
    """A checkpoint completed after the RESTARTING state but before the restore was not there to
    restore: restoring the one before it holds."""
    ev = [{"seq": 1, "kind": "flink.checkpoint_completed", "checkpoint": 1},
          {"seq": 2, "kind": "failure"},
          {"seq": 3, "kind": "flink.job_state", "state": "RESTARTING"},
          {"seq": 4, "kind": "flink.checkpoint_completed", "checkpoint": 2},
          {"seq": 5, "kind": "flink.restore", "attempt": 1, "checkpoint": 1}]
    assert restore_latest_completed(ev).status is Status.HELD
    assert restore_latest_completed(ev[:2] + ev[3:]).status is Status.VIOLATED


def test_without_a_failure_a_job_is_not_applicable_and_the_word_count_unchecked() -> None:
    ev = [{"seq": 1, "kind": "flink.checkpoint_completed", "checkpoint": 1}]
    assert restore_latest_completed(ev, no_failure="not-applicable").status is Status.NOT_APPLICABLE
    assert restore_latest_completed(ev).status is Status.UNCHECKED


def test_the_word_count_replay_uses_the_same_check(capsys: pytest.CaptureFixture[str]) -> None:
    path = ROOT / "tests" / "data" / "flink" / "aligned-task-failure.jsonl"
    main(["flink", "replay", str(path), "--json", "--no-tlc"])
    got = {x["name"]: x for x in json.loads(capsys.readouterr().out)["checks"]}
    assert got["restore-latest-completed"]["status"] == "held"
    assert "attempt 1: checkpoint" in got["restore-latest-completed"]["detail"]
