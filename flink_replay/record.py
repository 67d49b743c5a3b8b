"""Record a real Flink run: start the job in the PyFlink environment, then write its trace.

The job (:mod:`rollcheck.flink_replay.job`) runs in a separate interpreter and leaves raw
observations in a run folder; :func:`build_trace` merges them, ordered by time (microseconds,
one JVM clock), into a ``rollcheck.trace/1`` file:

- ``flink.restore`` / ``flink.snapshot`` / ``flink.notify_complete`` — written by the Java tap
  operators from ``initializeState`` (restored checkpoint id), ``snapshotState`` and
  ``notifyCheckpointComplete``, for the source task (records that left the source before the
  barrier, per key: the source offsets) and the keyed task (latest count per key: its keyed
  state);
- ``flink.barrier`` — arrival of a barrier on one input channel of the keyed task, from
  Flink's DEBUG log of ``SingleCheckpointBarrierHandler``;
- ``flink.checkpoint_completed`` — from the JobManager's checkpoint statistics (REST API);
- ``flink.job_state`` — job state transitions (REST API), ``RESTARTING`` among them;
- ``failure`` (core) — the injected task failure;
- ``flink.sink_commit`` — a file of the transactional sink becoming visible;
- ``flink.sink_output`` — the lines of both sinks at the end (``naive`` split by attempt).

References
----------
Carbone et al., "Lightweight Asynchronous Snapshots for Distributed Dataflows" (ABS), §3–4.
"""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import Any

from rollcheck.flink_replay.environment import find_flink, tap_jar
from rollcheck.flink_replay.releases import PINNED, cluster_config_name, parse_release
from rollcheck.flink_replay.replay import source_cut
from rollcheck.pyimpl import children
from rollcheck.pyimpl.errors import InconclusiveError, InternalError, InvalidInputError

__all__ = ["RecordConfig", "ModuleFailure", "write_run_folder", "HEADER_CONFIG_KEYS", "record", "record_wordcount", "build_trace", "source_of_record", "LOG4J", "BACKENDS", "FAILURES", "parse_rescale",
           "job_outcome"]

BACKENDS = ("hashmap", "rocksdb", "changelog")
#: The failures a recording injects: a task fails, the TaskManager process is killed, a second task
#: failure while the restarted job restores its state, a second one right after the first recovery.
FAILURES = ("task", "taskmanager", "during-restore", "twice")

LOG4J = """rootLogger.level = INFO
rootLogger.appenderRef.file.ref = FileAppender
appender.file.name = FileAppender
appender.file.type = FILE
appender.file.append = false
appender.file.fileName = ${sys:log.file}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = %d{yyyy-MM-dd HH:mm:ss,SSS} %-5p %-60c %x - %m%n
appender.barrier.name = BarrierAppender
appender.barrier.type = FILE
appender.barrier.append = false
appender.barrier.fileName = ${sys:log.file}.barriers
appender.barrier.layout.type = PatternLayout
appender.barrier.layout.pattern = %d{yyyy-MM-dd'T'HH:mm:ss.SSSSSS}{UTC} %m%n
logger.barrier.name = org.apache.flink.streaming.runtime.io.checkpointing
logger.barrier.level = DEBUG
logger.barrier.additivity = false
logger.barrier.appenderRef.barrier.ref = BarrierAppender
"""

_BARRIER = re.compile(r"^(\S+) (.*): Received barrier from channel InputChannelInfo\{gateIdx=(\d+), "
                      r"inputChannelIdx=(\d+)\} @ (\d+)\.")
_ANNOUNCE = re.compile(r"^(\S+) (.*): Triggering checkpoint (\d+) on the barrier announcement")
_TM_LOST = re.compile(r"^(\S+ \S+) INFO .*JobMaster .*TaskManager with id (\S+) is no longer reachable")
_SUBTASK = re.compile(r"\((\d+)/(\d+)\)#(\d+)")


def parse_rescale(text: str) -> tuple[int, int]:
    """``"P1:P2"`` -> (P1, P2): fail at parallelism P1, restore at P2.

    Examples
    --------
    >>> parse_rescale("2:3")
    (2, 3)
    """
    try:
        a, b = (int(x) for x in text.split(":"))
    except ValueError:
        raise InvalidInputError(f"--rescale {text!r}: expected P1:P2, two parallelisms such as 2:3") from None
    if not (1 <= a <= 8 and 1 <= b <= 8) or a == b:
        raise InvalidInputError(f"--rescale {text}: two different parallelisms between 1 and 8")
    return a, b


