"""Sign-ups counted per campaign with ``applyInPandasWithState``; a sign-up without a campaign
code is counted under a null campaign, and the output's first column is the campaign, so the
null campaign's rows have a null first column (update mode). Zoo entry SPARK-44464."""

import datetime as dt
import random

import pandas as pd
from pyspark.sql.streaming.state import GroupStateTimeout

SCHEMA = "ts TIMESTAMP, campaign STRING, user INT"
OUTPUT_MODE = "update"
KEY = ["campaign"]

T0 = dt.datetime(2024, 1, 1)


def batches(seed):
    rng = random.Random(seed)
    out = []
    for b in range(5):
        rows = []
        for i in range(5):
            code = rng.choice(["spring", "autumn", None])
            rows.append((T0 + dt.timedelta(seconds=5 * b + i), code, rng.randrange(1000)))
        out.append(rows)
    return out


def _count(key, frames, state):
    total = state.get[0] if state.exists else 0
    for pdf in frames:
        total += len(pdf)
    state.update((total,))
    yield pd.DataFrame({"campaign": [key[0]], "signups": [total]})


def query(df):
    return (df.groupBy("campaign")
            .applyInPandasWithState(_count, "campaign STRING, signups LONG", "total LONG", "update",
                                    GroupStateTimeout.NoTimeout))
