"""A finding of the Spark matrix, end to end: minimised, witnessed, and a standalone reproducer that
shows the lost row when run with plain Python.

The query module is a deliberately broken fixture (``tests/queries/lossy_dedup_sink.py``): its
``foreachBatch`` sink deduplicates on the event id instead of the batch id, so a batch that Spark
hands it again after a sink failure is written empty — rows are *lost*, which Spark's documented
at-least-once ``foreachBatch`` does not allow. One cell (HDFS state store, sink failure at batch
0) runs through ``rollcheck spark matrix``: the cell's own recording, two minimisation
recordings and the reproducer's run (``python -I``) — four JVM starts: 82 s measured at a load
of 8 on 2 cores (marked ``spark`` and ``slow``; on a machine saturated far beyond that, the
recordings can exceed their limits and the cell becomes inconclusive, never a pass).
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BROKEN = ROOT / "tests" / "queries" / "lossy_dedup_sink.py"


@pytest.mark.spark
@pytest.mark.slow
def test_a_lost_row_is_a_finding_minimised_with_a_reproducer_that_shows_it(tmp_path):
    out = tmp_path / "m"
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    r = subprocess.run([sys.executable, "-m", "rollcheck.cli.main", "spark", "matrix", "--module", str(BROKEN),
                        "--providers", "hdfs", "--failures", "sink", "--fail-at-batch", "0", "--out", str(out),
                        "--cell-timeout", "1500", "--json"], capture_output=True, text=True, timeout=3000, env=env)
    assert r.returncode == 1, r.stderr[-2000:]  # a finding
    doc = json.loads(r.stdout)
    (cell,) = doc["cells"]
    assert cell["verdict"] == "not-conformant" and cell["expected_by_engine"] is False, cell
    assert cell["reason"].startswith("finding: output-exactly-once: lost") and doc["summary"]["findings"] == 1

    # the witness: the lost rows, the batch that handed them to the sink (twice: the re-run), the step
    wit = json.loads(Path(cell["witness"]).read_text())
    assert wit["duplicated"] == [] and {w["row"]["id"] for w in wit["lost"]} == {0, 1}
    assert all(w["batch"] == 0 and w["written_in_attempts"] == [1, 2] for w in wit["lost"])
    assert wit["failures"][0]["step"] == "the sink raised after it wrote batch 0, before commits/0"

    # minimised: from 3 batches of 2 rows to the failing batch alone, with one row
    m = cell["minimised"]
    assert (m["input"], m["batches"], m["fail_at"], m["runs"]) == (
        {"unit": "rows", "kept": 1, "of": 6}, {"kept": 1, "of": 3}, {"batch": 0}, 2)

    # the reproducer: pyspark and the standard library only, the minimised input, run by the matrix
    # as a user would (``python -I script``: isolated mode, no rollcheck import)
    script = Path(cell["reproducer"])
    tree = ast.parse(script.read_text())
    mods = {(a.name if isinstance(n, ast.Import) else n.module).split(".")[0]
            for n in ast.walk(tree) if isinstance(n, ast.Import | ast.ImportFrom) for a in n.names[:1]}
    assert "rollcheck" not in mods and "pyspark" in mods
    run = cell["reproducer_run"]
    assert run["reproduced"] is True and run["exit"] == 1, run
    assert len(run["shows"]) == 1 and run["shows"][0].startswith('LOST row (0 copies, the failure-free run has 1): '
                                                                 '{"id": 0, "v": "v00"}; handed to the sink in batch 0')
