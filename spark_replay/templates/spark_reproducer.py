#!/usr/bin/env python3
# ruff: noqa: UP031  (the script formats its messages printf-style throughout)
"""Reproducer of a Spark matrix finding (rollcheck writes its account here)."""
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time

FAIL_AT = None  # filled by rollcheck
FAILURE = None  # filled by rollcheck
KILL_POINT = None  # filled by rollcheck
MASTER = None  # filled by rollcheck
SPARK_CONF = None  # filled by rollcheck
# The final table the failure-free run must give (None: only the two runs are compared): "rows"
# lists of values named by "columns", "key" the positions of the KEY columns; from
# EXPECTED_FROM (filled by rollcheck).
EXPECTED = None  # filled by rollcheck
# The query module under test, verbatim; its batches(seed) is replaced by the minimised input.
USER_SOURCE = None  # filled by rollcheck


def load_user():
    """The user's module, executed from its embedded source (its namespace)."""
    ns = {"__name__": "user_query"}  # not importable: pickled by value, the Python workers need no file
    exec(compile(USER_SOURCE, "user_query.py", "exec"), ns)
    return ns


def columns(ddl):
    """The column names of a DDL string (top-level commas only)."""
    parts, cur, depth = [], "", 0
    for ch in ddl:
        if ch in "<(":
            depth += 1
        elif ch in ">)":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    return [p.strip()[1:p.strip().find("`", 1)] if p.strip().startswith("`") else p.replace(":", " ").split()[0]
            for p in parts]


def write_rows(path, cols, rows, mtime):
    """Write ``rows`` as one JSON Lines input file with modification time ``mtime``."""
    with open(path, "w") as f:
        for row in rows:
            f.write(json.dumps({c: (v.strftime("%Y-%m-%dT%H:%M:%S.%f") if hasattr(v, "strftime") else v)
                                 for c, v in zip(cols, row, strict=False)}) + "\n")
    os.utime(path, (mtime, mtime))


def write_inputs(user, root):
    """One JSON Lines file per micro-batch.

    With SOURCES one folder per source, its files staged and fed to each run batch by batch (feed),
    so a source without rows in batch b reads nothing in b.
    """
    base = time.time() - 3600
    sources = user.get("SOURCES")
    if not sources:
        os.makedirs(os.path.join(root, "in"))
        cols = columns(user["SCHEMA"])
        for b, batch in enumerate(user["batches"](0)):
            write_rows(os.path.join(root, "in", "batch-%05d.json" % b), cols, batch, base + b)
        return
    first = next(iter(sources))
    for name in sources:
        for top in ("staged", "in", "in-ref"):
            os.makedirs(os.path.join(root, top, name))
    for b, batch in enumerate(user["batches"](0)):
        batch = {n: r for n, r in batch.items() if r} or {first: []}  # an empty file keeps batch b Spark's b
        for name, rows in batch.items():
            write_rows(os.path.join(root, "staged", name, "batch-%05d.json" % b), columns(sources[name]), rows,
                       base + b)


def feed(root, tag, upto):
    """Several sources: the files of batches 0..upto appear in this run's input folders."""
    staged = os.path.join(root, "staged")
    if not os.path.isdir(staged):
        return
    for name in os.listdir(staged):
        for b in range(upto + 1):
            f = "batch-%05d.json" % b
            target = os.path.join(root, "in" + tag, name, f)
            if os.path.exists(os.path.join(staged, name, f)) and not os.path.exists(target):
                os.link(os.path.join(staged, name, f), target)


def canon(row):
    """A row as canonical JSON."""
    return json.dumps(row, sort_keys=True, default=str)


def default_sink(batch_df, batch_id, out_dir):
    """The idempotent sink: the batch's rows replace its file atomically."""
    rows = sorted(canon(r.asDict()) for r in batch_df.collect())
    tmp = os.path.join(out_dir, ".batch-%05d.tmp" % batch_id)
    with open(tmp, "w") as f:
        f.write("\n".join(rows))
    os.replace(tmp, os.path.join(out_dir, "batch-%05d.json" % batch_id))


