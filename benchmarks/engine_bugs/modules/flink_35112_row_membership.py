"""Order lines priced by a Python map that serves two kinds of line: the DataStream carries named
``Row`` records, and the pricing code asks whether a line has a ``discount`` field
(``"discount" in line``, as it would ask a dict) before applying it; the running revenue per
customer is then kept in Flink keyed state (``ValueState`` of a ``KeyedProcessFunction``). Zoo
entry FLINK-35112.

PyFlink's ``Row.__contains__`` looked for the value among the row's values instead of the name
among its field names (a Row with field names reads like a dict, ``line.discount`` and
``line["discount"]`` both work), so on the affected release no line "has" a discount field and
no discount is ever applied: every customer's revenue is too high, with or without a failure, in
streaming and BATCH mode alike.
"""

import random

from pyflink.common import Row, Types
from pyflink.datastream.functions import KeyedProcessFunction
from pyflink.datastream.state import ValueStateDescriptor

KEY = ["customer"]
FIELDS = ["customer", "lines", "revenue"]

LINE = Types.ROW_NAMED(["customer", "price", "quantity", "discount"],
                       [Types.STRING(), Types.INT(), Types.INT(), Types.INT()])


def records(seed):
    """300 order lines (line id, customer, unit price, quantity, discount per unit)."""
    rng = random.Random(seed)
    return [(i, f"cust-{rng.randrange(6)}", rng.randrange(10, 60), rng.randrange(1, 4), rng.randrange(0, 8))
            for i in range(300)]


def _line(r):
    return Row(customer=r[1], price=r[2], quantity=r[3], discount=r[4])


def _revenue(line):
    unit = line.price - line.discount if "discount" in line else line.price
    return line.customer, 1, unit * line.quantity


class RunningRevenue(KeyedProcessFunction):
    def open(self, runtime_context):
        self.lines = runtime_context.get_state(ValueStateDescriptor("lines", Types.LONG()))
        self.revenue = runtime_context.get_state(ValueStateDescriptor("revenue", Types.LONG()))

    def process_element(self, value, ctx):
        lines = (self.lines.value() or 0) + value[1]
        revenue = (self.revenue.value() or 0) + value[2]
        self.lines.update(lines)
        self.revenue.update(revenue)
        yield value[0], lines, revenue


def job(env, source):
    lines = source.map(_line, output_type=LINE)
    priced = lines.map(_revenue, output_type=Types.TUPLE([Types.STRING(), Types.INT(), Types.INT()]))
    return priced.key_by(lambda t: t[0], key_type=Types.STRING()).process(RunningRevenue())
