"""The user's own code raising inside a Spark query: exit 2 naming the function and the exception.

Spark reports a ``foreachBatch`` sink's exception as the query's failure, and its message's first
line says only ``[FOREACH_BATCH_USER_FUNCTION_ERROR]``; rollcheck names the sink, the line of the
module it raised at and the exception (issue 29, item 6). One real recording (about 60-90 s).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CLI = [sys.executable, "-m", "rollcheck.cli.main"]


@pytest.mark.slow
def test_raising_sink_is_named(tmp_path: Path) -> None:
    mod = ROOT / "tests" / "spark_queries" / "raising_sink.py"
    r = subprocess.run([*CLI, "spark", "record", "query", "--module", str(mod), "--out", str(tmp_path / "s.jsonl")],
                       capture_output=True, text=True, timeout=600, cwd=ROOT)
    last = r.stderr.strip().splitlines()[-1]
    assert r.returncode == 2, r.stderr[-2000:]
    for needle in ("raising_sink.py", "sink(batch_df, 0, out_dir) raised KeyError: 'p'", "at line 23 (sink)"):
        assert needle in last, last
