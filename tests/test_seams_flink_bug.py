"""An exception of rollcheck's own inside a Flink check is rollcheck's bug (exit 4, one line naming
rollcheck), not "malformed events" (exit 2); a malformed trace stays bad input."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import rollcheck.flink_replay.checks.replay as replay
import rollcheck.flink_replay.checks.user_replay as user_replay
from rollcheck.cli.main import main
from rollcheck.flink_replay.checks.event_shape import malformed_reason

ROOT = Path(__file__).resolve().parents[1]
WORDCOUNT = ROOT / "examples" / "flink-aligned-task-failure.jsonl"
JOB = ROOT / "examples" / "flink-job-rescale-2-1.jsonl"


def _bug(*args: Any) -> Any:
    return None + 1  # type: ignore[operator]  # a TypeError of rollcheck's own code


def _error_lines(err: str) -> list[str]:
    return [x for x in err.splitlines() if ": error:" in x or "internal error" in x]


@pytest.mark.parametrize("trace, module, attr, check", [
    (WORDCOUNT, replay, "_snapshot_of", "snapshot-consistent"),
    (JOB, user_replay, "restore_check", "restore-latest-completed"),
])
def test_a_bug_in_a_check_exits_4_naming_rollcheck(trace: Path, module: Any, attr: str, check: str,
                                                   monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(module, attr, _bug)
    rc = main(["flink", "replay", str(trace), "--no-tlc"])
    err = capsys.readouterr().err
    assert rc == 4, err
    lines = _error_lines(err)
    assert len(lines) == 1, err
    assert check in lines[0] and "a bug in rollcheck" in lines[0] and "malformed" not in lines[0], lines[0]
    assert "Traceback" not in err


def test_the_same_exception_on_a_malformed_trace_is_bad_input(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    lines = WORDCOUNT.read_text(encoding="utf-8").splitlines()
    out = [lines[0]]
    for x in lines[1:]:
        e = json.loads(x)
        if e.get("kind") == "flink.snapshot" and len(out) < 40:
            e["checkpoint"] = "two"  # not what the recorder writes
        out.append(json.dumps(e))
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join(out) + "\n", encoding="utf-8")
    monkeypatch.setattr(replay, "_snapshot_of", _bug)
    rc = main(["flink", "replay", str(bad), "--no-tlc"])
    err = capsys.readouterr().err
    assert rc == 2, err
    line = _error_lines(err)[0]
    assert "malformed" in line and "field 'checkpoint'" in line, line


def test_every_shipped_flink_trace_is_well_formed() -> None:
    paths = sorted([*ROOT.glob("examples/flink*.jsonl"), *ROOT.glob("tests/data/flink*/*.jsonl")])
    assert paths
    for p in paths:
        rows = p.read_text(encoding="utf-8").splitlines()
        events = [json.loads(x) for x in rows[1:] if x.strip()]
        events = [e for e in events if not e.get("derived") and (e["kind"].startswith("flink.") or e["kind"] == "failure")]
        assert malformed_reason(json.loads(rows[0]), events) is None, p
