"""A query whose output holds NaN and infinities records a strict-JSON trace that replays."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
RC = [sys.executable, "-m", "rollcheck.cli.main"]


@pytest.mark.spark
@pytest.mark.engines  # a recording (about a minute); plain()'s doctest covers the spelling in make test
def test_doubles_that_are_not_finite_record_and_replay(tmp_path):
    out = tmp_path / "odd.jsonl"
    r = subprocess.run([*RC, "spark", "record", "query", "--module", str(ROOT / "tests" / "queries" / "odd_doubles.py"),
                        "--out", str(out), "--failure", "task", "--fail-at-batch", "1", "--json"],
                       capture_output=True, text=True, cwd=ROOT, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    rp = subprocess.run([*RC, "spark", "replay", str(out), "--json"], capture_output=True, text=True, cwd=ROOT,
                        timeout=600)
    assert rp.returncode == 0 and json.loads(rp.stdout)["conformant"] is True, rp.stdout[-3000:] + rp.stderr[-2000:]
    text = out.read_text()
    assert '"NaN"' in text and '"-Infinity"' in text  # Spark's JSON spelling, as strings
