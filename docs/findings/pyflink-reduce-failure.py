"""PyFlink: ``KeyedStream.sum`` (``reduce`` underneath) starts over after a failover.

The job counts records per key with ``key_by(...).sum(1)``, with checkpointing on and a restart
strategy. The upstream ``map`` raises once (``--failures N``: N times), each time after a
checkpoint holding some counts has completed. Each key's final count should be the number of its
records; after the failover it is only the number seen since the last restore.

While the job runs, the script reads every completed checkpoint and lists the names of the reduce
states it holds: one more abandoned ``_reduce_state<uuid>`` per failover.

Usage (with the Python of a PyFlink installation)::

    python pyflink-reduce-failure.py [--mode process|thread] [--failures N] [--records N]
                                     [--backend hashmap|rocksdb]

Exit 1 if a final count is wrong, 0 if all are right, 2 if fewer failures than asked happened.
"""

import argparse
import os
import re
import shutil
import site
import sys
import tempfile
import threading
import time

from pyflink.common import Configuration, Types, WatermarkStrategy
from pyflink.datastream import CheckpointingMode, StreamExecutionEnvironment
from pyflink.datastream.connectors.number_seq import NumberSequenceSource
from pyflink.datastream.functions import MapFunction, RuntimeContext
from pyflink.version import __version__

KEYS = 3
STATE_NAME = re.compile(rb"_reduce_state[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def checkpoints(chk_dir):
    """{checkpoint id: its folder} for every completed checkpoint under ``chk_dir``."""
    found = {}
    for root, dirs, _ in os.walk(chk_dir):
        for d in dirs:
            if re.fullmatch(r"chk-\d+", d) and os.path.exists(os.path.join(root, d, "_metadata")):
                found[int(d[4:])] = os.path.join(root, d)
    return found


def failures_done(work):
    return len([f for f in os.listdir(work) if f.startswith("failure-")])


class FailAfterCheckpoint(MapFunction):
    """Passes records on (paced); fails (if failures are left) once a checkpoint holds 50 of them."""

    def __init__(self, work, failures):
        self.work, self.failures = work, failures

    def open(self, runtime_context: RuntimeContext):
        self.n, self.armed_at = 0, None

    def map(self, i):
        self.n += 1
        time.sleep(0.01)
        done = failures_done(self.work)
        if done < self.failures and self.n >= 50:
            latest = max(checkpoints(os.path.join(self.work, "chk")), default=0)
            if self.armed_at is None:
                self.armed_at = latest  # 50 records in: wait for a checkpoint begun after now
            elif latest > self.armed_at + 1:
                open(os.path.join(self.work, f"failure-{done + 1}"), "w").close()
                raise RuntimeError(f"injected failure {done + 1} after checkpoint {latest}")
        return f"k{i % KEYS}", 1


def watch(chk_dir, seen, stop):
    """Records, for each completed checkpoint, the names of the reduce states it holds."""
    while not stop.is_set():
        for cid, path in checkpoints(chk_dir).items():
            if cid not in seen:
                time.sleep(0.1)  # let the metadata be written completely
                names = set()
                for root, _, files in os.walk(path):
                    for f in files:
                        with open(os.path.join(root, f), "rb") as data:
                            names |= set(STATE_NAME.findall(data.read()))
                seen[cid] = sorted(n.decode() for n in names)
        time.sleep(0.05)


def environment(mode, failures, backend, chk):
    conf = Configuration()
    for key, value in {
        "python.execution-mode": mode,
        "python.executable": sys.executable,
        "python.fn-execution.bundle.size": "10",  # small bundles: checkpoints complete while records flow
        "restart-strategy.type": "fixed-delay",
        "restart-strategy.fixed-delay.attempts": str(failures + 1),
        "restart-strategy.fixed-delay.delay": "100 ms",
        "state.backend.type": backend,
        "execution.checkpointing.dir": "file://" + chk,  # Flink 2.x
        "state.checkpoints.dir": "file://" + chk,  # Flink 1.x
        "execution.checkpointing.num-retained": "1000",
        "state.checkpoints.num-retained": "1000",
    }.items():
        conf.set_string(key, value)
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(1)
    env.enable_checkpointing(200, CheckpointingMode.EXACTLY_ONCE)
    return env


def print_checkpoints(seen):
    print("reduce states in the completed checkpoints:")
    ids = sorted(seen)
    for n, cid in enumerate(ids):  # one line per run of checkpoints holding the same states
        if n == 0 or seen[cid] != seen[ids[n - 1]]:
            last = next((ids[m - 1] for m in range(n + 1, len(ids)) if seen[ids[m]] != seen[cid]), ids[-1])
            print(f"  chk-{cid} .. chk-{last}: {len(seen[cid])} state(s): {', '.join(seen[cid])}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=("process", "thread"), default="process")
    ap.add_argument("--failures", type=int, default=1)
    ap.add_argument("--records", type=int, default=300)
    ap.add_argument("--backend", choices=("hashmap", "rocksdb"), default="hashmap")
    args = ap.parse_args()
    # thread mode runs Python inside the JVM, which finds pyflink only through PYTHONPATH
    os.environ["PYTHONPATH"] = os.pathsep.join([*site.getsitepackages(), os.environ.get("PYTHONPATH", "")])
    work = tempfile.mkdtemp(prefix="reduce-failure-")
    chk = os.path.join(work, "chk")
    env = environment(args.mode, args.failures, args.backend, chk)
    counts = (
        env.from_source(NumberSequenceSource(0, args.records - 1), WatermarkStrategy.no_watermarks(),
                        "numbers", type_info=Types.LONG())
        .map(FailAfterCheckpoint(work, args.failures), output_type=Types.TUPLE([Types.STRING(), Types.LONG()]))
        .key_by(lambda r: r[0], key_type=Types.STRING())
        .sum(1)
    )
    seen, stop = {}, threading.Event()
    watcher = threading.Thread(target=watch, args=(chk, seen, stop), daemon=True)
    watcher.start()
    t0 = time.time()
    final = {}
    with counts.execute_and_collect() as results:
        for key, count in results:
            final[key] = count  # the running count: the last one per key is its final count
    stop.set()
    watcher.join()
    injected = failures_done(work)
    print(f"pyflink {__version__}, python.execution-mode={args.mode}, {args.backend}, {args.records} records, "
          f"{injected} injected failure(s), job ran {time.time() - t0:.1f} s")
    print_checkpoints(seen)
    wrong = 0
    for k in range(KEYS):
        key, expected = f"k{k}", len(range(k, args.records, KEYS))
        wrong += final.get(key) != expected
        print(f"{key}: expected {expected}, got {final.get(key)}{'' if final.get(key) == expected else '  <-- WRONG'}")
    shutil.rmtree(work, ignore_errors=True)
    if injected < args.failures:
        print("fewer failures than asked were injected")
        return 2
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
