"""Late rows on purpose: per user and 10-second window the number of events (update mode, a 5-second
watermark delay). Some rows arrive after the watermark passed their event time while their window
is still open (Spark counts them), others after their window closed (Spark drops them): the
``batch-equivalent`` oracle must accept both without trusting the engine (``tests/test_spark_oracles.py``)."""

import datetime as dt

from pyspark.sql import functions as F

SCHEMA = "ts TIMESTAMP, user STRING"
OUTPUT_MODE = "update"
KEY = ["start", "user"]

T0 = dt.datetime(2024, 1, 1)


def _t(s):
    return T0 + dt.timedelta(seconds=s)


def batches(seed):
    """Five batches; batch 2 brings a row late for the watermark but in an open window (t=21 with the
    watermark at 23, window [20, 30)) and one late for a closed window (t=3, window [0, 10))."""
    u = ["a", "b"][seed % 2]
    return [
        [(_t(1), u), (_t(4), "c"), (_t(12), u)],
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