def default_read(out_dir):
    """Read back what the default sink wrote."""
    rows = []
    for name in sorted(os.listdir(out_dir)):
        if name.startswith("batch-"):
            with open(os.path.join(out_dir, name)) as f:
                rows += [json.loads(x) for x in f.read().splitlines() if x]
    return rows


def run_query(spark, user, root, fail, driver):
    """Run the query until it ends, restarting it in this driver after a task or sink failure."""
    from pyspark.sql import functions as F

    tag = "" if fail else "-ref"
    ck, out, marker = (os.path.join(root, x + tag) for x in ("checkpoint", "out", "failed"))
    handed = os.path.join(root, "handed" + tag + ".jsonl")
    os.makedirs(out, exist_ok=True)
    sink = user.get("sink") or default_sink

    def fire_once():
        try:
            os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            return True
        except FileExistsError:
            return False

    sources = user.get("SOURCES")
    for start in range(1, 4):
        done = sorted(int(n) for n in os.listdir(os.path.join(ck, "commits")) if n.isdigit()) \
            if os.path.isdir(os.path.join(ck, "commits")) else []
        feed(root, tag, done[-1] + 1 if done else 0)

        def batch_fn(df, bid, start=start):
            feed(root, tag, bid + 1)  # several sources: the next batch's files, before this one commits
            df.persist()
            rows = [canon(r.asDict()) for r in df.collect()]  # runs the batch: the state stores commit
            with open(handed, "a") as f:
                f.write(json.dumps({"batch": bid, "driver": driver, "start": start, "rows": rows}) + "\n")
            if fail and FAILURE == "kill" and KILL_POINT == "state" and bid == FAIL_AT and fire_once():
                print("killing the driver after the state store commit of batch", bid, flush=True)
                os.killpg(0, signal.SIGKILL)
            sink(df, bid, out)
            df.unpersist()
            if fail and bid == FAIL_AT and FAILURE == "kill" and KILL_POINT == "sink" and fire_once():
                print("killing the driver after the sink wrote batch", bid, flush=True)
                os.killpg(0, signal.SIGKILL)
            if fail and bid == FAIL_AT and FAILURE == "sink" and fire_once():
                print("raising in the sink after it wrote batch", bid, flush=True)
                raise RuntimeError("injected sink failure after the sink wrote batch %d" % bid)

        def read(ddl, folder):
            return (spark.readStream.schema(ddl).option("maxFilesPerTrigger", 1)
                    .option("timestampFormat", "yyyy-MM-dd'T'HH:mm:ss.SSSSSS").json(folder))

        if sources:
            dfs = {n: read(ddl, os.path.join(root, "in" + tag, n)) for n, ddl in sources.items()}
        else:
            dfs = {"df": read(user["SCHEMA"], os.path.join(root, "in"))}
        if fail and FAILURE == "task":
            target = "batch-%05d.json" % FAIL_AT

            def inject(path):
                if path and path.endswith(target) and fire_once():  # noqa: B023  (the same in every start)
                    raise RuntimeError("injected task failure in batch %d" % FAIL_AT)
                return True

            dfs = {n: df.where(F.udf(inject, "boolean").asNondeterministic()(F.input_file_name()))
                   for n, df in dfs.items()}
        result = user["query"](**dfs) if sources else user["query"](dfs["df"])
        w = result.writeStream.outputMode(user["OUTPUT_MODE"]).option("checkpointLocation", ck).foreachBatch(batch_fn)
        if sources:  # fed batch by batch: Spark's default trigger, stopped once all is processed
            q = w.start()

            def to_end(q=q):
                try:
                    q.processAllAvailable()
                    q.stop()
                except Exception:
                    pass

            threading.Thread(target=to_end, daemon=True).start()
        else:
            q = w.trigger(availableNow=True).start()
        try:
            q.awaitTermination()
            return
        except Exception as e:
            first = str(e).strip().splitlines()[0][:300] if str(e).strip() else type(e).__name__
            injected = (fail and FAILURE in ("task", "sink") and os.path.exists(marker)
                        and fire_once_seen(root))
            if injected:
                print("the query failed (the injected failure):", first[:160], flush=True)
            else:
                what = "the failure-free run" if not fail else "the query restarted from its checkpoint"
                print("QUERY FAILED in %s (driver %d, start %d): %s" % (what, driver, start, first), flush=True)
                with open(os.path.join(root, "query-failures.jsonl"), "a") as f:
                    f.write(json.dumps({"run": "reference" if not fail else "failure", "driver": driver,
                                        "start": start, "error": first}) + "\n")


