"""Restores of an attempt a second failure cancelled (``twice`` / ``during-restore``).

Found by the hunt on apache-flink 1.20.5 (``flink matrix --failures twice``): the second failure
struck while the first restore was under way, so one keyed subtask (or none) logged its restore
in attempt 1. ``keyed-state-restored-once`` called that lost state (a false finding), and with no
keyed restore at all it crashed on an empty ``min()`` (reported as an inconclusive cell). The two
recorded traces are kept here; the checks now ask each subtask of a cancelled attempt to restore
at most once and check in full what those that did restore hold.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rollcheck.flink_replay.checks.rescale import (
    cut_attempts,
    keyed_state_check,
    operator_state_check,
    user_state_check,
)

DATA = Path(__file__).parent / "data" / "flink_hunt"  # apart from data/flink: its traces are all conformant
CUT_KEYED = DATA / "keyed-totals-1.20.5-twice-cut-keyed.jsonl"  # attempt 1: keyed[0] only
NO_KEYED = DATA / "keyed-totals-1.20.5-twice-no-keyed.jsonl"  # attempt 1: sources only


def _load(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    lines = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]
    return lines[0], [e for e in lines[1:] if "kind" in e]


@pytest.mark.parametrize("path", [CUT_KEYED, NO_KEYED], ids=["one-keyed-restored", "no-keyed-restored"])
def test_cancelled_attempt_is_not_lost_state(path: Path) -> None:
    header, events = _load(path)
    assert cut_attempts(events) == {1}
    for check in (keyed_state_check(header, events), operator_state_check(header, events),
                  user_state_check(header, events)):
        assert check.status.value == "held", (check.name, check.detail)


def test_cancelled_attempt_still_checks_what_it_restored() -> None:
    header, events = _load(CUT_KEYED)
    first = next(e for e in events if e["kind"] == "flink.restore" and e["task"] == "keyed" and e["attempt"] == 1)
    assert first["keys"], "the fixture's cut attempt restored keys"
    lost_key = sorted(first["keys"])[0]
    tampered = [dict(e, keys={k: v for k, v in e["keys"].items() if k != lost_key}) if e is first else e
                for e in events]
    c = keyed_state_check(header, tampered)
    assert c.status.value == "violated" and "lost state" in c.detail and c.detail.startswith("attempt 1")
    twice = [dict(e) for e in events]
    twice.append(dict(first, seq=max(e["seq"] for e in events) + 1))  # keyed[0] restores twice in attempt 1
    c = keyed_state_check(header, twice)
    assert c.status.value == "violated" and "at most once" in c.detail


def test_without_the_second_failure_every_subtask_must_restore() -> None:
    header, events = _load(CUT_KEYED)
    plain = [{k: v for k, v in e.items() if k not in ("in_attempt", "second")} if e["kind"] == "failure" else e
             for e in events]
    assert cut_attempts(plain) == set()
    c = keyed_state_check(header, plain)
    assert c.status.value == "violated" and "expected 0..1" in c.detail
    header2, events2 = _load(NO_KEYED)
    plain2 = [{k: v for k, v in e.items() if k not in ("in_attempt", "second")} if e["kind"] == "failure" else e
              for e in events2]
    c = keyed_state_check(header2, plain2)  # a crash (empty min()) before the fix
    assert c.status.value == "violated" and "no keyed subtask restored" in c.detail
