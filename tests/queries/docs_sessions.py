"""A user's own query, written from the Structured Streaming Programming Guide's example of session
windows ("Types of time windows", the ``session_window`` example) — not one the matrix was designed
around: events per user, grouped into sessions that close after 5 seconds without an event, with a
watermark of 10 seconds, counted per session; append mode emits a session once the watermark has
passed its end. Session windows keep their state in their own state format (sessions per key,
merged as events arrive), which no query of the library uses.

The guide's example, in PySpark::

    events = ...  # streaming DataFrame of schema { timestamp: Timestamp, userId: String }
    sessionizedCounts = events \\
        .withWatermark("timestamp", "10 minutes") \\
        .groupBy(session_window(events.timestamp, "5 minutes"), events.userId) \\
        .count()

(minutes scaled down to seconds, so that a few micro-batches open, extend, merge and close sessions).
"""

import datetime as dt
import random

from pyspark.sql import functions as F

SCHEMA = "timestamp TIMESTAMP, userId STRING"
OUTPUT_MODE = "append"
EVENT_TIME = "session_end"  # a session is final once the watermark passed its end (batch-equivalent)
KEY = ["userId", "session_start"]

T0 = dt.datetime(2024, 1, 1)


def batches(seed):
    """Six batches of five events by three users, time moving forward by about 6 s per batch
    (sessions are extended within a batch and across batches, and closed by the watermark)."""
    rng = random.Random(seed)
    out = []
    for b in range(6):
        out.append([(T0 + dt.timedelta(seconds=6 * b + rng.randrange(0, 6)), rng.choice(["u1", "u2", "u3"]))
                    for _ in range(5)])
    return out


def query(df):
    # the columns are named, not taken from ``df``: a column object of the DataFrame before
    # ``withWatermark`` carries no watermark, and Spark then refuses append mode
    counts = (df.withWatermark("timestamp", "10 seconds")
              .groupBy(F.session_window(F.col("timestamp"), "5 seconds"), F.col("userId"))
              .count())
    return counts.select("userId", F.col("session_window.start").alias("session_start"),
                         F.col("session_window.end").alias("session_end"), "count")
