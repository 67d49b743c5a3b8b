"""Chaos-test a user's own Structured Streaming query: record it with a real injected failure.

A *query under test* is a Python file (or importable module) with (``docs/your-query.md``):

- ``SCHEMA``: the input rows as a Spark DDL string, e.g. ``"ts TIMESTAMP, user STRING, amount INT"``;
- ``batches(seed) -> list[list[tuple]]``: the input, one list of rows per micro-batch;
- ``query(df) -> DataFrame``: the streaming transformation of the input stream (stateful allowed);
- ``OUTPUT_MODE`` (``"append"``, ``"update"`` or ``"complete"``) and ``KEY`` (the output columns
  that identify a row; the final output table is the last row per key);
- optional ``sink(batch_df, batch_id, out_dir)`` and ``read_output(out_dir) -> list[dict]``: the
  user's own ``foreachBatch`` sink and how to read back what it wrote. The default sink is
  rollcheck's idempotent one: ``out_dir/batch-<id>.json`` replaced atomically per batch id;
- optional ``SINK_GUARANTEE`` (``"exactly-once"``, the default, or ``"at-least-once"``): what the
  module's own sink promises; the replay judges the output against it (the trace header's
  ``config.sink_guarantee``; :mod:`rollcheck.pyimpl.attribution`).

rollcheck owns the source (one JSON Lines file per batch, read with ``maxFilesPerTrigger=1``, so
data batch *b* is Spark batch *b*; later batch ids are data-less batches that only advance the
watermark), the failure injection and the recording. :func:`record_query` runs a failure-free
*reference* run (its own checkpoint and output folder) and then the run with the failure:

- ``task``: a non-deterministic Python UDF in a filter over ``input_file_name()`` raises inside a
  task of the chosen batch (the filter decides which rows survive, so the optimizer can neither
  drop nor pre-evaluate it; the plan is recorded as ``spark.plan``); the driver restarts the query;
- ``sink``: raises in ``foreachBatch`` *after* the user's sink wrote the batch; restart in process;
- ``kill``: the driver runs in a child process group; after the user's sink wrote the chosen batch
  the parent SIGKILLs the group (driver and JVM) and starts a new driver on the same checkpoint.

The trace (``"source": "spark", "job": "query"``) has the streaming events of
:mod:`rollcheck.spark_replay.watcher` plus ``spark.attempt_start``, ``spark.sink_written`` (with the
rows handed to the sink), the core ``failure``, ``spark.restart``, ``spark.plan``, and at the end
``spark.reference`` (the failure-free run's output and state), ``spark.output_final``,
``spark.state_final`` (every state store read with Spark's ``statestore`` reader, with the row
count of our own decoder) and ``end``. The checks are in :mod:`rollcheck.spark_replay.checks`.

References
----------
Spark Structured Streaming programming guide (foreachBatch, checkpointing, watermarks, the
``statestore`` data source); the conformance rules are in ``specs/spark.md``.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import decimal
import hashlib
import importlib
import importlib.util
import json
import os
import re
import shutil
import sys
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from types import ModuleType
from typing import Any

from rollcheck.pyimpl.calllimit import DEFAULT_QUERY_CALL_TIMEOUT, call_limited, check_limit
from rollcheck.pyimpl.errors import InvalidInputError, UserCodeTimeout, environment_fault
from rollcheck.pyimpl.partialfile import partial_output
from rollcheck.spark_replay.checkpoint_reader import CheckpointDir, spark_state_reads
from rollcheck.spark_replay.cluster import (
    cluster_conf,
    on_cluster,
    strike_executor,
    validate_cluster,
)
from rollcheck.spark_replay.killpoints import (
    RETRY_FAILED,
    RETRY_RESTART,
    SECOND_FAILURES,
    SECOND_KILL,
    KillSupervisor,
    checkpoint_logs,
    record_kill,
    recovery_kill_filter,
    retry_facts,
    retry_restart_batch,
    retry_task,
    state_files_of_version,
    state_store_conf,
    validate_options,
)
from rollcheck.spark_replay.releases import child_environment, pinned_release, spark_environment
from rollcheck.spark_replay.supervise import (
    child_main,
    environment_guard,
    give_up_on_user_code,
    request_kill,
    run_driver,
)
from rollcheck.spark_replay.trace import TraceWriter
from rollcheck.spark_replay.watcher import PREFIX, CheckpointWatcher

__all__ = [
    "FAILURES",
    "OUTPUT_MODES",
    "QueryConfig",
    "UserQuery",
    "load_query",
    "ddl_columns",
    "record_query",
    "session_conf",
    "read_state_stores",
    "WORK_MARKER",
    "OVERLOAD_SIGNS",
    "has_state_reader",
    "raising_frame",
    "engine_code_raised",
    "engine_failure",
    "release_ran",
    "reference_failure_is_engines",
    "StateUnreadable",
    "STATE_READER_SINCE",
]

FAILURES = ("task", "sink", "kill", "executor", "retry", "twice", "during-recovery")
#: The failures whose drivers are SIGKILLed and restarted by a supervising parent.
_KILLED = ("kill", "retry", "twice", "during-recovery")
OUTPUT_MODES = ("append", "update", "complete")
#: What Spark says when a Python worker it started did not connect back in time. Spark waits a fixed
#: 10 s for a worker started without its daemon (the driver-side runner of ``transformWithState`` in
#: pandas starts one); on an overloaded machine the worker's imports take longer. The machine's
#: fault, not the query's.
OVERLOAD_SIGNS = ("Python worker failed to connect back",
                  "Timed out while waiting for the Python worker to connect back")
#: A file that marks a work folder as rollcheck's (only such a folder is ever replaced).
WORK_MARKER = ".rollcheck-work"
#: Seconds a sink past its limit gets to stop before the recording gives up on it.
_SINK_GRACE_S = 10.0
#: State stores with at most this many rows are recorded row by row (else by digest only).
ROWS_IN_TRACE = 2000


# ----------------------------------------------------------------------------- the user's module
@dataclass
class UserQuery:
    """A loaded query module, its contract attributes checked."""

    spec: str
    module: ModuleType
    schema: str
    columns: list[str]
    output_mode: str
    key: list[str]
    #: seconds each call into the module may take (``--call-timeout``)
    call_timeout: float = DEFAULT_QUERY_CALL_TIMEOUT
    #: the module's ``SINK_GUARANTEE`` (``"exactly-once"`` when it declares none)
    sink_guarantee: str = "exactly-once"

    @property
    def has_sink(self) -> bool:
        return callable(getattr(self.module, "sink", None))

    def call(self, method: str, *args: Any, on_expire: Any = None) -> Any:
        """``module.method(*args)`` within :attr:`call_timeout` (else
        :class:`~rollcheck.pyimpl.errors.UserCodeTimeout` naming the file, the method, the limit)."""
        return call_limited(getattr(self.module, method), *args, limit=self.call_timeout, file=self.spec,
                            method=method, on_expire=on_expire)

    def batches(self, seed: int) -> list[list[tuple[Any, ...]]]:
        """The user's input, checked: a list of batches, each a list of rows of the schema's width."""
        try:
            data = self.call("batches", seed)
        except UserCodeTimeout:
            raise
        except Exception as e:  # the user's code: one clear line, no traceback
            raise InvalidInputError(f"batches({seed}) raised {type(e).__name__}: {e}", source=self.spec,
                                    location="batches") from None
        if not isinstance(data, list | tuple) or not data:
            raise InvalidInputError("batches(seed) must return a non-empty list of batches",
                                    source=self.spec, location="batches")
        out = []
        for b, rows in enumerate(data):
            if not isinstance(rows, list | tuple):
                raise InvalidInputError("a batch must be a list of rows", source=self.spec,
                                        location=f"batches(seed)[{b}]")
            for i, r in enumerate(rows):
                if not isinstance(r, list | tuple) or len(r) != len(self.columns):
                    raise InvalidInputError(f"a row must be a tuple of {len(self.columns)} values "
                                            f"({', '.join(self.columns)})", source=self.spec,
                                            location=f"batches(seed)[{b}][{i}]")
            out.append([tuple(r) for r in rows])
        return out


def ddl_columns(schema: str) -> list[str]:
    """The column names of a Spark DDL schema string (top-level commas only).

    Examples
    --------
    >>> ddl_columns("ts TIMESTAMP, `user id` STRING, s STRUCT<a: INT, b: INT>")
    ['ts', 'user id', 's']
    """
    parts: list[str] = []
    cur: list[str] = []
    depth = 0
    for ch in schema:
        if ch in "<(":
            depth += 1
        elif ch in ">)":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    names = []
    for p in parts:
        p = p.strip()
        if not p:
            raise InvalidInputError(f"empty column in SCHEMA {schema!r}", location="SCHEMA")
        if p.startswith("`"):
            end = p.find("`", 1)
            if end < 0:
                raise InvalidInputError(f"unbalanced backquote in SCHEMA {schema!r}", location="SCHEMA")
            names.append(p[1:end])
        else:
            names.append(p.replace(":", " ").split()[0])
    return names


def _import(spec: str) -> ModuleType:
    if spec.endswith(".py"):
        path = Path(spec)
        if not path.is_file():
            raise InvalidInputError("query module file not found", source=spec, location="--module")
        name = "rollcheck_user_query_" + hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:10]
        if name in sys.modules:
            return sys.modules[name]
        ispec = importlib.util.spec_from_file_location(name, path)
        assert ispec is not None and ispec.loader is not None
        mod = importlib.util.module_from_spec(ispec)
        sys.modules[name] = mod
        try:
            ispec.loader.exec_module(mod)
        except Exception as e:
            del sys.modules[name]
            raise InvalidInputError(f"cannot load the query module: {type(e).__name__}: {e}",
                                    source=spec, location="--module") from None
        return mod
    try:
        return importlib.import_module(spec)
    except ImportError as e:
        raise InvalidInputError(f"cannot import the query module: {e}", source=spec, location="--module") from None


def load_query(spec: str, call_timeout: float = DEFAULT_QUERY_CALL_TIMEOUT) -> UserQuery:
    """Load ``FILE.py`` or ``MODULE`` and check the contract (module docstring).

    Raises
    ------
    InvalidInputError
        Naming the module and the missing or malformed attribute.
    """
    mod = _import(spec)
    for name in ("SCHEMA", "batches", "query", "OUTPUT_MODE", "KEY"):
        if not hasattr(mod, name):
            raise InvalidInputError(f"the query module has no {name}", source=spec, location=name)
    if not isinstance(mod.SCHEMA, str) or not mod.SCHEMA.strip():
        raise InvalidInputError("SCHEMA must be a DDL string", source=spec, location="SCHEMA")
    for name in ("batches", "query"):
        if not callable(getattr(mod, name)):
            raise InvalidInputError(f"{name} must be a function", source=spec, location=name)
    if mod.OUTPUT_MODE not in OUTPUT_MODES:
        raise InvalidInputError(f"OUTPUT_MODE must be one of {OUTPUT_MODES}, got {mod.OUTPUT_MODE!r}",
                                source=spec, location="OUTPUT_MODE")
    key = mod.KEY
    if isinstance(key, str) or not isinstance(key, list | tuple) or not all(isinstance(k, str) for k in key):
        raise InvalidInputError("KEY must be a list of output column names", source=spec, location="KEY")
    has_sink, has_read = callable(getattr(mod, "sink", None)), callable(getattr(mod, "read_output", None))
    if has_sink != has_read:
        raise InvalidInputError("give sink and read_output together (rollcheck must read what your sink "
                                "wrote)", source=spec, location="sink" if has_sink else "read_output")
    cols = ddl_columns(mod.SCHEMA)
    from rollcheck.pyimpl.attribution import check_guarantee

    try:
        guarantee = check_guarantee(getattr(mod, "SINK_GUARANTEE", None))
    except ValueError as e:
        raise InvalidInputError(str(e), source=spec, location="SINK_GUARANTEE") from None
    if guarantee != "exactly-once" and not has_sink:
        raise InvalidInputError("SINK_GUARANTEE is about the module's own sink, and it has none (rollcheck's "
                                "default sink is exactly-once)", source=spec, location="SINK_GUARANTEE")
    return UserQuery(spec, mod, mod.SCHEMA, cols, mod.OUTPUT_MODE, list(key), check_limit(call_timeout),
                     guarantee)


# ----------------------------------------------------------------------------- configuration
@dataclass(frozen=True)
class QueryConfig:
    """Parameters of one recording (all of them go into the trace header)."""

    module: str
    batches: int | None = None
    seed: int = 0
    fail_at_batch: int | None = None
    failure: str | None = None
    master: str | None = None
    shuffle_partitions: int = 2
    max_attempts: int = 4
    reference: bool = True
    call_timeout: float = DEFAULT_QUERY_CALL_TIMEOUT
    state_store: str = "hdfs"  # killpoints.STATE_STORES
    kill_point: str | None = None  # killpoints.KILL_POINTS (with failure "kill")
    #: the pyspark release to record on (``releases.spark_environment``); None: the running one
    engine_version: str | None = None
    #: the release whose failure-free run the ``release-differential`` oracle compares with (with
    #: ``engine_version``; None: the pinned release)
    reference_version: str | None = None
    #: a cluster rollcheck starts for the recording (``cluster.CLUSTERS``: ``local-standalone``)
    cluster: str | None = None

    def validate(self, n_input: int | None = None) -> None:
        """Check the flags; with ``n_input`` (the number of input batches) also the batch."""
        check_limit(self.call_timeout)
        if self.batches is not None and self.batches < 1:
            raise InvalidInputError(f"need at least one batch, got {self.batches}", location="--batches")
        if (self.failure is None) != (self.fail_at_batch is None):
            raise InvalidInputError("give --fail-at-batch and --failure together", location="--failure")
        if self.failure is not None and self.failure not in FAILURES:
            raise InvalidInputError(f"unknown failure {self.failure!r}; use one of {FAILURES}",
                                    location="--failure")
        validate_options(self.failure, self.kill_point, self.state_store)  # killpoints.py
        validate_cluster(self.cluster, self.master)  # cluster.py
        if self.failure == "executor" and self.cluster is None and not on_cluster(self.master):
            raise InvalidInputError("the executor failure needs a cluster whose executors run on this machine: "
                                    "give --cluster local-standalone (or --master spark://HOST:PORT)",
                                    location="--cluster")
        if self.engine_version is not None:
            from rollcheck.spark_replay.releases import parse_release

            parse_release(self.engine_version)
        if self.reference_version is not None:
            from rollcheck.spark_replay.releases import parse_release

            try:
                parse_release(self.reference_version)
            except InvalidInputError as e:
                raise InvalidInputError(e.reason, location="--reference-version") from None
        if self.fail_at_batch is not None and self.fail_at_batch < 0:
            raise InvalidInputError("--fail-at-batch must be >= 0", location="--fail-at-batch")
        if n_input is not None and self.fail_at_batch is not None and self.fail_at_batch > n_input:
            # batch n_input may exist (a data-less batch that advances the watermark); beyond: never
            raise InvalidInputError(f"--fail-at-batch {self.fail_at_batch} is beyond the input: it has "
                                    f"{n_input} batches (ids 0..{n_input - 1}, plus at most one data-less "
                                    f"batch {n_input})", location="--fail-at-batch")


# ----------------------------------------------------------------------------- values
def _json_value(v: Any) -> Any:
    if isinstance(v, dt.datetime):
        if v.tzinfo is not None:
            v = v.astimezone(dt.UTC).replace(tzinfo=None)
        return v.strftime("%Y-%m-%dT%H:%M:%S.%f")
    if isinstance(v, dt.date):
        return v.isoformat()
    if isinstance(v, decimal.Decimal):
        return str(v)
    if isinstance(v, dict):
        return {str(k): _json_value(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_json_value(x) for x in v]
    return v


def plain(v: Any) -> Any:
    """A Spark value as JSON-able data: rows to dicts, timestamps to ISO strings (UTC).

    Examples
    --------
    >>> plain({"t": dt.datetime(2024, 1, 1, 0, 0, 5), "n": [1, (2, 3)]})
    {'t': '2024-01-01T00:00:05', 'n': [1, [2, 3]]}
    """
    if hasattr(v, "asDict"):
        return {k: plain(x) for k, x in v.asDict(recursive=False).items()}
    if isinstance(v, dt.datetime):
        return v.isoformat()
    if isinstance(v, dt.date):
        return v.isoformat()
    if isinstance(v, decimal.Decimal):
        return str(v)
    if isinstance(v, bytes | bytearray):
        return v.hex()
    if isinstance(v, dict):
        return {str(k): plain(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [plain(x) for x in v]
    return v


def _canon(x: Any) -> str:
    return json.dumps(x, sort_keys=True, separators=(",", ":"), default=str)


# ----------------------------------------------------------------------------- work folder
@dataclass
class _Paths:
    root: Path

    @property
    def inputs(self) -> Path:
        return self.root / "in"

    def checkpoint(self, ref: bool = False) -> Path:
        return self.root / ("ref-checkpoint" if ref else "checkpoint")

    def out(self, ref: bool = False) -> Path:
        return self.root / ("ref-out" if ref else "out")

    @property
    def markers(self) -> Path:
        return self.root / "markers"


def _prepare(root: Path, rows: list[list[tuple[Any, ...]]], columns: list[str]) -> _Paths:
    if root.exists():
        if not (root / WORK_MARKER).exists():
            raise InvalidInputError("the work folder exists and is not rollcheck's; remove it or choose "
                                    "another", source=str(root), location="--workdir")
        shutil.rmtree(root)
    paths = _Paths(root)
    root.mkdir(parents=True)
    (root / WORK_MARKER).write_text("rollcheck spark record query\n", encoding="utf-8")
    for d in (paths.inputs, paths.out(), paths.out(True), paths.markers):
        d.mkdir()
    base = time.time() - 3600  # strictly increasing modification times fix the file order
    for b, batch in enumerate(rows):
        f = paths.inputs / f"batch-{b:05d}.json"
        with open(f, "w", encoding="utf-8") as fh:
            for r in batch:
                fh.write(json.dumps(dict(zip(columns, map(_json_value, r), strict=True))) + "\n")
        os.utime(f, (base + b, base + b))
    return paths


# ----------------------------------------------------------------------------- Spark side
def _source(spark: Any, uq: UserQuery, paths: _Paths) -> Any:
    return (spark.readStream.schema(uq.schema).option("maxFilesPerTrigger", 1)
            .option("timestampFormat", "yyyy-MM-dd'T'HH:mm:ss.SSSSSS").option("mode", "FAILFAST")
            .json(str(paths.inputs)))


def _with_task_failure(df: Any, F: Any, marker: Path, batch: int) -> Any:
    """The input with a filter whose UDF raises in a task reading batch ``batch``'s file (once:
    the marker file is created exclusively)."""
    target = f"batch-{batch:05d}.json"
    mpath = str(marker)

    def inject(path):  # no type hints: PySpark 4 would read them as a pandas UDF
        if path and path.endswith(target):
            try:
                fd = os.open(mpath, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                return True
            os.write(fd, str(batch).encode())
            os.close(fd)
            raise RuntimeError(f"rollcheck: injected task failure in batch {batch}")
        return True

    return df.where(F.udf(inject, "boolean").asNondeterministic()(F.input_file_name()))


def _default_sink(rows: list[dict[str, Any]], batch_id: int, out_dir: str) -> None:
    """rollcheck's idempotent sink: the batch's rows replace ``batch-<id>.json`` atomically."""
    p = Path(out_dir) / f"batch-{batch_id:05d}.json"
    tmp = p.with_name("." + p.name + ".tmp")
    tmp.write_text(json.dumps(sorted(rows, key=_canon)), encoding="utf-8")
    os.replace(tmp, p)


def _default_read(out_dir: str) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for f in sorted(Path(out_dir).glob("batch-*.json")):
        rows.extend(json.loads(f.read_text(encoding="utf-8")))
    return rows


def _read_output(uq: UserQuery, out_dir: Path) -> list[dict[str, Any]]:
    if not uq.has_sink:
        return _default_read(str(out_dir))
    try:
        rows = uq.call("read_output", str(out_dir))
    except UserCodeTimeout:
        raise
    except Exception as e:
        raise InvalidInputError(f"read_output raised {type(e).__name__}: {e}", source=uq.spec,
                                location="read_output") from None
    if not isinstance(rows, list | tuple) or not all(isinstance(r, dict) for r in rows):
        raise InvalidInputError("read_output must return a list of dicts", source=uq.spec,
                                location="read_output")
    return [plain(r) for r in rows]


def read_state_stores(spark: Any, checkpoint: Path) -> dict[str, dict[str, Any]]:
    """Every state store of a checkpoint read with Spark's ``statestore`` reader, with the row
    count of the plain-Python decoder: ``{"<op>/<store>": {"count", "digest", "decoded", "rows"?}}``."""
    ck = CheckpointDir(checkpoint)
    if not ck.commits():
        return {}
    if not has_state_reader():
        return _decoded_state_stores(ck)
    meta = spark.read.format("state-metadata").load(str(checkpoint)).collect()
    out: dict[str, dict[str, Any]] = {}
    for m in meta:
        op, store = int(m["operatorId"]), str(m["stateStoreName"])
        props = m.asDict().get("operatorProperties")
        for var, options in spark_state_reads(props):  # transformWithState: one read per state variable
            df = (spark.read.format("statestore").option("operatorId", op).option("storeName", store)
                  .options(**options).load(str(checkpoint)))
            rows = df.select(*[c for c in df.columns if c != "partition_id"]).collect()
            canon = sorted(_canon([plain(x) for x in r]) for r in rows)
            # the plain decoder reads HDFS-backed files only; RocksDB state: Spark's reader alone
            decoded = (sum(len(p) for p in ck.state(op, store=store).values())
                       if ck.provider(op) == "hdfs" and not var else None)
            entry: dict[str, Any] = {"count": len(canon), "decoded": decoded,
                                     "digest": hashlib.sha256("\n".join(canon).encode()).hexdigest()}
            if len(canon) <= ROWS_IN_TRACE:
                entry["rows"] = canon
            out[f"{op}/{store}" + (f"/{var}" if var else "")] = entry
    return out


#: The first pyspark release with Spark's state data sources (``statestore``, ``state-metadata``).
STATE_READER_SINCE = (4, 0)


def has_state_reader() -> bool:
    """Whether the running pyspark has Spark's state data sources (4.0 on; 3.5 has none)."""
    import pyspark

    try:
        major, minor = (int(x) for x in pyspark.__version__.split(".")[:2])
    except ValueError:
        return True
    return (major, minor) >= STATE_READER_SINCE


