"""Flink's ``release-differential`` oracle (:func:`rollcheck.flink_replay.checks.oracles.release_check`).

Fast tests on constructed traces: a recorded keyed_totals run (apache-flink 2.3.0, a task
failure, its BATCH run inside) relabelled as recorded on 2.2.1 with the failure-free run on the
reference release 2.3.0 (``flink.release_reference``, the reference's own committed rows) holds;
the mutant ``differ-release`` (R's run lost a KEY's last row) is caught, naming both releases,
the KEY and which release the BATCH run agrees with; R's run failing with the engine's exception
is a violation, the module failing there leaves the check unchecked; without ``--engine-version``
the check is not applicable. The flags: ``--reference-version`` without ``--engine-version`` and
an out-of-range R are refused (exit 2) before anything runs. One real run (marked ``engines``)
records a job module on 2.2.1 with the failure-free run on the pinned 2.3.0.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from rollcheck.cli.main import main
from rollcheck.flink_replay.checks.oracles import ORACLE_TAMPERS, RELEASE, release_check
from rollcheck.flink_replay.checks.user_replay import JOB_CHECKS
from rollcheck.pyimpl.verdict import Status

ROOT = Path(__file__).resolve().parents[1]
TOTALS = ROOT / "tests" / "data" / "flink_oracles" / "keyed-totals-task-2.3.0.jsonl"
JOB = ROOT / "examples" / "flink_jobs" / "keyed_totals.py"


def _load(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    lines = path.read_text(encoding="utf-8").splitlines()
    return json.loads(lines[0]), [json.loads(x) for x in lines[1:]]


def _write(path: Path, header: dict[str, Any], events: list[dict[str, Any]]) -> Path:
    path.write_text("\n".join(json.dumps(x) for x in [header, *events]) + "\n", encoding="utf-8")
    return path


def _two_releases(**rel: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The recorded run as if on 2.2.1, with R = 2.3.0's failure-free run (its reference's rows)."""
    h, ev = _load(TOTALS)
    h = {**h, "engine_version": "2.2.1", "flink": {**h["flink"], "pyflink": "2.2.1"},
         "config": {**h["config"], "engine_version": "2.2.1", "reference_version": "2.3.0"}}
    ref = next(e for e in ev if e["kind"] == "flink.sink_output" and e["sink"] == "reference")
    end = ev[-1]
    event = {"seq": end["seq"], "kind": "flink.release_reference", "engine_version": "2.3.0",
             "final_state": "FINISHED", "lines": list(ref["lines"]), "seconds": 20.0, **rel}
    return h, [*ev[:-1], event, {**end, "seq": end["seq"] + 1}]


def test_release_differential_is_a_check_of_every_job_trace() -> None:
    assert RELEASE in JOB_CHECKS and JOB_CHECKS[-1] == "user-sink"