class RecordConfig(dict):
    """The knobs of a recorded run (a plain dict with validated fields)."""

    @classmethod
    def make(cls, *, checkpoints: str = "aligned", parallelism: int = 2, interval_ms: int = 300,
             records: int = 2000, rate: float = 500.0, keys: int = 8, fail_at_record: int | None = None,
             failure: str | None = None, seed: int = 0, timeout_s: float = 300.0, backend: str = "hashmap",
             rescale: tuple[int, int] | None = None, module: str | None = None,
             call_timeout: float = 300.0, engine_version: str | None = None,
             reference_version: str | None = None, fail_subtask: int | None = None,
             fail_after_checkpoint: int | None = None) -> RecordConfig:
        if checkpoints not in ("aligned", "unaligned"):
            raise InvalidInputError(f"--checkpoints must be aligned or unaligned, not {checkpoints!r}")
        if backend not in BACKENDS:
            raise InvalidInputError(f"--backend must be one of {', '.join(BACKENDS)}, not {backend!r}")
        if rescale is not None:
            parallelism = rescale[0]
            if fail_at_record is None:
                raise InvalidInputError("--rescale restores after the injected failure: give --fail-at-record "
                                        "and --failure too")
        elif parallelism < 2:
            raise InvalidInputError("--parallelism must be at least 2 (a keyBy shuffle between subtasks)")
        if interval_ms < 10:
            raise InvalidInputError("--interval must be at least 10 ms")
        if records < 1 or rate <= 0 or keys < 1:
            raise InvalidInputError("--records, --rate and the number of keys must be positive")
        if (fail_at_record is None) != (failure is None):
            raise InvalidInputError("--fail-at-record and --failure go together")
        if failure not in (None, *FAILURES):
            raise InvalidInputError(f"--failure {failure}: one of {', '.join(FAILURES)}")
        if failure in ("during-restore", "twice") and rescale is not None:
            raise InvalidInputError(f"--failure {failure} restarts the job in place: not with --rescale")
        if fail_at_record is not None and module is None and not 1 <= fail_at_record <= records:
            raise InvalidInputError(f"--fail-at-record {fail_at_record} is outside the input (1..{records})")
        if fail_at_record is not None and fail_at_record < 1:
            raise InvalidInputError(f"--fail-at-record {fail_at_record}: records count from 1")
        _check_strike(failure, fail_subtask, fail_after_checkpoint, rescale[0] if rescale else parallelism)
        if call_timeout <= 0:
            raise InvalidInputError("--call-timeout must be positive")
        if engine_version is not None:  # the release's range, before anything is installed or run
            parse_release(engine_version)
            engine_version = engine_version.strip()
        if reference_version is not None:  # release-differential's reference release (release_reference.py)
            if engine_version is None:
                raise InvalidInputError("--reference-version needs --engine-version (the release it is compared "
                                        "with)", location="--reference-version")
            parse_release(reference_version, location="--reference-version")
            reference_version = reference_version.strip()
        if engine_version is not None and reference_version is None:
            reference_version = PINNED
        extra: dict[str, Any] = {}
        if module is not None:
            path = Path(module)
            if not path.is_file():
                raise InvalidInputError("no such job module", source=str(module))
            extra = {"job": "module", "module": str(path.resolve()), "module_arg": str(module)}
            keys = 1  # the source tap counts the user's records in one bucket
        if failure is not None:
            # where and when the failure strikes (job_strike); an unaligned run's failure waits (up to
            # this long) for a completed checkpoint that holds data in flight
            extra.update(fail_subtask=fail_subtask, fail_after_checkpoint=fail_after_checkpoint)
            if checkpoints == "unaligned":
                extra["inflight_wait_s"] = 20.0
        return cls(checkpoints=checkpoints, parallelism=parallelism, interval_ms=interval_ms,
                   records=records, rate=rate, keys=keys, fail_at_record=fail_at_record,
                   failure=failure, seed=seed, timeout_s=timeout_s, backend=backend,
                   rescale=list(rescale) if rescale else None, max_parallelism=128,
                   call_timeout=call_timeout, engine_version=engine_version,
                   reference_version=reference_version, **extra)


def _check_strike(failure: str | None, subtask: int | None, after: int | None, parallelism: int) -> None:
    """Refuse a failure point no run can reach: a subtask beyond the parallelism, a checkpoint before 1."""
    if (subtask is not None or after is not None) and failure is None:
        raise InvalidInputError("--fail-subtask and --fail-after-checkpoint place the injected failure: give "
                                "--fail-at-record and --failure too", location="--fail-subtask")
    if subtask is not None and not 0 <= subtask < parallelism:
        raise InvalidInputError(f"--fail-subtask {subtask}: the failing job runs {parallelism} subtasks "
                                f"(0..{parallelism - 1})", location="--fail-subtask")
    if after is not None and after < 1:
        raise InvalidInputError(f"--fail-after-checkpoint {after}: checkpoints count from 1",
                                location="--fail-after-checkpoint")


def _job_file() -> Path:
    return Path(str(resources.files("rollcheck.flink_replay").joinpath("job.py")))


def record_wordcount(out: str | Path, config: RecordConfig, *, run_dir: str | Path | None = None) -> dict[str, Any]:
    """Record the word-count job (see :func:`record`)."""
    return record(out, config, run_dir=run_dir)


def record(out: str | Path, config: RecordConfig, *, run_dir: str | Path | None = None,
           before_publish: Callable[[Path, Path], int | None] | None = None) -> dict[str, Any]:
    """Run the word-count job or a user's job module once in the Flink environment and write its
    trace to ``out`` (through ``OUT.partial``, renamed when complete).

    ``before_publish(partial_trace, run_folder)`` is called on the finished trace before it is
    renamed to ``out`` and returns the trace's new number of events, if it added some (the
    failure-free run on the reference release:
    :func:`rollcheck.flink_replay.release_reference.record_job`).

    Returns ``{"trace", "checkpoint_dir", "restored_checkpoint", "seconds", "final_state"}``.

    Raises
    ------
    InconclusiveError
        PyFlink or a JDK is missing, or the job did not finish.
    InvalidInputError
        The user's job module failed, hung or returned the wrong type (named with the call).
    """
    t0 = time.time()
    if config.get("module"):  # what the module's own sink declares: refused before Flink starts
        from rollcheck.flink_replay.user_replay import declared_guarantee

        config = RecordConfig(config, sink_guarantee=declared_guarantee(config["module"]))
    env = find_flink(config.get("engine_version"))
    jar = tap_jar(env)
    out = Path(out)
    run = Path(run_dir) if run_dir is not None else out.with_name(out.stem + ".flinkrun")
    try:
        _check_space(out.parent if str(out.parent) else Path("."))
        return _record(out, run, config, env, jar, t0, before_publish)
    except OSError as e:
        if e.errno in _ENV_ERRNOS:  # the environment's fault: named as such, exit 2
            where = e.filename or str(run)
            raise InvalidInputError(f"{(e.strerror or str(e)).lower()} (writing {where})", source=str(where)) from None
        raise


#: errors of the environment (not of rollcheck, not of the user's job): disk full, read-only, denied
_ENV_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM}
#: what a recording writes (checkpoints, logs, the trace): refuse to start with less free space
MIN_FREE_BYTES = 64 * 1024 * 1024
#: the text of the failure rollcheck injects (job_failures.INJECTED): never the engine's exception
INJECTED_TEXT = "rollcheck: injected"
_ENV_MESSAGES = ("No space left on device", "Disk quota exceeded", "Read-only file system")


def _check_space(folder: Path) -> None:
    """Refuse up front (exit 2) when the output's file system has too little room for a run."""
    probe = folder
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    st = os.statvfs(probe)
    free = st.f_bavail * st.f_frsize
    if free < MIN_FREE_BYTES:
        raise InvalidInputError(f"no space left on device: {free // 1024} KB free, a Flink recording needs about "
                                f"{MIN_FREE_BYTES // (1024 * 1024)} MB (checkpoints, logs, the trace)",
                                source=str(folder))


