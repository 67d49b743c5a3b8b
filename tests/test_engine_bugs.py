"""The bug zoo's bookkeeping (``benchmarks/engine_bugs``): the manifest's entries are complete and
point at existing modules, the runner's judgement of a reproducer's output, and the Flink
reproducer's final table. Fast: no engine runs (``make bench-bugs`` runs the entries)."""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
from collections import Counter
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


def _two_sources() -> Any:
    def batches(seed: int) -> list[dict[str, list[tuple[Any, ...]]]]:
        return [{"a": [(1,), (2,)]}, {}, {"b": [("p", 1)], "a": []}, {"a": [(3,)], "b": [("q", 2)]}]

    return SimpleNamespace(SOURCES={"a": "x INT", "b": "y STRING, z INT"}, batches=batches)


def _offer(work: Path, batch: int, offsets: list[int | None], files: dict[int, list[Path]]) -> None:
    """What Spark leaves in a checkpoint for micro-batch ``batch``: each file source's log entry
    (``files``: source index -> the files it added), the offsets line per source, the commit."""
    ck = work / "checkpoint"
    for i, paths in files.items():
        log = ck / "sources" / str(i)
        log.mkdir(parents=True, exist_ok=True)
        lines = [json.dumps({"path": p.resolve().as_uri(), "timestamp": 0, "batchId": offsets[i]}) for p in paths]
        (log / str(offsets[i])).write_text("\n".join(["v1", *lines]), encoding="utf-8")
    (ck / "offsets").mkdir(parents=True, exist_ok=True)
    (ck / "commits").mkdir(parents=True, exist_ok=True)
    body = ["v1", "{}"] + ["-" if o is None else json.dumps({"logOffset": o}) for o in offsets]
    (ck / "offsets" / str(batch)).write_text("\n".join(body), encoding="utf-8")
    (ck / "commits" / str(batch)).write_text("v1\n{}", encoding="utf-8")


def test_spark_reproducer_feeds_several_sources_one_batch_at_a_time(tmp_path: Path) -> None:
    standalone = _load("spark_standalone")
    feeder = standalone._Feeder(_two_sources(), 0, tmp_path)
    assert feeder.expected() == [{"a": 2, "b": 0}, {"a": 0, "b": 1}, {"a": 1, "b": 1}]  # no micro-batch for {}
    a0, b1 = tmp_path / "in" / "a" / "batch-00000.json", tmp_path / "in" / "b" / "batch-00001.json"
    assert feeder.step() and [json.loads(x) for x in a0.read_text().splitlines()] == [{"x": 1}, {"x": 2}]
    assert not list((tmp_path / "in" / "b").iterdir())
    assert not feeder.step()  # batch 0's file is in no micro-batch's offsets yet: batch 1 must wait
    _offer(tmp_path, 0, [0, None], {0: [a0]})
    assert feeder.step() and b1.is_file() and not (tmp_path / "in" / "a" / "batch-00001.json").exists()
    assert not feeder.step()
    _offer(tmp_path, 1, [0, 0], {1: [b1]})
    assert feeder.observed() == [{"a": 2, "b": 0}, {"a": 0, "b": 1}]
    assert feeder.step() and not feeder.step()
    a2, b2 = tmp_path / "in" / "a" / "batch-00002.json", tmp_path / "in" / "b" / "batch-00002.json"
    _offer(tmp_path, 2, [1, 1], {0: [a2], 1: [b2]})
    _offer(tmp_path, 3, [1, 1], {})  # a batch that read nothing new (a watermark-only one) is left out
    assert feeder.observed() == feeder.expected()
    assert not feeder.step()  # all fed


def test_spark_reproducer_feed_limit_and_unknown_source(tmp_path: Path) -> None:
    standalone = _load("spark_standalone")
    feeder = standalone._Feeder(_two_sources(), 0, tmp_path / "w", limit=0)
    assert feeder.step()
    _offer(tmp_path / "w", 0, [0, None], {0: [tmp_path / "w" / "in" / "a" / "batch-00000.json"]})
    assert not feeder.step()  # the killed driver is fed batch 0 only
    bad = SimpleNamespace(SOURCES={"a": "x INT"}, batches=lambda seed: [{"a": [(1,)], "c": [(2,)]}])
    with pytest.raises(ValueError, match="'c'"):
        standalone._Feeder(bad, 0, tmp_path / "bad")


@pytest.mark.slow
def test_spark_reproducer_runs_a_two_source_module_batch_by_batch(tmp_path: Path) -> None:
    """The SPARK-47840 module on the pinned pyspark (a fixed release): each micro-batch read exactly
    its data batch, an idle stream nothing, and the counts are those of the input."""
    if shutil.which("java") is None:
        pytest.skip("no java")
    module = ZOO / "modules" / "spark_47840_union_literal_key.py"
    p = subprocess.run([sys.executable, str(ZOO / "spark_standalone.py"), str(module), "--workdir", str(tmp_path / "w")],
                       capture_output=True, text=True, timeout=600)
    report = json.loads([ln for ln in p.stdout.splitlines() if ln.startswith("{")][-1])
    spec = importlib.util.spec_from_file_location("zoo_47840", module)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    data = mod.batches(0)
    assert report["error"] is None and report["feed_aligned"] is True
    assert report["input_per_batch"] == [{n: len(b.get(n, [])) for n in mod.SOURCES} for b in data]
    kinds = {"impressions": "impression", "clicks": "click"}
    counts = Counter((kinds[n], r[1]) for b in data for n, rows in b.items() for r in rows)
    assert sorted((r["kind"], r["ad"], r["events"]) for r in report["rows"]) == sorted(
        (k, ad, c) for (k, ad), c in counts.items())


def test_a_rollcheck_run_past_its_time_is_not_run_not_missed(tmp_path, monkeypatch) -> None:
    """A rollcheck run that did not end in its limit gave no answer: the entry is "not run", not "missed"."""
    run = _load("run")
    entry = next(e for e in _entries() if e["id"] == "SPARK-57003")

    def too_slow(*a: Any, **k: Any) -> Any:
        raise subprocess.TimeoutExpired(cmd="rollcheck", timeout=run.LIMIT)

    monkeypatch.setattr(run, "_help", lambda *sub: "--engine-version")
    monkeypatch.setattr(run.subprocess, "run", too_slow)
    got = run._rollcheck(entry, entry["affected"], tmp_path)
    assert got["found"] is None and run._status(got, {"found": False}) == "not run"
    assert got["runs"][-1]["note"].startswith("timed out")
