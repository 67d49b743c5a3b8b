"""Running totals per customer with PyFlink's own ``KeyedStream.reduce`` (no user state at all).

Written the way the PyFlink documentation shows ``reduce`` (``key_by(...).reduce(lambda a, b:
...)``), against rollcheck's job contract only: ``records(seed)``, ``job(env, source)``, ``KEY``
and ``FIELDS``. Every update of a customer's total is emitted, so the customer's last row is the
sum of all their orders.

rollcheck found that the totals restart from zero after every restore from a checkpoint
(``docs/findings/pyflink-keyed-reduce-state-lost.md``)::

    rollcheck flink record job --module benchmarks/engine_bugs/findings/pyflink_keyed_reduce.py \\
        --out reduce.jsonl --fail-at-record 300 --failure task
    rollcheck flink replay reduce.jsonl
"""

import random

from pyflink.common import Types

FIELDS = ("customer", "total")
KEY = ("customer",)


def records(seed):
    """600 orders (customer, amount): a pure function of the seed."""
    rng = random.Random(seed)
    return [(f"cust-{rng.randrange(6)}", rng.randrange(1, 100)) for _ in range(600)]


def job(env, source):
    orders = source.map(lambda r: (r[0], r[1]), output_type=Types.TUPLE([Types.STRING(), Types.LONG()]))
    return orders.key_by(lambda r: r[0], key_type=Types.STRING()).reduce(lambda a, b: (a[0], a[1] + b[1]))
