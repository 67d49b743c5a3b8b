"""Ad impressions and clicks, two streams, tagged with a constant kind each ("impression",
"click"), unioned and counted per (kind, ad) in complete mode. Zoo entry SPARK-47840.

In a micro-batch where one stream has no new data, Spark puts an empty relation in its place; the
optimizer then drops that branch of the union and finds the kind constant ("click" when only
clicks moved), folds it into the streaming aggregation's grouping and output, and the aggregate
that reads the state store writes every stored group under that constant: the impressions counted
in earlier micro-batches come out as clicks, ad-3 (never clicked) among them (pyspark 3.5.1; 3.5.2
keeps the constants out of streaming aggregations and joins). Deterministic, with or without a
failure, so only the oracles that do not trust the engine (``batch-equivalent``,
``release-differential``) can see it; with both streams moving in every micro-batch it does not
show at all."""

import datetime as dt

from pyspark.sql import functions as F

SOURCES = {"impressions": "ts TIMESTAMP, ad STRING", "clicks": "ts TIMESTAMP, ad STRING, user STRING"}
OUTPUT_MODE = "complete"
KEY = ["kind", "ad"]

T0 = dt.datetime(2024, 1, 1)
#: every ad is shown; ad-3 is never clicked
SHOWN = ("ad-1", "ad-2", "ad-3")
CLICKED = ("ad-1", "ad-2")
#: which streams have new data in each micro-batch; the last one has clicks only
MOVING = (("impressions",), ("impressions", "clicks"), ("clicks",), ("impressions",),
          ("impressions", "clicks"), ("clicks",))


def batches(seed):
    """Six micro-batches; in four of them one of the two streams has no new data."""
    out = []
    for b, names in enumerate(MOVING):
        t = T0 + dt.timedelta(seconds=10 * b)
        batch = {}
        if "impressions" in names:
            batch["impressions"] = [(t + dt.timedelta(seconds=i), SHOWN[(i + seed) % 3]) for i in range(4 + b % 3)]
        if "clicks" in names:
            batch["clicks"] = [(t + dt.timedelta(seconds=i), CLICKED[(i + seed + b) % 2], f"user-{(i + b) % 4}")
                               for i in range(1 + b % 2)]
        out.append(batch)
    return out


def query(impressions, clicks):
    imp = impressions.select(F.lit("impression").alias("kind"), "ad")
    clk = clicks.select(F.lit("click").alias("kind"), "ad")
    return imp.unionByName(clk).groupBy("kind", "ad").agg(F.count("*").alias("events"))
