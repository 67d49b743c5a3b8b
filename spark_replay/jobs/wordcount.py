"""A stateful Structured Streaming job, recorded event by event, with injected failures.

The job (``rollcheck spark record wordcount``) reads a *replayable* file source: one text file per
micro-batch (``maxFilesPerTrigger=1``), lines ``<batch> <time> <word>`` generated from the seed.
It keeps keyed state with one streaming aggregation, ``rollup(word, win).count()`` where
``win = time div W * W`` is a tumbling window: the state holds, per word, the running word count
(grouping id 1), per (word, window) the windowed count (grouping id 0), and the grand total
(grouping id 3). The output mode is *update*: each batch emits the rows whose count changed.

The sink (``foreachBatch``) first appends one line to a deliberately *non-idempotent* side channel,
then (at the chosen batch, first attempt only) injects the failure, then writes
``sink/batch-<id>.json`` atomically: idempotent by batch id, a re-run overwrites the same file.

Details: ``docs/internals/spark-jobs.md`` (section ``wordcount``).

References
----------
Spark Structured Streaming programming guide (micro-batch execution, checkpointing, foreachBatch);
the conformance rules are in ``specs/spark.md``.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import sys
import tempfile
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rollcheck.infra.partialfile import partial_output
from rollcheck.pyimpl.errors import InvalidInputError
from rollcheck.spark_replay.checkpoint.reader import CheckpointDir
from rollcheck.spark_replay.checkpoint.watcher import PREFIX, CheckpointWatcher
from rollcheck.spark_replay.supervise import child_main, environment_guard, request_kill, run_driver
from rollcheck.spark_replay.trace import TraceWriter

__all__ = [
    "WordcountConfig",
    "generate_inputs",
    "rollup_updates",
    "fold_state",
    "record_wordcount",
    "FAILURES",
]

FAILURES = ("task", "sink", "kill")
VOCABULARY = ("ash", "birch", "cedar", "elm", "fir", "oak", "pine", "yew")


@dataclass(frozen=True)
class WordcountConfig:
    """Parameters of one recorded streaming run (all of them go into the trace header)."""

    batches: int = 6
    words_per_batch: int = 12
    vocabulary: int = 5
    window: int = 5
    fail_at_batch: int | None = None
    failure: str | None = None
    seed: int = 0
    master: str | None = None
    shuffle_partitions: int = 2
    crosscheck: bool = True
    max_attempts: int = 4
    #: State store snapshot every this many deltas (Spark's default is 10); with a smaller value
    #: the maintenance task (every second here) writes ``.snapshot`` files during short runs.
    snapshot_every: int = 10

    def validate(self) -> None:
        """Refuse a configuration the recorder cannot run (:class:`InvalidInputError`)."""
        if self.batches < 1:
            raise InvalidInputError(f"need at least one batch, got {self.batches}", location="--batches")
        if not 1 <= self.vocabulary <= len(VOCABULARY):
            raise InvalidInputError(f"vocabulary must be 1..{len(VOCABULARY)}", location="vocabulary")
        if (self.failure is None) != (self.fail_at_batch is None):
            raise InvalidInputError("give --fail-at-batch and --failure together", location="--failure")
        if self.failure is not None and self.failure not in FAILURES:
            raise InvalidInputError(f"unknown failure {self.failure!r}; use one of {FAILURES}",
                                    location="--failure")
        if self.fail_at_batch is not None and not 0 <= self.fail_at_batch < self.batches:
            raise InvalidInputError(f"--fail-at-batch must be in 0..{self.batches - 1}",
                                    location="--fail-at-batch")


def generate_inputs(cfg: WordcountConfig) -> list[list[tuple[int, str]]]:
    """The (time, word) records of every batch, a pure function of the seed.

    Examples
    --------
    >>> a = generate_inputs(WordcountConfig(batches=2, seed=3))
    >>> a == generate_inputs(WordcountConfig(batches=2, seed=3)), len(a), len(a[0])
    (True, 2, 12)
    """
    rng = random.Random(f"wordcount:{cfg.seed}")
    words = VOCABULARY[: cfg.vocabulary]
    out = []
    for b in range(cfg.batches):
        recs = [(b * 10 + rng.randrange(0, 14), rng.choice(words)) for _ in range(cfg.words_per_batch)]
        out.append(recs)
    return out


Key = tuple[Any, Any, int]


def _keys(t: int, w: str, window: int) -> list[Key]:
    return [(w, t // window * window, 0), (w, None, 1), (None, None, 3)]


def rollup_updates(inputs: list[list[tuple[int, str]]], window: int,
                   batches: list[int] | None = None) -> tuple[dict[int, list[list[Any]]], dict[Key, int]]:
    """The failure-free reference: each batch's update-mode output and the final state.

    Returns ``({batch: sorted rows [word, win, count]}, {key: count})`` where a key is
    ``(word, win, grouping id)``: grouping id 0 per (word, window), 1 per word, 3 the total.

    Parameters
    ----------
    inputs : list of list of (int, str)
        Each batch's (event time, word) records.
    window : int
        The window length.
    batches : list of int, optional
        The batches folded, in order; None for all.

    Returns
    -------
    tuple of (dict, dict)
        Batch -> sorted rows; key -> count.

    Examples
    --------
    >>> out, state = rollup_updates([[(1, "a"), (7, "a")]], window=5)
    >>> out[0]
    [['a', 0, 1], ['a', 5, 1], ['a', None, 2], [None, None, 2]]
    >>> state[("a", None, 1)]
    2
    """
    state: Counter[Key] = Counter()
    outputs: dict[int, list[list[Any]]] = {}
    for b in (range(len(inputs)) if batches is None else batches):
        touched: set[Key] = set()
        for t, w in inputs[b]:
            for k in _keys(t, w, window):
                state[k] += 1
                touched.add(k)
        outputs[b] = sorted(([k[0], k[1], state[k]] for k in touched), key=_row_order)
    return outputs, dict(state)


def fold_state(inputs: list[list[tuple[int, str]]], window: int, batches: list[int]) -> dict[Key, int]:
    """The state after the given batches (the committed ones), folded in order.

    Parameters
    ----------
    inputs : list of list of (int, str)
        Each batch's (event time, word) records.
    window : int
        The window length.
    batches : list of int
        The committed batches, in order.

    Returns
    -------
    dict
        Key -> count.
    """
    return rollup_updates(inputs, window, batches)[1]


def _row_order(r: Any) -> tuple[Any, ...]:
    return tuple((x is None, x if x is not None else 0) if not isinstance(x, str) else (False, x)
                 for x in r)


# ----------------------------------------------------------------------------- recording
@dataclass
class _Paths:
    root: Path
    inputs: Path = field(init=False)
    checkpoint: Path = field(init=False)
    sink: Path = field(init=False)
    side: Path = field(init=False)
    markers: Path = field(init=False)

    def __post_init__(self) -> None:
        self.inputs = self.root / "in"
        self.checkpoint = self.root / "checkpoint"
        self.sink = self.root / "sink"
        self.side = self.root / "side-channel.jsonl"
        self.markers = self.root / "markers"


def _write_inputs(paths: _Paths, inputs: list[list[tuple[int, str]]]) -> None:
    paths.inputs.mkdir(parents=True)
    paths.sink.mkdir()
    paths.markers.mkdir()
    base = time.time() - 3600  # strictly increasing modification times fix the file order
    for b, recs in enumerate(inputs):
        f = paths.inputs / f"batch-{b:05d}.txt"
        f.write_text("".join(f"{b} {t} {w}\n" for t, w in recs), encoding="utf-8")
        os.utime(f, (base + b, base + b))


def _atomic_json(path: Path, obj: Any) -> None:
    tmp = path.with_name("." + path.name + ".tmp")
    tmp.write_text(json.dumps(obj), encoding="utf-8")
    os.replace(tmp, path)


def _run_attempts(cfg: WordcountConfig, paths: _Paths, trace_path: Path, header: dict[str, Any],
                  single_attempt: bool, enabled: bool = True) -> str:
    """Run the query (restarting it in process after a failure); return "done" or "failed"."""
    from pyspark.errors import StreamingQueryException
    from pyspark.sql import functions as F

    from rollcheck.spark_replay.session import spark_session

    writer = TraceWriter(trace_path, header, enabled=enabled)
    previous = writer.previous
    status = "failed"
    query_seconds: list[float] = []
    try:
        conf = {"spark.sql.streaming.stateStore.minDeltasForSnapshot": cfg.snapshot_every,
                "spark.sql.streaming.stateStore.maintenanceInterval": "1s"}
        with spark_session(cfg.master, app_name="rollcheck-wordcount",
                           shuffle_partitions=cfg.shuffle_partitions, conf=conf) as spark:
            _quiet(spark)
            attempts = 1 if single_attempt else cfg.max_attempts
            watcher = CheckpointWatcher(paths.checkpoint, writer, previous if enabled else [])
            for k in range(attempts):
                if k > 0:
                    writer.attempt += 1
                    watcher.new_attempt()
                t_q = time.perf_counter()
                outcome = _one_attempt(spark, F, StreamingQueryException, cfg, paths, writer, watcher)
                query_seconds.append(time.perf_counter() - t_q)
                if outcome == "done":
                    if enabled:
                        _finish(spark, cfg, paths, writer)
                    status = "done"
                    break
    finally:
        writer.close()
        _LAST_QUERY_SECONDS[:] = query_seconds
    return status


#: Seconds spent in each query attempt of the last in-process recording (for the benchmark).
_LAST_QUERY_SECONDS: list[float] = []


def _quiet(spark: Any) -> None:
    """Injected failures are expected: keep their stack traces off the console."""
    import logging

    logging.getLogger("py4j").setLevel(logging.CRITICAL)
    spark.sparkContext.setLogLevel("OFF")


def _progress_listener(writer: TraceWriter) -> Any:
    """A StreamingQueryListener recording each batch's progress.

    Asynchronous; none for a failed batch; lost with a killed driver. An independent observation of
    what Spark did.
    """
    from pyspark.sql.streaming import StreamingQueryListener

    class _Listener(StreamingQueryListener):  # type: ignore[misc]
        last_batch = -1  # the last batch whose progress arrived

        def onQueryStarted(self, event: Any) -> None:
            pass

        def onQueryProgress(self, event: Any) -> None:
            p = event.progress
            writer.emit(PREFIX + "progress", batch=int(p.batchId), input_rows=int(p.numInputRows),
                        state_rows=[int(op.numRowsTotal) for op in p.stateOperators])
            self.last_batch = max(self.last_batch, int(p.batchId))

        def onQueryIdle(self, event: Any) -> None:
            pass

        def onQueryTerminated(self, event: Any) -> None:
            pass

    return _Listener()


def _one_attempt(spark: Any, F: Any, SQE: type[BaseException], cfg: WordcountConfig, paths: _Paths,
                 writer: TraceWriter, watcher: CheckpointWatcher) -> str:
    attempt = writer.attempt
    commits = sorted(CheckpointDir(paths.checkpoint).commits()) if paths.checkpoint.is_dir() else []
    writer.emit(PREFIX + "attempt_start", pid=os.getpid(), committed=commits)
    if writer.enabled:
        watcher.poll()
        watcher.start()
    fail_marker = paths.markers / "failed"
    first_sink = [True]
    last_sunk = [-1]

    df = spark.readStream.option("maxFilesPerTrigger", 1).text(str(paths.inputs))
    parts = F.split(F.col("value"), " ")
    batch_col = parts[0].cast("int")
    if cfg.failure == "task":
        k_fail = int(cfg.fail_at_batch)  # type: ignore[arg-type]
        marker = str(fail_marker)

        def inject(b):  # no type hints: PySpark 4 would read them as a pandas UDF
            if b == k_fail:
                try:
                    fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
                except FileExistsError:
                    return b
                os.write(fd, str(b).encode())
                os.close(fd)
                raise RuntimeError(f"rollcheck: injected task failure in batch {b}")
            return b

        # A filter on the UDF's result: the optimizer can neither drop it (the result decides
        # which rows survive) nor evaluate it statically (non-deterministic).
        df = df.where(F.udf(inject, "int").asNondeterministic()(batch_col) >= 0)
    df = df.select(batch_col.alias("b"), parts[1].cast("long").alias("t"), parts[2].alias("word"))
    agg = (df.withColumn("win", F.expr(f"t div {cfg.window} * {cfg.window}"))
           .rollup("word", "win").agg(F.count("*").alias("n")))

    def sink(bdf: Any, bid: int) -> None:
        rows = sorted(([r[0], r[1], r[2]] for r in bdf.collect()), key=_row_order)
        if writer.enabled:
            watcher.poll_now()
        if first_sink[0] and attempt > 1:
            first_sink[0] = False
            restored = watcher.restored_versions()
            writer.emit(PREFIX + "restart", resume_batch=bid, restored_versions=restored)
        first_sink[0] = False
        with open(paths.side, "a", encoding="utf-8") as f:
            f.write(json.dumps({"batch": bid, "attempt": attempt}) + "\n")
        writer.emit(PREFIX + "side_effect", batch=bid)
        if cfg.fail_at_batch == bid and not fail_marker.exists():
            fail_marker.write_text(str(bid), encoding="utf-8")
            if cfg.failure == "sink":
                writer.emit("failure", processes=["driver"], batch=bid, mode="sink")
                raise RuntimeError(f"rollcheck: injected sink failure in batch {bid}")
            if cfg.failure == "kill":
                writer.emit("failure", processes=["driver"], batch=bid, mode="kill")
                request_kill(paths.markers)  # the parent SIGKILLs this driver's process group now
        _atomic_json(paths.sink / f"batch-{bid:05d}.json", rows)
        writer.emit(PREFIX + "sink_written", batch=bid, rows=rows)
        last_sunk[0] = max(last_sunk[0], bid)

    listener = _progress_listener(writer) if writer.enabled else None
    if listener is not None:
        spark.streams.addListener(listener)
    q = (agg.writeStream.outputMode("update").option("checkpointLocation", str(paths.checkpoint))
         .foreachBatch(sink).trigger(availableNow=True).start())
    try:
        q.awaitTermination()
        outcome = "done"
    except SQE:
        outcome = "failed"
        if cfg.failure == "task" and fail_marker.exists() and not any(
                e.get("mode") == "task" for e in writer.previous):
            writer.emit("failure", processes=["driver"], batch=int(fail_marker.read_text()), mode="task")
            try:  # the plan that ran, with the injecting filter in it (evidence for the tests)
                writer.emit(PREFIX + "plan", physical=q._jsq.explainInternal(False))
            except Exception:
                pass
    finally:
        if writer.enabled:
            watcher.stop()
        if listener is not None:
            # the listener bus is asynchronous: wait (at most 0.5 s) for the last batch's progress
            deadline = time.perf_counter() + 0.5
            while listener.last_batch < last_sunk[0] and time.perf_counter() < deadline:
                time.sleep(0.005)
            spark.streams.removeListener(listener)
    if outcome == "done" and attempt > 1 and first_sink[0]:
        writer.emit(PREFIX + "restart", resume_batch=None, restored_versions={})
    return outcome


def _finish(spark: Any, cfg: WordcountConfig, paths: _Paths, writer: TraceWriter) -> None:
    reader = CheckpointDir(paths.checkpoint)
    commits = reader.commits()
    version = max(commits) + 1 if commits else 0
    state = reader.state(0, version) if commits else {}
    rows = sorted(([*k, *v] for part in state.values() for k, v in part.items()), key=_row_order)
    writer.emit(PREFIX + "final_state", version=version, rows=rows,
                partitions={str(p): len(s) for p, s in state.items()})
    sink = {}
    for f in sorted(paths.sink.glob("batch-*.json")):
        sink[str(int(f.stem.split("-")[1]))] = json.loads(f.read_text(encoding="utf-8"))
    writer.emit(PREFIX + "sink_final", batches=sink)
    side = []
    if paths.side.exists():
        side = [json.loads(x) for x in paths.side.read_text(encoding="utf-8").splitlines() if x]
    writer.emit(PREFIX + "side_channel", entries=side)
    if cfg.crosscheck and commits:
        t0 = time.perf_counter()
        srows = spark.read.format("statestore").load(str(paths.checkpoint)).collect()
        theirs = sorted(([*r["key"], *r["value"]] for r in srows), key=_row_order)
        meta = spark.read.format("state-metadata").load(str(paths.checkpoint)).collect()
        max_batch = meta[0]["maxBatchId"] if meta else None
        writer.emit(PREFIX + "state_crosscheck", agree=theirs == rows, spark_rows=len(theirs), rows=len(rows),
                    spark_max_batch=max_batch, max_committed=max(commits),
                    seconds=round(time.perf_counter() - t0, 2))
    writer.emit("end", status="done")


def record_wordcount(cfg: WordcountConfig, out: str | Path, *, enabled: bool = True,
                     workdir: str | Path | None = None) -> dict[str, Any]:
    """Run and record the streaming job; return a summary (attempts, seconds, trace path).

    The working directory (inputs, ``checkpoint``, ``sink``, side channel) is a temporary folder
    removed afterwards whatever happens, unless ``workdir`` (a path that must not exist yet) is
    given: then it is kept for inspection. The trace is the only output: recorded as
    ``OUT.partial`` and renamed when the run ends (an interrupted run leaves ``OUT`` as it was).

    Parameters
    ----------
    cfg : WordcountConfig
        The run's parameters.
    out : str or Path
        The trace file.
    enabled : bool, optional
        Write the trace (False: run without recording).
    workdir : str or Path, optional
        A new folder kept for inspection; None uses a removed temporary one.

    Returns
    -------
    dict
        Attempts, seconds and the trace path.
    """
    cfg.validate()
    target = Path(out)
    inputs = generate_inputs(cfg)
    header = {"source": "spark", "job": "wordcount", "processes": ["driver"], "seed": cfg.seed,
              "config": {**asdict(cfg), "inputs": [[f"batch-{b:05d}.txt", recs] for b, recs in enumerate(inputs)]}}
    keep_dir = workdir is not None
    root = Path(workdir) if workdir is not None else Path(tempfile.mkdtemp(prefix="rollcheck-wc-"))
    paths = _Paths(root)
    t0 = time.perf_counter()
    children = 0
    # recorded as OUT.partial, renamed when the run ends (pyimpl.partialfile)
    with contextlib.ExitStack() as stack:
        trace = stack.enter_context(partial_output(target))
        stack.enter_context(environment_guard(root))
        stack.callback(lambda: None if keep_dir else shutil.rmtree(root, ignore_errors=True))
        _write_inputs(paths, inputs)
        if cfg.failure != "kill":
            status = _run_attempts(cfg, paths, trace, header, single_attempt=False, enabled=enabled)
        else:
            status = "failed"
            if enabled:  # the first child continues this file; write the header now
                TraceWriter(trace, header).close()
            for _ in range(cfg.max_attempts):
                children += 1
                spec = {"cfg": asdict(cfg), "root": str(root), "trace": str(trace), "header": header,
                        "enabled": enabled}
                run = run_driver("rollcheck.spark_replay.jobs.wordcount", spec, workdir=root, n=children,
                                 markers=paths.markers)
                if not run.killed and run.reply.get("status") == "done":
                    status = "done"
                    break
                if not run.killed:
                    raise RuntimeError(f"wordcount driver ended with {run.reply}")
    return {"status": status, "seconds": round(time.perf_counter() - t0, 2), "trace": str(target),
            "children": children, "query_seconds": [round(x, 3) for x in _LAST_QUERY_SECONDS]}


def _child_run(spec: dict[str, Any]) -> dict[str, Any]:
    cfg = WordcountConfig(**spec["cfg"])
    with environment_guard(spec["root"]):
        status = _run_attempts(cfg, _Paths(Path(spec["root"])), Path(spec["trace"]), spec["header"],
                               single_attempt=True, enabled=spec["enabled"])
    return {"status": status}


if __name__ == "__main__":  # the driver child of a kill-mode recording
    if sys.argv[1:] == ["--child"]:
        sys.exit(child_main(_child_run))
