"""Record a real Flink run: start the job in the PyFlink environment, then write its trace.

The job (:mod:`rollcheck.flink_replay.job.main`) runs in a separate interpreter and leaves raw
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

import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rollcheck.flink_replay.environment import find_flink, tap_jar
from rollcheck.flink_replay.recording.config import BACKENDS, FAILURES, RecordConfig, parse_rescale
from rollcheck.flink_replay.recording.run_folder import (
    _ENV_ERRNOS,
    LOG4J,
    ModuleFailure,
    _check_space,
    _job_file,
    job_outcome,
    write_run_folder,
)
from rollcheck.flink_replay.recording.run_folder import _environment_failure as _environment_failure
from rollcheck.flink_replay.recording.standalone import start_cluster
from rollcheck.flink_replay.recording.trace_build import HEADER_CONFIG_KEYS, build_trace, tx_lines
from rollcheck.flink_replay.recording.trace_events import source_of_record
from rollcheck.infra import children
from rollcheck.pyimpl.errors import InconclusiveError, InvalidInputError

# the settings (config), the run folder (run_folder), the standalone cluster (standalone)
# and the trace (trace_events, trace_build) live beside this module; their names stay importable
# from here (and the private ones other modules import: _job_file, _environment_failure, _tx_lines)
_tx_lines = tx_lines

__all__ = ["RecordConfig", "ModuleFailure", "write_run_folder", "HEADER_CONFIG_KEYS", "record", "record_wordcount",
           "build_trace", "source_of_record", "LOG4J", "BACKENDS", "FAILURES", "parse_rescale", "job_outcome"]


def record_wordcount(out: str | Path, config: RecordConfig, *, run_dir: str | Path | None = None) -> dict[str, Any]:
    """Record the word-count job (see :func:`record`).

    Parameters
    ----------
    out : str or Path
        The trace file to write.
    config : RecordConfig
        The recording's configuration.
    run_dir : str or Path, optional
        The run folder (default: beside the trace).

    Returns
    -------
    dict
        :func:`record`'s summary.
    """
    return record(out, config, run_dir=run_dir)


def record(out: str | Path, config: RecordConfig, *, run_dir: str | Path | None = None,
           before_publish: Callable[[Path, Path], int | None] | None = None) -> dict[str, Any]:
    """Run the word-count job or a user's job module once in the Flink environment; write its trace.

    Parameters
    ----------
    out : str or Path
        The trace file, written through ``OUT.partial`` and renamed when complete.
    config : RecordConfig
        The run's knobs.
    run_dir : str or Path, optional
        The run folder (default: ``OUT.flinkrun`` beside the trace).
    before_publish : callable, optional
        ``before_publish(partial_trace, run_folder)`` is called on the finished trace before it is
        renamed to ``out`` and returns the trace's new number of events, if it added some (the
        failure-free run on the reference release:
        :func:`rollcheck.flink_replay.recording.release_reference.record_job`).

    Returns
    -------
    dict
        ``{"trace", "checkpoint_dir", "restored_checkpoint", "seconds", "final_state"}``.

    Raises
    ------
    InconclusiveError
        PyFlink or a JDK is missing, or the job did not finish.
    InvalidInputError
        The user's job module failed, hung or returned the wrong type (named with the call).
    """
    t0 = time.time()
    if config.get("module"):  # what the module's own sink declares: refused before Flink starts
        from rollcheck.flink_replay.checks.user_replay import declared_guarantee

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
            cfg["cluster_rest_port"] = start_cluster(run, env, penv, slots, cluster, _job_file().parent)
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
