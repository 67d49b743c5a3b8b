"""Held-out job written the way a Spark user writes a query module: the KEY names a field.

``FIELDS`` names the output tuple's fields in order and ``KEY`` lists the fields that identify a
row by name (``KEY = ("user",)``), as a Spark query names its columns. A running total per user,
kept in Flink keyed state.
"""

import random

from pyflink.common import Types
from pyflink.datastream.functions import KeyedProcessFunction
from pyflink.datastream.state import ValueStateDescriptor

FIELDS = ("user", "total")
KEY = ("user",)


def records(seed):
    """240 purchases (user, amount): a pure function of the seed."""
    rng = random.Random(seed)
    return [(f"u{rng.randrange(6)}", rng.randrange(1, 50)) for _ in range(240)]


class Total(KeyedProcessFunction):
    def open(self, runtime_context):
        self.total = runtime_context.get_state(ValueStateDescriptor("total", Types.LONG()))

    def process_element(self, value, ctx):
        total = (self.total.value() or 0) + value[1]
        self.total.update(total)
        yield value[0], total


def job(env, source):
    return source.key_by(lambda r: r[0], key_type=Types.STRING()).process(Total())
