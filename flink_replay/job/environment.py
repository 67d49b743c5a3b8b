"""The Flink environment of one job: its configuration, rollcheck's tap operators, the user-state log.

:func:`make_environment` configures a local MiniCluster (or a remote environment on the
standalone cluster the recorder started for ``failure: taskmanager``): REST API on a free port,
retained checkpoints in the run folder, the state backend, restarts, a restore path.
:func:`make_taps` inserts rollcheck's Java operators (``RollcheckTap``, ``RollcheckKeyedTap``)
that log snapshots, restores and keyed state. :class:`user_state_log` makes PyFlink's keyed
operators rollcheck's subclasses that log the user's keyed state key by key.

This module runs in the PyFlink environment (``.venv-flink``), imported by ``main.py``; like it, it
imports only the standard library, ``pyflink`` and its sibling ``job_*`` modules.
"""

from __future__ import annotations

import os
import sys

if __package__:  # imported as rollcheck.flink_replay (tests, the recorder's helpers)
    from .files import free_port
else:  # run by main.py in the PyFlink environment: this folder is on sys.path
    from files import free_port  # type: ignore[no-redef]

__all__ = ["make_environment", "make_taps", "user_state_log", "flink_release", "LEGACY_KEYS"]

#: Configuration keys Flink 2.0 renamed (the old spellings were deprecated in 1.20 and removed in
#: 2.0): on a release before 2.0 the old spelling is set too (1.19 knows only the old one)
LEGACY_KEYS = {
    "execution.checkpointing.dir": "state.checkpoints.dir",
    "execution.checkpointing.num-retained": "state.checkpoints.num-retained",
    "execution.checkpointing.incremental": "state.backend.incremental",
    "execution.state-recovery.path": "execution.savepoint.path",
    "execution.state-recovery.claim-mode": "execution.savepoint-restore-mode",
    "state.changelog.enabled": "state.backend.changelog.enabled",
    "state.changelog.storage": "state.backend.changelog.storage",
    "execution.checkpointing.data-inline-threshold": "state.storage.fs.memory-threshold",
}


def flink_release() -> tuple[int, int]:
    """``(major, minor)`` of the running PyFlink (``pyflink.version``)."""
    import pyflink.version as v

    parts = str(v.__version__).split(".")
    return int(parts[0]), int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0


