"""Exit codes decided by the one verdict rule: a recording that did not end "done" is inconclusive
(exit 3), never a violation (exit 1); other commands' exit codes go through the same function."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from rollcheck.cli.main import main
from rollcheck.pyimpl.verdict import RECORDING_ENDS, Check, exit_code, recording_check


@pytest.mark.parametrize("status", ["failed", "recovery-failed", "reference-failed"])
def test_record_query_not_done_is_inconclusive(status: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    import rollcheck.spark_replay.query.record as query

    def fake(cfg: Any, out: Path, **kw: Any) -> dict[str, Any]:
        return {"status": status, "seconds": 0.1, "checkpoint": str(tmp_path / "ck"), "trace": str(out)}

    monkeypatch.setattr(query, "record_query", fake)
    rc = main(["spark", "record", "query", "--module", "wordcount_agg", "--out", str(tmp_path / "t.jsonl")])
    assert rc == 3
    assert f"the recording ended {status!r}" in capsys.readouterr().err


def test_record_query_done_is_ok(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import rollcheck.spark_replay.query.record as query

    monkeypatch.setattr(query, "record_query", lambda cfg, out, **kw: {
        "status": "done", "seconds": 0.1, "checkpoint": str(tmp_path), "trace": str(out)})
    assert main(["spark", "record", "query", "--module", "wordcount_agg", "--out", str(tmp_path / "t.jsonl")]) == 0


def test_record_wordcount_failed_is_inconclusive(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import rollcheck.spark_replay.jobs.wordcount as wordcount

    monkeypatch.setattr(wordcount, "record_wordcount", lambda cfg, out, **kw: {
        "status": "failed", "seconds": 0.1, "trace": str(out)})
    assert main(["spark", "record", "wordcount", "--out", str(tmp_path / "t.jsonl")]) == 3


def test_every_recording_end_maps_to_ok_or_inconclusive() -> None:
    for status in [*RECORDING_ENDS, "something-new"]:
        assert exit_code([recording_check(status)]) in (0, 3)
    assert exit_code([recording_check("done")]) == 0
    assert exit_code([Check.violated("x", "bad")]) == 1


def test_exit_codes_are_decided_in_one_function() -> None:
    """No subcommand writes ``return 1`` or ``return 3`` by hand: they come from the verdict."""
    import re

    cli = Path(__file__).resolve().parents[1] / "rollcheck" / "cli"
    by_hand = []
    for f in sorted(cli.glob("*.py")):
        for n, line in enumerate(f.read_text().splitlines(), 1):
            if re.search(r"\breturn\s+(1|3)\b(?!\s*\+)|return\s+\d\s+if\b|return\s+1\s+if\b", line):
                by_hand.append(f"{f.name}:{n}: {line.strip()}")
    assert not by_hand, by_hand
