"""Arbitrary state with ``applyInPandasWithState``: per user, a running count and total of the
amounts seen so far, emitted for every user touched by a batch (update mode)."""

import random

SCHEMA = "user STRING, amount INT"
OUTPUT_MODE = "update"
KEY = ["user"]


def batches(seed):
    rng = random.Random(seed)
    return [[(rng.choice("abcd"), rng.randrange(1, 20)) for _ in range(5)] for _ in range(6)]


def _running(key, pdfs, state):
    import pandas as pd

    count, total = state.get if state.exists else (0, 0)
    for pdf in pdfs:
        count += len(pdf)
        total += int(pdf["amount"].sum())
    state.update((count, total))
    yield pd.DataFrame({"user": [key[0]], "count": [count], "total": [total]})


def query(df):
    from pyspark.sql.streaming.state import GroupStateTimeout

    return df.groupBy("user").applyInPandasWithState(
        _running, "user STRING, count LONG, total LONG", "count LONG, total LONG", "Update",
        GroupStateTimeout.NoTimeout)