def fire_once_seen(root):
    """True the first time the failure run raises after the injection: that exception is the injected one."""
    try:
        os.close(os.open(os.path.join(root, "injected-seen"), os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        return True
    except FileExistsError:
        return False


def drive(root, runs, driver):
    """One driver process: the reference run (first driver only), then the run with the failure."""
    from pyspark.sql import SparkSession

    b = SparkSession.builder.master(MASTER).appName("reproducer")
    for k, v in SPARK_CONF.items():
        b = b.config(k, v.replace("@ROOT@", root))
    spark = b.getOrCreate()
    spark.sparkContext.setLogLevel(os.environ.get("REPRO_LOG_LEVEL", "OFF"))  # ERROR shows Spark's own
    user = load_user()
    for run in runs:
        run_query(spark, user, root, run == "fail", driver)
    spark.stop()


def supervise(root):
    """Run the drivers; kill the first one at an external kill point (offsets, commit); restart."""
    ck = os.path.join(root, "checkpoint")
    for driver in range(1, 4):
        runs = "ref,fail" if driver == 1 else "fail"
        p = subprocess.Popen([sys.executable, __file__, "--drive", root, runs, str(driver)],
                             start_new_session=True)
        while p.poll() is None:
            if driver == 1 and FAILURE == "kill" and KILL_POINT in ("offsets", "commit"):
                d = os.path.join(ck, "offsets" if KILL_POINT == "offsets" else "commits")
                names = os.listdir(d) if os.path.isdir(d) else []
                hit = (str(FAIL_AT) in names) if KILL_POINT == "offsets" else any(
                    n == str(FAIL_AT) or n.startswith(".%d." % FAIL_AT) for n in names)
                if hit:
                    os.killpg(p.pid, signal.SIGKILL)
                    p.wait()
                    last = {x: max([int(n) for n in os.listdir(os.path.join(ck, x)) if n.isdigit()], default=None)
                             for x in ("offsets", "commits")}
                    print("killed the driver at %s of batch %d; last log entries at the kill: offsets/%s, "
                          "commits/%s" % (KILL_POINT, FAIL_AT, last["offsets"], last["commits"]), flush=True)
                    break
                time.sleep(0.001)
            else:
                time.sleep(0.05)
        p.wait()
        if p.returncode == 0:
            return
        if FAILURE != "kill" or driver > 1:
            print("QUERY FAILED: driver %d exited with status %s" % (driver, p.returncode), flush=True)
            with open(os.path.join(root, "query-failures.jsonl"), "a") as f:
                f.write(json.dumps({"run": "driver", "driver": driver, "error": "exit %s" % p.returncode}) + "\n")
            return
        print("restarting the query in a new driver from the same checkpoint", flush=True)


def main():
    """Run the query without and with the failure; print every row whose count differs."""
    if sys.argv[1:2] == ["--drive"]:
        drive(sys.argv[2], sys.argv[3].split(","), int(sys.argv[4]))
        return 0
    t0 = time.time()
    user = load_user()
    if sys.argv[1:]:  # python reproducer.py [WORKDIR]: a new folder for the inputs, checkpoints, outputs
        root = os.path.abspath(sys.argv[1])
        os.makedirs(root)
    else:
        root = tempfile.mkdtemp(prefix="spark-repro-")
    write_inputs(user, root)
    supervise(root)
    read = user.get("read_output") or default_read
    ref = [canon(r) for r in read(os.path.join(root, "out-ref"))]
    got = [canon(r) for r in read(os.path.join(root, "out"))]
    with open(os.path.join(root, "handed.jsonl")) as f:
        handed = [json.loads(x) for x in f if x.strip()]

    def where(row):
        hits = ["batch %d (driver %d, start %d)" % (h["batch"], h["driver"], h["start"])
                for h in handed if row in h["rows"]]
        return "; handed to the sink in " + ", ".join(hits) if hits else "; not handed to the sink as such"

    bad = 0
    for row in sorted(set(ref) | set(got)):
        a, b = ref.count(row), got.count(row)
        if b != a:
            print("%s row (%d copies, the failure-free run has %d): %s%s"
                  % ("DUPLICATED" if b > a else "LOST", b, a, row, where(row)))
            bad += 1
    print("%d row(s) differ from the failure-free run (%.0f s); work folder %s" % (bad, time.time() - t0, root))
    wrong = compare_expected([r for r in read(os.path.join(root, "out-ref"))]) if EXPECTED is not None else 0
    failed = os.path.exists(os.path.join(root, "query-failures.jsonl"))
    return 1 if bad or wrong or failed else 0


TS = re.compile(r"^(\d{4}-\d{2}-\d{2})[T ](\d{2}:\d{2}:\d{2})(\.\d+)?(Z|[+-]00:?00)?$")


def norm(v):
    """One notation for timestamps, doubles to 12 digits (a sum's last bits depend on its order)."""
    if hasattr(v, "strftime"):
        v = v.strftime("%Y-%m-%dT%H:%M:%S.%f")
    if isinstance(v, str):
        m = TS.match(v)
        if m:
            return "%sT%s.%s" % (m.group(1), m.group(2), (m.group(3) or ".0")[1:].ljust(6, "0")[:6])
        return v
    if isinstance(v, float):
        return int(v) if v.is_integer() else float("%.12g" % v)
    if isinstance(v, dict):
        return {k: norm(x) for k, x in v.items()}
    if isinstance(v, list):
        return [norm(x) for x in v]
    return v


def final_table(rows):
    """The last row per KEY (its columns of EXPECTED), as canonical strings."""
    cols = EXPECTED["columns"]
    key = [cols[i] for i in EXPECTED["key"]]
    out = {}
    for r in rows:
        r = dict(r)
        out[json.dumps([norm(r.get(k)) for k in key], default=str)] = json.dumps(
            {c: norm(r.get(c)) for c in cols}, sort_keys=True, default=str)
    return out


def compare_expected(rows):
    """Print every KEY whose final row differs from the expected table; return how many."""
    want = final_table([dict(zip(EXPECTED["columns"], r, strict=True)) for r in EXPECTED["rows"]])
    have = final_table(rows)
    n = 0
    for k in sorted(set(want) | set(have)):
        if k not in have:
            print("MISSING row of KEY %s: the failure-free run has none; %s gives %s" % (k, EXPECTED["from"], want[k]))
        elif k not in want:
            print("EXTRA row of KEY %s: the failure-free run gives %s; %s has none" % (k, have[k], EXPECTED["from"]))
        elif want[k] != have[k]:
            print("WRONG row of KEY %s: the failure-free run gives %s; %s gives %s"
                  % (k, have[k], EXPECTED["from"], want[k]))
        else:
            continue
        n += 1
    print("%d KEY(s) of the failure-free run differ from %s (%d expected)" % (n, EXPECTED["from"], len(want)))
    return n


if __name__ == "__main__":
    sys.exit(main())
