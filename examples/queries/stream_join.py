"""Stream-stream inner join with watermarks on both sides and a time-range condition: ad clicks
joined with the impression they follow by at most 20 seconds (append mode)."""

import datetime as dt
import random

from pyspark.sql import functions as F

SCHEMA = "ts TIMESTAMP, side STRING, ad INT"
OUTPUT_MODE = "append"
KEY = ["ad", "click_ts"]

T0 = dt.datetime(2024, 1, 1)


def batches(seed):
    rng = random.Random(seed)
    out = []
    for b in range(6):
        rows = []
        for k in range(3):
            ad = b * 3 + k
            t = T0 + dt.timedelta(seconds=b * 10 + rng.randrange(0, 5))
            rows.append((t, "impression", ad))
            if rng.random() < 0.7:
                rows.append((t + dt.timedelta(seconds=rng.randrange(1, 15)), "click", ad))
        out.append(rows)
    return out


def query(df):
    imp = (df.where("side = 'impression'").select(F.col("ts").alias("imp_ts"), F.col("ad").alias("imp_ad"))
           .withWatermark("imp_ts", "20 seconds"))
    clk = (df.where("side = 'click'").select(F.col("ts").alias("click_ts"), F.col("ad"))
           .withWatermark("click_ts", "20 seconds"))
    j = clk.join(imp, F.expr("ad = imp_ad AND click_ts >= imp_ts AND click_ts <= imp_ts + interval 20 seconds"))
    return j.select("ad", "imp_ts", "click_ts")