def _environment_failure(run: Path) -> str | None:
    """The OS reason when the job's own logs show the disk filled up (or went read-only) under it."""
    for f in [run / "job.out", *run.glob("*.log")]:
        try:
            text = f.read_text(errors="replace")
        except OSError:
            continue
        for msg in _ENV_MESSAGES:
            if msg in text:
                return msg.lower()
    return None


def _record(out: Path, run: Path, config: RecordConfig, env: Any, jar: Path, t0: float,
            before_publish: Callable[[Path, Path], int | None] | None = None) -> dict[str, Any]:
    if run.exists():
        shutil.rmtree(run)
    run.mkdir(parents=True)
    # until the run ends, OUT.partial holds this run's header (a run cut short leaves it beside the
    # previous OUT, which stays as it was); the finished trace replaces it and is renamed to OUT
    partial = out.with_name(out.name + ".partial")
    partial.write_text(json.dumps({"format": "rollcheck.trace/1", "source": "flink", "partial": True,
                                   "seed": config.get("seed", 0), "processes": ["source", "keyed"]}) + "\n")
    cfg = dict(config, run_dir=str(run.resolve()), tap_jar=str(jar), engine_version=env.version)
    rocksdb_dir = write_run_folder(run, cfg)
    penv = dict(os.environ, LOG4J_PROPERTIES=str(run / "log4j.properties"), FLINK_LOG_DIR=str(run),
                PYTHONPATH=str(_job_file().parent))
    penv.pop("PYTHONSTARTUP", None)
    # everything the JVM and PyFlink put in temporary folders stays inside the run folder
    (run / "tmp").mkdir()
    penv["TMPDIR"] = str(run / "tmp")
    penv["JVM_ARGS"] = (penv.get("JVM_ARGS", "") + f" -Djava.io.tmpdir={run / 'tmp'}").strip()
    cluster: list[Any] = []
    try:
        if config.get("failure") == "taskmanager":
            slots = max(int(config["parallelism"]), *(config.get("rescale") or [1]))
            cfg["cluster_rest_port"] = _start_cluster(run, env, penv, slots, cluster)
            (run / "config.json").write_text(json.dumps(cfg))
        with open(run / "job.out", "w") as so:
            try:
                p = children.run([str(env.python), str(_job_file()), str(run / "config.json")], stdout=so,
                                   stderr=subprocess.STDOUT, env=penv, timeout=float(config["timeout_s"]) + 180)
            except subprocess.TimeoutExpired:
                raise InconclusiveError(f"the Flink job did not end within {config['timeout_s']} s (log: {run})") from None
    finally:
        for proc in cluster:  # only the JobManager and TaskManagers this call started
            if proc.poll() is None:
                proc.kill_group()
                proc.wait(timeout=30)
        if rocksdb_dir is not None:
            shutil.rmtree(rocksdb_dir, ignore_errors=True)

    def _discard() -> None:  # nothing half-written is left for bad input
        shutil.rmtree(run, ignore_errors=True)
        partial.unlink(missing_ok=True)

    job_outcome(run, config, p.returncode, discard=_discard)
    tmp = out.with_name(out.name + ".partial")
    summary = build_trace(run, tmp, env_version=env.version)
    if before_publish is not None:  # e.g. release-differential's failure-free run on the reference release
        added = before_publish(tmp, run)
        if added is not None:
            summary["events"] = added
    os.replace(tmp, out)
    summary.update(trace=str(out), checkpoint_dir=str(run / "checkpoints"), seconds=round(time.time() - t0, 2))
    return summary


class ModuleFailure(InvalidInputError):
    """The user's module failed a call (exit 2): ``call`` names it, ``java`` the class of the Java
    exception when Flink's JVM raised it inside the call (None for the module's Python exception)."""

    def __init__(self, reason: str, *, source: str | None = None, call: str = "", java: str | None = None):
        super().__init__(reason, source=source)
        self.call = call
        self.java = java


#: The recording's settings a trace header's ``config`` holds.
#: the header keys of a failure's placement: written only when set (older headers have none)
_PLACEMENT_KEYS = ("fail_subtask", "fail_after_checkpoint", "inflight_wait_s")
HEADER_CONFIG_KEYS = ("checkpoints", "parallelism", "interval_ms", "records", "rate", "keys", "fail_at_record",
                      "failure", "backend", "rescale", "max_parallelism", "max_records", "engine_version",
                      "reference_version", "fail_subtask", "fail_after_checkpoint", "inflight_wait_s")


def write_run_folder(run: Path, cfg: dict[str, Any]) -> str | None:
    """Write the job process's ``config.json`` and ``log4j.properties`` into ``run``; with the RocksDB
    backend, also make a temporary folder for RocksDB's local files (named in ``cfg``) and return it
    (the caller removes it when the job ended)."""
    rocksdb_dir = None
    if cfg.get("backend") == "rocksdb":
        rocksdb_dir = tempfile.mkdtemp(prefix="rc-rdb-")
        cfg["rocksdb_dir"] = rocksdb_dir
    (run / "config.json").write_text(json.dumps(cfg))
    (run / "log4j.properties").write_text(LOG4J)
    return rocksdb_dir


