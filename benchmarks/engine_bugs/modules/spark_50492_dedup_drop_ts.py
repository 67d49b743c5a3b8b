"""Redelivered orders dropped with ``dropDuplicatesWithinWatermark`` on the order id, and only the
order id and amount kept in the output (the event-time column is not selected; append mode).
Zoo entry SPARK-50492."""

import datetime as dt
import random

SCHEMA = "ts TIMESTAMP, order_id STRING, amount INT"
OUTPUT_MODE = "append"
KEY = ["order_id"]

T0 = dt.datetime(2024, 1, 1)


def batches(seed):
    rng = random.Random(seed)
    sent = []
    out = []
    for b in range(5):
        rows = []
        for _ in range(4):
            if sent and rng.random() < 0.4:
                rows.append(rng.choice(sent))  # the same order delivered again
            else:
                r = (T0 + dt.timedelta(seconds=5 * b + rng.randrange(0, 5)), f"o{len(sent)}",
                     rng.randrange(1, 50))
                sent.append(r)
                rows.append(r)
        out.append(rows)
    return out


def query(df):
    return (df.withWatermark("ts", "30 seconds").dropDuplicatesWithinWatermark(["order_id"])
            .select("order_id", "amount"))
