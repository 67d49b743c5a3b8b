"""Standalone reproducer for a zoo query module: PySpark only, no rollcheck import.

Runs a query module of the ordinary contract (``SCHEMA``, ``batches(seed)``, ``query(df)``,
``OUTPUT_MODE``, ``KEY``) on whatever pyspark the interpreter running this script has, and prints
one JSON line: the pyspark version, the final output table (the last row per ``KEY`` in
update/complete mode, every row in append mode) and the error if the query failed::

    python spark_standalone.py MODULE.py [--seed S] [--provider hdfs|rocksdb|rocksdb-changelog]
                               [--restart-after-batch K | --kill-after-batch K]
                               [--retry-at-batch K] [--workdir DIR]

The input is written as one JSON Lines file per micro-batch and read with ``maxFilesPerTrigger=1``
(data batch *b* is Spark batch *b*); the query runs until every file is processed and the
watermark-only batches that follow have run. ``--restart-after-batch K`` stops the query cleanly
once batch ``K`` committed and starts it again from the same checkpoint folder (a restore without
a failure), which is all some restore bugs need. ``--kill-after-batch K`` runs the first ``K + 1``
batches in a child driver, SIGKILLs it (driver and JVM) once they committed and restarts the
query from the checkpoint in a new driver with the rest of the input (a crash, so state stores
are reloaded from their files, not from a clean shutdown). ``--retry-at-batch K`` makes the first
attempt of every task of batch ``K``'s last stage fail once it has drained its input (so its state
stores committed version ``K + 1``) and Spark retry it (master ``local[2,4]``): the sink collects
the batch through a ``mapPartitions`` pipelined into the stateful stage.

A module with several sources (``SOURCES = {name: schema}``, ``batches(seed)`` a list of dicts
``{name: rows}``, ``query(**{name: df})``) gets one file source per name reading ``in/<name>/``,
and data batch *b+1*'s files are written only once every file written before is in a
micro-batch's offsets (the file sources' logs in the checkpoint), from inside the sink of the
batch that read them: a source with no rows in a data batch has no new offset in that
micro-batch. The JSON line then also says what every committed micro-batch read per source
(``input_per_batch``, from the checkpoint's offsets) and whether that is the module's batches
(``feed_aligned``).
"""

from __future__ import annotations

import argparse
import datetime as dt
import decimal
import importlib.util
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

__all__ = ["main"]


def _load(path: str) -> Any:
    spec = importlib.util.spec_from_file_location(Path(path).stem, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _jsonable(v: Any) -> Any:
    if hasattr(v, "asDict"):
        return {k: _jsonable(x) for k, x in v.asDict(recursive=False).items()}
    if isinstance(v, dt.datetime):
        return v.replace(tzinfo=None).isoformat()
    if isinstance(v, dt.date):
        return v.isoformat()
    if isinstance(v, decimal.Decimal):
        return str(v)
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_jsonable(x) for x in v]
    return v


def _input_value(v: Any) -> Any:
    if isinstance(v, dt.datetime):
        return v.strftime("%Y-%m-%dT%H:%M:%S.%f")
    return v


def _write_input(mod: Any, seed: int, folder: Path, upto: int | None = None) -> int:
    columns = [c.strip().split()[0] for c in mod.SCHEMA.split(",")]
    data = mod.batches(seed)
    base = time.time() - 3600
    for b, rows in enumerate(data):
        if upto is not None and b > upto:
            break
        f = folder / f"batch-{b:05d}.json"
        with open(f, "w", encoding="utf-8") as fh:
            for r in rows:
                fh.write(json.dumps(dict(zip(columns, map(_input_value, r), strict=True))) + "\n")
        os.utime(f, (base + b, base + b))
    return len(data)


def _columns(schema: str) -> list[str]:
    return [c.strip().split()[0] for c in schema.split(",")]


def _plan(mod: Any, seed: int) -> list[dict[str, list[Any]]]:
    """A several-source module's data batches without the ones where no source has a row (Spark
    runs no micro-batch for them), each ``{name: rows}`` with every name of ``SOURCES``."""
    plan = []
    for b, batch in enumerate(mod.batches(seed)):
        unknown = set(batch) - set(mod.SOURCES)
        if unknown:
            raise ValueError(f"batch {b} names sources {sorted(unknown)} that SOURCES does not declare")
        if any(batch.values()):
            plan.append({n: list(batch.get(n) or []) for n in mod.SOURCES})
    return plan


