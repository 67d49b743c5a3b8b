"""Readings whose doubles include NaN and both infinities, kept per sensor (append mode): the
trace must stay strict JSON whatever values a user's query outputs."""

import datetime as dt

SCHEMA = "ts TIMESTAMP, sensor STRING, value DOUBLE"
OUTPUT_MODE = "append"
KEY = ["ts", "sensor"]

T0 = dt.datetime(2024, 1, 1)
ODD = [float("nan"), float("inf"), float("-inf"), 1.5]


def batches(seed):
    return [[(T0 + dt.timedelta(seconds=b * 4 + i), f"s{i}", ODD[(b + i) % 4]) for i in range(3)]
            for b in range(4)]


def query(df):
    return df.withWatermark("ts", "10 seconds").dropDuplicatesWithinWatermark(["ts", "sensor"])