def job_outcome(run: Path, config: dict[str, Any], returncode: int,
                discard: Callable[[], None] = lambda: None) -> None:
    """Raise what the job process's run folder says went wrong; return when it left a result.

    The job process (:mod:`rollcheck.flink_replay.job`) leaves typed records in the run folder (or
    in its ``reference/`` folder, for the failure-free run of a user's job that comes first):

    - ``user-error.json`` ``{"call", "error", "kind"}``: the user's module failed a call
      (``records()``, ``job()``...), its import, or declares a bad attribute (``KEY``) -> exit 2;
    - ``engine-error.json`` ``{"code", "function", "file", "line", "type", "message"}``: an
      exception raised inside the engine, by the user's code (``code: "user"``, exit 2 naming the
      function, the file and the exception) or by rollcheck's own (``"rollcheck"``, exit 4).

    A disk that filled up under the job (its logs say so) is the environment's fault (exit 2), checked
    before ``engine-error.json``; a job that ended without ``run.json`` and without such a record is
    inconclusive with the reason it failed — never without. ``engine-error.json`` also records an
    exception of rollcheck's own code in the job process outside the engine (exit 4).
    ``discard`` runs before an error of the user's module is raised (the run folder goes).

    Raises
    ------
    InvalidInputError
        The user's module (named, with the call or attribute) or the environment.
    InternalError
        rollcheck's own code raised inside the engine (a bug in rollcheck).
    InconclusiveError
        The job ended without a result for a reason of the engine (the reason named).
    """
    module = str(config.get("module_arg") or config.get("module") or "")
    for folder in (run, run / "reference"):
        f = folder / "user-error.json"
        if f.exists():
            ue = json.loads(f.read_text())
            kind = ue.get("kind", "call")
            call = ue["call"] + ("()" if kind == "call" and ue["call"] != "import" else "")
            discard()
            raise ModuleFailure(f"{call}: {ue['error']} (the job module's own failure)",
                                source=str(config.get("module") or run), call=str(ue["call"]), java=ue.get("java"))
    reason = _environment_failure(run)
    if reason is not None:
        raise InvalidInputError(f"{reason} while Flink ran (the run folder {run} and its file system)",
                                source=str(run))
    for folder in (run, run / "reference"):
        f = folder / "engine-error.json"
        if f.exists():
            ee = json.loads(f.read_text())
            what = f"{ee['type']}: {ee['message']}".rstrip(": ")
            if ee.get("code") == "rollcheck":
                where = f"{ee['function']}() ({Path(ee['file']).name}:{ee['line']})"
                raise InternalError(f"rollcheck's own {where} raised {what} inside the Flink job"
                                    + (f" running {module}" if module else "") + f" (log: {run})")
            where = f"{ee['function']}() line {ee['line']}"
            discard()
            raise InvalidInputError(f"{where} raised {what} inside the Flink job (the job module's own failure)",
                                    source=str(ee["file"]))
    if not (run / "run.json").exists():
        raise InconclusiveError(f"the Flink job ended without a result (exit {returncode}): {_why(run)}")


def _why(run: Path) -> str:
    """Why a job process ended without ``run.json``, in one line: the reference run's failure cause,
    the job's last output lines, or the log's last error — never empty."""
    ref = run / "reference" / "run.json"
    if ref.exists():
        info = json.loads(ref.read_text())
        if info.get("final_state") != "FINISHED":
            cause = info.get("failure_cause") or "no failure cause reported"
            return f"the failure-free reference run ended {info.get('final_state')}: {cause}"
    out = run / "job.out"
    tail = out.read_text(errors="replace").strip().splitlines()[-3:] if out.exists() else []
    if tail:
        return " | ".join(line.strip() for line in tail)[:600]
    for log in sorted(run.glob("*.log")):
        errors = [ln for ln in log.read_text(errors="replace").splitlines() if " ERROR " in ln]
        if errors:
            return errors[-1][:400] + f" (log: {log})"
    return f"the job process printed nothing (log folder: {run})"


CLUSTER_CONFIG = """jobmanager.rpc.address: localhost
jobmanager.bind-host: localhost
jobmanager.rpc.port: {rpc}
jobmanager.memory.process.size: 1024m
taskmanager.host: localhost
taskmanager.bind-host: localhost
taskmanager.numberOfTaskSlots: {slots}
taskmanager.cpu.cores: 2.0
taskmanager.memory.framework.heap.size: 128m
taskmanager.memory.task.heap.size: 384m
taskmanager.memory.framework.off-heap.size: 128m
taskmanager.memory.task.off-heap.size: 0m
taskmanager.memory.network.min: 64m
taskmanager.memory.network.max: 64m
taskmanager.memory.managed.size: 128m
taskmanager.memory.jvm-metaspace.size: 256m
taskmanager.memory.jvm-overhead.min: 192m
taskmanager.memory.jvm-overhead.max: 192m
rest.address: 127.0.0.1
rest.bind-address: 127.0.0.1
rest.port: {rest}
rest.cache.checkpoint-statistics.timeout: 50 ms
web.checkpoints.history: 1000
heartbeat.interval: 1000
heartbeat.timeout: 5000
pekko.startup-timeout: 90 s
io.tmp.dirs: {tmp}
python.execution-mode: thread
"""


def _start_cluster(run: Path, env: Any, penv: dict[str, str], slots: int,
                   procs: list[Any]) -> int:
    """Start a standalone session cluster: one JobManager and two TaskManager processes.

    Each TaskManager has enough slots for the whole job, so the job can restart on the survivor
    when the other one is killed. Returns the REST port; the processes are appended to ``procs``.
    """
    import socket

    def free() -> int:
        with socket.socket() as sk:
            sk.bind(("127.0.0.1", 0))
            return int(sk.getsockname()[1])

    rest, rpc = free(), free()
    conf = run / "cluster-conf"
    conf.mkdir()
    (conf / cluster_config_name(env.version)).write_text(CLUSTER_CONFIG.format(rpc=rpc, rest=rest, slots=slots, tmp=run / "tmp"))
    # append: the TaskManager re-initialises logging once, which would truncate the file
    (conf / "log4j.properties").write_text(LOG4J.replace("append = false", "append = true"))
    jars = sorted((env.pyflink_dir / "lib").glob("*.jar")) + sorted((env.pyflink_dir / "opt").glob("flink-python*.jar"))
    cp = os.pathsep.join(str(j) for j in jars)
    site = str(Path(env.pyflink_dir).parent)
    tenv = dict(penv, PYTHONPATH=os.pathsep.join([str(_job_file().parent), site]))
    mains = [("jobmanager", "org.apache.flink.runtime.entrypoint.StandaloneSessionClusterEntrypoint"),
             ("taskmanager-0", "org.apache.flink.runtime.taskexecutor.TaskManagerRunner"),
             ("taskmanager-1", "org.apache.flink.runtime.taskexecutor.TaskManagerRunner")]
    for name, main in mains:
        cmd = ["java", "-Xmx512m", "-XX:MaxDirectMemorySize=256m", f"-Dlog.file={run / (name + '.log')}",
               f"-Dlog4j.configurationFile=file:{conf / 'log4j.properties'}", f"-Djava.io.tmpdir={run / 'tmp'}",
               "--add-opens=java.base/java.lang=ALL-UNNAMED", "--add-opens=java.base/java.util=ALL-UNNAMED",
               "--add-opens=java.base/java.nio=ALL-UNNAMED", "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
               "-cp", cp, main, "--configDir", str(conf)]
        with open(run / (name + ".out"), "wb") as out:
            procs.append(children.spawn(cmd, stdout=out, stderr=subprocess.STDOUT, env=tenv,
                                          stdin=subprocess.DEVNULL))
    # wait until both TaskManagers registered (REST /taskmanagers)
    import urllib.request

    deadline = time.time() + 180
    while time.time() < deadline:
        if any(p.poll() is not None for p in procs):
            raise InconclusiveError(f"a Flink cluster process exited at start-up (see {run})")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{rest}/taskmanagers", timeout=2) as r:
                if len(json.loads(r.read().decode()).get("taskmanagers", [])) >= 2:
                    return rest
        except OSError:
            pass
        time.sleep(0.5)
    raise InconclusiveError("the standalone Flink cluster did not start within 180 s")