class _Feeder:
    """Writes a several-source module's data batches into ``in/<name>/``, one batch at a time.

    :meth:`step` writes the next data batch only when every file written so far is in the offsets
    of a micro-batch (the file sources' logs in the checkpoint), so one micro-batch reads exactly
    one data batch, and a source without rows in it has no new offset. It is called before a
    query starts and from the sink, while no offsets are being planned.
    """

    def __init__(self, mod: Any, seed: int, work: Path, limit: int | None = None) -> None:
        self.names = list(mod.SOURCES)
        self.columns = {n: _columns(mod.SOURCES[n]) for n in self.names}
        self.plan = _plan(mod, seed)
        self.work, self.limit = work, limit
        for n in self.names:
            (work / "in" / n).mkdir(parents=True, exist_ok=True)
        (work / "fed").mkdir(exist_ok=True)

    def fed(self) -> int:
        """How many data batches are written (a marker per batch, written after its files)."""
        return len(list((self.work / "fed").glob("[0-9]*")))

    def _logged(self) -> dict[int, dict[int, set[Path]]]:
        """The file sources' logs in the checkpoint: source index -> log offset -> files."""
        logs: dict[int, dict[int, set[Path]]] = {}
        root = self.work / "checkpoint" / "sources"
        for f in root.glob("*/*") if root.exists() else []:
            if f.name.startswith(".") or not f.is_file() or not f.parent.name.isdigit():
                continue
            for line in f.read_text(encoding="utf-8").splitlines()[1:]:
                e = json.loads(line)
                path = Path(unquote(urlparse(e["path"]).path))
                logs.setdefault(int(f.parent.name), {}).setdefault(int(e["batchId"]), set()).add(path)
        return logs

    def _offered(self) -> set[tuple[str, str]]:
        """(source folder, file name) of every file a file source put into a micro-batch's offsets."""
        return {(p.parent.name, p.name) for per in self._logged().values() for ps in per.values() for p in ps}

    def step(self) -> bool:
        """Write the next data batch if the ones written are all read; say whether it wrote."""
        i = self.fed()
        if i >= len(self.plan) or (self.limit is not None and i > self.limit):
            return False
        written = {(f.parent.name, f.name) for f in (self.work / "in").glob("*/batch-*.json")}
        if written - self._offered():
            return False
        for n, rows in self.plan[i].items():
            if not rows:
                continue
            f = self.work / "in" / n / f"batch-{i:05d}.json"
            tmp = f.parent / f".{f.name}.tmp"  # hidden from the file source until complete
            with open(tmp, "w", encoding="utf-8") as fh:
                for r in rows:
                    fh.write(json.dumps(dict(zip(self.columns[n], map(_input_value, r), strict=True))) + "\n")
            os.replace(tmp, f)
        (self.work / "fed" / f"{i:05d}").touch()
        return True

    def expected(self) -> list[dict[str, int]]:
        """Rows per source of every data batch, as each micro-batch should read them."""
        return [{n: len(rows) for n, rows in b.items()} for b in self.plan]

    def observed(self) -> list[dict[str, int]]:
        """Rows per source read by every committed micro-batch that read any, in batch order: the
        checkpoint's offsets (one line per source after the version and metadata lines, ``-`` for
        none yet) against the file sources' logs (the query's progress leaves out a source that an
        empty relation replaced on some releases)."""
        ck = self.work / "checkpoint"
        logs = self._logged()
        done = {int(f.name) for f in (ck / "commits").glob("[0-9]*")} if (ck / "commits").exists() else set()
        prev: dict[int, int] = {}
        out = []
        for b in sorted(done):
            got = {n: 0 for n in self.names}
            for i, line in enumerate((ck / "offsets" / str(b)).read_text(encoding="utf-8").splitlines()[2:]):
                if not line.strip().startswith("{"):
                    continue
                off = int(json.loads(line)["logOffset"])
                for lo in range(prev.get(i, -1) + 1, off + 1):
                    for path in logs.get(i, {}).get(lo, set()):
                        local = self.work / "in" / path.parent.name / path.name
                        got[path.parent.name] += len(local.read_text(encoding="utf-8").splitlines())
                prev[i] = off
            if any(got.values()):
                out.append(got)
        return out


