"""Windowed aggregation with a watermark: per user and 10-second tumbling window, the number of
events and the sum of their amounts (update mode; the state is keyed by the ``window`` struct)."""

import datetime as dt
import random

from pyspark.sql import functions as F

SCHEMA = "ts TIMESTAMP, user STRING, amount INT"
OUTPUT_MODE = "update"
KEY = ["start", "user"]

T0 = dt.datetime(2024, 1, 1)


def batches(seed):
    rng = random.Random(seed)
    out = []
    for b in range(6):
        out.append([(T0 + dt.timedelta(seconds=b * 8 + rng.randrange(0, 12)), rng.choice("abc"),
                     rng.randrange(1, 10)) for _ in range(5)])
    return out


def query(df):
    agg = (df.withWatermark("ts", "15 seconds")
           .groupBy(F.window("ts", "10 seconds"), "user")
           .agg(F.count("*").alias("n"), F.sum("amount").alias("total")))
    return agg.select(F.col("window.start").alias("start"), "user", "n", "total")