class StateUnreadable(Exception):
    """The state of a checkpoint cannot be read on this release (the reason is the message)."""


def _decoded_state_stores(ck: CheckpointDir) -> dict[str, dict[str, Any]]:
    """Without Spark's state reader (pyspark < 4.0): every HDFS-backed store decoded by rollcheck's
    own reader (``checkpoint_reader``), in the same form; RocksDB state cannot be read here."""
    import pyspark

    out: dict[str, dict[str, Any]] = {}
    for op in sorted(ck.operators()):
        if ck.provider(op) != "hdfs":
            raise StateUnreadable(f"pyspark {pyspark.__version__} has no state data source (Spark's state "
                                  "reader exists from 4.0 on) and rollcheck decodes only the HDFS-backed "
                                  f"store's files; operator {op} keeps its state in RocksDB")
        for store in ck.stores(op):
            rows = [_canon([plain(x) for x in (*k, *v)])
                    for part in ck.state(op, store=store).values() for k, v in part.items()]
            canon = sorted(rows)
            entry: dict[str, Any] = {"count": len(canon), "decoded": None, "reader": "rollcheck",
                                     "digest": hashlib.sha256("\n".join(canon).encode()).hexdigest()}
            if len(canon) <= ROWS_IN_TRACE:
                entry["rows"] = canon
            out[f"{op}/{store}"] = entry
    return out


