"""A ``foreachBatch`` sink made exactly-once by the batch id, as Spark's programming guide advises
("Using Foreach and ForeachBatch": use the batchId to deduplicate): batch ``b`` is written to
``batch-b.json`` through a temporary file renamed into place, so writing a batch again after a
failure replaces it instead of adding to it.
"""

import json
import os
import random

from pyspark.sql import functions as F

SCHEMA = "user STRING, amount INT"
OUTPUT_MODE = "update"
KEY = ["user"]
SINK_GUARANTEE = "exactly-once"  # the default, said: a batch written again replaces its file


def batches(seed):
    """Six batches of four purchases by three users."""
    rng = random.Random(seed)
    return [[(rng.choice("pqr"), rng.randrange(1, 9)) for _ in range(4)] for _ in range(6)]


def query(df):
    return df.groupBy("user").agg(F.sum("amount").alias("total"), F.count("*").alias("purchases"))


def sink(batch_df, batch_id, out_dir):
    rows = sorted((r.asDict() for r in batch_df.collect()), key=lambda r: r["user"])
    final = os.path.join(out_dir, f"batch-{batch_id:05d}.json")
    tmp = final + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(rows, f)
    os.replace(tmp, final)


def read_output(out_dir):
    rows = []
    for name in sorted(os.listdir(out_dir)):
        if name.startswith("batch-") and name.endswith(".json"):
            with open(os.path.join(out_dir, name), encoding="utf-8") as f:
                rows.extend(json.load(f))
    return rows