def _parse_log_time(s: str, pattern: str) -> int:
    """Microseconds since the epoch of a barrier-log timestamp (UTC).

    ``pattern`` is the log4j date pattern the log was written with: ``SSSSSS`` (a fixed
    6-digit fraction) or ``nnnnnn``, which log4j 2.25 prints as the nanosecond of the second
    without leading zeros.
    """
    whole, _, frac = s.partition(".")
    d = datetime.strptime(whole, "%Y-%m-%dT%H:%M:%S").replace(tzinfo=UTC)
    us = int(frac) // 1000 if "nnnnnn" in pattern else int(frac.ljust(6, "0")[:6])
    return int(d.timestamp()) * 1_000_000 + us


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    out = []
    for line in path.read_text(errors="replace").splitlines():
        if line.strip():
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                break
    return out


def _channel_state_event(run: Path) -> dict[str, Any] | None:
    """``flink.channel_state``: the data in flight the restored checkpoint held, from the job
    process's reading of its ``_metadata`` (``channel-state.json``), None when it did not read one."""
    path = run / "channel-state.json"
    if not path.exists():
        return None
    cs = json.loads(path.read_text())
    return {"kind": "flink.channel_state", "checkpoint": cs.get("checkpoint"),
            "input_bytes": int(cs.get("input_bytes") or 0), "output_bytes": int(cs.get("output_bytes") or 0),
            "holders": [str(h) for h in cs.get("holders") or []], "reason": cs.get("error")}


def _strike_fields(fi: dict[str, Any]) -> dict[str, Any]:
    """Where and when the injected failure struck, as ``failure.json`` says (recordings before these
    fields have none): the operator, its subtask, the attempt, ``where`` (at a ``record`` in the pace
    step, or at a ``checkpoint-complete`` notification in the source tap) and the latest checkpoint
    completed before it."""
    out: dict[str, Any] = {}
    for k in ("operator", "where"):
        if isinstance(fi.get(k), str):
            out[k] = fi[k]
    for k in ("subtask", "after_checkpoint"):
        if isinstance(fi.get(k), int) and not isinstance(fi.get(k), bool):
            out[k] = fi[k]
    if isinstance(fi.get("attempt"), int):
        out["in_attempt"] = fi["attempt"]
    return out


