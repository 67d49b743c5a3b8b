"""Plain PySpark, no rollcheck: what a spark matrix of task and sink failures does, by hand, in one session.

``python benchmarks/_plain_spark_runs.py MODULE.py BATCHES FAIL_AT WORKDIR`` loads a query module
(``SCHEMA``, ``batches(seed)``, ``query(df)``, ``OUTPUT_MODE``), writes its input as one JSON Lines
file per batch, and in one SparkSession runs: the failure-free reference; a task failure (a filter
UDF raises in a task of batch FAIL_AT) and a sink failure (foreachBatch raises after it wrote batch
FAIL_AT), each restarted once from its checkpoint; after each run the output is read back and the
state with Spark's state reader. Prints one JSON line: the seconds of each run and the rows read.
"""

from __future__ import annotations

import datetime as dt
import importlib.util
import json
import os
import sys
import time
from pathlib import Path


def _load(path: str):  # noqa: ANN202 - a plain script
    spec = importlib.util.spec_from_file_location("plain_query", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _claim(marker: str) -> bool:
    try:
        os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return False
    return True


def main(module: str, n: int, fail_at: int, root: Path) -> dict:
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # the workers run this interpreter
    mod = _load(module)
    names = [c.strip().split()[0] for c in mod.SCHEMA.split(",")]
    inp = root / "input"
    inp.mkdir(parents=True, exist_ok=True)
    for b, rows in enumerate(mod.batches(0)[:n]):
        with open(inp / f"batch-{b:04d}.json", "w") as f:
            for r in rows:
                f.write(json.dumps({k: v.isoformat() if isinstance(v, dt.datetime) else v
                                    for k, v in zip(names, r, strict=True)}) + "\n")
    spark = (SparkSession.builder.master("local[2]").appName("plain").config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "2").config("spark.sql.session.timeZone", "UTC")
             .getOrCreate())
    spark.sparkContext.setLogLevel("OFF")

    def run(name: str, failure: str | None) -> dict:
        ck, out, marker = root / name / "checkpoint", root / name / "out", str(root / f"{name}.failed")
        t0 = time.perf_counter()

        def once() -> None:
            df = spark.readStream.schema(mod.SCHEMA).option("maxFilesPerTrigger", 1).json(str(inp))
            if failure == "task":
                def keep(path, _m=marker, _b=f"batch-{fail_at:04d}"):  # noqa: ANN001
                    if _b in path and _m and _claim(_m):
                        raise RuntimeError("injected task failure")
                    return True
                df = df.filter(F.udf(keep, "boolean")(F.input_file_name()))

            def sink(bdf, bid):  # noqa: ANN001
                bdf.write.mode("overwrite").json(str(out / f"batch-{bid}"))
                if failure == "sink" and bid == fail_at and _claim(marker):
                    raise RuntimeError("injected sink failure")

            q = (mod.query(df).writeStream.outputMode(mod.OUTPUT_MODE).option("checkpointLocation", str(ck))
                 .foreachBatch(sink).trigger(availableNow=True).start())
            q.awaitTermination()

        restarts = 0
        try:
            once()
        except Exception:  # noqa: BLE001 - the injected failure: restart from the checkpoint
            restarts += 1
            once()
        output = spark.read.json(str(out / "batch-*")).count()
        state = spark.read.format("statestore").load(str(ck)).count()
        return {"seconds": round(time.perf_counter() - t0, 2), "restarts": restarts, "output_rows": output,
                "state_rows": state}

    t0 = time.perf_counter()
    res = {"reference": run("reference", None), "task": run("task", "task"), "sink": run("sink", "sink")}
    res["session_seconds"] = round(time.perf_counter() - t0, 2)
    spark.stop()
    return res


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), Path(sys.argv[4]))))