def make_environment(cfg: dict, *, restarts: bool = True, restore_path: str | None = None):
    """The configured ``StreamExecutionEnvironment`` of one job and the port of its REST API."""
    from pyflink.common import Configuration
    from pyflink.datastream import CheckpointingMode, StreamExecutionEnvironment

    run_dir = cfg["run_dir"]
    par = int(cfg["parallelism"])
    port = free_port()

    conf = Configuration()
    legacy = flink_release() < (2, 0)

    def put(key: str, value: str) -> None:
        """Set ``key`` (and, before Flink 2.0, its old spelling: :data:`LEGACY_KEYS`)."""
        if legacy and key in LEGACY_KEYS:
            conf.set_string(LEGACY_KEYS[key], value)
        conf.set_string(key, value)

    if cfg.get("cluster_rest_port"):
        # a standalone session cluster started by the recorder (separate TaskManager processes)
        port = int(cfg["cluster_rest_port"])
    put("python.execution-mode", cfg.get("python_mode", "thread"))
    put("python.executable", sys.executable)
    put("rest.port", str(port))
    put("rest.address", "127.0.0.1")
    put("rest.bind-address", "127.0.0.1")
    put("rest.cache.checkpoint-statistics.timeout", "50 ms")
    put("web.checkpoints.history", "1000")
    put("execution.checkpointing.dir", "file://" + os.path.join(run_dir, "checkpoints"))
    put("execution.checkpointing.num-retained", "1000")
    backend = cfg.get("backend") or "hashmap"
    put("state.backend.type", "rocksdb" if backend == "rocksdb" else "hashmap")
    if backend == "rocksdb":
        put("execution.checkpointing.incremental", "true")
        # RocksDB names its info log after the flattened instance path: keep that path short
        # (a run folder deep in the file system exceeds the 255-byte file-name limit)
        if cfg.get("rocksdb_dir"):
            put("state.backend.rocksdb.localdir", cfg["rocksdb_dir"])
    if backend == "changelog":
        put("state.changelog.enabled", "true")
        put("state.changelog.storage", "filesystem")
        put("state.changelog.dstl.dfs.base-path", "file://" + os.path.join(run_dir, "changelog"))
    put("execution.checkpointing.externalized-checkpoint-retention", "RETAIN_ON_CANCELLATION")
    if cfg.get("lose_checkpoint_files"):  # every piece of state in a file of its own (none inline)
        put("execution.checkpointing.data-inline-threshold", "0 b")
    if restore_path:
        put("execution.state-recovery.path", restore_path)
        if backend == "changelog":
            # the changelog backend cannot take the full snapshot that Flink forces after a restore in
            # the default NO_CLAIM mode (its first checkpoint fails: "does not support enforcing a full
            # snapshot"); Flink's documentation (State Backends, changelog limitations: "NO_CLAIM mode
            # not supported") says to restore it in CLAIM mode
            put("execution.state-recovery.claim-mode", "CLAIM")
    put("restart-strategy.type", "fixed-delay" if restarts else "none")
    put("restart-strategy.fixed-delay.attempts", str(int(cfg.get("restart_attempts", 3))))
    put("restart-strategy.fixed-delay.delay", f"{int(cfg.get('restart_delay_ms', 200))} ms")
    put("io.tmp.dirs", os.path.join(run_dir, "tmp"))
    os.makedirs(os.path.join(run_dir, "tmp"), exist_ok=True)
    if cfg.get("cluster_rest_port"):
        from pyflink.java_gateway import get_gateway as _gw

        gw0 = _gw()
        jars = gw0.new_array(gw0.jvm.String, 1)
        jars[0] = cfg["tap_jar"]
        if restore_path:
            # a remote environment replaces the configuration's claim mode by its own restore settings
            # (NO_CLAIM): give them explicitly, so that the changelog backend is restored in CLAIM mode
            if flink_release() >= (2, 0):
                claim = gw0.jvm.org.apache.flink.core.execution.RecoveryClaimMode
            else:  # 1.19/1.20: the restore mode enum before its rename
                claim = gw0.jvm.org.apache.flink.runtime.jobgraph.RestoreMode
            srs = gw0.jvm.org.apache.flink.runtime.jobgraph.SavepointRestoreSettings.forPath(
                restore_path, False, claim.CLAIM if backend == "changelog" else claim.NO_CLAIM)
            j_env = gw0.jvm.org.apache.flink.streaming.api.environment.RemoteStreamEnvironment(
                "127.0.0.1", port, conf._j_configuration, jars, gw0.new_array(gw0.jvm.java.net.URL, 0), srs)
        else:
            j_env = gw0.jvm.org.apache.flink.streaming.api.environment.StreamExecutionEnvironment \
                .createRemoteEnvironment("127.0.0.1", port, conf._j_configuration, jars)
        env = StreamExecutionEnvironment(j_env)
    else:
        env = StreamExecutionEnvironment.get_execution_environment(conf)
    if cfg.get("runtime_mode") == "batch":  # the batch-equivalent oracle's run of the same job
        from pyflink.datastream import RuntimeExecutionMode

        env.set_runtime_mode(RuntimeExecutionMode.BATCH)
    env.set_parallelism(par)
    env.set_max_parallelism(int(cfg.get("max_parallelism", 128)))
    if not cfg.get("no_checkpoints"):  # the failure-free baseline of a utilization sweep has none
        env.enable_checkpointing(int(cfg["interval_ms"]), CheckpointingMode.EXACTLY_ONCE)
    cc = env.get_checkpoint_config()
    if cfg["checkpoints"] == "unaligned":
        cc.enable_unaligned_checkpoints(True)
    cc.set_tolerable_checkpoint_failure_number(100)
    env.add_jars("file://" + cfg["tap_jar"])
    return env, port


