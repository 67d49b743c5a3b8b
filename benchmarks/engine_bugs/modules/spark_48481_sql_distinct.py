"""Redelivered page visits removed with SQL ``SELECT DISTINCT`` over a watermarked stream (the
event time is one of the distinct columns, so append mode is allowed). Zoo entry SPARK-48481."""

import datetime as dt
import random

SCHEMA = "ts TIMESTAMP, page STRING, visitor INT"
OUTPUT_MODE = "append"
KEY = ["ts", "page", "visitor"]
EVENT_TIME = "ts"

T0 = dt.datetime(2024, 1, 1)


def batches(seed):
    rng = random.Random(seed)
    sent = []
    out = []
    for b in range(6):
        rows = []
        for _ in range(5):
            if sent and rng.random() < 0.3:
                rows.append(rng.choice(sent[-4:]))  # a recent visit delivered again
            else:
                r = (T0 + dt.timedelta(seconds=10 * b + rng.randrange(0, 10)),
                     rng.choice(["home", "cart", "help"]), rng.randrange(100))
                sent.append(r)
                rows.append(r)
        out.append(rows)
    return out


def query(df):
    df.withWatermark("ts", "5 seconds").createOrReplaceTempView("visits")
    return df.sparkSession.sql("SELECT DISTINCT ts, page, visitor FROM visits")
