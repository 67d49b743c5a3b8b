"""Held-out job whose own sink calls an API that PyFlink's thread mode lacks.

The sink's ``open()`` asks the runtime context for its attempt number; in PyFlink 2.3's thread
mode that context has no ``get_attempt_number`` and the call raises ``AttributeError`` in every
attempt. rollcheck must name this function, its file and the exception (exit 2), not end with
an inconclusive "the job ended without a result".
"""

import json
import os

from pyflink.common import Types
from pyflink.datastream.functions import MapFunction

KEY = [0]


def records(seed):
    return [(f"k{i % 4}", i) for i in range(120)]


def job(env, source):
    return source.map(lambda r: (r[0], r[1] * 2),
                      output_type=Types.TUPLE([Types.STRING(), Types.LONG()]))


class AttemptSink(MapFunction):
    def open(self, runtime_context):
        self.attempt = runtime_context.get_attempt_number()

    def map(self, value):
        return value


def sink(stream, out_dir):
    stream.map(AttemptSink()).filter(lambda row: False).print()


def read_output(out_dir):
    rows = []
    for name in sorted(os.listdir(out_dir)):
        with open(os.path.join(out_dir, name)) as f:
            rows += [tuple(json.loads(line)) for line in f if line.strip()]
    return rows
