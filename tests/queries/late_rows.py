"""Late rows on purpose: per user and 10-second window the number of events (update mode, a 5-second
watermark delay). Two rows of batch 2 arrive at or below the watermark in force (23 s): t=21 s for
the window [20, 30), still open, and t=3 s for the window [0, 10), whose end is below that
watermark. Spark 4 counts both (its late-row filter compares a window's end with the previous
batch's watermark, 7 s), and so does ``batch-equivalent``, which applies that rule to each input
row and expects the batch job over exactly the rows it keeps (``tests/test_spark_oracles.py``)."""

import datetime as dt

from pyspark.sql import functions as F

SCHEMA = "ts TIMESTAMP, user STRING"
OUTPUT_MODE = "update"
KEY = ["start", "user"]

T0 = dt.datetime(2024, 1, 1)


def _t(s):
    return T0 + dt.timedelta(seconds=s)


def batches(seed):
    """Five batches, the same for every seed but for the first user; two late rows in batch 2."""
    u = ["a", "b"][seed % 2]
    return [
        [(_t(1), u), (_t(4), "c"), (_t(6), "c"), (_t(12), u)],
        [(_t(22), u), (_t(28), "c")],
        [(_t(21), u), (_t(3), "c"), (_t(33), u)],
        [(_t(41), "c"), (_t(36), u)],
        [(_t(55), u)],
    ]


def query(df):
    agg = (df.withWatermark("ts", "5 seconds")
           .groupBy(F.window("ts", "10 seconds"), "user")
           .agg(F.count("*").alias("n")))
    return agg.select(F.col("window.start").alias("start"), "user", "n")
