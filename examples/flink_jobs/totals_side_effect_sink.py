"""Example Flink job with a sink of its own that does not take part in checkpointing.

The running totals of ``keyed_totals.py``, written by the job's own ``sink``: a map that appends
each row to a file as it passes (a side effect, no transaction). After a restore the rows since the
checkpoint are written again — which Flink's documentation says to expect ("Fault Tolerance
Guarantees of Data Sources and Sinks": only a sink that takes part in checkpointing gives end-to-end
exactly-once). The module declares what it is, ``SINK_GUARANTEE = "at-least-once"``, and
``user-sink-at-least-once`` holds when no row is lost and no KEY has more extra copies than rows the
trace shows handed to the sink again since the restored checkpoint. rollcheck's own transactional
output of the same job stays exactly once.
"""

import json
import os
import random
import uuid

from pyflink.common import Types
from pyflink.datastream.functions import KeyedProcessFunction
from pyflink.datastream.state import ValueStateDescriptor

KEY = [0]  # the account identifies a row of the output table
SINK_GUARANTEE = "at-least-once"  # rows since the restored checkpoint are appended again


def records(seed):
    """600 payments (account, amount, payment id): a pure function of the seed."""
    rng = random.Random(seed)
    return [(f"acct-{rng.randrange(12)}", rng.randrange(1, 100), i) for i in range(600)]


class RunningTotal(KeyedProcessFunction):
    def open(self, runtime_context):
        self.total = runtime_context.get_state(ValueStateDescriptor("total", Types.LONG()))
        self.count = runtime_context.get_state(ValueStateDescriptor("count", Types.LONG()))

    def process_element(self, value, ctx):
        total = (self.total.value() or 0) + value[1]
        count = (self.count.value() or 0) + 1
        self.total.update(total)
        self.count.update(count)
        yield value[0], total, count


def job(env, source):
    return source.key_by(lambda r: r[0], key_type=Types.STRING()).process(RunningTotal())


def sink(stream, out_dir):
    def append(row):
        # one file per subtask and attempt, appended as rows pass
        if not hasattr(append, "f"):
            append.f = open(os.path.join(out_dir, uuid.uuid4().hex + ".jsonl"), "a", buffering=1)
        append.f.write(json.dumps(list(row)) + "\n")
        return row

    stream.map(append).filter(lambda row: False).print()


def read_output(out_dir):
    rows = []
    for name in sorted(os.listdir(out_dir)):
        with open(os.path.join(out_dir, name)) as f:
            rows += [tuple(json.loads(line)) for line in f if line.strip()]
    return rows
