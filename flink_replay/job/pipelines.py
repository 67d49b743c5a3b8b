"""The dataflows rollcheck runs: the word count, the user's job, the utilization pipeline.

Each starts at a checkpointed ``NumberSequenceSource`` and rollcheck's source tap, and ends at
a transactional ``FileSink`` behind rollcheck's keyed tap (:func:`build`). :func:`pace.pace_class`
paces the source and injects the failure; the word count adds a keyed count and a naive
side-effect sink; the user's job gets the user's records by index (with ``SOURCES``, one stream per
source name split off the one sequence: :func:`user.source_streams`), the user's ``job()`` (its keyed
operators logged key by key), the user's ``sink`` and rollcheck's output step (each row checked
against ``KEY`` and written as JSON).

Every class here is defined inside a function: PyFlink pickles it by value for the workers.

This module runs in the PyFlink environment (``.venv-flink``), imported by ``main.py``; like it, it
imports only the standard library, ``pyflink`` and its sibling ``job_*`` modules.
"""

from __future__ import annotations

import json
import os
import time
import uuid

if __package__:  # imported as rollcheck.flink_replay (tests, the recorder's helpers)
    from .environment import user_state_log
    from .pace import pace_class
    from .user import UserCodeError, call_user, source_streams, user_error
else:  # run by main.py in the PyFlink environment: this folder is on sys.path
    from environment import user_state_log  # type: ignore[no-redef]
    from pace import pace_class  # type: ignore[no-redef]
    from user import UserCodeError, call_user, source_streams, user_error  # type: ignore[no-redef]

__all__ = ["build", "pace_class", "utilization_pipeline"]


def build(cfg: dict, env, tap, keyed_tap, *, user=None, attempt_offset: int = 0):
    """Build the job's graph on ``env``.

    Returns
    -------
    str or dict
        The job's name, or ``{"user_error": True, ...}`` when the user's ``job()`` or ``sink()``
        failed while building it.
    """
    from pyflink.common import Encoder
    from pyflink.datastream.connectors.file_system import FileSink, RollingPolicy

    run_dir = cfg["run_dir"]
    tx_sink = FileSink.for_row_format(os.path.join(run_dir, "tx"), Encoder.simple_string_encoder()) \
        .with_rolling_policy(RollingPolicy.on_checkpoint_rolling_policy()).build()
    if cfg.get("job") == "utilization":
        ds = utilization_pipeline(cfg, env, tap)
        ds.sink_to(tx_sink).name("rollcheck-tx-sink")
        return "rollcheck-utilization"
    if user is None:
        return wordcount_pipeline(cfg, env, tap, keyed_tap, tx_sink)
    return user_pipeline(cfg, env, tap, keyed_tap, tx_sink, user, attempt_offset)


def wordcount_pipeline(cfg: dict, env, tap, keyed_tap, tx_sink) -> str:
    """Source -> tap -> pace -> keyBy -> keyed count -> naive sink -> keyed tap -> FileSink."""
    from pyflink.common import Types, WatermarkStrategy
    from pyflink.datastream.connectors.number_seq import NumberSequenceSource
    from pyflink.datastream.functions import KeyedProcessFunction, MapFunction, RuntimeContext
    from pyflink.datastream.state import ValueStateDescriptor

    run_dir = cfg["run_dir"]
    n_records = int(cfg["records"])
    par = int(cfg["parallelism"])
    keys = int(cfg["keys"])
    marker = os.path.join(run_dir, "failure.json")
    naive_dir = os.path.join(run_dir, "naive")
    Pace = pace_class(cfg)

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
    ds = keyed_tap(ds, "tap-keyed", "count", Types.STRING(), keys)
    ds.sink_to(tx_sink).name("rollcheck-tx-sink")
    job_name = "rollcheck-wordcount"
    return job_name


