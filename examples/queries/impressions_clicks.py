"""Two input streams joined as a user writes it: ad impressions and clicks, each read from its
own topic with a watermark of its own, a click joined with the impression it follows by at most
20 seconds (append mode). The clicks come later than their impressions and in bursts, so in some
micro-batches only one of the two streams has new data."""

import datetime as dt
import random

from pyspark.sql import functions as F

SOURCES = {"impressions": "ts TIMESTAMP, ad INT, campaign STRING",
           "clicks": "ts TIMESTAMP, ad INT, user STRING"}
OUTPUT_MODE = "append"
KEY = ["ad", "click_ts"]
EVENT_TIME = "imp_ts"

T0 = dt.datetime(2024, 1, 1)


def batches(seed):
    rng = random.Random(seed)
    out = []
    pending = []  # clicks not yet delivered: their stream lags behind
    for b in range(6):
        imps, clicks = [], []
        if b != 3:  # batch 3: no impression arrives (only the click stream moves)
            for k in range(3):
                ad = b * 3 + k
                t = T0 + dt.timedelta(seconds=b * 10 + rng.randrange(0, 5))
                imps.append((t, ad, rng.choice(["spring", "autumn"])))
                if k == 0 or rng.random() < 0.7:  # at least one click per batch of impressions
                    pending.append((t + dt.timedelta(seconds=rng.randrange(1, 15)), ad, f"u{rng.randrange(5)}"))
        if b in (1, 3, 5):  # the clicks arrive in bursts: idle in batches 0, 2 and 4
            clicks, pending = pending, []
        batch = {"impressions": imps}
        if clicks:
            batch["clicks"] = clicks
        out.append(batch)
    return out


def query(impressions, clicks):
    imp = (impressions.select(F.col("ts").alias("imp_ts"), F.col("ad").alias("imp_ad"), "campaign")
           .withWatermark("imp_ts", "30 seconds"))
    clk = clicks.select(F.col("ts").alias("click_ts"), "ad", "user").withWatermark("click_ts", "30 seconds")
    j = clk.join(imp, F.expr("ad = imp_ad AND click_ts >= imp_ts AND click_ts <= imp_ts + interval 20 seconds"))
    return j.select("ad", "campaign", "user", "imp_ts", "click_ts")
