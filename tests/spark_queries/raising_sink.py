"""Held-out query whose own foreachBatch sink raises (a ledger lookup that fails).

rollcheck must name the sink, the line and the exception (exit 2), not only Spark's first line
("[STREAM_FAILED] Query ... terminated with exception: [FOREACH_BATCH_USER_FUNCTION_ERROR] ...").
"""

SCHEMA = "user STRING, amount INT"
OUTPUT_MODE = "update"
KEY = ["user"]


def batches(seed):
    return [[("p", 1), ("q", 2)], [("p", 3)]]


def query(df):
    return df.groupBy("user").sum("amount")


def sink(batch_df, batch_id, out_dir):
    ledger = {}
    for row in batch_df.collect():
        ledger[row["user"]] += row["sum(amount)"]


def read_output(out_dir):
    return []
