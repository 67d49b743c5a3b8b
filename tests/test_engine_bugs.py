"""The bug zoo's bookkeeping (``benchmarks/engine_bugs``): the manifest's entries are complete and
point at existing modules, the runner's judgement of a reproducer's output, and the Flink
reproducer's final table. Fast: no engine runs (``make bench-bugs`` runs the entries)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
ZOO = ROOT / "benchmarks" / "engine_bugs"


def _load(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(f"zoo_{name}", ZOO / f"{name}.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _entries() -> list[dict[str, Any]]:
    return list(json.loads((ZOO / "manifest.json").read_text(encoding="utf-8"))["entries"])


@pytest.mark.parametrize("entry", _entries(), ids=lambda e: e["id"])
def test_manifest_entry_complete(entry: dict[str, Any]) -> None:
    for k in ("id", "engine", "kind", "affected", "fixed", "module", "description", "slice", "reproducer_args",
              "expected", "verified", "sources"):
        assert k in entry, k
    assert (ZOO / entry["module"]).is_file()
    assert entry["engine"] in ("spark", "flink")
    assert entry["affected"] != entry["fixed"]
    table = entry["expected"].get("right_table")
    if table is not None:  # a value-changing bug: the right table has the right number of rows
        assert len(table) == entry["expected"]["right_rows"]
    if entry["engine"] == "flink":
        for k in ("checkpoints", "backends", "failures"):
            assert entry["slice"][k], k


def test_judge_by_rows_and_by_table() -> None:
    run = _load("run")
    right = [["all", 240, 124, 12370]]
    assert run.judge({"error": None, "rows": [["all", 240, 240, 12370]]}, 1) == "not reproduced"
    assert run.judge({"error": None, "rows": [["all", 240, 240, 12370]]}, 1, right) == "reproduced"
    assert run.judge({"error": None, "rows": [["all", 240, 124, 12370]]}, 1, right) == "not reproduced"
    assert run.judge({"error": "java.lang.NullPointerException", "rows": []}, 150) == "reproduced"


def test_flink_reproducer_table_is_last_row_per_key() -> None:
    standalone = _load("flink_standalone")
    mod = SimpleNamespace(KEY=["customer"], FIELDS=["customer", "lines", "revenue"])
    rows = [["b", 1, 5], ["a", 1, 3], ["b", 2, 9], ["a", 2, 4]]
    assert standalone._table(mod, rows) == [["a", 2, 4], ["b", 2, 9]]
    assert standalone._table(SimpleNamespace(KEY=[0]), rows) == [["a", 2, 4], ["b", 2, 9]]


def test_doc_lists_notes_of_open_bugs() -> None:
    run = _load("run")
    entry = {"id": "FLINK-1", "engine": "flink", "kind": "wrong output", "affected": "1.19.0", "fixed": "1.19.1",
             "module": "modules/x.py", "description": "d", "expected": {"wrong": "w", "right": "r"},
             "reproducer_run": {}, "rollcheck": {}, "status": "not run", "note": "n"}
    results = {"generated": "now", "entries": [entry], "notes": ["an open bug"],
               "summary": {"entries": 1, "reproduced_affected": 0, "quiet_fixed_reproducer": 0, "found": 0,
                           "missed": 0, "not_run": 1, "findings_on_fixed": 0}}
    text = run.render_markdown(results)
    assert "## Found while building the zoo" in text and "- an open bug" in text
    assert "## Found while building the zoo" not in run.render_markdown(dict(results, notes=[]))
