"""Every trap of issue 19's list gives exit 3 (or 1), never 0; the uncut shipped examples stay conformant.

One verdict rule (``rollcheck.pyimpl.verdict``): violated if a check is; inconclusive if nothing
was examined or a check the trace calls for could not run; conformant otherwise. The traces are
the shipped examples, cut or edited the way a crashed recorder or a broken engine would leave them.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rollcheck.cli.main import main

ROOT = Path(__file__).resolve().parents[1]
EX = ROOT / "examples"
TRACE = EX / "trace-hmnr-3p.jsonl"
REF = EX / "trace-hmnr-3p.reference.json"


def run(capsys, *argv: str) -> tuple[int, dict]:
    rc = main([*argv, "--json"])
    out = capsys.readouterr().out
    return rc, json.loads(out) if out.strip() else {}


def lines_of(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def write(path: Path, lines: list[str], tail: str = "") -> Path:
    path.write_text("\n".join(lines) + "\n" + tail, encoding="utf-8")
    return path


def status(doc: dict, name: str) -> str:
    return next(c["status"] for c in doc["checks"] if c["name"] == name)


def test_header_only_trace_is_inconclusive(capsys, tmp_path):
    rc, doc = run(capsys, "check", "trace", str(write(tmp_path / "h.jsonl", lines_of(TRACE)[:1])), "--no-tlc")
    assert rc == 3 and doc["conformant"] is None and status(doc, "pattern-valid") == "unchecked"


def test_cut_right_after_the_failure_is_inconclusive(capsys, tmp_path):
    lines = lines_of(TRACE)
    k = next(i for i, x in enumerate(lines) if '"kind":"failure"' in x)
    rc, doc = run(capsys, "check", "trace", str(write(tmp_path / "f.jsonl", lines[:k + 1])), "--no-tlc")
    assert rc == 3 and status(doc, "recovery-line") == "unchecked" and doc["truncated"] is True


@pytest.mark.parametrize("where", ["before-failure", "mid-line", "before-end"])
def test_reference_with_the_run_cut_is_inconclusive(capsys, tmp_path, where):
    lines = lines_of(TRACE)
    if where == "before-failure":
        k = next(i for i, x in enumerate(lines) if '"kind":"failure"' in x)
        p = write(tmp_path / "c.jsonl", lines[:k])
    elif where == "mid-line":
        p = write(tmp_path / "c.jsonl", lines[:-1], tail=lines[-1][:9])  # the end line half written
    else:
        p = write(tmp_path / "c.jsonl", lines[:-1])
    rc, doc = run(capsys, "check", "trace", str(p), "--reference", str(REF), "--no-tlc")
    assert rc == 3 and status(doc, "outputs-exactly-once") == "unchecked", doc


def test_flink_trace_without_sink_output_never_passes(capsys, tmp_path):
    lines = lines_of(EX / "flink-aligned-task-failure.jsonl")
    kept = [lines[0]]
    for x in lines[1:]:
        e = json.loads(x)
        if e["kind"] != "flink.sink_output":
            e["seq"] = len(kept)
            kept.append(json.dumps(e))
    p = write(tmp_path / "nosink.jsonl", kept)
    rc, doc = run(capsys, "flink", "replay", str(p), "--no-tlc")
    assert rc in (1, 3) and doc["conformant"] is not True
    assert status(doc, "output-exactly-once") == "unchecked"


def test_tlc_that_cannot_run_is_unchecked_not_a_pass(tmp_path):
    """Check trace and the Flink replay with a TLC that fails to start: exit 3, no TLC claim."""
    from rollcheck.flink_replay.checks.replay import replay
    from rollcheck.flink_replay.checks.tlc import TLCVerdict
    from rollcheck.pyimpl.traces import check_trace_file

    def broken(protocol, segments):
        return None, "TLC could not start (java: not found)", None

    rep, _ = check_trace_file(TRACE, reference=json.loads(REF.read_text()), tlc=(broken, "hmnr", "", False))
    assert rep.exit_code == 3 and rep.check("tlc-trace").status.value == "unchecked"
    rep = replay(EX / "flink-aligned-task-failure.jsonl", tlc=lambda path: TLCVerdict(None, "java: not found"))
    tlc = rep.check("barrier-alignment-tlc")
    assert rep.exit_code == 3 and tlc.status.value == "unchecked" and rep.check("barrier-alignment").ok is True


def test_nhop_not_checked_is_unchecked_and_a_missing_end_never_passes(tmp_path):
    from rollcheck.spark_replay.jobs.nhop import NhopConfig, record_nhop
    from rollcheck.spark_replay.replay.conformance import replay_file

    out = tmp_path / "nh.jsonl"
    record_nhop(NhopConfig(protocol="hmnr", processes=3, rounds=4, seed=1, fail_process=1, fail_round=2),
                out, engine="local")
    assert replay_file(out).exit_code == 0
    lines = lines_of(out)
    cut = write(tmp_path / "cut.jsonl", lines[:-1])  # the end never reached
    r = replay_file(cut)
    assert r.exit_code == 3 and r.check("end-of-run").status.value == "unchecked"
    assert all(c.status.value != "held" or c.ok for c in r.checks)
    assert not any("not checked" in c.detail for c in r.checks if c.ok)


def test_root_cause_of_the_orphan_example_is_the_wrong_recovery(capsys):
    rc, doc = run(capsys, "check", "trace", str(EX / "trace-hmnr-3p-orphan.jsonl"), "--no-tlc")
    assert rc == 1 and doc["first_offending_seq"] == 19 and doc["root_cause"] == "recovery-line"


@pytest.mark.tlc
def test_root_cause_with_tlc_is_the_wrong_recovery_not_the_forced_checkpoint(capsys):
    rc, doc = run(capsys, "check", "trace", str(EX / "trace-hmnr-3p-orphan.jsonl"))
    tlc = next(c for c in doc["checks"] if c["name"] == "tlc-trace")
    assert rc == 1 and doc["first_offending_seq"] == 19 and doc["root_cause"] == "recovery-line"
    # TLC rejects the execution the engine continued with (at the correct forced checkpoint, seq 15):
    # a consequence of the wrong recovery, named as such
    assert tlc["ok"] is False and tlc["consequence_of"] == "recovery-line"


@pytest.mark.parametrize("name", ["trace-hmnr-3p.jsonl", "flink-aligned-task-failure.jsonl",
                                  "flink-unaligned-task-failure.jsonl", "spark-wordcount-kill.jsonl"])
def test_uncut_shipped_examples_stay_conformant(capsys, name):
    extra = ["--reference", str(REF)] if name == "trace-hmnr-3p.jsonl" else []
    rc, doc = run(capsys, "check", "trace", str(EX / name), "--no-tlc", *extra)
    assert rc == 0 and doc["conformant"] is True, doc


@pytest.mark.parametrize("name, kind, field, value", [
    ("spark-wordcount-kill.jsonl", "spark.restart", "restored_versions", 1.5),
    ("spark-wordcount-kill.jsonl", "spark.batch_planned", "batch", [1]),
    ("flink-aligned-task-failure.jsonl", "flink.sink_output", "lines", 7),
])
def test_a_malformed_engine_event_is_bad_input_not_a_crash(capsys, tmp_path, name, kind, field, value):
    """Engine events are untrusted input: a field of the wrong type is exit 2, one line, no traceback."""
    lines = lines_of(EX / name)
    k = next(i for i, x in enumerate(lines) if json.loads(x).get("kind") == kind)
    e = json.loads(lines[k])
    e[field] = value
    lines[k] = json.dumps(e)
    p = write(tmp_path / "bad.jsonl", lines)
    assert main(["spark" if name.startswith("spark") else "flink", "replay", str(p), "--no-tlc"]) == 2
    err = capsys.readouterr().err
    assert "bad.jsonl" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_checks_derived_from_a_wrong_recovery_say_so(capsys):
    """The missing forced checkpoint (seq 15) is the root cause; the orphan delivery at seq 23 follows
    from the wrong recovery at seq 18 and is marked as its consequence."""
    rc, doc = run(capsys, "check", "trace", str(EX / "trace-hmnr-3p-no-forced.jsonl"), "--no-tlc")
    by = {c["name"]: c for c in doc["checks"]}
    assert rc == 1 and doc["first_offending_seq"] == 15 and doc["root_cause"] == "forced-checkpoints"
    assert by["pattern-valid"]["consequence_of"] == "recovery-line" and "consequence_of" not in by["recovery-line"]


def test_one_check_type_in_the_trace_and_replay_world():
    """The old result types are gone: only rollcheck.pyimpl.verdict defines a check result."""
    import re

    old = re.compile(r"^class (Check|CheckResult|TraceReport|ReplayResult|FlinkReplay)\b", re.M)
    found = [f"{p.relative_to(ROOT)}: {m.group(0)}"
             for folder in ("pyimpl", "infra", "spark_replay", "flink_replay", "rollcheck", "tla", "properties")
             for p in (ROOT / folder).rglob("*.py") for m in old.finditer(p.read_text(encoding="utf-8"))]
    assert found == ["pyimpl/verdict.py: class Check"], found