def test_equal_final_tables_hold(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    h, ev = _two_releases()
    c = release_check(h, ev)
    assert c.status is Status.HELD and "2.2.1 equals the one on 2.3.0 (12 KEY(s))" in c.detail, c.detail
    assert main(["flink", "replay", str(_write(tmp_path / "t.jsonl", h, ev)), "--json", "--no-tlc"]) == 0
    got = {x["name"]: x for x in json.loads(capsys.readouterr().out)["checks"]}
    assert got[RELEASE]["status"] == "held"


def test_not_applicable_without_engine_version_and_unchecked_without_rs_run() -> None:
    h, ev = _load(TOTALS)
    c = release_check(h, ev)
    assert c.status is Status.NOT_APPLICABLE and "without --engine-version" in c.detail
    same = {**h, "config": {**h["config"], "reference_version": "2.3.0"}}
    assert "reference release itself" in release_check(same, ev).detail
    h2, ev2 = _two_releases()
    c = release_check(h2, [e for e in ev2 if e["kind"] != "flink.release_reference"])
    assert c.status is Status.UNCHECKED and "apache-flink 2.3.0" in c.detail


def test_mutant_differ_release_is_caught(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fn, check = ORACLE_TAMPERS["differ-release"]
    h, ev = fn(*_two_releases())
    assert check == RELEASE
    c = release_check(h, ev)
    assert c.status is Status.VIOLATED, c.detail
    assert c.detail.startswith("apache-flink 2.2.1 and 2.3.0 give different final tables: 1 KEY(s) differ: KEY ")
    # the BATCH run (on 2.2.1) gives the reference's last row: 2.2.1 agrees with it
    assert "in BATCH mode on 2.2.1 gives" in c.detail and "2.2.1 agrees" in c.detail
    assert c.offending_seq == next(e["seq"] for e in ev if e["kind"] == "flink.release_reference")
    assert main(["flink", "replay", str(_write(tmp_path / "t.jsonl", h, ev)), "--json", "--no-tlc"]) == 1
    got = {x["name"]: x for x in json.loads(capsys.readouterr().out)["checks"]}
    # the run with the failure matches the failure-free run on its own release: only the oracle sees it
    assert got["output-exactly-once"]["status"] == "held" and got[RELEASE]["status"] == "violated"
    with pytest.raises(ValueError, match="no failure-free run on a reference release"):
        fn(*_load(TOTALS))


def test_failed_run_on_r_is_a_violation_and_the_modules_failure_unchecked() -> None:
    h, ev = _two_releases(final_state="FAILED", lines=[],
                          failure_cause="java.lang.IllegalStateException: state corrupted")
    c = release_check(h, ev)
    assert c.status is Status.VIOLATED and "on apache-flink 2.3.0 ended FAILED" in c.detail
    assert "IllegalStateException" in c.detail and "on 2.2.1 the same run ran to its end" in c.detail
    h, ev = _two_releases(final_state="NOT_RUN", lines=[], user_error="job(): AttributeError: no such API")
    c = release_check(h, ev)
    assert c.status is Status.UNCHECKED and "no such API" in c.detail
    h, ev = _two_releases(final_state="FAILED", lines=[])
    assert release_check(h, ev).status is Status.UNCHECKED


def test_reference_version_needs_engine_version(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = str(tmp_path / "t.jsonl")
    rc = main(["flink", "record", "job", "--module", str(JOB), "--out", out, "--reference-version", "2.2.1"])
    err = capsys.readouterr().err
    assert rc == 2 and "--reference-version" in err and "--engine-version" in err
    rc = main(["flink", "record", "job", "--module", str(JOB), "--out", out, "--engine-version", "2.2.1",
               "--reference-version", "1.18.0"])
    err = capsys.readouterr().err
    assert rc == 2 and "--reference-version" in err and "1.18.0 is not supported" in err
    rc = main(["flink", "matrix", "--module", str(JOB), "--out", str(tmp_path / "m"), "--reference-version", "2.2.1"])
    err = capsys.readouterr().err
    assert rc == 2 and "--reference-version" in err and "--engine-version" in err
    rc = main(["flink", "matrix", "--module", str(JOB), "--out", str(tmp_path / "m"), "--engine-version", "2.2.1",
               "--reference-version", "2.2"])
    err = capsys.readouterr().err
    assert rc == 2 and "--reference-version" in err and "is not a release" in err
    assert not (tmp_path / "t.jsonl").exists() and not (tmp_path / "m").exists()


def test_record_job_adds_rs_run_before_the_trace_is_published(monkeypatch: pytest.MonkeyPatch,
                                                               tmp_path: Path) -> None:
    """record_job: R's environment first, then V's recording, R's run into the trace before ``end``."""
    import rollcheck.flink_replay.environment as environment
    import rollcheck.flink_replay.recording.record as record
    import rollcheck.flink_replay.recording.release_reference as rr

    calls: list[str] = []
    monkeypatch.setattr(environment, "find_flink", lambda v=None: calls.append(f"env {v}"))

    def fake_record(out: Path, config: Any, *, run_dir: Any = None, before_publish: Any = None) -> dict[str, Any]:
        calls.append("record V")
        tmp = Path(str(out) + ".partial")
        _write(tmp, {"format": "rollcheck.trace/1"}, [{"seq": 1, "kind": "failure"}, {"seq": 2, "kind": "end"}])
        n = before_publish(tmp, tmp_path / "run") if before_publish else None
        tmp.rename(out)
        return {"events": n or 2}

    def fake_reference(config: dict[str, Any], run: Path) -> dict[str, Any]:
        calls.append(f"run on {config['reference_version']} in {run.name}")
        return {"kind": "flink.release_reference", "engine_version": "2.3.0", "final_state": "FINISHED", "lines": []}

    monkeypatch.setattr(record, "record", fake_record)
    monkeypatch.setattr(rr, "release_reference", fake_reference)
    cfg = record.RecordConfig.make(module=str(JOB), engine_version="2.2.1", fail_at_record=5, failure="task")
    assert cfg["reference_version"] == "2.3.0" and rr.needs_release_reference(cfg)
    res = rr.record_job(tmp_path / "t.jsonl", cfg)
    assert calls == ["env 2.3.0", "record V", "run on 2.3.0 in release-2.3.0"] and res["events"] == 3
    _, ev = _load(tmp_path / "t.jsonl")
    assert [(e["seq"], e["kind"]) for e in ev] == [(1, "failure"), (2, "flink.release_reference"), (3, "end")]
    calls.clear()
    rr.record_job(tmp_path / "u.jsonl", cfg, shared={"kind": "flink.release_reference", "lines": []})
    assert calls == ["record V"]  # the matrix's shared run: nothing more runs
    calls.clear()
    same = record.RecordConfig.make(module=str(JOB), engine_version="2.3.0")
    assert not rr.needs_release_reference(same)
    rr.record_job(tmp_path / "v.jsonl", same)
    assert calls == ["record V"] and len(_load(tmp_path / "v.jsonl")[1]) == 2


@pytest.mark.parametrize("java, r_state, found", [
    ("java.lang.NullPointerException", "FINISHED", True),   # builds and runs on R: the engine's exception
    ("java.lang.NullPointerException", "NOT_RUN", False),   # fails on R too: the module's failure (exit 2)
    (None, "FINISHED", False),                              # a Python exception: the module's, R not asked
])
def test_flink_raising_inside_job_on_v_only_is_the_engines(java: str | None, r_state: str, found: bool,
                                                            monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    """FLINK-27741's shape: Flink's planner raises inside the module's job() on V (exit 2 so far,
    'the job module's own failure'); the same module built and run on R makes it the engine's: the
    trace says so and release-differential is violated, naming the exception and both releases."""
    import rollcheck.flink_replay.environment as environment
    import rollcheck.flink_replay.recording.record as record
    import rollcheck.flink_replay.recording.release_reference as rr
    from rollcheck.pyimpl.errors import InvalidInputError

    asked: list[str] = []
    monkeypatch.setattr(environment, "find_flink", lambda v=None: None)

    def fake_record(out: Path, config: Any, *, run_dir: Any = None, before_publish: Any = None) -> dict[str, Any]:
        raise record.ModuleFailure("job(): raised Py4JJavaError: An error occurred while calling o7.toDataStream.\n"
                                   ": java.lang.NullPointerException (the job module's own failure)",
                                   source="m.py", call="job", java=java)

    def fake_reference(config: dict[str, Any], run: Path) -> dict[str, Any]:
        asked.append(str(config["reference_version"]))
        return {"kind": "flink.release_reference", "engine_version": "2.3.0", "final_state": r_state,
                "lines": ["1\x1f[\"a\"]\x1f[\"a\", 1]"] if r_state == "FINISHED" else []}

    monkeypatch.setattr(record, "record", fake_record)
    monkeypatch.setattr(rr, "release_reference", fake_reference)
    cfg = record.RecordConfig.make(module=str(JOB), engine_version="2.2.1", fail_at_record=5, failure="task")
    out = tmp_path / "t.jsonl"
    if not found:
        with pytest.raises(InvalidInputError, match="the job module's own failure"):
            rr.record_job(out, cfg)
        assert not out.exists() and asked == ([] if java is None else ["2.3.0"])
        return
    res = rr.record_job(out, cfg)
    assert res["final_state"] == "NOT_RUN" and res["engine_failure"] == java and res["events"] == 3
    assert asked == ["2.3.0"]
    assert main(["flink", "replay", str(out), "--json", "--no-tlc"]) == 1
    rep = json.loads(capsys.readouterr().out)
    got = {c["name"]: c for c in rep["checks"]}
    assert got[RELEASE]["status"] == "violated" and rep["root_cause"] == RELEASE
    assert "on apache-flink 2.2.1 Flink raised java.lang.NullPointerException inside the module's job()" in \
        got[RELEASE]["detail"] and "on 2.3.0 the same job was built and ran to its end" in got[RELEASE]["detail"]
    assert "own failure" not in got[RELEASE]["detail"]


@pytest.mark.engines
def test_real_release_differential_on_two_releases(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """keyed_totals on apache-flink 2.2.1 with a task failure; its failure-free run also on the
    pinned 2.3.0 (in 2.3.0's environment): the same final table, held; the trace alone decides it."""
    out = tmp_path / "t.jsonl"
    t0 = time.monotonic()
    rc = main(["flink", "record", "job", "--module", str(JOB), "--out", str(out), "--records", "300",
               "--fail-at-record", "150", "--failure", "task", "--engine-version", "2.2.1", "--json"])
    capsys.readouterr()
    assert rc == 0, out
    h, ev = _load(out)
    assert h["config"]["engine_version"] == "2.2.1" and h["config"]["reference_version"] == "2.3.0"
    rel = next(e for e in ev if e["kind"] == "flink.release_reference")
    assert rel["engine_version"] == "2.3.0" and rel["final_state"] == "FINISHED" and rel["lines"]
    assert main(["flink", "replay", str(out), "--json", "--no-tlc"]) == 0
    got = {x["name"]: x for x in json.loads(capsys.readouterr().out)["checks"]}
    assert got[RELEASE]["status"] == "held", got[RELEASE]
    assert "2.2.1 equals the one on 2.3.0" in got[RELEASE]["detail"]
    print(f"recorded and replayed in {time.monotonic() - t0:.0f} s")
