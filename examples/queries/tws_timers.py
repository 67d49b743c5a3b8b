"""``transformWithStateInPandas`` with event-time timers (Spark 4's arbitrary state API v2): per
user a running count of events in a value state; each input registers a timer 10 seconds (event
time) after the user's latest event, and when the watermark passes it the user's session is
closed: a ``closed`` row is emitted and the state cleared. Update mode.

Needs ``protobuf`` in the Python workers' environment (the state client speaks protobuf) and the
RocksDB state store: Spark refuses ``HDFSBackedStateStoreProvider`` for transformWithState
(``UNSUPPORTED_FEATURE.STORE_BACKEND_NOT_SUPPORTED_FOR_TWS``), so ``STATE_STORES`` names the RocksDB
providers only and the matrix skips the HDFS configuration.
"""

import datetime as dt
import random

SCHEMA = "ts TIMESTAMP, user STRING"
OUTPUT_MODE = "update"
KEY = ["user", "kind", "count"]
#: transformWithState keeps its state in RocksDB only (the matrix skips other providers).
STATE_STORES = ["rocksdb", "rocksdb-changelog"]

T0 = dt.datetime(2024, 1, 1)
OUTPUT = "user STRING, kind STRING, count LONG"


def batches(seed):
    """Five batches of events by four users (a user pauses now and then, so sessions close), then
    one event far ahead that closes every open session."""
    rng = random.Random(seed)
    out = []
    for b in range(5):
        users = rng.sample("abcd", 2)
        out.append([(T0 + dt.timedelta(seconds=b * 8 + rng.randrange(0, 4)), u) for u in users for _ in range(2)])
    # a late-comer far ahead in event time: the watermark passes every open session's timer
    out.append([(T0 + dt.timedelta(seconds=120), "z")])
    return out


def _processor():
    import pandas as pd
    from pyspark.sql.streaming import StatefulProcessor

    class Sessions(StatefulProcessor):
        def init(self, handle):
            self.handle = handle
            self.count = handle.getValueState("count", "n LONG")
            self.deadline = handle.getValueState("deadline", "ms LONG")

        def handleInputRows(self, key, rows, timerValues):
            n = self.count.get()[0] if self.count.exists() else 0
            latest = 0
            for pdf in rows:
                n += len(pdf)
                latest = max(latest, int(pdf["ts"].max().value // 1_000_000))
            if self.deadline.exists():
                self.handle.deleteTimer(self.deadline.get()[0])
            self.deadline.update((latest + 10_000,))
            self.handle.registerTimer(latest + 10_000)
            self.count.update((n,))
            yield pd.DataFrame({"user": [key[0]], "kind": ["open"], "count": [n]})

        def handleExpiredTimer(self, key, timerValues, expiredTimerInfo):
            n = self.count.get()[0] if self.count.exists() else 0
            self.count.clear()
            self.deadline.clear()
            yield pd.DataFrame({"user": [key[0]], "kind": ["closed"], "count": [n]})

        def close(self):
            pass

    return Sessions()


def query(df):
    return (df.withWatermark("ts", "5 seconds").groupBy("user")
            .transformWithStateInPandas(_processor(), OUTPUT, "Update", "EventTime"))
