"""``dropDuplicatesWithinWatermark``: events delivered more than once (also across batches) are
kept once per ``event_id`` while the watermark allows (append mode)."""

import datetime as dt
import random

SCHEMA = "ts TIMESTAMP, event_id STRING, user STRING"
OUTPUT_MODE = "append"
KEY = ["event_id"]

T0 = dt.datetime(2024, 1, 1)


def batches(seed):
    rng = random.Random(seed)
    sent = []
    out = []
    for b in range(6):
        rows = []
        for _ in range(4):
            if sent and rng.random() < 0.4:
                rows.append(rng.choice(sent))  # a redelivered event
            else:
                r = (T0 + dt.timedelta(seconds=b * 5 + rng.randrange(0, 5)), f"e{len(sent)}", rng.choice("xyz"))
                sent.append(r)
                rows.append(r)
        out.append(rows)
    return out


def query(df):
    return df.withWatermark("ts", "30 seconds").dropDuplicatesWithinWatermark(["event_id"])
