"""``dropDuplicates`` on the event id and the event time with a 5-second watermark (append mode):
redelivered events, and late events some of which Spark drops (event time at or below the previous
batch's watermark) (tests/test_spark_lateness.py)."""

import datetime as dt

SCHEMA = "ts TIMESTAMP, event_id STRING"
OUTPUT_MODE = "append"
KEY = ["event_id", "ts"]
EVENT_TIME = "ts"

T0 = dt.datetime(2024, 1, 1)


def _t(s):
    return T0 + dt.timedelta(seconds=s)


def batches(seed):
    """Five batches; batch 2 redelivers e1 and brings e9 (t=1 s, dropped: at or below the previous
    batch's watermark 7 s) and e10 (t=9 s, kept); batch 3 brings e11 (t=3 s, dropped)."""
    x = f"x{seed % 3}"
    return [
        [(_t(1), "e1"), (_t(4), "e2"), (_t(12), x)],
        [(_t(14), "e3"), (_t(22), "e4"), (_t(4), "e2")],
        [(_t(1), "e1"), (_t(25), "e5"), (_t(1), "e9"), (_t(9), "e10"), (_t(18), "e6")],
        [(_t(33), "e7"), (_t(3), "e11"), (_t(25), "e5")],
        [(_t(45), "e8")],
    ]


def query(df):
    return df.withWatermark("ts", "5 seconds").dropDuplicates(["event_id", "ts"])