def make_taps(run_dir: str, attempt_offset: int, keys: int):
    """``(tap, keyed_tap)``: functions that insert rollcheck's Java tap operators into a stream.

    Parameters
    ----------
    run_dir : str
        The run folder the taps log into.
    attempt_offset : int
        Added to the logged attempt numbers (a restored second job continues the first's).
    keys : int
        The default number of keys a tap tracks.

    Returns
    -------
    tuple
        ``(tap, keyed_tap)``.
    """
    from pyflink.common import Types
    from pyflink.datastream.data_stream import DataStream
    from pyflink.java_gateway import get_gateway
    from pyflink.util.java_utils import load_java_class

    gw = get_gateway()
    tap_class = load_java_class("rollcheck.flink.RollcheckTap")

    keyed_tap_class = load_java_class("rollcheck.flink.RollcheckKeyedTap")
    # Flink 2.0 made ALWAYS the default chaining strategy of an AbstractStreamOperator; before (1.19,
    # 1.20) it was HEAD, which cut the source off its tap: the whole input then queued in network
    # buffers ahead of the first barrier and no checkpoint completed before the input ended
    chain_always = gw.jvm.org.apache.flink.streaming.api.operators.ChainingStrategy.ALWAYS \
        if flink_release() < (2, 0) else None

    def _chained(op):
        if chain_always is not None:
            op.setChainingStrategy(chain_always)
        return op

    def _args(name: str, mode: str, n_keys: int):
        args = gw.new_array(gw.jvm.Object, 5)
        args[0] = name
        args[1] = run_dir
        args[2] = mode
        args[3] = gw.jvm.Integer(n_keys)
        args[4] = gw.jvm.Integer(attempt_offset)
        return args

    def tap(ds, name: str, mode: str, type_info, n_keys: int = keys, cost_ms: int = 0, buckets: str = ""):
        """Insert rollcheck's tap after ``ds``.

        ``buckets`` is the source tap's table of each record's source (a job with several input streams;
        one character per sequence number), empty for records counted by value mod keys.
        """
        args = gw.new_array(gw.jvm.Object, 7 if buckets else 6)
        for i, a in enumerate(_args(name, mode, n_keys)):
            args[i] = a
        args[5] = gw.jvm.Integer(cost_ms)
        if buckets:
            args[6] = buckets
        ctor = next(c for c in tap_class.getConstructors() if len(c.getParameterTypes()) == len(args))
        op = _chained(ctor.newInstance(args))
        j = ds._j_data_stream.transform(name, type_info.get_java_type_info(), op)
        return DataStream(j)

    def keyed_tap(ds, name: str, mode: str, type_info, n_keys: int):
        """Insert rollcheck's keyed tap (keyed state only) after ``ds``.

        ``count`` reinterprets the stream as keyed by the word's number (same key groups as the Python
        keyed operator it is chained to), ``rows`` keys it by the user's KEY (a shuffle).
        """
        op = _chained(keyed_tap_class.getConstructors()[0].newInstance(_args(name, mode, n_keys)))
        j_ds = ds._j_data_stream
        if mode == "count":
            keyed = gw.jvm.org.apache.flink.streaming.api.datastream.DataStreamUtils.reinterpretAsKeyedStream(
                j_ds, load_java_class("rollcheck.flink.RollcheckKeys$Word").newInstance(),
                Types.ROW([Types.LONG()]).get_java_type_info())
        else:
            keyed = j_ds.keyBy(load_java_class("rollcheck.flink.RollcheckKeys$Field").newInstance(),
                               Types.STRING().get_java_type_info())
        return DataStream(keyed.transform(name, type_info.get_java_type_info(), op))

    return tap, keyed_tap


#: PyFlink's embedded keyed operators and rollcheck's subclasses that also log their keyed state
_STATE_LOGGED = {"EmbeddedPythonKeyedProcessOperator": "rollcheck.flink.RollcheckStateLog$KeyedProcess",
                 "EmbeddedPythonWindowOperator": "rollcheck.flink.RollcheckStateLog$Window",
                 "EmbeddedPythonKeyedCoProcessOperator": "rollcheck.flink.RollcheckStateLog$KeyedCoProcess"}


class user_state_log:
    """Make PyFlink's keyed operators log the user's keyed state while ``job()`` builds its graph.

    The operators become rollcheck's subclasses (``RollcheckStateLog``): the same operators, which also
    log their keyed state key by key at every snapshot and after a restore (``ustate-*.jsonl`` in the
    run folder).

    PyFlink names the operator classes through ``get_gateway().jvm`` in ``data_stream``; only that
    module's lookup is redirected, and only for the three keyed operator classes.

    Parameters
    ----------
    run_dir : str
        The run folder the state logs go into.
    attempt_offset : int
        Added to the logged attempt numbers.
    """

    def __init__(self, run_dir: str, attempt_offset: int) -> None:
        self.run_dir = run_dir
        self.attempt_offset = attempt_offset

    def __enter__(self):
        import pyflink.datastream.data_stream as dsmod
        from pyflink.util.java_utils import load_java_class

        self.mod = dsmod
        self.real = real = dsmod.get_gateway
        run_dir, offset = self.run_dir, self.attempt_offset

        def maker(java_name: str):
            def make(*args):
                gw = real()
                arr = gw.new_array(gw.jvm.Object, len(args) + 2)
                for i, a in enumerate(args):
                    arr[i] = a
                arr[len(args)] = run_dir
                arr[len(args) + 1] = gw.jvm.Integer(offset)
                return load_java_class(java_name).getConstructors()[0].newInstance(arr)
            return make

        class Jvm:
            def __init__(self, jvm) -> None:
                self._jvm = jvm

            def __getattr__(self, name: str):
                if name in _STATE_LOGGED:
                    return maker(_STATE_LOGGED[name])
                return getattr(self._jvm, name)

        class Gateway:
            def __getattr__(self, name: str):
                gw = real()
                return Jvm(gw.jvm) if name == "jvm" else getattr(gw, name)

        dsmod.get_gateway = Gateway
        return self

    def __exit__(self, *exc) -> None:
        self.mod.get_gateway = self.real
