"""A mutant of ``examples/flink_jobs/account_ledger.py``: withdrawals held outside Flink's state.

Each withdrawal is held in a Python attribute of a ``FlatMapFunction`` and emitted only when the
next one arrives (the last withdrawal of each subtask is never emitted, in every run alike). The
held record is in no checkpoint: after a restore, the one held at the checkpoint is gone, although
the checkpoint's source offsets had passed it — a record of the second stream lost
(``output-exactly-once`` must catch it).
"""

from pyflink.common import Types
from pyflink.datastream.functions import FlatMapFunction, KeyedCoProcessFunction
from pyflink.datastream.state import ValueStateDescriptor

SOURCES = ("deposits", "withdrawals")
KEY = [0]


def records(seed):
    deposits = [(f"acct-{i % 7}", 100 + i, f"d{i}") for i in range(400)]
    withdrawals = [(f"acct-{(3 * i) % 7}", 1 + i % 50, f"w{i}") for i in range(200)]
    return {"deposits": deposits, "withdrawals": withdrawals}


class HoldOne(FlatMapFunction):
    """Emits the previous withdrawal when the next arrives (the held one lives only in memory)."""

    def open(self, runtime_context):
        self.held = None

    def flat_map(self, value):
        if self.held is not None:
            yield self.held
        self.held = value


class Balance(KeyedCoProcessFunction):
    def open(self, runtime_context):
        self.balance = runtime_context.get_state(ValueStateDescriptor("balance", Types.LONG()))

    def process_element1(self, value, ctx):
        b = (self.balance.value() or 0) + value[1]
        self.balance.update(b)
        yield value[0], b

    def process_element2(self, value, ctx):
        b = (self.balance.value() or 0) - value[1]
        self.balance.update(b)
        yield value[0], b


def job(env, sources):
    withdrawals = sources["withdrawals"].flat_map(HoldOne())
    return sources["deposits"].connect(withdrawals) \
        .key_by(lambda r: r[0], lambda r: r[0], key_type=Types.STRING()) \
        .process(Balance())
