"""Orders summed up by one Flink SQL query without GROUP BY (a global aggregation): how many
orders there are, how many of them are large (``COUNT(*) FILTER (WHERE amount >= 50)``) and the
total amount, updated with every order. The DataStream of orders becomes a table
(``from_data_stream``), the query's changelog comes back as a DataStream
(``to_changelog_stream``) and only its inserts and update-afters are output, so the last row is
the query's current answer. Zoo entry FLINK-30687.

In Flink's streaming runtime the planner lays out the aggregation's input so that the filter
condition is its first column; the generated streaming aggregation code took a filter at
position 0 for "no filter" and counted every order as large. The same query in BATCH runtime mode
is right (the reported bug: streaming only, global aggregations only).
"""

import random

from pyflink.common import Row, Types
from pyflink.table import StreamTableEnvironment

KEY = ["scope"]
FIELDS = ["scope", "orders", "large_orders", "amount"]

#: what the query answers: one row, updated with every order
QUERY = """
SELECT COUNT(*) FILTER (WHERE amount >= 50) AS large_orders,
       COUNT(*) AS orders,
       SUM(amount) AS amount
FROM orders
"""


def records(seed):
    """240 orders (order id, customer, amount 1-99): a pure function of the seed."""
    rng = random.Random(seed)
    return [(i, f"c{rng.randrange(8)}", rng.randrange(1, 100)) for i in range(240)]


def _answer(row):
    return "all", row[1], row[0], row[2]


def job(env, source):
    typed = source.map(lambda r: Row(order_id=r[0], customer=r[1], amount=r[2]),
                       output_type=Types.ROW_NAMED(["order_id", "customer", "amount"],
                                                   [Types.INT(), Types.STRING(), Types.INT()]))
    tables = StreamTableEnvironment.create(env)
    tables.create_temporary_view("orders", tables.from_data_stream(typed))
    changelog = tables.to_changelog_stream(tables.sql_query(QUERY))
    current = changelog.filter(lambda r: r.get_row_kind().name in ("INSERT", "UPDATE_AFTER"))
    return current.map(_answer, output_type=Types.TUPLE([Types.STRING(), Types.LONG(), Types.LONG(),
                                                         Types.INT()]))
