"""The Flink word-count job that ``rollcheck flink record`` runs inside the Flink environment.

This file runs under the separate PyFlink environment (``.venv-flink``) as
``python job.py CONFIG.json``: it imports only the standard library and ``pyflink``, never the
rest of rollcheck. It writes raw observations into the run folder named by the config; the
recorder (:mod:`rollcheck.flink_replay.record`) turns them into a ``rollcheck.trace/1`` file.

The job: a checkpointed ``NumberSequenceSource`` (values 1..N, split offsets are checkpointed),
a pass-through Java operator (``RollcheckTap``, mode ``source``) that logs per-key counts of the
records that left the source at every snapshot, a Python map that paces the source to ``rate``
records/s and raises once at record K, a ``keyBy`` shuffle to a keyed count (Python
``ValueState``), a naive side-effect sink (a Python map appending a line per record to a file), a
second tap (mode ``keyed``) that logs the latest count per key, and a transactional ``FileSink``.
A thread polls the MiniCluster REST API for checkpoint statistics and job state transitions.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
import threading
import time
import urllib.request
import uuid

__all__ = ["main"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get(url: str) -> dict | None:
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return json.loads(r.read().decode())
    except Exception:  # noqa: BLE001 - the endpoint is polled; a miss is retried
        return None


def main(config_path: str) -> int:
    """Run the job described by the config file; a config with ``runs`` runs each of them in turn,
    in the same JVM (each entry overrides the base config and names its own ``run_dir``)."""
    import site

    # thread mode embeds CPython in the JVM (pemja): it finds pyflink, pemja and this file only
    # through PYTHONPATH, which the gateway JVM inherits from this process
    paths = [os.path.dirname(os.path.abspath(__file__)), *site.getsitepackages()]
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(paths + ([old] if old else []))
    with open(config_path) as f:
        cfg = json.load(f)
    if "runs" in cfg:
        rc = 0
        for sub in cfg["runs"]:
            one = {k: v for k, v in cfg.items() if k != "runs"}
            one.update(sub)
            os.makedirs(one["run_dir"], exist_ok=True)
            rc = max(rc, run_one(one))
        return rc
    return run_one(cfg)


def run_one(cfg: dict) -> int:
    """One execution of the word-count job; raw observations go to ``cfg["run_dir"]``."""
    from pyflink.common import Configuration, Encoder, Types, WatermarkStrategy
    from pyflink.datastream import CheckpointingMode, StreamExecutionEnvironment
    from pyflink.datastream.connectors.file_system import FileSink, RollingPolicy
    from pyflink.datastream.connectors.number_seq import NumberSequenceSource
    from pyflink.datastream.data_stream import DataStream
    from pyflink.datastream.functions import KeyedProcessFunction, MapFunction, RuntimeContext
    from pyflink.datastream.state import ValueStateDescriptor
    from pyflink.java_gateway import get_gateway
    from pyflink.util.java_utils import load_java_class

    run_dir = cfg["run_dir"]
    n_records = int(cfg["records"])
    par = int(cfg["parallelism"])
    keys = int(cfg["keys"])
    rate = float(cfg["rate"])
    fail_at = cfg.get("fail_at_record")
    failure = cfg.get("failure") or "task"
    marker = os.path.join(run_dir, "failure.json")
    naive_dir = os.path.join(run_dir, "naive")
    os.makedirs(naive_dir, exist_ok=True)
    port = _free_port()

    conf = Configuration()
    if cfg.get("cluster_rest_port"):
        # a standalone session cluster started by the recorder (separate TaskManager processes)
        port = int(cfg["cluster_rest_port"])
    conf.set_string("python.execution-mode", cfg.get("python_mode", "thread"))
    conf.set_string("python.executable", sys.executable)
    conf.set_string("rest.port", str(port))
    conf.set_string("rest.address", "127.0.0.1")
    conf.set_string("rest.bind-address", "127.0.0.1")
    conf.set_string("rest.cache.checkpoint-statistics.timeout", "50 ms")
    conf.set_string("web.checkpoints.history", "1000")
    conf.set_string("execution.checkpointing.dir", "file://" + os.path.join(run_dir, "checkpoints"))
    conf.set_string("execution.checkpointing.num-retained", "1000")
    conf.set_string("state.backend.type", "hashmap")
    conf.set_string("restart-strategy.type", "fixed-delay")
    conf.set_string("restart-strategy.fixed-delay.attempts", "3")
    conf.set_string("restart-strategy.fixed-delay.delay", f"{int(cfg.get('restart_delay_ms', 200))} ms")
    conf.set_string("io.tmp.dirs", os.path.join(run_dir, "tmp"))
    os.makedirs(os.path.join(run_dir, "tmp"), exist_ok=True)
    if cfg.get("cluster_rest_port"):
        from pyflink.java_gateway import get_gateway as _gw

        gw0 = _gw()
        jars = gw0.new_array(gw0.jvm.String, 1)
        jars[0] = cfg["tap_jar"]
        j_env = gw0.jvm.org.apache.flink.streaming.api.environment.StreamExecutionEnvironment \
            .createRemoteEnvironment("127.0.0.1", port, conf._j_configuration, jars)
        env = StreamExecutionEnvironment(j_env)
    else:
        env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(par)
    env.enable_checkpointing(int(cfg["interval_ms"]), CheckpointingMode.EXACTLY_ONCE)
    cc = env.get_checkpoint_config()
    if cfg["checkpoints"] == "unaligned":
        cc.enable_unaligned_checkpoints(True)
    cc.set_tolerable_checkpoint_failure_number(100)
    env.add_jars("file://" + cfg["tap_jar"])

    gw = get_gateway()
    tap_class = load_java_class("rollcheck.flink.RollcheckTap")

    def tap(ds, name: str, mode: str, type_info):
        args = gw.new_array(gw.jvm.Object, 4)
        args[0] = name
        args[1] = run_dir
        args[2] = mode
        args[3] = gw.jvm.Integer(keys)
        op = tap_class.getConstructors()[0].newInstance(args)
        j = ds._j_data_stream.transform(name, type_info.get_java_type_info(), op)
        return DataStream(j)

    per_subtask_rate = rate / par
    absolute = cfg.get("schedule") == "absolute"
    cap = cfg.get("source_cap")
    cap_per_subtask = float(cap) / par if cap else None
    fail_before_trigger = bool(cfg.get("fail_before_trigger"))
    interval_s = int(cfg["interval_ms"]) / 1000.0

    def _t0() -> float:
        """The common start of the absolute arrival schedule (the first emission of any subtask)."""
        path = os.path.join(run_dir, "t0")
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            for _ in range(1000):
                with open(path) as fh:
                    txt = fh.read()
                if txt:
                    return float(txt)
                time.sleep(0.001)
            raise RuntimeError("rollcheck: t0 file stayed empty") from None
        # recovery-time runs start with a backlog of ``calibrate_s`` seconds of input: the source
        # drains it at its capped rate, which measures the service rate before any failure
        t = time.time() - float(cfg.get("calibrate_s", 0.0))
        os.write(fd, repr(t).encode())
        os.close(fd)
        return t

    class Pace(MapFunction):
        """Paces the source to ``rate`` records/s and raises once at the K-th record.

        ``schedule: absolute`` (recovery-time runs): record v of a split is due at
        t0 + (v - split start)/rate_per_subtask, records whose due time passed (after a restart)
        are emitted at most at ``source_cap`` records/s, and every emission is logged.
        """

        def open(self, runtime_context: RuntimeContext) -> None:
            self.n = 0
            self.t0: float | None = None
            self.last = 0.0
            self.start: int | None = None
            self.caught_up = False
            self.log = None
            if absolute:
                gen = 1 if os.path.exists(marker) else 0
                path = os.path.join(run_dir, f"pace-gen{gen}-{uuid.uuid4().hex[:10]}.jsonl")
                self.log = open(path, "a", buffering=1)  # noqa: SIM115 - closed in close()

        def close(self) -> None:
            if self.log is not None:
                self.log.close()

        def _split_start(self, v: int) -> int:
            if self.start is None:
                starts_dir = os.path.join(run_dir, "splits")
                os.makedirs(starts_dir, exist_ok=True)
                if not os.path.exists(marker):
                    open(os.path.join(starts_dir, str(v)), "w").close()
                    self.start = v
                else:
                    starts = sorted(int(x) for x in os.listdir(starts_dir))
                    self.start = max(x for x in starts if x <= v)
            return self.start

        def map(self, value):
            now = time.time()
            self.n += 1
            if absolute:
                if self.t0 is None:
                    self.t0 = _t0()
                due = self.t0 + (int(value) - self._split_start(int(value))) / per_subtask_rate
                at = max(due, self.last + 1.0 / cap_per_subtask) if cap_per_subtask else due
            else:
                if self.t0 is None:
                    self.t0 = now
                due = at = self.t0 + self.n / per_subtask_rate
            if at > now:
                time.sleep(at - now)
            self.last = max(at, now)
            if self.log is not None:
                self.log.write(f"{int(value)} {due:.6f} {self.last:.6f}\n")
                if self.last - due <= 0.05:
                    self.caught_up = True
            if absolute and not self.caught_up:
                return value  # the initial backlog is not drained yet: no failure before that
            if fail_at is not None and self.n * par >= int(fail_at) and not os.path.exists(marker):
                names = os.listdir(run_dir)
                completed = [f for f in names if f.startswith("completed-")]
                if len(completed) < 2:
                    return value
                if fail_before_trigger:
                    snaps = [f for f in names if f.startswith("snapshot-")]
                    last = max(os.path.getmtime(os.path.join(run_dir, f)) for f in snaps)
                    if time.time() < last + interval_s * 0.92:
                        return value
                try:
                    fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
                except FileExistsError:
                    return value
                info = {"t": time.time(), "value": int(value), "local_index": self.n, "failure": failure,
                        "pid": os.getpid()}
                os.write(fd, json.dumps(info).encode())
                os.close(fd)
                if failure == "taskmanager":
                    # thread mode: this function runs inside the TaskManager's JVM process
                    os.kill(os.getpid(), signal.SIGKILL)
                raise RuntimeError(f"rollcheck: injected task failure at record {value}")
            return value

    max_rate = cfg.get("max_rate")
    service_per_subtask = float(max_rate) / par if max_rate else None

    class Count(KeyedProcessFunction):
        """The keyed count; with ``max_rate`` it serves at most that many records/s (all subtasks)."""

        def open(self, runtime_context: RuntimeContext) -> None:
            self.count = runtime_context.get_state(ValueStateDescriptor("count", Types.LONG()))
            self.next_free = 0.0

        def process_element(self, value, ctx):
            if service_per_subtask:
                now = time.time()
                start = max(now, self.next_free)
                self.next_free = start + 1.0 / service_per_subtask
                if self.next_free > now:
                    time.sleep(self.next_free - now)
            c = (self.count.value() or 0) + 1
            self.count.update(c)
            yield f"w{value % keys},{c}"

    class NaiveSink(MapFunction):
        """A side-effect sink: appends every line to a file as it passes, no transactions."""

        def open(self, runtime_context: RuntimeContext) -> None:
            gen = 1 if os.path.exists(marker) else 0
            path = os.path.join(naive_dir, f"gen{gen}-{uuid.uuid4().hex[:10]}.txt")
            self.f = open(path, "a", buffering=1)  # noqa: SIM115 - closed in close()

        def map(self, value):
            self.f.write(value + "\n")
            self.f.flush()
            return value

        def close(self) -> None:
            self.f.close()

    source = NumberSequenceSource(1, n_records)
    ds = env.from_source(source, WatermarkStrategy.no_watermarks(), "rollcheck-source",
                         type_info=Types.LONG())
    ds = tap(ds, "tap-source", "source", Types.LONG())
    ds = ds.map(Pace(), output_type=Types.LONG()).name("rollcheck-pace")
    ds = ds.key_by(lambda v: v % keys, key_type=Types.LONG())
    ds = ds.process(Count(), output_type=Types.STRING()).name("rollcheck-keyed")
    ds = ds.map(NaiveSink(), output_type=Types.STRING()).name("rollcheck-naive-sink")
    ds = tap(ds, "tap-keyed", "keyed", Types.STRING())
    sink = FileSink.for_row_format(os.path.join(run_dir, "tx"), Encoder.simple_string_encoder()) \
        .with_rolling_policy(RollingPolicy.on_checkpoint_rolling_policy()).build()
    ds.sink_to(sink).name("rollcheck-tx-sink")

    t_start = time.time()
    client = env.execute_async("rollcheck-wordcount")
    job_id = str(client.get_job_id())
    base = f"http://127.0.0.1:{port}"
    polls: dict = {"checkpoints": {}, "restored": [], "states": []}
    commits: list = []
    seen_files: set = set()
    tx_dir = os.path.join(run_dir, "tx")

    def scan_commits() -> None:
        # a file of the FileSink becomes visible (no leading dot) when its transaction commits
        for root, _dirs, files in os.walk(tx_dir):
            for name in files:
                path = os.path.join(root, name)
                if name.startswith(".") or path in seen_files:
                    continue
                seen_files.add(path)
                with open(path) as fh:
                    n = sum(1 for line in fh if line.strip())
                commits.append({"t": time.time(), "file": os.path.relpath(path, tx_dir), "lines": n})

    last_state = None
    misses = 0
    done = threading.Event()
    final_state = "UNKNOWN"
    deadline = t_start + float(cfg.get("timeout_s", 300))
    while not done.is_set():
        job = _get(f"{base}/jobs/{job_id}")
        misses = misses + 1 if job is None else 0
        if misses >= 20 and last_state is not None:
            # the MiniCluster of a local execution shuts down when the job ends: ask the client
            try:
                client.get_job_execution_result().result()
                final_state = "FINISHED"
            except Exception:  # noqa: BLE001 - any error from the job means it failed
                final_state = "FAILED"
            break
        if job is not None:
            state = job.get("state")
            if state != last_state:
                polls["states"].append({"state": state, "t": time.time(),
                                        "timestamps": job.get("timestamps", {})})
                last_state = state
            if state in ("FINISHED", "FAILED", "CANCELED"):
                final_state = state
                done.set()
        chk = _get(f"{base}/jobs/{job_id}/checkpoints")
        if chk is not None:
            for h in chk.get("history", []):
                polls["checkpoints"][str(h["id"])] = h
            rest = (chk.get("latest") or {}).get("restored")
            if rest and (not polls["restored"] or polls["restored"][-1]["id"] != rest.get("id")):
                polls["restored"].append(rest)
        scan_commits()
        if time.time() > deadline:
            client.cancel()
            final_state = "TIMEOUT"
            break
        time.sleep(0.1)
    scan_commits()
    job = _get(f"{base}/jobs/{job_id}")
    chk = _get(f"{base}/jobs/{job_id}/checkpoints")
    if chk is not None:
        for h in chk.get("history", []):
            polls["checkpoints"][str(h["id"])] = h
    out = {"job_id": job_id, "final_state": final_state, "t_start": t_start, "t_end": time.time(),
           "timestamps": (job or {}).get("timestamps", {}), "rest": polls, "commits": commits,
           "pyflink_python": sys.executable}
    with open(os.path.join(run_dir, "run.json.tmp"), "w") as f:
        json.dump(out, f)
    os.replace(os.path.join(run_dir, "run.json.tmp"), os.path.join(run_dir, "run.json"))
    return 0 if final_state == "FINISHED" else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
