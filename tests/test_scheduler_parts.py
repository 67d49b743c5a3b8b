"""Sections split into parts: together the parts run exactly what the whole section runs.

For every section that declares ``PARTS`` (Spark, Flink, TLC, fuzzing, mutants), the helpers
that record, model-check or fuzz are replaced by stand-ins returning one marker row each, and the
section is run whole (``part`` None) and part by part, quick and full: the parts' rows, taken
together, are the whole section's rows, each exactly once. Nothing starts a JVM. Cost: a second.
"""

from __future__ import annotations

import types
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from rollcheck.scheduler import section_parts
from rollcheck.suite import Row, VerifyContext


def _marker(name: str) -> Any:
    def f(*args: Any, **kwargs: Any) -> list[Row]:
        what = "|".join(str(a) for a in args[2:] if isinstance(a, str)) + "|".join(
            f"{k}={v}" for k, v in sorted(kwargs.items()) if isinstance(v, str))
        return [Row("x", "pyimpl", f"{name}:{what}", "pass", 1)]
    return f


def _rows(module: Any, tmp: Path, quick: bool, part: str | None, profile: str) -> list[str]:
    ctx = VerifyContext(profile=profile, quick=quick, out_dir=tmp, seed=0, log=lambda _m: None, part=part)
    return [r.check for r in module.run(ctx)]


def _same_as_whole(module: Any, tmp: Path, profile_of: Any = None) -> None:
    for quick in (True, False):
        profile = profile_of(quick) if profile_of else ("ci" if quick else "verify")
        whole = Counter(_rows(module, tmp, quick, None, profile))
        parts = section_parts(module, quick)
        split: Counter = Counter()
        for part in parts or [None]:
            split += Counter(_rows(module, tmp, quick, part, profile))
        assert whole and split == whole, (quick, whole - split, split - whole)


def test_spark_parts(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from rollcheck.sections import sec_spark as m

    monkeypatch.setenv("SPARK_SUBMIT_OPTS", "")  # the parts set it (in their own processes): restored after
    monkeypatch.delenv("SPARK_SUBMIT_OPTS")
    monkeypatch.setenv("ROLLCHECK_CLASS_ARCHIVES", "0")  # no training run of a class-data archive here
    for name in ("_streaming", "_nhop", "_sweep", "_matrix_slice", "_local_batch"):
        monkeypatch.setattr(m, name, _marker(name))
    monkeypatch.setattr(m, "_queries", lambda ctx, tmp: [Row("x", "pyimpl", f"query {q} {f}", "pass", 1)
                                                         for q, f in m._query_cases(ctx)])
    _same_as_whole(m, tmp_path)
    full = VerifyContext("verify", False, tmp_path, 0, part="queries-kill")
    assert {f for _q, f in m._query_cases(full)} == {"kill"}


def test_flink_parts(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from rollcheck.sections import sec_flink as m

    monkeypatch.delenv("JVM_ARGS", raising=False)  # the recording parts set it (in their own processes)
    def record(ctx: Any, tmp: Path, mode: str, rows: list[Row], failure: str = "task") -> Path:
        rows.append(Row("x", "pyimpl", f"record {mode} {failure}", "pass", 1))
        return tmp / "t.jsonl"

    monkeypatch.setattr(m, "_record", record)
    monkeypatch.setattr(m, "_no_flink_row", lambda: None)
    for name in ("_tampered", "_user_job", "_rescale", "_recovery_time", "_utilization"):
        monkeypatch.setattr(m, name, lambda *a, _n=name: _marker(_n)(*a)[0])
    _same_as_whole(m, tmp_path)
    # without Flink, one inconclusive row (from the first part), not one per part
    gone = Row("x", "Flink", "no flink", "inconclusive", 0)
    monkeypatch.setattr(m, "_no_flink_row", lambda: gone)
    got = [_rows(m, tmp_path, True, p, "ci") for p in section_parts(m, True)]
    assert sum(len(g) for g in got) == 1


def test_tlc_parts(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import os

    import rollcheck.tla.manifest as manifest
    import rollcheck.tla.runner as runner
    from rollcheck.sections import sec_tlc as m

    def result(status: str) -> Any:
        return types.SimpleNamespace(status=status, distinct_states=5, seconds=0.1, message="m", depth=2, trace=None)

    monkeypatch.setattr(manifest, "run_entry", lambda e, **k: types.SimpleNamespace(entry=e, result=result("ok"),
                                                                                    met=True))
    monkeypatch.setattr(manifest, "check_coverage", lambda e, **k: [types.SimpleNamespace(
        entry=e, goal=f"Unreached_{g}", status="reached", result=result("violation")) for g in e.cover])
    monkeypatch.setattr(runner, "find_jar", lambda: "tla2tools.jar")
    monkeypatch.setattr(runner, "find_java", lambda: "java")
    monkeypatch.setattr(m, "_trace_rows", _marker("_trace_rows"))
    monkeypatch.setenv("JAVA_TOOL_OPTIONS", "")  # the short parts set it: restored after the test
    monkeypatch.delenv("JAVA_TOOL_OPTIONS")
    monkeypatch.delenv("ROLLCHECK_JVM_DEFAULTS", raising=False)
    monkeypatch.setenv("ROLLCHECK_CLASS_ARCHIVES", "0")  # no training run of a class-data archive here
    _same_as_whole(m, tmp_path)
    # the short runs (small bounds) get C1 only
    from rollcheck.sections._jvm import SHORT_JVM_OPTIONS

    assert SHORT_JVM_OPTIONS in os.environ.get("JAVA_TOOL_OPTIONS", "")


def test_fuzz_parts(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import rollcheck.testing.faults as faults
    from rollcheck.sections import sec_fuzz as m

    monkeypatch.setattr(m, "_fuzz_file", lambda name, *a: _marker("file")(None, None, name)[0])
    monkeypatch.setattr(m, "_fuzz_options", lambda name, *a: _marker("options")(None, None, name)[0])
    monkeypatch.setattr(m, "_fuzz_tla", lambda *a: _marker("tla")()[0])
    monkeypatch.setattr(faults, "faults_row", lambda *a: _marker("faults")()[0])
    _same_as_whole(m, tmp_path)


def test_mutant_parts(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import rollcheck.properties.catalogue as catalogue
    from rollcheck.properties.mutation import MUTANTS, load_all
    from rollcheck.sections import sec_mutants as m

    load_all()

    def run_catalogue(profile: str, out: Any, names: Any, *, areas: tuple[str, ...] = (), **k: Any) -> list[dict]:
        return [{"verdict": "killed", "safe": False, "killed_by": "p", "ratio": None, "reproducer": "r",
                 "detail": "", "picture": None, "target": mu.area, "name": mu.name, "description": "d",
                 "examples": 1, "seconds": 0.0}
                for mu in MUTANTS.values() if not areas or mu.area in areas]

    monkeypatch.setattr(catalogue, "run_catalogue", run_catalogue)
    _same_as_whole(m, tmp_path)