def _session(provider: str, work: Path, retries: bool = False) -> Any:
    from pyspark.sql import SparkSession

    os.environ["PYSPARK_PYTHON"] = sys.executable  # Python workers run this interpreter too
    b = (SparkSession.builder.master("local[2,4]" if retries else "local[2]").appName("zoo-reproducer")
         .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
         .config("spark.driver.bindAddress", "127.0.0.1").config("spark.driver.host", "127.0.0.1")
         .config("spark.sql.shuffle.partitions", "2").config("spark.default.parallelism", "2")
         .config("spark.sql.warehouse.dir", str(work / "warehouse"))
         .config("spark.sql.session.timeZone", "UTC")
         .config("spark.sql.pyspark.jvmStacktrace.enabled", "true")
         .config("spark.driver.extraJavaOptions", "-Duser.timezone=UTC")
         .config("spark.executor.extraJavaOptions", "-Duser.timezone=UTC"))
    if provider.startswith("rocksdb"):
        b = b.config("spark.sql.streaming.stateStore.providerClass",
                     "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider")
    if provider == "rocksdb-changelog":
        b = b.config("spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled", "true")
    spark = b.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _reader(spark: Any, schema: str) -> Any:
    return (spark.readStream.schema(schema).option("timestampFormat", "yyyy-MM-dd'T'HH:mm:ss.SSSSSS")
            .option("mode", "FAILFAST"))


def _fail_first_attempt(rows: Any) -> Any:
    """Drain a task's rows (its state stores commit), then fail its first attempt."""
    from pyspark import TaskContext

    out = list(rows)
    ctx = TaskContext.get()
    if ctx is not None and ctx.attemptNumber() == 0:
        raise RuntimeError("zoo reproducer: first attempt of the batch's task fails after its input")
    return out


def _run_once(spark: Any, mod: Any, work: Path, stop_after: int | None, keep: bool = False,
              feeder: _Feeder | None = None, retry_at: int | None = None) -> None:
    if feeder is None:
        result = mod.query(_reader(spark, mod.SCHEMA).option("maxFilesPerTrigger", 1).json(str(work / "in")))
    else:
        feeder.step()
        result = mod.query(**{n: _reader(spark, mod.SOURCES[n]).json(str(work / "in" / n)) for n in feeder.names})
    out = work / "out"

    def sink(batch_df: Any, batch_id: int) -> None:
        got = batch_df.rdd.mapPartitions(_fail_first_attempt).collect() if batch_id == retry_at else batch_df.collect()
        rows = [_jsonable(r) for r in got]
        p = out / f"batch-{batch_id:05d}.json"
        tmp = out / f".batch-{batch_id:05d}.tmp"
        tmp.write_text(json.dumps(rows), encoding="utf-8")
        os.replace(tmp, p)
        if feeder is not None:
            feeder.step()

    q = (result.writeStream.outputMode(mod.OUTPUT_MODE).foreachBatch(sink)
         .option("checkpointLocation", str(work / "checkpoint")).start())
    try:
        if stop_after is None:
            q.processAllAvailable()
            # the data-less batches that only advance the watermark run right after: wait for quiet
            last = -1
            for _ in range(40):
                time.sleep(0.5)
                p = q.lastProgress
                bid = p["batchId"] if p else -1
                if bid == last and not q.status["isTriggerActive"]:
                    break
                last = bid
            q.processAllAvailable()
        else:
            while True:
                commits = work / "checkpoint" / "commits"
                done = [int(f.name) for f in commits.glob("[0-9]*")] if commits.exists() else []
                if done and max(done) >= stop_after:
                    break
                if q.exception() is not None or not q.isActive:
                    break
                time.sleep(0.2)
        exc = q.exception()
        if exc is not None:
            raise RuntimeError(str(exc))
    finally:
        if not keep:
            q.stop()


_WRAPPERS = ("StreamingQueryException", "Py4JJavaError", "PythonException", "RuntimeError",
             "StreamingQueryException", "SparkException", "CapturedException")


def _summary(text: str) -> str:
    """The innermost engine exception named in ``text`` (class and message), else its first line."""
    causes = re.findall(r"Caused by: ((?:[A-Za-z_$][\w$]*\.)*[A-Z][\w$]*(?:Exception|Error))(?::[ \t]*([^\n]*))?",
                        text)
    for name, msg in reversed(causes):
        if name.rsplit(".", 1)[-1] not in _WRAPPERS:
            return f"{name}: {msg.strip()[:300]}"
    found = re.findall(r"((?:[A-Za-z_$][\w$]*\.)*[A-Z][\w$]*(?:Exception|Error))(?::[ \t]*([^\n]*))?",
                       text)
    for name, msg in found:
        if name.rsplit(".", 1)[-1] not in _WRAPPERS:
            return f"{name}: {msg.strip()[:300]}"
    return text.strip().splitlines()[0][:400]