def _state_or_reason(spark: Any, checkpoint: Path) -> tuple[dict[str, dict[str, Any]], str | None,
                                                              dict[str, Any] | None]:
    """The checkpoint's state stores, or why they cannot be read: ``(stores, reason, failed)``.
    ``failed`` is Spark's own state reader failing on the engine's own checkpoint with the
    engine's exception (``spark.state_read_failed``: a finding, ``oracles.recovery_succeeded``),
    not rollcheck's error; a fault of the machine (a full disk) stays the machine's."""
    try:
        return read_state_stores(spark, checkpoint), None, None
    except StateUnreadable as e:
        return {}, str(e), None
    except (UserCodeTimeout, InvalidInputError):
        raise
    except Exception as e:
        fault = environment_fault(e, str(checkpoint))
        if fault is not None:
            raise fault from None
        failed = engine_failure(str(e) or type(e).__name__, str(checkpoint))
        return {}, (f"Spark's state reader failed on this checkpoint with the engine's exception "
                    f"{failed['exception']}: {failed['message']}"), failed


class _InjectedSinkFailure(RuntimeError):
    pass


def _request_kill(paths: _Paths) -> None:
    """Ask the supervising parent to SIGKILL this driver now (once per recording) and wait."""
    try:
        fd = os.open(paths.markers / "failed", os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return
    os.close(fd)
    request_kill(paths.markers)  # the parent SIGKILLs this driver and its JVM now


def _run_once(spark: Any, uq: UserQuery, cfg: QueryConfig, paths: _Paths, *, ref: bool,
              writer: TraceWriter | None, watcher: CheckpointWatcher | None,
              notes: dict[str, Any] | None = None) -> str:
    """One start of the query until it ends ("done") or fails with the injected failure
    ("failed"); any other failure of the query is the user's and ends the recording."""
    from pyspark.errors import StreamingQueryException
    from pyspark.sql import functions as F

    attempt = writer.attempt if writer is not None else 0
    failing = not ref and cfg.failure is not None
    marker = paths.markers / "failed"
    first_sink = [True]
    expired: list[UserCodeTimeout] = []
    expired_at: list[float] = []
    sink_raised: list[str] = []  # the user's sink raised: what, where (Spark's message loses it)

    def sink_expired() -> None:  # from the limit's timer: unblock a Spark action in the sink
        expired_at.append(time.monotonic())
        spark.sparkContext.cancelAllJobs()
    out_dir = paths.out(ref)
    ck = paths.checkpoint(ref)
    if writer is not None:
        commits = sorted(CheckpointDir(ck).commits()) if ck.is_dir() else []
        writer.emit(PREFIX + "attempt_start", pid=os.getpid(), committed=commits)
    df = _source(spark, uq, paths)
    if failing and cfg.failure == "task":
        df = _with_task_failure(df, F, marker, int(cfg.fail_at_batch))  # type: ignore[arg-type]
    if failing and cfg.failure == "during-recovery" and marker.exists() and not (paths.markers / SECOND_KILL).exists():
        # the restarted driver: killed in batch K's first stage, before its stateful stage loads any state
        hold = recovery_kill_filter(paths.markers, int(cfg.fail_at_batch))  # type: ignore[arg-type]
        df = df.where(F.udf(hold, "boolean").asNondeterministic()(F.input_file_name()))
    try:
        result = uq.call("query", df)
    except UserCodeTimeout:
        raise
    except Exception as e:
        raise InvalidInputError(f"query(df) raised {type(e).__name__}: {e}", source=uq.spec,
                                location="query") from None
    if not getattr(result, "isStreaming", False):
        raise InvalidInputError("query(df) must return a streaming DataFrame", source=uq.spec,
                                location="query")
    if notes is not None and "stream_plan" not in notes:
        try:  # what the oracles read: event-time column, operators (oracles.analyse_plan)
            notes["stream_plan"] = str(result._jdf.queryExecution().analyzed().toString())
            notes["stream_fields"] = [{"name": f.name, "type": f.dataType.simpleString(),
                                       "metadata": dict(f.metadata or {})} for f in result.schema.fields]
        except Exception:
            notes["stream_plan"] = ""
    if watcher is not None:
        watcher.poll_now()
        watcher.start()

    def sink(bdf: Any, bid: int) -> None:
        # the retry failure collects batch K through a task that fails once after its state store
        # committed (killpoints.retry_task); uncached, so that Spark's retry runs the stateful operator again
        retrying = (failing and cfg.failure == "retry" and cfg.fail_at_batch == bid
                    and not (paths.markers / RETRY_FAILED).exists())
        # The recorder keeps the rows handed to the sink; the default sink writes the same rows
        # (one Spark action). Only a user's sink next to the recorder reads the batch twice: cache it.
        twice = writer is not None and uq.has_sink and not retrying
        if twice:
            bdf.persist()
        try:
            # collecting runs the batch: its state stores commit their new versions now
            if retrying:
                rows = [plain(r) for r in bdf.rdd.mapPartitions(retry_task(paths.markers, ck, bid)).collect()]
                if writer is not None:  # the failed attempt and the attempts that ran to their end
                    writer.emit("failure", processes=["driver"], batch=bid, mode="retry",
                                stateful=(ck / "state").is_dir(), **retry_facts(paths.markers))
            else:
                rows = [plain(r) for r in bdf.collect()] if (writer is not None or not uq.has_sink) else []
            if failing and cfg.failure == "executor" and cfg.fail_at_batch == bid and not marker.exists():
                marker.write_text(str(bid), encoding="utf-8")  # once: the state stores of batch K committed
                struck = strike_executor(spark)  # cluster.py: one executor JVM SIGKILLed, seen removed
                if writer is not None:  # an engine-level failure: no process of the trace's model (the driver) failed
                    writer.emit(PREFIX + "failure", batch=bid, mode="executor", kill_point="state",
                                checkpoint_logs=checkpoint_logs(ck), state_files=state_files_of_version(ck, bid + 1),
                                **struck)
            if watcher is not None:
                watcher.poll_now()
            if writer is not None and first_sink[0] and attempt > 1:
                writer.emit(PREFIX + "restart", resume_batch=bid,
                            restored_versions=watcher.restored_versions() if watcher else {})
            first_sink[0] = False
            if failing and cfg.failure == "kill" and cfg.kill_point == "state" and cfg.fail_at_batch == bid:
                _request_kill(paths)  # kill point "state": the batch ran (state committed), sink not yet
            if uq.has_sink:
                try:
                    uq.call("sink", bdf, bid, str(out_dir), on_expire=sink_expired)
                except UserCodeTimeout as e:
                    expired.append(e)  # Spark reports the sink's failure as the query's: say why
                    raise
                except Exception as e:
                    if not sink_raised:
                        sink_raised.append(_user_exception("sink", bid, e, uq.spec))
                    raise
            else:
                _default_sink(rows, bid, str(out_dir))
        finally:
            if twice:
                bdf.unpersist()
        if writer is not None:
            writer.emit(PREFIX + "sink_written", batch=bid, rows=rows)
        if failing and cfg.fail_at_batch == bid and cfg.failure == "kill" and cfg.kill_point in (None, "sink"):
            _request_kill(paths)  # kill point "sink" (the default): the parent records the kill
        if failing and cfg.fail_at_batch == bid and cfg.failure in SECOND_FAILURES:
            if cfg.failure == "twice" and marker.exists():  # the restarted driver wrote batch K again: once more
                try:
                    fd = os.open(paths.markers / SECOND_KILL, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
                except FileExistsError:
                    pass
                else:
                    os.close(fd)
                    request_kill(paths.markers)
            _request_kill(paths)  # the first kill, after the sink wrote batch K (once: the marker)
        if failing and cfg.failure == "retry" and (paths.markers / RETRY_FAILED).exists() \
                and bid == retry_restart_batch(int(cfg.fail_at_batch or 0), len(list(paths.inputs.glob("batch-*.json")))):
            try:  # after the next batch: a new driver restarts from the checkpoint (the retried state reloads)
                fd = os.open(paths.markers / RETRY_RESTART, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                pass
            else:
                os.close(fd)
                request_kill(paths.markers)
        if failing and cfg.fail_at_batch == bid and cfg.failure == "sink":
            try:
                fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                return
            os.close(fd)
            if writer is not None:
                writer.emit("failure", processes=["driver"], batch=bid, mode=cfg.failure)
            raise _InjectedSinkFailure(f"rollcheck: injected sink failure in batch {bid}")

    writer_ = (result.writeStream.outputMode(uq.output_mode).option("checkpointLocation", str(ck))
               .foreachBatch(sink).trigger(availableNow=True))
    try:
        q = writer_.start()
    except Exception as e:
        if watcher is not None:
            watcher.stop()
        fault = environment_fault(e, str(paths.root))
        if fault is not None:
            raise fault from None
        raise InvalidInputError(f"Spark refused the query: {type(e).__name__}: {str(e).splitlines()[0]}",
                                source=uq.spec, location="query") from None
    outcome = "done"
    error: str | None = None
    error_text = ""
    try:
        # a sink past its limit normally fails the query at once; one stuck in C code cannot be
        # stopped in this process: give up on it after a grace period (a driver child is killed)
        while not q.awaitTermination(0.5):
            if expired_at and time.monotonic() - expired_at[0] > _SINK_GRACE_S:
                give_up_on_user_code(UserCodeTimeout(uq.spec, "sink", uq.call_timeout))
    except StreamingQueryException as e:
        if expired:
            raise expired[0] from None
        injected = failing and marker.exists() and not (paths.markers / "recovered").exists()
        if injected:
            outcome = "failed"
            (paths.markers / "recovered").write_text("1", encoding="utf-8")
        else:
            fault = environment_fault(e, str(paths.root))
            if fault is not None:  # a full disk is the machine's, not the query's
                raise fault from None
            outcome = "error"
            error = str(e).splitlines()[0] if str(e) else type(e).__name__
            error_text = str(e)
    finally:
        if watcher is not None:
            watcher.stop()
    progress = _progress_of(q)
    if notes is not None:
        notes.setdefault("progress", []).extend(progress)
    if writer is not None:
        for p in progress:  # the watermark Spark reported in force per batch (the oracles read it)
            writer.emit(PREFIX + "progress", **p)
    if writer is not None and failing and cfg.failure == "task" and notes is not None \
            and not notes.get("plan"):
        try:  # the physical plan that ran: the injection is in it (evidence, not a requirement)
            notes["plan"] = q._jsq.explainInternal(False)
            writer.emit(PREFIX + "plan", physical=notes["plan"])
        except Exception:
            pass
    if outcome == "failed" and cfg.failure == "task" and writer is not None:
        # the batch Spark was running: the first planned batch that did not commit
        c = CheckpointDir(ck)
        pending = sorted(set(c.offsets()) - set(c.commits()))
        writer.emit("failure", processes=["driver"], batch=pending[0] if pending else None, mode="task")
    if outcome == "done" and writer is not None and attempt > 1 and first_sink[0]:
        writer.emit(PREFIX + "restart", resume_batch=None, restored_versions={})
    if outcome == "error":
        if writer is not None:
            writer.emit(PREFIX + "query_error", message=error)
        restarted = failing and ((paths.markers / "recovered").exists()
                                 or (cfg.failure in _KILLED and attempt > 1))
        overloaded = any(sign in str(error) for sign in OVERLOAD_SIGNS)  # the machine's, not the engine's
        if writer is not None and restarted and not sink_raised and not overloaded \
                and engine_code_raised(error_text, uq):
            # the restart from the engine's own checkpoint failed with the engine's exception: a
            # finding against the engine (oracles.recovery_succeeded), not the query's fault
            failed = engine_failure(error_text, str(ck))  # the specific exception and its root cause
            writer.emit(PREFIX + "recovery_failed", checkpoint=str(ck), message=failed["message"],
                        exception=failed["exception"], cause=failed["cause"], user_code=False)
            return "recovery_failed"
        if ref and notes is not None and reference_failure_is_engines(
                error_text, uq, release_ok=bool(notes.get("release_ok")), sink_raised=bool(sink_raised),
                overloaded=overloaded):
            # fails on the release under test, ran on the reference release: the engine's
            # (oracles.release_differential), not the module's
            notes["reference_failed"] = engine_failure(error_text, str(ck))
            return "reference_failed"
        if sink_raised:
            raise InvalidInputError(sink_raised[0], source=uq.spec, location="sink")
        if any(sign in str(error) for sign in OVERLOAD_SIGNS):
            raise InvalidInputError(f"not the query's failure: Spark's Python worker did not connect back within "
                                    f"Spark's fixed 10 s (the machine is overloaded; run fewer jobs at once): "
                                    f"{error}", source=uq.spec, location="environment")
        raise InvalidInputError(f"the query failed on its own (not an injected failure): {error}",
                                source=uq.spec, location="query")
    return outcome


def _progress_of(q: Any) -> list[dict[str, Any]]:
    """The query's progress reports (Spark's ``recentProgress``, read from the JVM: the same on
    every release): per batch the input rows, the watermark in force and the rows dropped as late."""
    out: list[dict[str, Any]] = []
    try:
        items = [json.loads(p.json()) for p in q._jsq.recentProgress()]
    except Exception:
        return out
    for d in items:
        et = d.get("eventTime") or {}
        wm = et.get("watermark")
        out.append({"batch": int(d.get("batchId", -1)), "input_rows": int(d.get("numInputRows") or 0),
                    "watermark": wm, "watermark_ms": _iso_ms(wm),
                    "late_rows_dropped": sum(int(op.get("numRowsDroppedByWatermark") or 0)
                                             for op in d.get("stateOperators") or [])})
    return out


def _iso_ms(v: Any) -> int | None:
    """``"2024-05-01T12:00:10.000Z"`` -> epoch milliseconds.

    Examples
    --------
    >>> _iso_ms("1970-01-01T00:00:02.500Z"), _iso_ms(None)
    (2500, None)
    """
    if not isinstance(v, str) or not v:
        return None
    try:
        t = dt.datetime.fromisoformat(v.replace("Z", "+00:00"))
    except ValueError:
        return None
    if t.tzinfo is None:
        t = t.replace(tzinfo=dt.UTC)
    return int(round(t.timestamp() * 1000))


def _exception_name(text: str) -> str:
    """The engine's exception class (or error class) named in a query failure's message."""
    for pat in (r"\[([A-Z][A-Z0-9_.]+)\]", r"((?:[a-z]+\.)+[A-Z]\w*(?:Exception|Error))"):
        m = re.search(pat, text)
        if m:
            return m.group(1)
    return "StreamingQueryException"


def _user_code_raised(text: str, uq: UserQuery) -> bool:
    """Whether the failure's traceback runs through the user's module (their code raised)."""
    spec = uq.spec
    names = {os.path.abspath(spec), os.path.basename(spec)} if spec.endswith(".py") else {spec.replace(".", "/")}
    return any(f'File "{n}' in text or (n in text and "PythonException" in text) for n in names)


_FRAME = re.compile(r'File "([^"]+)", line \d+')
_CAUSE = re.compile(r"Caused by: ((?:[a-zA-Z_$][\w$]*\.)+[A-Z][\w$]*)(?:: ?(.*))?")


def raising_frame(text: str) -> str | None:
    """The file of the innermost Python frame in a failure's text (the code that raised), if any.

    Examples
    --------
    >>> raising_frame('Traceback:\\n  File "/u/q.py", line 3, in f\\n  File "/x/pyspark/sql/state.py", line 9')
    '/x/pyspark/sql/state.py'
    >>> raising_frame("java.util.NoSuchElementException: None.get") is None
    True
    """
    frames = _FRAME.findall(text.replace("\\n", "\n"))
    return frames[-1] if frames else None


def engine_code_raised(text: str, uq: UserQuery) -> bool:
    """Whether a query failure is the engine's: no frame of the user's module in its traceback (an
    exception of Spark's plan), or the innermost Python frame lies in pyspark's own package (an
    exception of pyspark's code the user's function called, e.g. ``GroupState``)."""
    if not _user_code_raised(text, uq):
        return True
    frame = raising_frame(text)
    return frame is not None and f"{os.sep}pyspark{os.sep}" in frame


def engine_failure(text: str, checkpoint: str) -> dict[str, Any]:
    """The record of an engine exception: ``{"checkpoint", "exception", "message", "cause"}``
    (``cause``: the root ``Caused by:`` of the JVM's trace, where there is one).

    Examples
    --------
    >>> f = engine_failure("org.apache.spark.SparkException: [CANNOT_LOAD_STATE_STORE] x\\n"
    ...                    "Caused by: java.lang.NumberFormatException: For input string: \\")\\"", "/ck")
    >>> f["exception"], f["cause"]
    ('CANNOT_LOAD_STATE_STORE', 'java.lang.NumberFormatException: For input string: ")"')
    """
    causes = _CAUSE.findall(text)
    cause = None
    if causes:
        name, msg = causes[-1]
        cause = f"{name}: {msg.strip()}" if msg and msg.strip() else name
    classes = [c for c in re.findall(r"\[([A-Z][A-Z0-9_.]+)\]", text) if c not in _WRAPPERS]
    java = re.findall(r"((?:[a-z][a-z0-9_]*\.)+[A-Z]\w*(?:Exception|Error))", text)
    specific = [j for j in java if j not in _WRAPPERS]
    exception = (classes or specific or java or [_exception_name(text)])[0]
    lines = [ln.strip().lstrip(": ") for ln in text.replace("\\n", "\n").splitlines() if ln.strip().lstrip(": ")]
    message = next((ln for ln in lines if exception in ln), lines[0] if lines else "?")
    return {"checkpoint": checkpoint, "exception": exception, "message": message[:2000], "cause": cause}


#: Exceptions that only carry another (the query's failure, py4j's call, the Python worker's).
_WRAPPERS = frozenset({"STREAM_FAILED", "org.apache.spark.SparkException", "py4j.protocol.Py4JJavaError",
                       "org.apache.spark.sql.streaming.StreamingQueryException",
                       "pyspark.errors.exceptions.captured.StreamingQueryException",
                       "pyspark.errors.exceptions.captured.PythonException",
                       "org.apache.spark.api.python.PythonException"})


def release_ran(previous: list[dict[str, Any]]) -> bool:
    """Whether the trace so far holds the reference release's failure-free run with its output
    (``spark.release_reference``: that release ran the module to its end)."""
    return any(e.get("kind") == PREFIX + "release_reference" and e.get("output") is not None for e in previous)


def reference_failure_is_engines(error_text: str, uq: UserQuery, *, release_ok: bool, sink_raised: bool,
                                 overloaded: bool) -> bool:
    """Whether the failure-free run's own failure is a finding against the engine: the reference
    release ran the same module to its end (``release_ok``), and the exception is the engine's
    (:func:`engine_code_raised`), not the user's sink's nor the overloaded machine's. Otherwise it
    stays the module's own failure (exit 2): a module that fails everywhere is the user's."""
    return release_ok and not sink_raised and not overloaded and engine_code_raised(error_text, uq)


def _user_exception(method: str, batch_id: int, e: BaseException, spec: str) -> str:
    """One line naming the user's ``method``, the line of the module it raised at, the exception.

    Examples
    --------
    >>> try:
    ...     {}["ledger"]
    ... except KeyError as e:
    ...     _user_exception("sink", 2, e, "q.py")
    "sink(batch_df, 2, out_dir) raised KeyError: 'ledger'"
    """
    import traceback

    stem = os.path.splitext(os.path.abspath(spec))[0]
    frames = [f for f in traceback.extract_tb(e.__traceback__)
              if os.path.splitext(os.path.abspath(f.filename))[0] == stem]
    where = f" at line {frames[-1].lineno} ({frames[-1].name})" if frames else ""
    return f"{method}(batch_df, {batch_id}, out_dir) raised {type(e).__name__}: {e}{where}"


def _reference(spark: Any, uq: UserQuery, cfg: QueryConfig, paths: _Paths, writer: TraceWriter) -> float | None:
    """The failure-free run on this release; None when it failed with the engine's exception while
    the reference release ran it to its end (``spark.reference_failed``, a finding)."""
    import pyspark

    t0 = time.perf_counter()
    notes: dict[str, Any] = {"release_ok": release_ran(writer.previous)}
    outcome = _run_once(spark, uq, cfg, paths, ref=True, writer=None, watcher=None, notes=notes)
    seconds = time.perf_counter() - t0
    ck = CheckpointDir(paths.checkpoint(True))
    if outcome == "reference_failed":
        writer.emit(PREFIX + "reference_failed", engine_version=pyspark.__version__,
                    batches=sorted(ck.commits()) if paths.checkpoint(True).is_dir() else [],
                    seconds=round(seconds, 3), **notes["reference_failed"])
        writer.emit("end", status="reference-failed")
        return None
    state, unreadable, read_failed = _state_or_reason(spark, paths.checkpoint(True))
    if read_failed is not None:
        writer.emit(PREFIX + "state_read_failed", run="reference", engine_version=pyspark.__version__,
                    **read_failed)
    writer.emit(PREFIX + "reference", output=_read_output(uq, paths.out(True)), state=state,
                batches=sorted(ck.commits()), seconds=round(seconds, 3),
                **({"state_unreadable": unreadable} if unreadable else {}))
    writer.emit(PREFIX + "batch_evaluation", run="reference",
                **_batch_evaluation(spark, uq, cfg, paths.checkpoint(True), notes.get("progress", []),
                                    notes.get("stream_plan", ""), notes.get("stream_fields")))
    return seconds


def _batch_evaluation(spark: Any, uq: UserQuery, cfg: QueryConfig, checkpoint: Path,
                      progress: list[dict[str, Any]], plan: str,
                      stream_fields: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The query as a batch job over the run's on-time input (:func:`oracles.evaluate_batch`), in
    this session: the watermark in force per batch as Spark reported it in its progress, else as
    its offset log holds it (a killed driver's progress is lost with it)."""
    from rollcheck.spark_replay.oracles import evaluate_batch

    t0 = time.perf_counter()
    rows = uq.batches(cfg.seed)
    if cfg.batches is not None:
        rows = rows[: cfg.batches]
    wm: dict[int, int] = {}
    source: dict[str, str] = {}
    for b, entry in CheckpointDir(checkpoint).offsets().items():
        w = (entry.get("metadata") or {}).get("batchWatermarkMs")
        if w is not None:
            wm[b], source[str(b)] = int(w), "offset-log"
    for p in progress:
        if p.get("watermark_ms") is not None and p.get("batch", -1) >= 0:
            wm[int(p["batch"])], source[str(p["batch"])] = int(p["watermark_ms"]), "progress"
    res = evaluate_batch(lambda df: uq.call("query", df), spark, uq.schema, uq.columns, rows, wm, plan, plain)
    return {**res, "stream_fields": stream_fields or [], "watermark_source": source,
            "seconds": round(time.perf_counter() - t0, 3)}


def _finish(spark: Any, uq: UserQuery, cfg: QueryConfig, paths: _Paths, writer: TraceWriter,
            notes: dict[str, Any]) -> None:
    writer.emit(PREFIX + "output_final", rows=_read_output(uq, paths.out()))
    stores, unreadable, read_failed = _state_or_reason(spark, paths.checkpoint())
    if read_failed is not None:
        import pyspark

        writer.emit(PREFIX + "state_read_failed", run="final", engine_version=pyspark.__version__, **read_failed)
    writer.emit(PREFIX + "state_final", stores=stores, **({"unreadable": unreadable} if unreadable else {}))
    progress = [e for e in writer.previous if e.get("kind") == PREFIX + "progress"] + notes.get("progress", [])
    writer.emit(PREFIX + "batch_evaluation", run="final",
                **_batch_evaluation(spark, uq, cfg, paths.checkpoint(), progress, notes.get("stream_plan", ""),
                                    notes.get("stream_fields")))
    writer.emit("end", status="done")


def session_conf(state_store: str = "hdfs") -> dict[str, Any]:
    """The Spark settings a recording needs (UTC session time zone, frequent state maintenance,
    the state store provider)."""
    return {"spark.sql.session.timeZone": "UTC",
            "spark.sql.streaming.stateStore.maintenanceInterval": "1s", **state_store_conf(state_store)}


def _drive(cfg: QueryConfig, paths: _Paths, trace: Path, header: dict[str, Any], *, single_attempt: bool,
           with_reference: bool, enabled: bool = True, spark: Any = None) -> dict[str, Any]:
    """Run (reference and) attempts in one Spark session (``spark``, or a new one); return the
    status and timings."""
    from rollcheck.spark_replay.session import spark_session

    uq = load_query(cfg.module, cfg.call_timeout)
    _register_by_value(uq)
    _check_release(header)
    writer = TraceWriter(trace, header, enabled=enabled)
    status, ref_s, attempts_s = "failed", None, []
    try:
        with contextlib.ExitStack() as stack:
            if spark is None:
                spark = stack.enter_context(spark_session(
                    _master(cfg), app_name="rollcheck-query", shuffle_partitions=cfg.shuffle_partitions,
                    conf={**session_conf(cfg.state_store), **cluster_conf(cfg.master)}))
            else:
                for k, v in session_conf(cfg.state_store).items():
                    spark.conf.set(k, str(v))
                spark.conf.set("spark.sql.shuffle.partitions", str(cfg.shuffle_partitions))
            _quiet(spark)
            if with_reference:
                t_ref = time.perf_counter()
                ref_s = _reference(spark, uq, cfg, paths, writer)
                if ref_s is None:  # failed on this release only: the engine's (spark.reference_failed)
                    return {"status": "reference-failed", "reference_seconds": round(time.perf_counter() - t_ref, 3),
                            "attempt_seconds": []}
            watcher = (CheckpointWatcher(paths.checkpoint(), writer, writer.previous, provider=cfg.state_store)
                       if enabled else None)
            notes: dict[str, Any] = {}
            for n in range(1 if single_attempt else cfg.max_attempts):
                if n > 0:
                    writer.attempt += 1
                    if watcher is not None:
                        watcher.new_attempt()
                t0 = time.perf_counter()
                outcome = _run_once(spark, uq, cfg, paths, ref=False, writer=writer if enabled else None,
                                    watcher=watcher, notes=notes)
                attempts_s.append(time.perf_counter() - t0)
                if outcome == "done":
                    if enabled:
                        _finish(spark, uq, cfg, paths, writer, notes)
                    status = "done"
                    break
                if outcome == "recovery_failed":  # the engine could not restart (oracles.py)
                    writer.emit(PREFIX + "output_final", rows=_read_output(uq, paths.out()))
                    writer.emit("end", status="recovery-failed")
                    status = "recovery-failed"
                    break
    finally:
        writer.close()
    return {"status": status, "reference_seconds": None if ref_s is None else round(ref_s, 3),
            "attempt_seconds": [round(x, 3) for x in attempts_s]}


def _master(cfg: QueryConfig) -> str | None:
    """The driver's master: the retry failure needs task retries, which local mode allows only
    when asked (``local[N,F]``: F attempts per task; a cluster allows 4, ``spark.task.maxFailures``).

    >>> _master(QueryConfig("q.py", failure="retry", fail_at_batch=1)), _master(QueryConfig("q.py"))
    ('local[2,4]', None)
    """
    if cfg.failure != "retry" or on_cluster(cfg.master):
        return cfg.master
    from rollcheck.spark_replay.session import DEFAULT_MASTER

    m = cfg.master or os.environ.get("ROLLCHECK_SPARK_MASTER") or DEFAULT_MASTER
    hit = re.fullmatch(r"local(?:\[(\d+|\*)\])?", m)
    return f"local[{hit.group(1) or 1},4]" if hit else m


@contextlib.contextmanager
def _cluster(cfg: QueryConfig, root: Path) -> Any:
    """The recording's cluster (``--cluster local-standalone``: started here, stopped at the end,
    its JVMs dying with rollcheck): yields the configuration the drivers run with."""
    if cfg.cluster is None:
        yield cfg
        return
    from rollcheck.spark_replay.cluster import LocalStandaloneCluster

    with LocalStandaloneCluster(root=root / "cluster") as c:
        yield replace(cfg, master=c.master_url, cluster=None)


def _check_release(header: dict[str, Any]) -> None:
    """The driver runs the release the trace header names (else the environment is broken)."""
    import pyspark

    want = header.get("engine_version")
    if want is not None and pyspark.__version__ != want:
        raise InvalidInputError(f"this driver runs pyspark {pyspark.__version__}, the recording asked for "
                                f"{want} ({sys.executable})", location="--engine-version")


def _register_by_value(uq: UserQuery) -> None:
    """Ship the user's functions to the Python workers by value (a file module is not importable
    there)."""
    from pyspark import cloudpickle

    try:
        cloudpickle.register_pickle_by_value(uq.module)
    except ValueError:  # a module of the standard library or already registered
        pass


def _quiet(spark: Any) -> None:
    import logging

    logging.getLogger("py4j").setLevel(logging.CRITICAL)
    spark.sparkContext.setLogLevel("OFF")


def record_query(cfg: QueryConfig, out: str | Path, *, workdir: str | Path | None = None,
                 enabled: bool = True, spark: Any = None,
                 reference_from: str | Path | None = None) -> dict[str, Any]:
    """Record the user's query: a failure-free reference run, then the run with the failure.

    Parameters
    ----------
    cfg : QueryConfig
        The module, the failure and the Spark settings.
    out : path
        The trace file (``rollcheck.trace/1``) to write: recorded as ``OUT.partial`` and renamed
        when the run ends (an interrupted run leaves an existing ``OUT`` as it was).
    workdir : path, optional
        The folder for the input files, checkpoints and outputs (default: ``<out>.work`` next to
        the trace); kept afterwards. An existing folder is replaced only if it is rollcheck's.
    enabled : bool
        False runs the same query without recording (the overhead baseline of the benchmark).
    spark : SparkSession, optional
        Run in this session (``task`` and ``sink`` failures only; ``kill`` always starts its own
        driver processes). Several recordings can so share one JVM. Without it every driver is a
        child process (:mod:`rollcheck.spark_replay.supervise`) whose process group dies with
        rollcheck, and a call into the user's code past ``cfg.call_timeout`` that cannot be
        stopped in place ends with that group; in the caller's session it is stopped as far as
        Python allows (an exception in the calling thread, the running Spark jobs cancelled).
    reference_from : path, optional
        A failure-free recording of the same query (module, seed, batches, state store) whose
        final output and state serve as this run's reference instead of a reference run of its
        own (:func:`rollcheck.spark_replay.shared_reference.shared_reference`; the matrix runs it once per
        configuration).

    Returns
    -------
    dict
        ``trace``, ``checkpoint`` (the kept checkpoint folder), ``seconds`` (the whole recording),
        ``reference_seconds``, ``attempt_seconds``, ``status``, ``batches``, ``children``.

    Examples
    --------
    See ``docs/your-query.md``; the library of queries in ``tests/queries`` is recorded by
    ``tests/test_spark_query.py``.
    """
    cfg.validate()
    if reference_from is not None:
        cfg = replace(cfg, reference=False)
    uq = load_query(cfg.module, cfg.call_timeout)
    rows = uq.batches(cfg.seed)
    if cfg.batches is not None:
        rows = rows[: cfg.batches]
    cfg.validate(len(rows))
    out = Path(out)
    root = Path(workdir) if workdir is not None else out.with_name(out.name + ".work")
    # the release: made once into rollcheck's cache (releases.py); the pinned one runs here
    python = spark_environment(cfg.engine_version)
    release = cfg.engine_version or pinned_release()
    other = cfg.reference_version or pinned_release()
    event_time = getattr(uq.module, "EVENT_TIME", None)  # the append oracle's event-time bound
    if event_time is not None and (not isinstance(event_time, str) or not event_time.strip()):
        raise InvalidInputError("EVENT_TIME must name the output column that carries a row's event-time bound",
                                source=uq.spec, location="EVENT_TIME")
    paths = _prepare(root, rows, uq.columns)
    release_ref = None
    if enabled and cfg.engine_version is not None and other != release and reference_from is not None:
        from rollcheck.spark_replay.trace import read_trace

        # a shared reference recorded with the same releases carries R's run: reuse it (the matrix)
        release_ref = next((dict(e) for e in read_trace(reference_from).of_kind(PREFIX + "release_reference")
                            if e.get("engine_version") == other), None)
        if release_ref is not None:
            for k in ("seq", "kind", "run", "attempt", "t", "_line"):
                release_ref.pop(k, None)
    if enabled and cfg.engine_version is not None and other != release and release_ref is None \
            and (cfg.reference or reference_from is not None):
        with environment_guard(root):  # oracles.release_differential: the failure-free run on R
            release_ref = _release_reference(cfg, other, root / f"release-{other}", rows, uq.columns)
    header = {"source": "spark", "job": "query", "seed": cfg.seed, "processes": ["driver"],
              "engine_version": release,
              "config": {**asdict(cfg), "engine_version": release,
                         "reference_version": other if cfg.engine_version is not None else None,
                         "event_time": event_time, "key": uq.key, "output_mode": uq.output_mode, "schema": uq.schema,
                         "user_sink": uq.has_sink, "sink_guarantee": uq.sink_guarantee, "input_batches": len(rows),
                         "input_rows": sum(len(b) for b in rows)}}
    # OUT.partial until the run ends (then renamed); a refused query leaves no fragment, an
    # interrupted run leaves OUT as it was (pyimpl.partialfile)
    with partial_output(out) as partial, environment_guard(root):
        if reference_from is not None and enabled:  # matrix.py: the configuration's shared reference
            from rollcheck.spark_replay.shared_reference import write_shared_reference

            write_shared_reference(reference_from, partial, header)
        if release_ref is not None:  # before the recording's own attempts (as attempt 0)
            w = TraceWriter(partial, header)
            try:
                w.attempt = 0
                w.emit(PREFIX + "release_reference", **release_ref)
            finally:
                w.close()
        with _cluster(cfg, root) as run_cfg:  # cluster.py
            res = _record(run_cfg, partial, root, paths, header, enabled, spark, len(rows), python)
    return {**res, "trace": str(out), "engine_version": release}


def _record(cfg: QueryConfig, out: Path, root: Path, paths: _Paths, header: dict[str, Any], enabled: bool,
            spark: Any, n_rows: int, python: Path | None = None) -> dict[str, Any]:
    t0 = time.perf_counter()
    children = 0
    here = python is None or Path(python) == Path(sys.executable)  # the running release
    if cfg.failure not in _KILLED and spark is not None and here:  # in the caller's session
        res = _drive(cfg, paths, out, header, single_attempt=False, with_reference=cfg.reference,
                     enabled=enabled, spark=spark)
    else:
        # Driver children (spark_replay.supervise): a kill needs them, and without a session of
        # the caller's the user's code runs there too, so that a call past its limit that cannot
        # be stopped in place (a sink blocked in C code) ends with the child's process group.
        kill = cfg.failure in _KILLED  # retry: the driver is restarted after the next batch
        res = {"status": "failed", "reference_seconds": None, "attempt_seconds": []}
        if enabled:
            TraceWriter(out, header).close()
        # a kill strikes only in kill mode (batch None: the supervisor only waits)
        at = cfg.fail_at_batch if kill else None
        if cfg.failure == "retry" and at is not None:
            at = retry_restart_batch(at, n_rows)
        supervisor = KillSupervisor(paths.checkpoint(), paths.markers, at, cfg.kill_point or "sink")
        for k in range(cfg.max_attempts if kill else 1):
            children += 1
            spec = {"cfg": asdict(cfg), "root": str(root), "trace": str(out), "header": header,
                    "reference": k == 0 and cfg.reference, "enabled": enabled, "single_attempt": kill}
            run = run_driver("rollcheck.spark_replay.query", spec, workdir=root, n=children,
                             markers=paths.markers, watch=supervisor.watch,  # killpoints.py strikes
                             python=None if here else python,
                             env=None if here else child_environment(python or sys.executable))
            if run.killed:
                if not kill:
                    raise RuntimeError("the Spark driver was killed from outside")
                fired = supervisor.take()
                second = cfg.failure in SECOND_FAILURES and (paths.markers / SECOND_KILL).exists()
                if fired is not None and enabled:  # what the checkpoint logs held at the kill
                    if second and cfg.failure == "during-recovery":
                        fired = {**fired, "kill_point": "recovery"}
                    record_kill(out, paths.checkpoint(), fired, mode=str(cfg.failure) if second else "kill")
                res["attempt_seconds"].append(round(run.seconds, 3))
                continue
            child = run.reply
            res["status"] = child.get("status", "failed")
            if child.get("reference_seconds") is not None:
                res["reference_seconds"] = child["reference_seconds"]
            res["attempt_seconds"] += child.get("attempt_seconds", [])
            if res["status"] in ("done", "recovery-failed", "reference-failed"):
                break
    if res["reference_seconds"] is None and enabled and out.exists():
        from rollcheck.spark_replay.trace import read_trace

        ref = read_trace(out).of_kind(PREFIX + "reference")  # a killed first driver could not reply
        if ref:
            res["reference_seconds"] = ref[0].get("seconds")
    return {"trace": str(out), "checkpoint": str(paths.checkpoint()), "workdir": str(root),
            "seconds": round(time.perf_counter() - t0, 2), "status": res["status"],
            "reference_seconds": res["reference_seconds"], "attempt_seconds": res["attempt_seconds"],
            "batches": n_rows, "children": children, "seed": cfg.seed}


def _release_reference(cfg: QueryConfig, version: str, root: Path, rows: list[list[tuple[Any, ...]]],
                       columns: list[str]) -> dict[str, Any]:
    """The failure-free run of the same query on pyspark ``version`` (a driver child in that
    release's environment): ``{"engine_version", "output", "seconds"}``."""
    python = spark_environment(version)
    here = Path(python) == Path(sys.executable)
    paths = _prepare(root, rows, columns)
    spec = {"cfg": asdict(replace(cfg, failure=None, fail_at_batch=None, kill_point=None)), "root": str(root),
            "release_only": True}
    run = run_driver("rollcheck.spark_replay.query", spec, workdir=root, n=1, markers=paths.markers,
                     python=None if here else python, env=None if here else child_environment(python))
    reply = run.reply
    if reply.get("status") != "done" or "output" not in reply:
        raise RuntimeError(f"the failure-free run on pyspark {version} did not finish: {reply}")
    return {"engine_version": reply.get("engine_version", version), "output": reply["output"],
            "seconds": reply.get("seconds"), "workdir": str(root)}


def _release_run(spec: dict[str, Any]) -> dict[str, Any]:
    """In a driver child: one failure-free run (no trace), its output in the reply."""
    import pyspark

    from rollcheck.spark_replay.session import spark_session

    cfg = QueryConfig(**spec["cfg"])
    uq = load_query(cfg.module, cfg.call_timeout)
    _register_by_value(uq)
    paths = _Paths(Path(spec["root"]))
    t0 = time.perf_counter()
    with environment_guard(spec["root"]), spark_session(
            cfg.master, app_name="rollcheck-release-reference", shuffle_partitions=cfg.shuffle_partitions,
            conf=session_conf(cfg.state_store)) as spark:
        _quiet(spark)
        _run_once(spark, uq, cfg, paths, ref=True, writer=None, watcher=None)
        output = _read_output(uq, paths.out(True))
    return {"status": "done", "output": output, "engine_version": pyspark.__version__,
            "seconds": round(time.perf_counter() - t0, 3)}


def _child_run(spec: dict[str, Any]) -> dict[str, Any]:
    if spec.get("release_only"):
        return _release_run(spec)
    cfg = QueryConfig(**spec["cfg"])
    with environment_guard(spec["root"]):
        return _drive(cfg, _Paths(Path(spec["root"])), Path(spec["trace"]), spec["header"],
                      single_attempt=spec.get("single_attempt", True), with_reference=spec["reference"],
                      enabled=spec["enabled"])


if __name__ == "__main__":  # the driver child of a kill-mode recording
    if sys.argv[1:] == ["--child"]:
        sys.exit(child_main(_child_run))
