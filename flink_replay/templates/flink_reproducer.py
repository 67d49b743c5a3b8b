#!/usr/bin/env python3
# ruff: noqa: UP031  (the script formats its messages printf-style throughout)
"""Reproducer of a Flink matrix finding (rollcheck writes its account here)."""
import argparse
import collections
import json
import os
import shutil
import sys
import tempfile
import time

JOB = None  # filled by rollcheck
BACKEND, CHECKPOINTS, INTERVAL_MS, PAR, RESCALE = None, None, None, None, None  # filled by rollcheck
FAIL_AT, SEED, RATE = None, None, None  # filled by rollcheck
RECORDS = None  # filled by rollcheck
# The final table (per KEY its last row) the failure-free run of the first RECORDS records must give:
# "rows" output tuples as lists, "key" the positions of the KEY fields in them
# (None: only the two runs are compared), from EXPECTED_FROM (filled by rollcheck).
EXPECTED = None  # filled by rollcheck
# A job with several input streams (SOURCES): the sources it leaves out (DROP), and the order of
# its one sequence of records (ORDER: one character per record, "0" + the index of its source)
DROP = None  # filled by rollcheck
ORDER = None


def sequence(names, per_source, n):
    """Every source's records in one sequence, merged in proportion (as rollcheck runs them)."""
    from fractions import Fraction
    lists = [[] if name in DROP else list(per_source.get(name) or []) for name in names]
    spots = sorted((Fraction(2 * i + 1, 2 * len(x)), s) for s, x in enumerate(lists) for i in range(len(x)))
    order = [s for _, s in spots][:n]
    nxt, recs = [0] * len(names), []
    for s in order:
        recs.append(lists[s][nxt[s]])
        nxt[s] += 1
    return recs, "".join(chr(48 + s) for s in order)


def run(ns, recs, out, par, fail, restore=None, restarts=True):
    """Run the job once at parallelism ``par`` into ``out``; ``fail``: inject the finding's failure."""
    from pyflink.common import Configuration, Encoder, Types, WatermarkStrategy
    from pyflink.datastream import CheckpointingMode, StreamExecutionEnvironment
    from pyflink.datastream.connectors.file_system import FileSink, RollingPolicy
    from pyflink.datastream.connectors.number_seq import NumberSequenceSource
    from pyflink.datastream.functions import MapFunction
    conf = Configuration()
    conf.set_string("python.execution-mode", "thread")
    conf.set_string("python.executable", sys.executable)
    conf.set_string("state.backend.type", "rocksdb" if BACKEND == "rocksdb" else "hashmap")
    if BACKEND == "rocksdb":
        conf.set_string("execution.checkpointing.incremental", "true")
    if BACKEND == "changelog":
        conf.set_string("state.changelog.enabled", "true")
        conf.set_string("state.changelog.storage", "filesystem")
        conf.set_string("state.changelog.dstl.dfs.base-path", "file://" + os.path.join(out, "changelog"))
    conf.set_string("execution.checkpointing.dir", "file://" + os.path.join(out, "chk"))
    conf.set_string("execution.checkpointing.externalized-checkpoint-retention", "RETAIN_ON_CANCELLATION")
    conf.set_string("restart-strategy.type", "fixed-delay" if restarts else "none")
    if restore:
        conf.set_string("execution.state-recovery.path", restore)
        if BACKEND == "changelog":  # the changelog backend is restored in CLAIM mode (NO_CLAIM unsupported)
            conf.set_string("execution.state-recovery.claim-mode", "CLAIM")
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(par)
    env.set_max_parallelism(128)
    env.enable_checkpointing(INTERVAL_MS, CheckpointingMode.EXACTLY_ONCE)
    if CHECKPOINTS == "unaligned":
        env.get_checkpoint_config().enable_unaligned_checkpoints(True)
    marker = os.path.join(out, "failed")

    class Pace(MapFunction):
        def open(self, ctx):
            self.n = 0
            self.first = None

        def map(self, i):
            self.n += 1
            self.first = self.first or time.time()
            time.sleep(par / RATE)
            if fail and self.n * par >= FAIL_AT and not os.path.exists(marker):
                if time.time() < self.first + 3 * INTERVAL_MS / 1000:
                    time.sleep(0.05)  # slow down until checkpoints completed, then fail
                    return emit(i)
                try:
                    os.close(os.open(marker, os.O_CREAT | os.O_EXCL))
                except FileExistsError:
                    return emit(i)
                raise RuntimeError("injected failure at record %d" % i)
            return emit(i)

    def emit(i):  # one source: the record; several: its number in the sequence, split below
        return recs[i] if ORDER is None else i

    ds = env.from_source(NumberSequenceSource(0, len(recs) - 1), WatermarkStrategy.no_watermarks(), "src",
                         type_info=Types.LONG())
    ds = ds.map(Pace()) if ORDER is None else ds.map(Pace(), output_type=Types.LONG())
    if ORDER is not None:  # SOURCES: one stream per source name, split off the one sequence
        from pyflink.datastream.functions import FilterFunction

        class OfSource(FilterFunction):
            def __init__(self, mark):
                self.mark = mark

            def filter(self, i):
                return ORDER[i] == self.mark

        class Record(MapFunction):
            def map(self, i):
                return recs[i]

        ds = {name: ds.filter(OfSource(chr(48 + s))).map(Record()) for s, name in enumerate(ns["SOURCES"])}
    key = list(ns["KEY"]) if isinstance(ns["KEY"], (list, tuple)) else [ns["KEY"]]
    key = [list(ns["FIELDS"]).index(k) if isinstance(k, str) else k for k in key]  # names of FIELDS
    from pyflink.datastream.functions import KeyedProcessFunction
    from pyflink.datastream.state import ValueStateDescriptor

    class Number(KeyedProcessFunction):
        """Numbers each key's rows in keyed state (restored with the checkpoint)."""

        def open(self, ctx):
            self.n = ctx.get_state(ValueStateDescriptor("n", Types.LONG()))

        def process_element(self, r, ctx):
            n = (self.n.value() or 0) + 1
            self.n.update(n)
            yield json.dumps([n, [r[i] for i in key], list(r)], default=str)

    rows = ns["job"](env, ds).key_by(lambda r: json.dumps([r[i] for i in key], default=str),
                                     key_type=Types.STRING()).process(Number(), output_type=Types.STRING())
    rows.sink_to(FileSink.for_row_format(os.path.join(out, "tx"), Encoder.simple_string_encoder())
                 .with_rolling_policy(RollingPolicy.on_checkpoint_rolling_policy()).build())
    try:
        env.execute("reproducer")
    except Exception as e:  # the failed job of a rescale
        if restarts:
            raise
        print("job failed as injected:", str(e).splitlines()[0][:120])