def main(argv: list[str] | None = None) -> int:
    """Run the module, print one JSON line; exit 0 whether or not the query failed."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("module")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--provider", default="hdfs", choices=["hdfs", "rocksdb", "rocksdb-changelog"])
    ap.add_argument("--restart-after-batch", type=int, default=None)
    ap.add_argument("--kill-after-batch", type=int, default=None)
    ap.add_argument("--retry-at-batch", type=int, default=None)
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--feed-limit", type=int, default=None, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:  # the driver that is killed: run what is there, say so, wait for the kill
        mod = _load(a.module)
        spark = _session(a.provider, Path(a.workdir), a.retry_at_batch is not None)
        child_feed = _Feeder(mod, a.seed, Path(a.workdir), a.feed_limit) if hasattr(mod, "SOURCES") else None
        _run_once(spark, mod, Path(a.workdir), None, keep=True, feeder=child_feed, retry_at=a.retry_at_batch)
        print("READY", flush=True)
        time.sleep(3600)
        return 0
    import pyspark

    mod = _load(a.module)
    work = Path(a.workdir or tempfile.mkdtemp(prefix="zoo-spark-"))
    if work.exists():
        shutil.rmtree(work)
    (work / "in").mkdir(parents=True)
    (work / "out").mkdir()
    t0 = time.time()
    killed = None
    feeder = _Feeder(mod, a.seed, work) if hasattr(mod, "SOURCES") else None
    if a.kill_after_batch is not None:
        if feeder is None:
            _write_input(mod, a.seed, work / "in", upto=a.kill_after_batch)
        child = subprocess.Popen([sys.executable, os.path.abspath(__file__), a.module, "--child",
                                  "--seed", str(a.seed), "--provider", a.provider, "--workdir", str(work),
                                  "--feed-limit", str(a.kill_after_batch),
                                  *([] if a.retry_at_batch is None else ["--retry-at-batch", str(a.retry_at_batch)])],
                                 stdout=subprocess.PIPE, text=True, start_new_session=True)
        assert child.stdout is not None
        line = child.stdout.readline()
        os.killpg(child.pid, signal.SIGKILL)
        child.wait()
        killed = line.strip() == "READY"
    n = _write_input(mod, a.seed, work / "in") if feeder is None else len(mod.batches(a.seed))
    spark = _session(a.provider, work, a.retry_at_batch is not None)
    error = None
    try:
        if a.restart_after_batch is not None:
            _run_once(spark, mod, work, a.restart_after_batch, feeder=feeder, retry_at=a.retry_at_batch)
        _run_once(spark, mod, work, None, feeder=feeder, retry_at=a.retry_at_batch)
    except Exception as e:  # the engine's failure is the observation, not a crash of this script
        error = _summary(f"{type(e).__name__}: {e}")
    rows: list[dict[str, Any]] = []
    for f in sorted((work / "out").glob("batch-*.json")):
        rows.extend(json.loads(f.read_text(encoding="utf-8")))
    key = list(mod.KEY)
    if mod.OUTPUT_MODE == "append":
        table = sorted(rows, key=lambda r: json.dumps(r, sort_keys=True))
    else:
        last: dict[str, dict[str, Any]] = {}
        for r in rows:
            last[json.dumps([r.get(k) for k in key], default=str)] = r
        table = sorted(last.values(), key=lambda r: json.dumps(r, sort_keys=True))
    report: dict[str, Any] = {"engine": "spark", "version": pyspark.__version__, "provider": a.provider,
                              "input_batches": n, "rows": table, "error": error, "killed_driver": killed,
                              "seconds": round(time.time() - t0, 1)}
    if feeder is not None:  # what each micro-batch read per source, from the checkpoint
        report["input_per_batch"] = feeder.observed()
        report["feed_aligned"] = report["input_per_batch"] == feeder.expected() if error is None else None
    print(json.dumps(report, sort_keys=True))
    spark.stop()
    if a.workdir is None:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
