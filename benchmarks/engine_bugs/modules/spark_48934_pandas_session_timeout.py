"""Per-user activity sessions with ``applyInPandasWithState``: each batch adds a user's events to
the session's count and moves the session's event-time timeout to 10 seconds after the user's
latest event (given as a ``datetime``); when the watermark passes it, the session is written out
with its count and closed (append mode). Zoo entry SPARK-48934."""

import datetime as dt

import pandas as pd
from pyspark.sql.streaming.state import GroupStateTimeout

SCHEMA = "ts TIMESTAMP, user STRING"
OUTPUT_MODE = "append"
KEY = ["user", "session_start"]

T0 = dt.datetime(2024, 1, 1)


def batches(seed):
    """Two users active for three batches each (5 s apart), then both idle while a third user's
    events move the watermark on."""
    out = []
    for b in range(6):
        rows = []
        t = T0 + dt.timedelta(seconds=5 * b)
        if b < 3:
            rows += [(t, "ann"), (t + dt.timedelta(seconds=1), "bob"), (t + dt.timedelta(seconds=2), "ann")]
        rows.append((t + dt.timedelta(seconds=3 + seed % 2), "cy"))
        out.append(rows)
    return out


def _sessions(key, frames, state):
    user = key[0]
    if state.hasTimedOut:
        start, count = state.get
        state.remove()
        yield pd.DataFrame({"user": [user], "session_start": [pd.Timestamp(start, unit="ms")],
                            "events": [count]})
        return
    start, count = state.get if state.exists else (None, 0)
    latest = None
    for pdf in frames:
        count += len(pdf)
        first = pdf["ts"].min()
        if start is None or int(first.value // 10**6) < start:
            start = int(first.value // 10**6)
        last = pdf["ts"].max()
        latest = last if latest is None or last > latest else latest
    state.update((start, count))
    state.setTimeoutTimestamp(latest.to_pydatetime() + dt.timedelta(seconds=10))
    if False:  # a generator that yields nothing for a key that is still active
        yield pd.DataFrame()


def query(df):
    return (df.withWatermark("ts", "2 seconds").groupBy("user")
            .applyInPandasWithState(_sessions, "user STRING, session_start TIMESTAMP, events LONG",
                                    "start LONG, count LONG", "append", GroupStateTimeout.EventTimeTimeout))
