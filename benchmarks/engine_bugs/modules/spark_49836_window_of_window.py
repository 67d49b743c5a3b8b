"""Spending per user in 5-second windows, rolled up in SQL into 10-second windows built from the
5-second windows (``window()`` over a ``window`` column), and only the 10-second windows with at
least 10 spent kept (append mode). Zoo entry SPARK-49836: the filter and projection above the
roll-up are part of the query the user wrote and must stay in the plan."""

import datetime as dt
import random

SCHEMA = "ts TIMESTAMP, user STRING, amount INT"
OUTPUT_MODE = "append"
KEY = ["big_window", "user"]

T0 = dt.datetime(2024, 1, 1)


def batches(seed):
    rng = random.Random(seed)
    out = []
    for b in range(6):
        rows = []
        for _ in range(6):
            t = T0 + dt.timedelta(seconds=10 * b + rng.randrange(0, 10))
            rows.append((t, rng.choice("ab"), rng.randrange(1, 9)))
        out.append(rows)
    return out


def query(df):
    df.withWatermark("ts", "5 seconds").createOrReplaceTempView("spend")
    return df.sparkSession.sql("""
        SELECT big_window, user, amount, windows
        FROM (
            SELECT window(small_window, '10 seconds') AS big_window, user,
                   sum(amount) AS amount, count(*) AS windows
            FROM (
                SELECT window(ts, '5 seconds') AS small_window, user, sum(amount) AS amount
                FROM spend
                GROUP BY window, user
            ) small
            GROUP BY window, user
        ) big
        WHERE amount >= 10
    """)