def committed(out):
    """The rows the transactional sink committed under ``out``: ``[number, KEY, row]`` each."""
    rows = []
    for root, _, files in os.walk(os.path.join(out, "tx")):
        for f in files:
            if not f.startswith("."):
                rows += [json.loads(x) for x in open(os.path.join(root, f)) if x.strip()]
    return rows


def latest_checkpoint(out):
    """The folder of the newest completed checkpoint under ``out`` (None when there is none)."""
    best = None
    for root, dirs, _ in os.walk(os.path.join(out, "chk")):
        for d in dirs:
            if d.startswith("chk-") and os.path.exists(os.path.join(root, d, "_metadata")):
                if best is None or int(d[4:]) > int(os.path.basename(best)[4:]):
                    best = os.path.join(root, d)
    return best


def main():
    """Run the job failure-free and with the failure; print each KEY that differs (exit 1: reproduced)."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=RECORDS)
    args = ap.parse_args()
    # thread mode runs Python inside the JVM (pemja), which finds pyflink only through PYTHONPATH
    import site
    os.environ["PYTHONPATH"] = os.pathsep.join(site.getsitepackages() + [os.environ.get("PYTHONPATH", "")])
    ns = {"__name__": "flink_repro_job"}
    exec(compile(JOB, "job", "exec"), ns)
    global ORDER
    if "SOURCES" in ns:
        recs, ORDER = sequence(list(ns["SOURCES"]), ns["records"](SEED), args.records)
    else:
        recs = ns["records"](SEED)[: args.records]
    work = tempfile.mkdtemp(prefix="flink-repro-")
    try:
        try:
            run(ns, recs, os.path.join(work, "ref"), RESCALE[0] if RESCALE else PAR, fail=False)
            ref_failed = None
        except Exception as e:  # the failure-free run fails: that is a finding in itself
            ref_failed = str(e).strip().splitlines()[0][:300] if str(e).strip() else type(e).__name__
            print("JOB FAILED in the failure-free run:", ref_failed)
        out = os.path.join(work, "run")
        if RESCALE:
            run(ns, recs, out, RESCALE[0], fail=True, restarts=False)
            run(ns, recs, out, RESCALE[1], fail=False, restore="file://" + latest_checkpoint(out))
        else:
            run(ns, recs, out, PAR, fail=True)
        def per_key(rows):
            out = collections.defaultdict(list)
            for n, k, row in rows:
                out[json.dumps(k)].append((n, row))
            return out

        want, got = per_key(committed(os.path.join(work, "ref"))), per_key(committed(out))
        bad = 0
        for k in sorted(set(want) | set(got)):
            w, g = sorted(want.get(k, [])), sorted(got.get(k, []))
            ns_ = collections.Counter(n for n, _ in g)
            dup = sorted(n for n, c in ns_.items() if c > 1)
            if dup or len(g) != len(w):
                bad += 1
                print("KEY %s: %d rows committed, %d without the failure%s" % (
                    k, len(g), len(w), " (row %d twice)" % dup[0] if dup else ""))
            elif g and w and g[-1][1] != w[-1][1]:
                bad += 1
                print("KEY %s: final row %s, without the failure %s" % (k, g[-1][1], w[-1][1]))
        if EXPECTED is not None and args.records == RECORDS:
            have = {k: json.dumps(max(v)[1], default=str) for k, v in want.items()}
            table = {json.dumps([r[i] for i in EXPECTED["key"]], default=str): json.dumps(r, default=str)
                     for r in EXPECTED["rows"]}  # the last row of a KEY counts
            for k in sorted(set(table) | set(have)):
                if table.get(k) != have.get(k):
                    bad += 1
                    print("KEY %s: final row %s in the failure-free run; %s gives %s" % (
                        k, have.get(k) or "missing", EXPECTED["from"], table.get(k) or "no row"))
        elif EXPECTED is not None:
            print("EXPECTED not compared: it is the table of the first %d records, not %d" % (RECORDS, args.records))
        bad += ref_failed is not None
        print("reproduced" if bad else "not reproduced: the output equals the failure-free output")
        return 1 if bad else 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
