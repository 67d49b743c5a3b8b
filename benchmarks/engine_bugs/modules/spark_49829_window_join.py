"""Ad impressions and clicks counted per 10-second window on each side, then the two windowed
counts joined per (window, ad): a stream-stream join fed by two time-window aggregations
(append mode). Zoo entry SPARK-49829.

On pyspark 3.5.3 the join drops matches (an optimisation of the join skipped adding input rows to
its state that later rows still had to match; 3.5.4 gives every match), deterministically and with
or without a failure, so the failure-free reference is just as empty as the run:
``output-exactly-once`` holds and only the oracles that do not trust the engine
(``batch-equivalent``, ``release-differential``) see it (``tests/test_spark_oracles.py`` records
this module). A window is final once the watermark passed its end, so the module names ``wend`` as
its ``EVENT_TIME`` (its start would call the last, still open window lost)."""

import datetime as dt

from pyspark.sql import functions as F

SCHEMA = "ts TIMESTAMP, side STRING, ad INT"
OUTPUT_MODE = "append"
KEY = ["wstart", "ad"]
EVENT_TIME = "wend"  # a window is final once the watermark passed its end

T0 = dt.datetime(2024, 1, 1)


def batches(seed):
    """Each batch: impressions and clicks of two ads in the batch's own 10-second window."""
    out = []
    for b in range(6):
        start = T0 + dt.timedelta(seconds=10 * b)
        rows = []
        for ad in (1, 2):
            for i in range(ad + (seed + b) % 2):
                rows.append((start + dt.timedelta(seconds=1 + i), "impression", ad))
            rows.append((start + dt.timedelta(seconds=5), "click", ad))
        out.append(rows)
    return out


def _counts(df, side, name):
    return (df.where(F.col("side") == side).withWatermark("ts", "5 seconds")
            .groupBy(F.window("ts", "10 seconds"), "ad").agg(F.count("*").alias(name)))


def query(df):
    imp = _counts(df, "impression", "impressions")
    clk = _counts(df, "click", "clicks")
    return (imp.join(clk, ["window", "ad"])
            .select(F.col("window.start").alias("wstart"), F.col("window.end").alias("wend"), "ad",
                    "impressions", "clicks"))
