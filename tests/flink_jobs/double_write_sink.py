"""A deliberately broken job sink (a mutant of ``examples/flink_jobs/totals_side_effect_sink.py``):
it declares at-least-once but writes every row it is handed twice, so its extra copies exceed the
rows Flink hands it again after a restore. ``user-sink-at-least-once`` must be violated, and the
cell attributed to the module, not expected by the engine (``tests/test_sink_guarantee.py``)."""

import json
import os
import random
import uuid

from pyflink.common import Types
from pyflink.datastream.functions import KeyedProcessFunction
from pyflink.datastream.state import ValueStateDescriptor

KEY = [0]
SINK_GUARANTEE = "at-least-once"


def records(seed):
    rng = random.Random(seed)
    return [(f"acct-{rng.randrange(6)}", rng.randrange(1, 100), i) for i in range(300)]


class RunningTotal(KeyedProcessFunction):
    def open(self, runtime_context):
        self.total = runtime_context.get_state(ValueStateDescriptor("total", Types.LONG()))

    def process_element(self, value, ctx):
        total = (self.total.value() or 0) + value[1]
        self.total.update(total)
        yield value[0], total


def job(env, source):
    return source.key_by(lambda r: r[0], key_type=Types.STRING()).process(RunningTotal())


def sink(stream, out_dir):
    def append(row):
        if not hasattr(append, "f"):
            append.f = open(os.path.join(out_dir, uuid.uuid4().hex + ".jsonl"), "a", buffering=1)
        line = json.dumps(list(row)) + "\n"
        append.f.write(line + line)  # the bug: every row twice
        return row

    stream.map(append).filter(lambda row: False).print()


def read_output(out_dir):
    rows = []
    for name in sorted(os.listdir(out_dir)):
        with open(os.path.join(out_dir, name)) as f:
            rows += [tuple(json.loads(line)) for line in f if line.strip()]
    return rows