def user_pipeline(cfg: dict, env, tap, keyed_tap, tx_sink, user, attempt_offset: int):
    """Build the user's job: source, taps, pace, the user's ``job()``, rollcheck's output, FileSink.

    In order: source -> tap -> pace -> the user's records -> the user's ``job()`` (and ``sink()``) ->
    rollcheck's output step -> keyed tap (keyed by ``KEY``) -> FileSink.

    Returns
    -------
    str or dict
        The job's name, or ``{"user_error": True, ...}`` when the user's code failed while the graph
        was built.
    """
    from pyflink.common import Types, WatermarkStrategy
    from pyflink.datastream.connectors.number_seq import NumberSequenceSource
    from pyflink.datastream.data_stream import DataStream
    from pyflink.datastream.functions import MapFunction

    run_dir = cfg["run_dir"]
    n_records = int(cfg["records"])
    marker = os.path.join(run_dir, "failure.json")
    Pace = pace_class(cfg)
    module, recs, layout = user
    key_idx = [int(i) for i in cfg["key_idx"]]  # KEY as indices (names resolved through FIELDS)
    key_spec = getattr(module, "KEY", None)
    module_path = cfg["module"]
    error_path = os.path.join(run_dir, "user-error.json")

    def _bad_row(call: str, msg: str) -> None:
        if not os.path.exists(error_path):
            with open(error_path + ".tmp", "w") as f:
                json.dump({"call": call, "error": msg, "kind": "attribute" if call == "KEY" else "call"}, f)
            os.replace(error_path + ".tmp", error_path)

    class Input(MapFunction):
        """The user's record number ``value`` (0-based) of ``records(seed)``."""

        def map(self, value):
            return recs[int(value)]

    class Output(MapFunction):
        """A row of the user's output: type-checked, keyed by ``KEY``, written as JSON."""

        def map(self, value):
            row = tuple(value) if isinstance(value, (tuple, list)) or hasattr(value, "_values") else value
            if not isinstance(row, tuple):
                _bad_row("job", f"output must be tuples with the KEY fields {key_spec!r}, got "
                                f"{type(value).__name__} {value!r:.80}")
                raise RuntimeError(f"rollcheck: {module_path}: bad output row {value!r:.80}")
            beyond = [i for i in key_idx if i >= len(row)]
            if beyond:
                _bad_row("KEY", f"index {beyond[0]} is beyond the output tuple: the first output row has "
                                f"{len(row)} field(s): {value!r:.80}")
                raise RuntimeError(f"rollcheck: {module_path}: KEY {key_spec!r} beyond output row {value!r:.80}")
            key = json.dumps([row[i] for i in key_idx], default=str)
            return key + "\x1f" + json.dumps(list(row), default=str)

    source = NumberSequenceSource(0, n_records - 1)
    ds = env.from_source(source, WatermarkStrategy.no_watermarks(), "rollcheck-source",
                         type_info=Types.LONG())
    if layout is None:
        ds = tap(ds, "tap-source", "source", Types.LONG(), 1)
        ds = ds.map(Pace(), output_type=Types.LONG()).name("rollcheck-pace")
        arg = ds.map(Input()).name("rollcheck-input")
    else:  # SOURCES: the source tap counts each source's records; one stream per source name
        ds = tap(ds, "tap-source", "source", Types.LONG(), len(layout["names"]), buckets=layout["order"])
        ds = ds.map(Pace(), output_type=Types.LONG()).name("rollcheck-pace")
        arg = source_streams(ds, layout, Input)
    limit = float(cfg.get("call_timeout", 300))
    try:
        with user_state_log(run_dir, attempt_offset):
            out = call_user(run_dir, "job", limit, module.job, env, arg)
    except UserCodeError:
        return {"user_error": True, "final_state": "NOT_RUN"}
    if not isinstance(out, DataStream):
        user_error(run_dir, "job", f"must return a DataStream, got {type(out).__name__}")
        return {"user_error": True, "final_state": "NOT_RUN"}
    if cfg.get("runtime_mode") == "batch":
        return _batch_rows(run_dir, out, Output())
    if hasattr(module, "sink"):
        user_out = os.path.join(run_dir, "user-sink")
        os.makedirs(user_out, exist_ok=True)
        Handed = _handed_class(run_dir, marker, key_idx)
        out.map(Handed(), output_type=Types.BOOLEAN()).name("rollcheck-sink-handings") \
            .filter(lambda x: x).print()
        try:
            call_user(run_dir, "sink", limit, module.sink, out, user_out)
        except UserCodeError:
            return {"user_error": True, "final_state": "NOT_RUN"}
    ds = out.map(Output(), output_type=Types.STRING()).name("rollcheck-output")
    ds = keyed_tap(ds, "tap-keyed", "rows", Types.STRING(), 0)
    ds.sink_to(tx_sink).name("rollcheck-tx-sink")
    job_name = "rollcheck-user-job"
    return job_name


def _batch_rows(run_dir: str, out, output) -> str:
    """Write the batch-equivalent oracle's rows of every KEY, in the order the user's job emitted them.

    The output step runs in the same task as the user's last operator; one file per subtask; no keyed
    tap (a BATCH shuffle sorts by key and does not keep the emission order).
    """
    from pyflink.common import Types
    from pyflink.datastream.functions import MapFunction, RuntimeContext

    batch_dir = os.path.join(run_dir, "batch-out")
    os.makedirs(batch_dir, exist_ok=True)

    class Emitted(MapFunction):
        def open(self, runtime_context: RuntimeContext) -> None:
            name = f"rows-{uuid.uuid4().hex[:10]}.txt"
            self.f = open(os.path.join(batch_dir, name), "a", buffering=1 << 16)  # noqa: SIM115 - closed in close()

        def map(self, value):
            self.f.write(value + "\n")
            return False

        def close(self) -> None:
            self.f.close()

    out.map(output, output_type=Types.STRING()).name("rollcheck-output") \
        .map(Emitted(), output_type=Types.BOOLEAN()).name("rollcheck-batch-rows").filter(lambda x: x).print()
    return "rollcheck-user-job-batch"


