"""Uploaded documents deduplicated by their content (``dropDuplicates`` on a ~160 KB text
column), each first upload's id and size written out (append mode). With RocksDB changelog
checkpointing the state key of every document is one record of the changelog files, which a
restart replays. Zoo entry SPARK-52553."""

import random

SCHEMA = "doc_id STRING, body STRING"
OUTPUT_MODE = "append"
KEY = ["doc_id"]

#: the body length: every document's state key (the row Spark keeps per body) has the same size
BODY_CHARS = 161_304


def _body(n):
    head = f"document {n}: "
    return head + "x" * (BODY_CHARS - len(head))


def batches(seed):
    rng = random.Random(seed)
    out = []
    made = 0
    for _ in range(5):
        rows = []
        for _ in range(2):
            if made and rng.random() < 0.3:
                n = rng.randrange(made)  # the same document uploaded again
            else:
                n = made
                made += 1
            rows.append((f"d{n}", _body(n)))
        out.append(rows)
    return out


def query(df):
    from pyspark.sql import functions as F

    return df.dropDuplicates(["body"]).select("doc_id", F.length("body").alias("chars"))
