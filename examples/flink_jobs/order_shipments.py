"""Example Flink job: an interval join of orders and shipments (``docs/your-flink-job.md``).

A shipment joins its order when it was sent within 5 s after the order (event time). PyFlink's
DataStream API has no interval join operator, so it is written the way Flink implements one: both
streams keyed by the order id and connected, each side buffered in keyed state until the other
side arrives. Every (order, shipment) pair inside the interval is emitted exactly once, whatever
the arrival order.
"""

import random

from pyflink.common import Types
from pyflink.datastream.functions import KeyedCoProcessFunction
from pyflink.datastream.state import ListStateDescriptor, ValueStateDescriptor

KEY = [0, 1]  # order id, shipment id
BOUND_MS = 5000


def records(seed):
    """150 orders and up to 2 shipments each (some too late to join), interleaved."""
    rng = random.Random(seed)
    out = []
    for o in range(150):
        t = o * 300
        out.append(("order", o, t))
        for s in range(rng.randrange(3)):
            out.append(("ship", o, o * 10 + s, t + rng.randrange(-1000, 7000)))
    rng.shuffle(out)
    return out


class IntervalJoin(KeyedCoProcessFunction):
    def open(self, runtime_context):
        self.order_ts = runtime_context.get_state(ValueStateDescriptor("order", Types.LONG()))
        self.waiting = runtime_context.get_list_state(
            ListStateDescriptor("ships", Types.TUPLE([Types.LONG(), Types.LONG()])))

    def process_element1(self, order, ctx):
        self.order_ts.update(order[2])
        for sid, ts in list(self.waiting.get() or []):
            if 0 <= ts - order[2] <= BOUND_MS:
                yield order[1], sid, order[2], ts
        self.waiting.clear()

    def process_element2(self, ship, ctx):
        t = self.order_ts.value()
        if t is None:
            self.waiting.add((ship[2], ship[3]))
        elif 0 <= ship[3] - t <= BOUND_MS:
            yield ship[1], ship[2], t, ship[3]


def job(env, source):
    orders = source.filter(lambda r: r[0] == "order").key_by(lambda r: r[1], key_type=Types.LONG())
    ships = source.filter(lambda r: r[0] == "ship").key_by(lambda r: r[1], key_type=Types.LONG())
    return orders.connect(ships).process(IntervalJoin())
