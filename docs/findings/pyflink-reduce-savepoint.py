"""PyFlink: ``KeyedStream.sum`` (``reduce`` underneath) starts over when a job is restored from a savepoint.

Two submissions of the same job (every operator has a uid). The first counts records per key with
``key_by(...).sum(1)`` and is stopped with a savepoint part-way; the second is restored from that
savepoint and reads the rest of the input. Each key's final count should be the number of all
its records; it is only the number read after the restore.

No failure is involved: the random state name is drawn again in the new submission's tasks, so a
fix that draws it once per submission (on the client) would not help here either.

Usage (with the Python of a PyFlink installation)::

    python pyflink-reduce-savepoint.py [--mode process|thread] [--records N]

Exit 1 if a final count is wrong, 0 if all are right, 2 if the first submission made no progress.
"""

import argparse
import os
import shutil
import site
import sys
import tempfile
import time

from pyflink.common import Configuration, Encoder, Types, WatermarkStrategy
from pyflink.datastream import CheckpointingMode, StreamExecutionEnvironment
from pyflink.datastream.connectors.file_system import FileSink
from pyflink.datastream.connectors.number_seq import NumberSequenceSource
from pyflink.datastream.functions import MapFunction, RuntimeContext
from pyflink.version import __version__

KEYS = 3


class Paced(MapFunction):
    """Passes records on, 10 ms each, and writes how many it has seen to ``progress``."""

    def __init__(self, progress):
        self.progress = progress

    def open(self, runtime_context: RuntimeContext):
        self.n = 0

    def map(self, i):
        self.n += 1
        time.sleep(0.01)
        with open(self.progress, "w") as f:
            f.write(str(self.n))
        return f"k{i % KEYS}", 1


def submit(mode, records, work, run, restore=None):
    """Builds the job and submits it; its rows (``run key count``) go to ``work/out``."""
    conf = Configuration()
    settings = {
        "python.execution-mode": mode,
        "python.executable": sys.executable,
        "python.fn-execution.bundle.size": "10",  # small bundles: a savepoint completes while records flow
        "state.backend.type": "hashmap",
    }
    if restore:
        settings["execution.state-recovery.path"] = restore  # Flink 2.x
        settings["execution.savepoint.path"] = restore  # Flink 1.x
    for key, value in settings.items():
        conf.set_string(key, value)
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(1)
    env.enable_checkpointing(500, CheckpointingMode.EXACTLY_ONCE)
    (env.from_source(NumberSequenceSource(0, records - 1), WatermarkStrategy.no_watermarks(), "numbers",
                     type_info=Types.LONG()).uid("numbers")
     .map(Paced(os.path.join(work, run + ".progress")), output_type=Types.TUPLE([Types.STRING(), Types.LONG()]))
     .uid("paced")
     .key_by(lambda r: r[0], key_type=Types.STRING())
     .sum(1).uid("count")
     .map(lambda r: f"{run} {r[0]} {r[1]}", output_type=Types.STRING()).uid("format")
     .sink_to(FileSink.for_row_format(os.path.join(work, "out"), Encoder.simple_string_encoder()).build())
     .uid("sink"))
    return env.execute_async(f"reduce-savepoint-{run}")


def totals(folder):
    """{run: {key: its last count}} from the committed files under ``folder`` (counts only grow)."""
    last = {"first": {}, "second": {}}
    for root, _, files in os.walk(folder):
        for name in files:
            if not name.startswith("."):  # in-progress files are hidden
                with open(os.path.join(root, name)) as f:
                    for line in f:
                        run, key, count = line.split()
                        last[run][key] = max(last[run].get(key, 0), int(count))
    return last


def stop_with_savepoint(client, folder):
    """Stops the job with a canonical savepoint in ``folder``; returns the savepoint's path.

    Calls Java's three-argument ``JobClient.stopWithSavepoint`` (Flink 1.15 on): PyFlink 2.x's
    ``JobClient.stop_with_savepoint`` calls the two-argument one, which Flink 2.0 removed.
    """
    from pyflink.java_gateway import get_gateway
    canonical = get_gateway().jvm.org.apache.flink.core.execution.SavepointFormatType.CANONICAL
    return client._j_job_client.stopWithSavepoint(False, folder, canonical).get()


def wait_for(progress, n, timeout=600):
    """Waits until the first submission has counted ``n`` records (False after ``timeout`` s)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if os.path.exists(progress):
            with open(progress) as f:
                if int(f.read() or 0) >= n:
                    return True
        time.sleep(0.1)
    return False


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=("process", "thread"), default="process")
    ap.add_argument("--records", type=int, default=600)
    args = ap.parse_args()
    # thread mode runs Python inside the JVM, which finds pyflink only through PYTHONPATH
    os.environ["PYTHONPATH"] = os.pathsep.join([*site.getsitepackages(), os.environ.get("PYTHONPATH", "")])
    work = tempfile.mkdtemp(prefix="reduce-savepoint-")
    t0 = time.time()
    first = submit(args.mode, args.records, work, "first")
    if not wait_for(os.path.join(work, "first.progress"), args.records // 3):
        print("the first submission did not count a third of the records in 10 minutes")
        return 2
    savepoint = stop_with_savepoint(first, "file://" + os.path.join(work, "savepoints"))
    submit(args.mode, args.records, work, "second", restore=savepoint).get_job_execution_result().result()
    rows = totals(os.path.join(work, "out"))
    after = rows["second"]
    print(f"pyflink {__version__}, python.execution-mode={args.mode}, {args.records} records, "
          f"{time.time() - t0:.1f} s in all")
    print(f"first submission: stopped with a savepoint ({os.path.basename(savepoint)}) after counting "
          f"{dict(sorted(rows['first'].items()))}")
    print(f"second submission: restored from the savepoint, ends with {dict(sorted(after.items()))}")
    wrong = 0
    for k in range(KEYS):
        key, expected = f"k{k}", len(range(k, args.records, KEYS))
        wrong += after.get(key) != expected
        print(f"{key}: expected {expected}, got {after.get(key)}{'' if after.get(key) == expected else '  <-- WRONG'}")
    shutil.rmtree(work, ignore_errors=True)
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
