r"""Example Flink job under test (``docs/your-flink-job.md``): a running total per account.

A keyed aggregation written only against rollcheck's job contract: ``records(seed)``,
``job(env, source)`` and ``KEY``. Each payment adds to its account's total, kept in Flink keyed
state (``ValueState``); every update is emitted, so the last row of an account is its balance::

    rollcheck flink record job --module examples/flink_jobs/keyed_totals.py \
        --out totals.jsonl --fail-at-record 300 --failure task
    rollcheck flink replay totals.jsonl
"""

import random

from pyflink.common import Types
from pyflink.datastream.functions import KeyedProcessFunction
from pyflink.datastream.state import ValueStateDescriptor

KEY = [0]  # the account identifies a row of the output table


def records(seed):
    """600 payments (account, amount, payment id): a pure function of the seed."""
    rng = random.Random(seed)
    return [(f"acct-{rng.randrange(12)}", rng.randrange(1, 100), i) for i in range(600)]


class RunningTotal(KeyedProcessFunction):
    """Per account: add each payment to the total and emit ``(account, total, payments)``."""

    def open(self, runtime_context):
        """Declare the keyed state: the total and the number of payments."""
        self.total = runtime_context.get_state(ValueStateDescriptor("total", Types.LONG()))
        self.count = runtime_context.get_state(ValueStateDescriptor("count", Types.LONG()))

    def process_element(self, value, ctx):
        """Add one payment to its account's state and emit the new row."""
        total = (self.total.value() or 0) + value[1]
        count = (self.count.value() or 0) + 1
        self.total.update(total)
        self.count.update(count)
        yield value[0], total, count


def job(env, source):
    """The job: the payments keyed by account into :class:`RunningTotal`."""
    return source.key_by(lambda r: r[0], key_type=Types.STRING()).process(RunningTotal())