def build_trace(run: str | Path, out: str | Path, *, env_version: str = "?") -> dict[str, Any]:
    """Merge the raw observations of a run folder into a ``rollcheck.trace/1`` file."""
    run = Path(run)
    cfg = json.loads((run / "config.json").read_text())
    info = json.loads((run / "run.json").read_text())
    timed: list[tuple[int, int, dict[str, Any]]] = []  # (t_us, tiebreak, event)
    task_of = {"tap-source": "source", "tap-keyed": "keyed"}
    rank = {"barrier": 0, "restore": 1, "snapshot": 2, "complete": 3, "finish": 3}
    for f in sorted(run.glob("tap-*.jsonl")):
        for ev in _read_jsonl(f):
            base: dict[str, Any] = {"task": task_of[ev["tap"]], "subtask": ev["subtask"], "attempt": ev["attempt"]}
            if "parallelism" in ev:
                base["parallelism"] = ev["parallelism"]
            # the keyed tap's keyed state: every key with its value, and the key groups Flink gave
            # the subtask (a rescaled restore is checked key by key)
            keyed: dict[str, Any] = {k: ev[k] for k in ("keys", "key_groups", "max_parallelism") if k in ev}
            per_key: dict[str, Any] = {"per_key": ev["per_key"]} if "per_key" in ev else {}
            e: dict[str, Any]
            if ev["ev"] == "restore":
                e = {"kind": "flink.restore", **base, "checkpoint": ev["checkpoint"], **per_key,
                     "records": ev["seen"], **keyed}
            elif ev["ev"] == "snapshot":
                e = {"kind": "flink.snapshot", **base, "checkpoint": ev["checkpoint"], **per_key,
                     "records": ev["seen"], "inflight_records": 0, **keyed}
            elif ev["ev"] == "finish":
                e = {"kind": "flink.task_finished", **base, **per_key, "records": ev["seen"], **keyed}
            elif ev["ev"] == "complete":
                e = {"kind": "flink.notify_complete", **base, "checkpoint": ev["checkpoint"]}
            else:
                continue
            timed.append((ev["t_us"], rank[ev["ev"]], e))
    # the user's keyed operators, key by key (RollcheckStateLog): at every snapshot, after restores
    for f in sorted(run.glob("ustate-*.jsonl")):
        for ev in _read_jsonl(f):
            name = re.sub(r" \(\d+/\d+\)#\d+$", "", ev["name"])  # the task name ends with "(i/P)#attempt"
            e = {"kind": "flink.user_state", "phase": ev["ev"], "operator": ev["operator"], "name": name,
                 **{k: ev[k] for k in ("subtask", "attempt", "parallelism", "max_parallelism", "key_groups",
                                       "checkpoint", "backend", "states")}}
            timed.append((ev["t_us"], rank[ev["ev"]], e))
    # Flink's log numbers the attempts of each job from 0; a job restored at another parallelism
    # (rescaling) gets the attempt numbers after its predecessor's, as the taps do. The jobs of a
    # rescaled run differ in parallelism, which the log line shows ("(2/3)#0").
    offsets = {j.get("parallelism"): int(j.get("attempt_offset") or 0) for j in info.get("jobs") or []}
    props = run / "log4j.properties"
    pattern = props.read_text() if props.exists() else LOG4J
    for barrier_log in sorted(run.glob("*.log.barriers")):
        for line in barrier_log.read_text(errors="replace").splitlines():
            m = _BARRIER.match(line)
            a = _ANNOUNCE.match(line) if m is None else None
            if a is not None and "rollcheck-keyed" in a.group(2) and (st := _SUBTASK.search(a.group(2))):
                e = {"kind": "flink.barrier_announcement", "task": "keyed", "subtask": int(st.group(1)) - 1,
                     "attempt": int(st.group(3)) + offsets.get(int(st.group(2)), 0), "checkpoint": int(a.group(3))}
                timed.append((_parse_log_time(a.group(1), pattern), rank["barrier"], e))
                continue
            if not m or "rollcheck-keyed" not in m.group(2):
                continue
            st = _SUBTASK.search(m.group(2))
            if st is None:
                continue
            e = {"kind": "flink.barrier", "task": "keyed", "subtask": int(st.group(1)) - 1,
                 "attempt": int(st.group(3)) + offsets.get(int(st.group(2)), 0), "gate": int(m.group(3)),
                 "channel": int(m.group(4)),
                 "checkpoint": int(m.group(5))}
            timed.append((_parse_log_time(m.group(1), pattern), rank["barrier"], e))
    jm_log = run / "jobmanager.log"
    if jm_log.exists():  # standalone cluster (failure "taskmanager"): the JobManager saw the loss
        for line in jm_log.read_text(errors="replace").splitlines():
            m = _TM_LOST.match(line)
            if m:
                d = datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f").replace(tzinfo=UTC)
                timed.append((int(d.timestamp() * 1e6), 5, {"kind": "flink.taskmanager_lost",
                                                            "taskmanager": m.group(2)}))
                break
    rest = info["rest"]
    for cid, h in sorted(rest["checkpoints"].items(), key=lambda kv: int(kv[0])):
        if h.get("status") == "COMPLETED":
            t = int(h.get("latest_ack_timestamp") or h.get("trigger_timestamp")) * 1000
            timed.append((t, 4, {"kind": "flink.checkpoint_completed", "checkpoint": int(cid),
                                 "type": h.get("checkpoint_type"),
                                 "persisted_bytes": h.get("persisted_data"), "duration_ms": h.get("end_to_end_duration")}))
    jobs = info.get("jobs") or [{"timestamps": info.get("timestamps"), "job_id": info.get("job_id")}]
    for j in jobs:
        for state in ("RUNNING", "FAILING", "RESTARTING", "FINISHED", "FAILED", "CANCELED"):
            ts = (j.get("timestamps") or {}).get(state)
            if ts:
                extra = {"job_id": j["job_id"]} if len(jobs) > 1 else {}
                timed.append((int(ts) * 1000, 5, {"kind": "flink.job_state", "state": state, **extra}))
    for r in rest.get("restored", []):
        if r.get("restore_timestamp"):
            timed.append((int(r["restore_timestamp"]) * 1000, 6, {"kind": "flink.restore_reported",
                                                                   "checkpoint": r.get("id")}))
    marker = run / "failure.json"
    if marker.exists():
        fi = json.loads(marker.read_text())
        # a keyBy connects every task: Flink's failover region is the whole job, every task's
        # state is lost and restored (the task that raised is named separately)
        timed.append((int(fi["t"] * 1e6), 1, {"kind": "failure", "processes": ["source", "keyed"],
                                              "failed_task": "source",
                                              "failure": fi.get("failure", "task"), "record": fi.get("value"),
                                              **_strike_fields(fi),
                                              **source_of_record(info.get("sources"), fi.get("value"))}))
    marker2 = run / "failure2.json"
    if marker2.exists():  # the second failure of "during-restore" / "twice" (job_pipelines.pace_class)
        f2 = json.loads(marker2.read_text())
        # "twice": a failure of the recovered job, a core failure with its own recovery; "during-restore":
        # the first recovery had not happened yet (it is the restore that completes after it), so for the
        # core model the job failed once and recovered once, and the second failure is Flink's own event
        kind = "failure" if f2.get("failure") == "twice" else "flink.failure_during_restore"
        if kind != "failure" and f2.get("attempt") is not None:
            # the restores of the attempt that failure interrupted: not a recovery (some tasks of that
            # attempt never restored); the recovery is the next attempt's
            for _, _, e in timed:
                if e["kind"] == "flink.restore" and e["attempt"] == int(f2["attempt"]):
                    e["kind"] = "flink.restore_interrupted"
                elif e["kind"] == "flink.user_state" and e["phase"] == "restore" and e["attempt"] == int(f2["attempt"]):
                    e["phase"] = "restore-interrupted"  # the user's keyed operators, likewise
        timed.append((int(f2["t"] * 1e6), 1, {"kind": kind, "processes": ["source", "keyed"],
                                              "failed_task": "source", "failure": "task", "second": f2.get("failure"),
                                              "phase": f2.get("phase"), "in_attempt": f2.get("attempt"),
                                              "subtask": f2.get("subtask"), "record": f2.get("value"),
                                              **source_of_record(info.get("sources"), f2.get("value"))}))
    channels = _channel_state_event(run)
    if channels is not None:
        restored_t = min((t for t, _, e in timed if e["kind"] == "flink.restore" and e["attempt"] > 0), default=None)
        timed.append(((restored_t or int(float(info.get("t_end") or 0) * 1e6)), 2, channels))
    for c in info.get("commits", []):
        timed.append((int(c["t"] * 1e6), 7, {"kind": "flink.sink_commit", "file": c["file"], "lines": c["lines"]}))
    failed = _recovery_failed(info, timed, run) if marker.exists() else None
    if failed is not None:
        timed.append((int(float(info.get("t_end") or 0) * 1e6), 8, failed))
    # unaligned: the keyed snapshot reflects fewer records than the source snapshot; the difference
    # per checkpoint are the records the checkpoint stored as channel state
    if cfg["checkpoints"] == "unaligned" and cfg.get("job") != "module":
        _fill_inflight(timed)
    timed.sort(key=lambda x: (x[0], x[1]))
    errors = run / "ustate-errors.log"
    if errors.exists() and timed:  # a dump of the user's keyed state failed: said, at the end
        for line in errors.read_text(errors="replace").splitlines()[:5]:
            timed.append((timed[-1][0], 9, {"kind": "flink.user_state_error", "error": line[:300]}))
    tx_lines = _tx_lines(run / "tx")
    naive: dict[str, list[str]] = {"0": [], "1": []}
    for f in sorted((run / "naive").glob("gen*.txt")):
        naive[f.name[3]].extend(x for x in f.read_text().splitlines() if x)
    module = cfg.get("job") == "module"
    outputs: list[tuple[str, list[Any], dict[str, Any]]] = [("tx", tx_lines, {})]
    if module:
        # the failure-free reference run of the same job, and the user's own sink (if any)
        outputs.append(("reference", _tx_lines(run / "reference" / "tx"), {}))
        for name, folder in (("user", run), ("user-reference", run / "reference")):
            if (folder / "user-sink.json").exists():
                outputs.append((name, json.loads((folder / "user-sink.json").read_text())["rows"], {}))
        # the KEY of every row handed to the module's sink (job.py's Handed), per generation
        handed_ref = sorted((run / "reference").glob("handed-gen*.txt"))
        if handed_ref:
            outputs.append(("handed-reference", [x for f in handed_ref for x in f.read_text().splitlines() if x], {}))
            for g in (0, 1):
                outputs.append((f"handed-{g}", [x for f in sorted(run.glob(f"handed-gen{g}-*.txt"))
                                                for x in f.read_text().splitlines() if x], {"generation": g}))
    else:
        outputs += [("naive", naive["0"], {"generation": 0}), ("naive", naive["1"], {"generation": 1})]
    header = {"format": "rollcheck.trace/1", "source": "flink", "seed": cfg.get("seed", 0),
              "processes": ["source", "keyed"], "job": "module" if module else "wordcount",
              "engine_version": env_version,
              "config": {k: cfg.get(k) for k in HEADER_CONFIG_KEYS
                         if k not in _PLACEMENT_KEYS or cfg.get(k) is not None},
              "flink": {"pyflink": env_version, "job_id": info.get("job_id"), "final_state": info.get("final_state"),
                        "python_mode": cfg.get("python_mode", "thread")}}
    if info.get("failure_cause") and info.get("final_state") != "FINISHED":
        header["flink"]["failure_cause"] = info["failure_cause"]  # why the (last) job did not finish
    if module:
        header["config"]["records"] = info.get("records", cfg.get("records"))
        header["config"]["fail_at_record"] = info.get("fail_at_record", cfg.get("fail_at_record"))
        header["key"] = info.get("key")
        header["module"] = cfg.get("module_arg", cfg["module"])  # as the user named it
        header["key_format"] = "N\\x1fKEY\\x1fROW: the row's number within its KEY, KEY and the row as JSON"
        header["sink_guarantee"] = cfg.get("sink_guarantee") or "exactly-once"  # the module's SINK_GUARANTEE
        # the user's keyed operators were logged key by key (RollcheckStateLog)
        header["user_state_log"] = True
        if info.get("sources"):  # SOURCES: the names and each one's records in the run's input
            header["sources"] = {"names": info["sources"]["names"], "records": info["sources"]["records"]}
            if cfg.get("drop_sources"):  # a finding being shrunk without these sources
                header["config"]["drop_sources"] = list(cfg["drop_sources"])
    restored = None
    # the engine-neutral core next to the flink.* kinds (for `rollcheck check trace`): a
    # `checkpoint` of every task per completed checkpoint (index = its ordinal), and after the
    # failure a `recovery` to the line the tasks restored
    # A process takes its part of a checkpoint when its last subtask snapshots: the core event goes
    # there, and only for checkpoints that completed. The `failure` stands for the failure of the
    # job's region, which Flink completes by cancelling every task: a checkpoint that completed after
    # a task raised (another task's snapshot can still follow the raise) was taken before that, so
    # its core events come just before the failure.
    # every failure (two for "during-restore" and "twice") and the first restore after it
    fails: list[tuple[int, int | None]] = []
    for tf in sorted(t for t, _, e in timed if e["kind"] == "failure"):
        tr = next((t for t, _, e in sorted(timed, key=lambda x: (x[0], x[1]))
                   if e["kind"] == "flink.restore" and e["attempt"] > 0 and t >= tf), None)
        fails.append((tf, tr))
    taken: dict[tuple[int, str], int] = {}
    for t, _, e in timed:
        if e["kind"] == "flink.snapshot":
            key = (e["checkpoint"], e["task"])
            taken[key] = max(taken.get(key, t), t)
    core_timed: list[tuple[int, int, int, dict[str, Any]]] = []  # (t, rank, position, event)
    ordinal: dict[int, int] = {}
    recoveries = 0
    for pos, (t, rank_, e) in enumerate(timed):
        core_timed.append((t, rank_, 2 * pos, e))
        if e["kind"] == "flink.checkpoint_completed":
            ordinal[e["checkpoint"]] = len(ordinal) + 1
            for proc in header["processes"]:
                at = min(t, taken.get((e["checkpoint"], proc), t))
                rk = 2
                for t_fail, t_rec in fails[::-1]:
                    if at >= t_fail and (t_rec is None or t < t_rec):
                        at, rk = t_fail, 0  # before the failure (rank 1 at the same time)
                        break
                core_timed.append((at, rk, 2 * pos + 1, {"kind": "checkpoint", "process": proc,
                                                        "index": ordinal[e["checkpoint"]], "forced": False}))
        elif e["kind"] == "flink.restore" and e["attempt"] > 0 and recoveries < len(fails) \
                and t >= fails[recoveries][0]:  # the first restore after each failure
            recoveries += 1
            k = ordinal.get(e["checkpoint"]) if e["checkpoint"] is not None else 0
            restored = {proc: k for proc in header["processes"]}
            core_timed.append((t, rank_, 2 * pos + 1, {"kind": "recovery", "line": restored, "in_transit": []}))
    core_timed.sort(key=lambda x: (x[0], x[1], x[2]))
    core: list[tuple[int, dict[str, Any]]] = [(t, e) for t, _, _, e in core_timed]
    with open(out, "w") as fh:
        fh.write(json.dumps(header) + "\n")
        seq = 0
        t_first = timed[0][0] if timed else 0
        for t, e in core:
            seq += 1
            if e["kind"] == "flink.restore" and e["attempt"] > 0:
                restored = e["checkpoint"]
            fh.write(json.dumps({"seq": seq, **e, "t": round((t - t_first) / 1e6, 6)}) + "\n")
        for sink, lines, extra in outputs:
            seq += 1
            fh.write(json.dumps({"seq": seq, "kind": "flink.sink_output", "sink": sink, **extra,
                                 "lines": lines}) + "\n")
        batch = _batch_output(run / "batch") if module else None
        if batch is not None:
            seq += 1
            fh.write(json.dumps({"seq": seq, **batch}) + "\n")
        seq += 1
        fh.write(json.dumps({"seq": seq, "kind": "end"}) + "\n")
    return {"restored_checkpoint": restored, "final_state": info.get("final_state"), "events": seq,
            "failure_injected": marker.exists()}


