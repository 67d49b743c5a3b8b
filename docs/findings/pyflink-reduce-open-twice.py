"""PyFlink: the function behind ``KeyedStream.reduce`` names its state anew in every ``open()``.

No job is run. The script builds ``key_by(...).sum(1)`` (``reduce`` underneath), keeps the bytes
of the Python function that the job graph carries to the tasks (``cloudpickle.dumps`` of it), and
does what two starts of the same task do: unpickle those bytes and call ``open()``. A stub runtime
context records the name of the ``ReducingState`` each ``open()`` registers.

A task started again after a failure, or a job restored from a savepoint, must register its state
under the name it had before, or the restored state is never read. Here the two names differ.

Usage (with the Python of a PyFlink installation)::

    python pyflink-reduce-open-twice.py [--mode process|thread]

Exit 1 if the two ``open()`` calls registered different names, 0 if the same name.
"""

import argparse
import pickle
import sys

import cloudpickle
from pyflink.common import Configuration, Types
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.version import __version__


class RecordingContext:
    """The parts of a keyed runtime context that the reduce function's ``open()`` uses."""

    _in_batch_execution_mode = False

    def __init__(self):
        self.names = []

    def get_reducing_state(self, descriptor):
        self.names.append(descriptor.get_name())
        return None

    def get_job_parameter(self, key, default_value):
        return default_value


def shipped_reduce_function(mode):
    """The pickled bytes of the function that ``KeyedStream.sum`` puts into the job graph."""
    conf = Configuration()
    conf.set_string("python.execution-mode", mode)
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    ds = env.from_collection([("a", 1)], type_info=Types.TUPLE([Types.STRING(), Types.LONG()]))
    shipped, dumps = [], cloudpickle.dumps

    def recording_dumps(obj, *args, **kwargs):
        shipped.append((type(obj).__name__, dumps(obj, *args, **kwargs)))
        return shipped[-1][1]

    cloudpickle.dumps = recording_dumps
    try:
        ds.key_by(lambda r: r[0], key_type=Types.STRING()).sum(1)
    finally:
        cloudpickle.dumps = dumps
    return next((name, blob) for name, blob in reversed(shipped) if "Reduce" in name)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=("process", "thread"), default="process")
    mode = ap.parse_args().mode
    name, blob = shipped_reduce_function(mode)
    print(f"pyflink {__version__}, python.execution-mode={mode}: the job graph carries {name} "
          f"({len(blob)} bytes pickled)")
    names = []
    for start in ("first start of the task", "the task started again (restore)"):
        context = RecordingContext()
        pickle.loads(blob).open(context)  # what each start of the task does with the shipped bytes
        names += context.names
        print(f"{start}: open() registers the ReducingState {context.names}")
    if len(set(names)) > 1:
        print("different names: the state restored under the first one is never read again")
        return 1
    print("the same name: a restored state is read again")
    return 0


if __name__ == "__main__":
    sys.exit(main())