def _handed_class(run_dir: str, marker: str, key_idx: list):
    """The ``Handed`` map function: it logs the KEY of every row handed to the module's sink."""
    from pyflink.datastream.functions import MapFunction, RuntimeContext

    class Handed(MapFunction):
        """Logs the KEY of every row handed to the module's sink (beside it on the same stream).

        One file per subtask and generation (1 once the injected failure struck), line-buffered.
        """

        def open(self, runtime_context: RuntimeContext) -> None:
            gen = 1 if os.path.exists(marker) else 0
            name = f"handed-gen{gen}-{uuid.uuid4().hex[:10]}.txt"
            self.f = open(os.path.join(run_dir, name), "a", buffering=1)  # noqa: SIM115 - closed in close()

        def map(self, value):
            row = tuple(value) if isinstance(value, (tuple, list)) or hasattr(value, "_values") else value
            if isinstance(row, tuple) and all(i < len(row) for i in key_idx):
                self.f.write(json.dumps([row[i] for i in key_idx], default=str) + "\n")
            return False

        def close(self) -> None:
            self.f.close()

    return Handed


def utilization_pipeline(cfg: dict, env, tap):
    """Source -> tap (a blocking snapshot of ``snapshot_cost_ms``) -> capped work -> keyed count.

    The work step serves at most ``service_rate`` records/s without catching up after a pause (a
    checkpoint's blocking cost or a restart is time lost), logs every record it emits with its
    time, and raises the injected failures at the scheduled times (``failure_times``, seconds
    after the first record; one marker file each, so a failure strikes once).
    """
    from pyflink.common import Types, WatermarkStrategy
    from pyflink.datastream.connectors.number_seq import NumberSequenceSource
    from pyflink.datastream.functions import KeyedProcessFunction, MapFunction, RuntimeContext
    from pyflink.datastream.state import ValueStateDescriptor

    run_dir = cfg["run_dir"]
    mu = float(cfg["service_rate"])
    times = [float(t) for t in cfg.get("failure_times") or []]

    class Work(MapFunction):
        def open(self, runtime_context: RuntimeContext) -> None:
            self.next_free = 0.0
            done = len([f for f in os.listdir(run_dir) if f.startswith("ufail-")])
            self.log = open(os.path.join(run_dir, f"work-{done}.log"), "a", buffering=1 << 16)  # noqa: SIM115
            self.t0 = None

        def close(self) -> None:
            self.log.close()

        def map(self, value):
            now = time.time()
            start = max(now, self.next_free)
            self.next_free = start + 1.0 / mu
            if start > now:
                time.sleep(start - now)
            if self.t0 is None:
                path = os.path.join(run_dir, "t0")
                try:
                    fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
                    os.write(fd, repr(start).encode())
                    os.close(fd)
                    self.t0 = start
                except FileExistsError:
                    with open(path) as fh:
                        self.t0 = float(fh.read() or start)
            self.log.write(f"{int(value)} {start:.6f}\n")
            k = len([f for f in os.listdir(run_dir) if f.startswith("ufail-")]) if times else 0
            if k < len(times) and start >= self.t0 + times[k]:
                try:
                    fd = os.open(os.path.join(run_dir, f"ufail-{k}"), os.O_CREAT | os.O_EXCL | os.O_WRONLY)
                except FileExistsError:
                    return value
                os.write(fd, repr(start).encode())
                os.close(fd)
                self.log.flush()
                raise RuntimeError(f"rollcheck: injected failure {k} at record {value}")
            return value

    class Count(KeyedProcessFunction):
        def open(self, runtime_context: RuntimeContext) -> None:
            self.count = runtime_context.get_state(ValueStateDescriptor("count", Types.LONG()))

        def process_element(self, value, ctx):
            c = (self.count.value() or 0) + 1
            self.count.update(c)
            if c % 1000 == 0:
                yield f"k{value % 4},{c}"

    ds = env.from_source(NumberSequenceSource(1, 10 ** 12), WatermarkStrategy.no_watermarks(), "rollcheck-source",
                         type_info=Types.LONG())
    ds = tap(ds, "tap-source", "source", Types.LONG(), 1, int(cfg.get("snapshot_cost_ms", 0)))
    ds = ds.map(Work(), output_type=Types.LONG()).name("rollcheck-work")
    return ds.key_by(lambda v: v % 4, key_type=Types.LONG()).process(Count(), output_type=Types.STRING())
