"""The machine calibration (``rollcheck.calibration``): recorded by ``verify`` and ``bench-verify``,
and used to compare times across machines (a section is flagged when its time *in calibration
loops* grew, not its seconds)."""

from __future__ import annotations

import doctest
import importlib
import json
import sys
from pathlib import Path

import pytest

import rollcheck.calibration as calibration
from rollcheck.calibration import normalise, slower_sections

ROOT = Path(__file__).resolve().parents[1]


def test_doctests() -> None:
    res = doctest.testmod(calibration)
    assert res.attempted >= 15 and res.failed == 0


def test_loop_time_grows_with_the_work() -> None:
    small = calibration.loop_cpu_seconds(100_000, repeat=3)
    big = calibration.loop_cpu_seconds(2_000_000, repeat=1)
    assert 0 < small < big


def test_calibrate_records_every_figure() -> None:
    c = calibration.calibrate(n=200_000, load_start=0.25)
    assert c["loop_cpu_seconds"] > 0 and c["load_average"] == {"start": 0.25, "end": None}
    assert c["cpu_count"] >= c["usable_cores"] >= 1
    assert c["jvm_start_seconds"] is None or 0 < c["jvm_start_seconds"] < 60
    done = calibration.finish(c, 1.5)
    assert done["load_average"] == {"start": 0.25, "end": 1.5} and c["load_average"]["end"] is None


def _rec(loop: float | None, **sections: float) -> dict:
    r: dict = {"sections": dict(sections)}
    if loop is not None:
        r["calibration"] = {"loop_cpu_seconds": loop}
    return r


@pytest.mark.parametrize("factor", [2.0, 2.5, 3.0])
def test_a_slower_machine_doing_the_same_work_is_not_flagged(factor: float) -> None:
    fast = _rec(1.0, spark=500.0, tlc=250.0, fuzz=300.0)
    slow = _rec(factor, spark=500.0 * factor * 1.1, tlc=250.0 * factor * 0.9, fuzz=300.0 * factor)
    assert slower_sections(slow, fast) == []
    # ... but in plain seconds every section would have been "slower"
    assert {x.name for x in slower_sections(slow, {"sections": fast["sections"]})} == {"spark", "tlc", "fuzz"}


def test_a_section_slower_in_calibration_loops_is_flagged() -> None:
    before = _rec(1.0, spark=500.0, tlc=250.0)
    after = _rec(2.0, spark=1000.0, tlc=250.0 * 2 * 1.3)  # tlc did 30 % more work per loop
    flagged = slower_sections(after, before, tolerance=0.25)
    assert [(x.name, x.normalised) for x in flagged] == [("tlc", True)]
    assert flagged[0].loops == 325.0 and flagged[0].previous_loops == 250.0
    assert slower_sections(after, before, tolerance=0.35) == []
    # a faster machine that hides a regression in seconds is still caught
    faster = _rec(0.5, spark=400.0, tlc=125.0)  # spark: 800 loops against 500
    assert [x.name for x in slower_sections(faster, before)] == ["spark"]


def test_uncalibrated_records_are_said_so_not_invented() -> None:
    assert normalise(10.0, {"calibration": {"loop_cpu_seconds": 0}}) is None
    assert normalise(10.0, {"calibration": None}) is None
    assert calibration.describe({"sections": {}}).startswith("uncalibrated")
    assert slower_sections(_rec(2.0, a=300.0), _rec(None, a=100.0), require_calibration=True) == []


def _bench(monkeypatch, tmp_path: Path, history: list[dict], report: dict, capsys) -> tuple[str, list[dict]]:
    monkeypatch.syspath_prepend(str(ROOT))
    sys.modules.pop("benchmarks.bench_verify", None)
    bench = importlib.import_module("benchmarks.bench_verify")
    results = tmp_path / "a" / "benchmarks" / "results" / "verify-sections.json"
    results.parent.mkdir(parents=True)
    results.write_text(json.dumps(history))
    src = tmp_path / "results.json"
    src.write_text(json.dumps(report))
    monkeypatch.setattr(bench, "RESULTS", results)
    monkeypatch.setenv("ROLLCHECK_BENCH_VERIFY_FROM", str(src))
    bench.main(quick=True)
    return capsys.readouterr().out, json.loads(results.read_text())


def _report(loop: float | None, **sections: float) -> dict:
    doc = {"quick": False, "total_seconds": sum(sections.values()), "section_seconds": sections,
           "section_cpu_seconds": sections, "rows": [{"status": "pass"}], "cores": 2, "jobs": 3,
           "load_average": {"start": 0.1, "end": 2.0}, "verdict": "1 checks"}
    if loop is not None:
        doc["calibration"] = {"loop": calibration.LOOP, "loop_cpu_seconds": loop, "jvm_start_seconds": 0.4,
                              "cpu_count": 2, "usable_cores": 2, "load_average": {"start": 0.1, "end": 2.0}}
    return doc


def test_bench_verify_flags_in_calibration_loops(monkeypatch, tmp_path, capsys) -> None:
    old = {"when": "2026-11-26 15:06:37", "kind": "full", "commit": "x", "load_before": 0.0, "total_seconds": 700.0,
           "sections": {"spark": 400.0, "tlc": 300.0}}  # uncalibrated, as the records made before
    out, hist = _bench(monkeypatch, tmp_path, [old], _report(1.0, spark=420.0, tlc=450.0), capsys)
    assert "its machine: uncalibrated" in out and "compared in seconds" in out
    assert "SLOWER (s)" in out and "x1.50" in out
    assert "calibration" not in hist[0] and hist[1]["calibration"]["loop_cpu_seconds"] == 1.0
    # the same work on a machine 2.2x slower: nothing is slower in calibration loops
    out, hist = _bench(monkeypatch, tmp_path / "b", hist, _report(2.2, spark=420.0 * 2.2, tlc=450.0 * 2.2), capsys)
    assert "0 section(s) more than 25 % slower" in out and "SLOWER" not in out
    assert "compared in calibration loops" in out
    # a real regression on the slow machine is flagged
    out, _ = _bench(monkeypatch, tmp_path / "c", hist, _report(2.2, spark=420.0 * 2.2 * 1.4, tlc=450.0 * 2.2), capsys)
    lines = [ln for ln in out.splitlines() if ln.startswith("spark ")]
    assert lines and lines[0].endswith(" SLOWER"), out


def test_bench_verify_keeps_an_uncalibrated_report_uncalibrated(monkeypatch, tmp_path, capsys) -> None:
    out, hist = _bench(monkeypatch, tmp_path, [], _report(None, spark=10.0), capsys)
    assert "machine: uncalibrated" in out and "calibration" not in hist[-1]


def test_verify_records_the_calibration(tmp_path, capsys) -> None:
    from rollcheck.cli.main import main

    out = tmp_path / "report"
    assert main(["verify", "--quick", "--only", "yours", "--out", str(out), "--seed", "0"]) == 0
    err = capsys.readouterr().err
    doc = json.loads((out / "results.json").read_text(encoding="utf-8"))
    cal = doc["calibration"]
    assert cal["loop"] == calibration.LOOP and 0 < cal["loop_cpu_seconds"] < 60
    assert cal["usable_cores"] == doc["cores"] and cal["load_average"] == doc["load_average"]
    assert cal["load_average"]["end"] is not None
    assert "machine: calibration loop" in err
    assert "- machine: calibration loop" in (out / "report.md").read_text(encoding="utf-8")
