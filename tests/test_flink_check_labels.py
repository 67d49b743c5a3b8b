"""A malformed event of a user's Flink job trace is reported under the check that reads it.

Every plug-in of ``flink replay`` on a user's job used to compute all of the job's checks and pick
its own, so the first to run (``failure-observed``) raised any error of the others: a malformed
committed row was reported as ``failure-observed: the trace's Flink events are malformed``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from rollcheck.cli.main import main
from rollcheck.flink_replay.checks.user_replay import JOB_CHECKS, job_check, job_checks

ROOT = Path(__file__).resolve().parents[1]
JOB = ROOT / "examples" / "flink-job-rescale-2-1.jsonl"


def _doctor(tmp_path: Path, pick: Callable[[dict[str, Any]], bool], change: Callable[[dict[str, Any]], None]) -> Path:
    """The shipped job trace with ``change`` applied to the first event ``pick`` selects."""
    lines = JOB.read_text(encoding="utf-8").splitlines()
    out, done = [lines[0]], False
    for x in lines[1:]:
        e = json.loads(x)
        if not done and pick(e):
            change(e)
            done = True
        out.append(json.dumps(e))
    assert done
    p = tmp_path / "t.jsonl"
    p.write_text("\n".join(out) + "\n", encoding="utf-8")
    return p


def _committed(e: dict[str, Any]) -> bool:
    return e["kind"] == "flink.sink_output" and e["sink"] == "tx"


def _restored(e: dict[str, Any]) -> bool:
    return e["kind"] == "flink.restore" and e.get("attempt", 0) > 0


def _set_last(value: Any) -> Callable[[dict[str, Any]], None]:
    return lambda e: e["lines"].__setitem__(-1, value)


CASES = {
    "row-not-split": (_committed, _set_last("garbage"), "output-exactly-once"),
    "row-not-json": (_committed, lambda e: e["lines"].__setitem__(
        -1, e["lines"][-1].rsplit("\x1f", 1)[0] + "\x1f{nope"), "output-exactly-once"),
    "row-not-text": (_committed, _set_last(5), "output-exactly-once"),
    "rows-not-a-list": (_committed, lambda e: e.__setitem__("lines", None), "output-exactly-once"),
    "restore-without-checkpoint": (_restored, lambda e: e.pop("checkpoint"), "restore-latest-completed"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_malformed_event_is_named_by_the_check_that_reads_it(capsys, tmp_path, case):
    pick, change, check = CASES[case]
    path = _doctor(tmp_path, pick, change)
    for argv in (["flink", "replay", str(path), "--no-tlc"], ["check", "trace", str(path), "--no-tlc"]):
        rc = main(argv)
        err = capsys.readouterr().err
        assert rc == 2, (argv, err)
        line = next(x for x in err.splitlines() if ": error:" in x)
        assert f"{path}: {check}: " in line and "failure-observed" not in line, line


def test_each_check_computed_alone_equals_the_whole_list():
    """``job_check`` (one check) and ``job_checks`` (all, in order) agree on the shipped job trace."""
    lines = JOB.read_text(encoding="utf-8").splitlines()
    header = json.loads(lines[0])
    events = [json.loads(x) for x in lines[1:]]
    all_checks = job_checks(header, events)
    assert [c.name for c in all_checks][:-1] == list(JOB_CHECKS[:-1])
    assert all_checks[-1].name.startswith("user-sink-")
    for name, c in zip(JOB_CHECKS, all_checks, strict=True):
        alone = job_check(name, header, events)
        assert (alone.name, alone.status, alone.detail) == (c.name, c.status, c.detail)
    with pytest.raises(ValueError, match="no check"):
        job_check("nope", header, events)
