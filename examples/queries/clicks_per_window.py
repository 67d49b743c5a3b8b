"""Example query under test (``docs/your-query.md``): clicks per page and 10-second window.

A windowed aggregation with a watermark, written only against rollcheck's query contract:
``SCHEMA``, ``batches(seed)``, ``query(df)``, ``OUTPUT_MODE`` and ``KEY``. It uses rollcheck's
default, idempotent sink (no ``sink``/``read_output``)::

    rollcheck spark record query --module examples/queries/clicks_per_window.py \\
        --out clicks.jsonl --fail-at-batch 2 --failure kill --json
    rollcheck spark replay clicks.jsonl
    rollcheck spark checkpoint clicks.jsonl.work/checkpoint --json
"""

import datetime as dt
import random

from pyspark.sql import functions as F

SCHEMA = "ts TIMESTAMP, page STRING, user STRING"
OUTPUT_MODE = "update"
KEY = ["window_start", "page"]

START = dt.datetime(2024, 5, 1, 12, 0, 0)


def batches(seed):
    """Six micro-batches of clicks, a pure function of the seed (some arrive late)."""
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


def query(df):
    counts = (df.withWatermark("ts", "20 seconds")
              .groupBy(F.window("ts", "10 seconds"), "page")
              .agg(F.count("*").alias("clicks"), F.max("ts").alias("last_click")))
    return counts.select(F.col("window.start").alias("window_start"), "page", "clicks", "last_click")
