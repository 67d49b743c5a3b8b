"""The blind-recall benchmark's judgement (``benchmarks/bench_hunt.py``): its doctests and the
rules that decide whether a hunt's finding is a zoo entry rediscovered."""

from __future__ import annotations

import doctest
import importlib.util
from pathlib import Path

_SPEC = importlib.util.spec_from_file_location(
    "bench_hunt", Path(__file__).resolve().parent.parent / "benchmarks" / "bench_hunt.py")
assert _SPEC and _SPEC.loader
bh = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(bh)


def test_doctests() -> None:
    result = doctest.testmod(bh, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 5 and result.failed == 0


def test_a_finding_quiet_on_the_fixed_release_only_counts_with_the_entry_symptom() -> None:
    failure = {"kind": "query failure", "affected": "3.5.3", "fixed": "3.5.4"}
    output_finding = {"exception": None, "checks": ["release-differential"],
                      "reproducer_run": {"3.5.3": "reproduced"}}
    assert not bh.rediscovers(failure, output_finding, "not reproduced")
    raised = {**output_finding, "exception": "java.util.NoSuchElementException"}
    assert bh.rediscovers(failure, raised, "not reproduced")
    assert not bh.rediscovers(failure, raised, "could not run: exit None")
    assert not bh.rediscovers(failure, {**raised, "reproducer_run": {"3.5.3": "not reproduced"}}, "not reproduced")


def test_every_verified_entry_says_what_its_query_needs() -> None:
    assert {e["id"] for e in bh.entries()} <= set(bh.NEEDS)


def test_the_table_counts_what_was_found() -> None:
    rows = [{"id": "SPARK-1", "affected": "1.0.0", "fixed": "1.0.1", "found": True, "wall_seconds": 60.0,
             "programs": 3, "cells": 9, "findings": [{"id": "F1", "signature": "s", "rediscovers": True}]},
            {"id": "SPARK-2", "affected": "1.0.0", "fixed": "1.0.1", "found": False, "wall_seconds": 50.0,
             "findings": [], "lacks": ["union"]}]
    text = bh.render_markdown(rows, {"when": "now", "machine": "m", "budget": "1m", "seed": 1})
    assert "**1 of 2** rediscovered" in text and "| union |" in text and "F1 `s`" in text


def test_the_benchmark_runs_rollcheck_as_python_dash_m() -> None:
    import subprocess
    import sys

    res = subprocess.run([sys.executable, "-m", "rollcheck", "spark", "hunt", "--help"], capture_output=True,
                         text=True, timeout=120)
    assert res.returncode == 0 and "--reference-version" in res.stdout, res.stderr