def source_of_record(layout: dict[str, Any] | None, value: Any) -> dict[str, Any]:
    """``{"source": name, "source_record": i}`` of sequence number ``value`` of a job with several
    input streams (``layout``: the job process's ``sources``, with ``order``, one character per
    record), ``{}`` for a one-source job or a number outside the sequence.

    Examples
    --------
    >>> source_of_record({"names": ["a", "b"], "order": "0100"}, 3)
    {'source': 'a', 'source_record': 2}
    """
    if not layout or not isinstance(value, int) or not 0 <= value < len(layout.get("order") or ""):
        return {}
    order = layout["order"]
    return {"source": layout["names"][ord(order[value]) - 48], "source_record": order.count(order[value], 0, value)}


def _restarts_in_logs(run: Path, job_id: str | None) -> int:
    """How often Flink's logs say the job switched to ``RESTARTING`` (the REST poll can miss a quick one)."""
    if not job_id:
        return 0
    n = 0
    for log in sorted(run.glob("*.log")):
        for line in log.read_text(errors="replace").splitlines():
            if f"({job_id}) switched from state" in line and line.rstrip().endswith("to RESTARTING."):
                n += 1
    return n


def _recovery_failed(info: dict[str, Any], timed: list[tuple[int, int, dict[str, Any]]],
                     run: Path) -> dict[str, Any] | None:
    """``flink.recovery_failed``: after the injected failure the (last) job did not finish — the
    restart from the engine's own checkpoint failed with the engine's exception (Flink's root cause),
    or restarted until the limit ended it. None when it finished (or the user's code raised: the
    recorder refuses that run as the module's failure before a trace is written).

    The checkpoint named is the one the restarted tasks restored (rollcheck's taps, else the REST
    API's ``restored``), else the latest completed before the failure, the one Flink restores."""
    final = info.get("final_state")
    if final == "FINISHED" or info.get("user_error"):
        return None
    restarts = max(int(info.get("restarts") or 0), _restarts_in_logs(run, info.get("job_id")))
    cause = str(info.get("failure_cause") or "")
    # only what is the engine's: a job Flink failed with its exception, or one restarted again and
    # again until the limit (not a rescaled run rollcheck could not restore, not a slow run cut at
    # the limit after one restart)
    if not ((final == "FAILED" and cause and INJECTED_TEXT not in cause) or (final == "TIMEOUT" and restarts >= 2)):
        return None
    events = [e for _, _, e in sorted(timed, key=lambda x: (x[0], x[1]))]
    t_fail = next((t for t, _, e in timed if e["kind"] == "failure"), None)
    restored = [e.get("checkpoint") for e in events if e["kind"] == "flink.restore" and e.get("attempt", 0) > 0]
    reported = [e.get("checkpoint") for e in events if e["kind"] == "flink.restore_reported"]
    completed = [e["checkpoint"] for t, _, e in timed if e["kind"] == "flink.checkpoint_completed"
                 and (t_fail is None or t <= t_fail)]
    checkpoint = next((c for c in [*restored[::-1], *reported[::-1]] if c is not None),
                      max(completed) if completed else None)
    etype, _, message = cause.partition(": ")
    if not cause:
        etype, message = "", f"restarted {restarts} times without end until the limit"
    return {"kind": "flink.recovery_failed", "final_state": final, "checkpoint": checkpoint,
            "restarts": restarts,
            "exception": etype.strip() or None,
            "message": message.strip()[:400], "user_code": False}


