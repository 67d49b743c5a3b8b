"""Orders left-outer-joined with the payments that settle them within 30 seconds (append mode): an
order comes out with its payment, or without one once the watermark says none can come. The
payment feed stalls for three micro-batches (batches 2 to 4 have orders only) and then delivers
late. Zoo entry SPARK-57003.

The optimizer infers ``pay_order IS NOT NULL`` on the payments side of the join, so the join's
state schema written at batch 0 has a non-nullable ``pay_order``. In a micro-batch where the
payments have no new data Spark plans that side as an empty relation and the inferred filter, with
its nullability, is gone. The run that started at batch 0 never checks its state schema again, so
a failure-free run is right; a new run (the query restarted after a task failure or a crash) checks
it in its first micro-batch, and when the payments are idle there the check refuses the now
nullable ``pay_order`` with ``StateSchemaNotCompatible``, on every restart: the query cannot
recover from its own checkpoint (pyspark 3.5.x; 4.3.0 widens every stateful operator's schema to
nullable)."""

import datetime as dt

from pyspark.sql import functions as F

SOURCES = {"orders": "order_ts TIMESTAMP, order_id INT, amount INT",
           "payments": "paid_ts TIMESTAMP, pay_order INT, method STRING"}
OUTPUT_MODE = "append"
KEY = ["order_id"]
EVENT_TIME = "order_ts"

T0 = dt.datetime(2024, 1, 1)
#: (order id, seconds after T0, amount) per micro-batch
ORDERS = (((1, 1, 30), (2, 3, 12)), ((3, 11, 45), (4, 13, 8)), ((5, 21, 60), (6, 24, 15)),
          ((7, 32, 22),), ((8, 41, 90),), ((9, 52, 35),), ((10, 75, 18),))
#: (order id, seconds after T0) of the payments per micro-batch; none in batches 2, 3 and 4
PAYMENTS = (((1, 4),), ((2, 15), (3, 14)), (), (), (), ((5, 26), (8, 44)), ((9, 60), (10, 78)))
METHODS = ("card", "transfer", "wallet")


def _t(seconds):
    return T0 + dt.timedelta(seconds=seconds)


def batches(seed):
    """Seven micro-batches of orders; the payments are idle in batches 2 to 4."""
    out = []
    for orders, payments in zip(ORDERS, PAYMENTS, strict=True):
        batch = {"orders": [(_t(s), oid, amount) for oid, s, amount in orders]}
        if payments:
            batch["payments"] = [(_t(s), oid, METHODS[(oid + seed) % len(METHODS)]) for oid, s in payments]
        out.append(batch)
    return out


def query(orders, payments):
    o = orders.withWatermark("order_ts", "10 seconds")
    p = payments.withWatermark("paid_ts", "10 seconds")
    settled = F.expr("pay_order = order_id AND paid_ts BETWEEN order_ts AND order_ts + INTERVAL 30 SECONDS")
    return o.join(p, settled, "left_outer").select("order_id", "order_ts", "amount", "paid_ts", "method")
