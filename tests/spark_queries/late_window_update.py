"""Tumbling 10-second windows, 10-second watermark, update mode, late rows in every batch from
batch 2 on: some dropped by Spark's rule (window end at or below the previous batch's watermark), some
counted (tests/test_spark_lateness.py)."""

import datetime as dt
import random

from pyspark.sql import functions as F

SCHEMA = "ts TIMESTAMP, page STRING, user STRING"
OUTPUT_MODE = "update"
KEY = ["window_start", "page"]

START = dt.datetime(2024, 5, 1, 12, 0, 0)


def batches(seed):
    """Six batches of clicks, a pure function of the seed: five on time (advancing 8 s a batch),
    one late within the watermark's reach and one far behind it."""
    rng = random.Random(seed)
    out = []
    for b in range(6):
        rows = []
        for _ in range(5):
            t = START + dt.timedelta(seconds=b * 8 + rng.randrange(0, 8))
            rows.append((t, rng.choice(["/home", "/cart"]), f"u{rng.randrange(4)}"))
        if b >= 2:
            near = START + dt.timedelta(seconds=b * 8 - rng.randrange(9, 14))  # its window may be open
            far = START + dt.timedelta(seconds=b * 8 - rng.randrange(22, 30))  # its window is closed
            rows += [(near, "/home", "late-near"), (far, "/cart", "late-far")]
        out.append(rows)
    return out


def query(df):
    counts = (df.withWatermark("ts", "10 seconds")
              .groupBy(F.window("ts", "10 seconds"), "page")
              .agg(F.count("*").alias("clicks")))
    return counts.select(F.col("window.start").alias("window_start"), "page", "clicks")