def _batch_output(folder: Path) -> dict[str, Any] | None:
    """``flink.batch_output``: the batch-equivalent oracle's run (``job.py``'s ``_batch_run``): its
    final state (and Flink's reason when it did not finish, or the module's reason when it declared
    no batch meaning), and per subtask of the output step the ``KEY<US>ROW`` lines in the order the
    job emitted them. None when the recording has no batch run (a rescaled run, an older recorder)."""
    info_path = folder / "run.json"
    if not info_path.exists():
        return None
    info = json.loads(info_path.read_text())
    files = sorted((folder / "batch-out").glob("rows-*.txt")) if (folder / "batch-out").exists() else []
    return {"kind": "flink.batch_output", "final_state": info.get("final_state"),
            "reason": info.get("skipped") or info.get("failure_cause"),
            "subtasks": [[x for x in f.read_text().splitlines() if x] for f in files]}


def _tx_lines(folder: Path) -> list[str]:
    """The lines of the committed (visible) files of a FileSink folder."""
    lines: list[str] = []
    if folder.exists():
        for f in sorted(folder.rglob("*")):
            if f.is_file() and not f.name.startswith("."):
                lines.extend(x for x in f.read_text().splitlines() if x)
    return lines


def _fill_inflight(timed: list[tuple[int, int, dict[str, Any]]]) -> None:
    events = [e for _, _, e in timed]
    # the keys a keyed subtask owns: every key it ever counted (early in the run a key it owns may
    # still be at 0 in its state while all of that key's records are in flight)
    owned: dict[int, set[int]] = {}
    for e in events:
        if e["kind"] in ("flink.snapshot", "flink.task_finished", "flink.restore") and e["task"] == "keyed":
            owned.setdefault(e["subtask"], set()).update(k for k, c in enumerate(e["per_key"]) if c > 0)
    for e in events:
        if e["kind"] == "flink.snapshot" and e["task"] == "keyed":
            cut = source_cut(events, e["attempt"], e["checkpoint"])
            if cut is None:
                continue
            e["inflight_records"] = sum(cut[0][k] - e["per_key"][k] for k in owned.get(e["subtask"], set()))
