"""A ``foreachBatch`` sink that is *not* idempotent: every call appends the batch's rows to one JSON
Lines file, ignoring the batch id. A batch that Spark runs again after a failure (the sink failed
after writing, or the driver died after the sink wrote) is written twice. Spark documents this:
foreachBatch gives at-least-once writes unless the sink deduplicates by batch id (Structured
Streaming Programming Guide, "Using Foreach and ForeachBatch"). The module declares what it is,
``SINK_GUARANTEE = "at-least-once"``: the replay allows each row as many extra copies as the trace
shows Spark handed its batch to the sink again after a failure, and no more, and no lost row; so
the matrix finds this query conformant as declared. Without the declaration (exactly-once, the
default) the same duplicates make the cell not conformant, exit 1, ``expected_by_engine: true``.
"""

import json
import os
import random

from pyspark.sql import functions as F

SCHEMA = "user STRING, amount INT"
OUTPUT_MODE = "update"
KEY = ["user"]
SINK_GUARANTEE = "at-least-once"  # a batch handed again after a failure is appended again


def batches(seed):
    """Six batches of four purchases by three users."""
    rng = random.Random(seed)
    return [[(rng.choice("pqr"), rng.randrange(1, 9)) for _ in range(4)] for _ in range(6)]


def query(df):
    return df.groupBy("user").agg(F.sum("amount").alias("total"))


def sink(batch_df, batch_id, out_dir):
    rows = [r.asDict() for r in batch_df.collect()]
    with open(os.path.join(out_dir, "rows.jsonl"), "a", encoding="utf-8") as f:
        for r in sorted(rows, key=lambda r: r["user"]):
            f.write(json.dumps(r) + "\n")


def read_output(out_dir):
    path = os.path.join(out_dir, "rows.jsonl")
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]
