"""A deliberately broken job (a mutant of examples/flink_jobs/keyed_totals.py): the running totals
live in a Python dict of the operator instead of Flink keyed state, so a restore forgets them and
the totals after the failure restart from zero. rollcheck must report lost output (the final rows
differ from the failure-free run's)."""

import random

from pyflink.common import Types
from pyflink.datastream.functions import KeyedProcessFunction

KEY = [0]


def records(seed):
    rng = random.Random(seed)
    return [(f"acct-{rng.randrange(12)}", rng.randrange(1, 100), i) for i in range(600)]


class VolatileTotal(KeyedProcessFunction):
    def open(self, runtime_context):
        self.totals = {}  # not checkpointed: the bug

    def process_element(self, value, ctx):
        total, count = self.totals.get(value[0], (0, 0))
        total, count = total + value[1], count + 1
        self.totals[value[0]] = (total, count)
        yield value[0], total, count


def job(env, source):
    return source.key_by(lambda r: r[0], key_type=Types.STRING()).process(VolatileTotal())
