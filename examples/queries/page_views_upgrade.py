"""Example query under test with an upgrade (``docs/your-query.md``, "An upgrade is a recovery too").

Page views per page and 10-second window with a 20-second watermark; ``query_next`` is the
version deployed later on the same checkpoint: the same aggregation, one more output column
(``tier``, derived from the count after the aggregation) -- a projection change that Spark's
guide allows::

    rollcheck spark record query --module examples/queries/page_views_upgrade.py \\
        --out views.jsonl --fail-at-batch 2 --failure upgrade --json
    rollcheck spark replay views.jsonl

A ``query_next`` that grouped by another column, or counted something else, would be refused
before Spark runs anything (exit 2 naming ``query_next`` and the change).
"""

import datetime as dt
import random

from pyspark.sql import functions as F

SCHEMA = "ts TIMESTAMP, page STRING, user STRING"
OUTPUT_MODE = "update"
KEY = ["window_start", "page"]

START = dt.datetime(2024, 5, 1, 12, 0, 0)


def batches(seed):
    """Six micro-batches of page views, a pure function of the seed (some arrive late)."""
    rng = random.Random(seed)
    out = []
    for b in range(6):
        rows = []
        for _ in range(6):
            late = rng.random() < 0.2
            t = START + dt.timedelta(seconds=b * 7 + rng.randrange(0, 10) - (12 if late else 0))
            rows.append((t, rng.choice(["/home", "/cart", "/pay"]), f"u{rng.randrange(4)}"))
        out.append(rows)
    return out


def _views(df):
    return (df.withWatermark("ts", "20 seconds")
            .groupBy(F.window("ts", "10 seconds"), "page")
            .agg(F.count("*").alias("views"), F.max("ts").alias("last_view")))


def query(df):
    counts = _views(df)
    return counts.select(F.col("window.start").alias("window_start"), "page", "views", "last_view")


def query_next(df):
    """The upgrade: the same state, one more output column computed after the aggregation."""
    counts = _views(df)
    return counts.select(F.col("window.start").alias("window_start"), "page", "views", "last_view",
                         F.when(F.col("views") >= 3, "busy").otherwise("quiet").alias("tier"))
