"""Held-out job whose KEY points past the output tuple, which only the first output row shows.

Without ``FIELDS`` nothing in the module says how long an output row is: ``KEY = [2]`` is a
valid-looking index, and the rows ``(user, total)`` have two fields. rollcheck must say ``KEY``
at the first output row (exit 2), not run the job to the end and call it inconclusive.
"""

from pyflink.common import Types
from pyflink.datastream.functions import KeyedProcessFunction
from pyflink.datastream.state import ValueStateDescriptor

KEY = [2]


def records(seed):
    return [(f"u{i % 3}", i) for i in range(90)]


class Total(KeyedProcessFunction):
    def open(self, runtime_context):
        self.total = runtime_context.get_state(ValueStateDescriptor("total", Types.LONG()))

    def process_element(self, value, ctx):
        total = (self.total.value() or 0) + value[1]
        self.total.update(total)
        yield value[0], total


def job(env, source):
    return source.key_by(lambda r: r[0], key_type=Types.STRING()).process(Total())
