"""The kept reference's key covers the files a query module imports from its own folder
(spark_replay/shared_reference.py): an edited helper is never served a stale reference."""

from __future__ import annotations

from rollcheck.spark_replay.query.config import QueryConfig
from rollcheck.spark_replay.shared_reference import local_imports, reference_key

QUERY = '''import os, sys
sys.path.insert(0, os.path.dirname(__file__))
from helpers.windows import WIDTH
import counting
'''


def test_the_key_follows_the_helpers_a_module_imports(tmp_path):
    (tmp_path / "q.py").write_text(QUERY)
    (tmp_path / "helpers").mkdir()
    (tmp_path / "helpers" / "__init__.py").write_text("")
    (tmp_path / "helpers" / "windows.py").write_text("from . import units\nWIDTH = 10\n")
    (tmp_path / "helpers" / "units.py").write_text("SECOND = 1\n")
    (tmp_path / "counting.py").write_text("def count(df):\n    return df.count()\n")
    (tmp_path / "unrelated.py").write_text("X = 1\n")
    cfg = QueryConfig(str(tmp_path / "q.py"), batches=3, state_store="hdfs")
    key = reference_key(cfg)
    assert key is not None
    assert [p.name for p in local_imports(tmp_path / "q.py")] == ["counting.py", "__init__.py", "units.py",
                                                                   "windows.py"]
    (tmp_path / "unrelated.py").write_text("X = 2\n")  # not imported: the same key
    assert reference_key(cfg) == key
    for helper in ("counting.py", "helpers/windows.py", "helpers/units.py"):  # each imported file counts
        f = tmp_path / helper
        before = f.read_text()
        f.write_text(before + "# edited\n")
        assert reference_key(cfg) != key, helper
        f.write_text(before)
        assert reference_key(cfg) == key


def test_the_reference_releases_run_is_added_once_before_the_attempts(tmp_path):
    from rollcheck.spark_replay.shared_reference import add_release_reference, shared_reference
    from rollcheck.spark_replay.trace import TraceWriter, read_trace

    path = tmp_path / "reference.jsonl"
    w = TraceWriter(path, {"source": "spark", "job": "query", "seed": 0, "config": {"module": "q.py"}})
    w.emit("spark.batch_committed", batch=0)
    w.emit("spark.output_final", rows=[{"k": 1}])
    w.emit("spark.state_final", stores={})
    w.emit("end", status="done")
    w.close()
    assert add_release_reference(path, "4.3.0", [{"k": 2}], seconds=1.5)
    assert not add_release_reference(path, "4.3.0", [{"k": 3}])  # once per release
    t = read_trace(path)
    assert [e["seq"] for e in t.events] == [1, 2, 3, 4, 5] and t.events[-1]["kind"] == "end"
    (rel,) = t.of_kind("spark.release_reference")
    assert rel["attempt"] == 0 and rel["engine_version"] == "4.3.0" and rel["output"] == [{"k": 2}]
    assert shared_reference(path)["output"] == [{"k": 1}]  # the reference itself unchanged


def test_the_recorder_fingerprint_covers_the_recorders_modules():
    """Each pattern of the recorder's fingerprint names files of the package (a moved module is not
    silently left out of every key), and the modules a recording runs through are among them."""
    from pathlib import Path

    from rollcheck.spark_replay import shared_reference as sr

    here = Path(sr.__file__).resolve().parent
    assert [pat for pat in sr._RECORDER if not list(here.glob(pat))] == []
    covered = {p.relative_to(here).as_posix() for pat in sr._RECORDER for p in here.glob(pat)}
    for mod in ("query/record.py", "query/run.py", "query/drive.py", "checkpoint/watcher.py",
                "checkpoint/reader.py", "faults/killpoints.py", "matrix/cell.py", "matrix/warm.py", "trace.py"):
        assert mod in covered, mod
