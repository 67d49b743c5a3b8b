"""Example Flink job with two input streams (``docs/your-flink-job.md``): deposits and withdrawals.

Written only against rollcheck's job contract for several sources: ``SOURCES`` names the input
streams, ``records(seed)`` returns each one's records by name and ``job(env, sources)`` gets one
checkpointed stream per name. The two streams are connected and keyed per account; a
``KeyedCoProcessFunction`` keeps the running balance and the number of operations in Flink keyed
state and emits every update, so the last row of an account is its balance::

    rollcheck flink record job --module examples/flink_jobs/account_ledger.py \\
        --out ledger.jsonl --fail-at-record 300 --failure task
    rollcheck flink replay ledger.jsonl
"""

import random

from pyflink.common import Types
from pyflink.datastream.functions import KeyedCoProcessFunction
from pyflink.datastream.state import ValueStateDescriptor

SOURCES = ("deposits", "withdrawals")
FIELDS = ("account", "balance", "operations")
KEY = ["account"]  # the account identifies a row of the output table


def records(seed):
    """400 deposits and 200 withdrawals (account, amount, id): a pure function of the seed."""
    rng = random.Random(seed)
    deposits = [(f"acct-{rng.randrange(10)}", rng.randrange(10, 200), f"d{i}") for i in range(400)]
    withdrawals = [(f"acct-{rng.randrange(10)}", rng.randrange(1, 150), f"w{i}") for i in range(200)]
    return {"deposits": deposits, "withdrawals": withdrawals}


class Balance(KeyedCoProcessFunction):
    """Deposits (first input) add to the account's balance, withdrawals (second input) take from it."""

    def open(self, runtime_context):
        self.balance = runtime_context.get_state(ValueStateDescriptor("balance", Types.LONG()))
        self.ops = runtime_context.get_state(ValueStateDescriptor("operations", Types.LONG()))

    def _apply(self, account, amount):
        balance = (self.balance.value() or 0) + amount
        ops = (self.ops.value() or 0) + 1
        self.balance.update(balance)
        self.ops.update(ops)
        return account, balance, ops

    def process_element1(self, value, ctx):
        yield self._apply(value[0], value[1])

    def process_element2(self, value, ctx):
        yield self._apply(value[0], -value[1])


def job(env, sources):
    deposits, withdrawals = sources["deposits"], sources["withdrawals"]
    return deposits.connect(withdrawals) \
        .key_by(lambda r: r[0], lambda r: r[0], key_type=Types.STRING()) \
        .process(Balance())
