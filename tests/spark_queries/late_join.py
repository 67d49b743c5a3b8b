"""Stream-stream inner join of two sources, each with its own watermark (impressions 5 s, clicks
10 s), append mode; late rows on both sides, some dropped by Spark's rule (the side's event time at or
below the previous batch's global watermark) (tests/test_spark_lateness.py)."""

import datetime as dt

from pyspark.sql import functions as F

SOURCES = {"imps": "imp_ts TIMESTAMP, imp_ad INT", "clicks": "click_ts TIMESTAMP, ad INT"}
OUTPUT_MODE = "append"
KEY = ["ad", "click_ts"]
EVENT_TIME = "click_ts"

T0 = dt.datetime(2024, 1, 1)


def _t(s):
    return T0 + dt.timedelta(seconds=s)


def batches(seed):
    """Five batches of both sources; late rows in batches 2 and 3; in batch 3 (late-events
    watermark 14 s, the previous batch's global one) the impression at 12 s and the click at 2 s are
    dropped, the impression at 21 s and the click at 23 s count."""
    k = seed % 2
    return [
        {"imps": [(_t(1), 1), (_t(5), 2)], "clicks": [(_t(3), 1)]},
        {"imps": [(_t(20), 3)], "clicks": [(_t(8), 2), (_t(24), 3)]},
        {"imps": [(_t(2), 4), (_t(30), 5)], "clicks": [(_t(4), 4), (_t(33), 5), (_t(6 + k), 2)]},
        {"imps": [(_t(40), 6), (_t(21), 7), (_t(12), 9)], "clicks": [(_t(44), 6), (_t(23), 7), (_t(2), 1)]},
        {"imps": [(_t(60), 8)], "clicks": [(_t(62), 8)]},
    ]


def query(imps, clicks):
    i = imps.withWatermark("imp_ts", "5 seconds")
    c = clicks.withWatermark("click_ts", "10 seconds")
    j = c.join(i, F.expr("ad = imp_ad AND click_ts >= imp_ts AND click_ts <= imp_ts + interval 10 seconds"))
    return j.select("ad", "imp_ts", "click_ts")
