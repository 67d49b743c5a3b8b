"""A job whose source feeds two branches, the shape that made a requested failure miss.

One branch is a ``.set_parallelism(1)`` map that sleeps on every record (a slow step of its own
parallelism: backpressure, and in unaligned mode data held in flight); the other is a keyed sum
written into the module's own sink. The job returns the keyed sums (``KEY``: the account).
``RECORDS`` (an environment variable, default 400) sets the input's size: with 40 records and the
failure at the last one, the input ends before two checkpoints completed.
"""

import json
import os
import random
import time
import uuid

from pyflink.common import Types
from pyflink.datastream.functions import KeyedProcessFunction
from pyflink.datastream.state import ValueStateDescriptor

KEY = [0]
SINK_GUARANTEE = "at-least-once"


def records(seed):
    """``RECORDS`` deposits (account, amount): a pure function of the seed."""
    rng = random.Random(seed)
    return [(f"acct-{rng.randrange(5)}", rng.randrange(1, 50)) for _ in range(int(os.environ.get("RECORDS", "400")))]


class Sum(KeyedProcessFunction):
    def open(self, runtime_context):
        self.total = runtime_context.get_state(ValueStateDescriptor("total", Types.LONG()))

    def process_element(self, value, ctx):
        total = (self.total.value() or 0) + value[1]
        self.total.update(total)
        yield value[0], total


def _slow(row):
    time.sleep(0.01)
    return row[1]


def job(env, source):
    # the slow branch runs at parallelism 1 whatever the job's parallelism: its operators carry uids, its
    # head is never chained to the step before it and its input is rebalanced at every parallelism (at
    # parallelism 1 the edge would be a forward one, whose data in flight Flink cannot rescale)
    source.rebalance().map(_slow, output_type=Types.INT()).set_parallelism(1).disable_chaining().uid("slow-side") \
        .name("slow-side").filter(lambda v: False).set_parallelism(1).uid("slow-filter") \
        .print().set_parallelism(1)
    return source.key_by(lambda r: r[0], key_type=Types.STRING()).process(
        Sum(), output_type=Types.TUPLE([Types.STRING(), Types.LONG()]))


def sink(stream, out_dir):
    def append(row):
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
