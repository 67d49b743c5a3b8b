"""The failure-free run of a user's job on the reference release (``release-differential``).

With ``flink record job --engine-version V`` the recorder also runs the job once without a failure
on the reference release R (``--reference-version R``, default the pinned release), in R's own
environment, and keeps what its transactional sink committed. :func:`release_reference` returns
that run as the ``flink.release_reference`` event (:func:`add_to_trace` puts it into the trace
just before ``end``), so that a replay decides the check from the trace alone
(:func:`rollcheck.flink_replay.checks.oracles.release_check`). :func:`record_job` is
:func:`rollcheck.flink_replay.recording.record.record` with that run added; ``rollcheck flink
record`` and the matrix record through it.

See docs/internals/flink-recording.md#release_reference for what the run shares with V's and what
the event holds.

References
----------
McKeeman, "Differential Testing for Software", Digital Technical Journal 10(1), 1998 (the same
input to two implementations, the outputs compared).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

from rollcheck.infra import children
from rollcheck.pyimpl.errors import InconclusiveError, InvalidInputError

__all__ = ["record_job", "build_failure_trace", "needs_release_reference", "release_reference", "add_to_trace", "config_key"]

#: The configuration keys the failure-free run depends on (what the matrix shares it by).
_SAME = ("module", "checkpoints", "parallelism", "interval_ms", "records", "rate", "keys", "seed", "backend",
         "max_parallelism", "max_records", "call_timeout", "reference_version")


def record_job(out: str | Path, config: dict[str, Any], *, run_dir: str | Path | None = None,
               shared: dict[str, Any] | None = None) -> dict[str, Any]:
    """Record ``config``, with the failure-free run on the reference release when it needs one.

    That run (:func:`needs_release_reference`) comes after the run on V, into the same trace; or
    ``shared``, that run's event made once for several cells (the matrix).

    Parameters
    ----------
    out : str or Path
        The trace file to write.
    config : dict
        The recording's configuration (:class:`RecordConfig`'s keys).
    run_dir : str or Path, optional
        The run's folder; None: one beside the trace.
    shared : dict, optional
        The reference release's ``flink.release_reference`` event, made once for several cells;
        None: run it here when needed.

    Returns
    -------
    dict
        :func:`rollcheck.flink_replay.recording.record.record`'s summary.

    Raises
    ------
    InvalidInputError, InconclusiveError, InternalError
        As :func:`record`, and as :func:`release_reference` (the trace is then not published).
    """
    from rollcheck.flink_replay.environment import find_flink
    from rollcheck.flink_replay.recording.record import ModuleFailure, RecordConfig, record

    if shared is None and needs_release_reference(config):
        find_flink(str(config["reference_version"]))  # R's environment made (or refused, exit 2) before V's run

    def add(tmp: Path, run: Path) -> int | None:
        if not needs_release_reference(config):
            return None
        event = shared if shared is not None else release_reference(config, run / f"release-{config['reference_version']}")
        return add_to_trace(tmp, event)

    t0 = time.monotonic()
    try:
        return record(out, RecordConfig(config), run_dir=run_dir, before_publish=add)
    except ModuleFailure as e:
        # Flink's JVM raised inside the module's job() on V: the module's fault, unless the same
        # module builds and runs on R, which makes it the engine's (the release is the difference)
        if not (e.java and e.call == "job" and needs_release_reference(config)):
            raise
        folder = Path(out).with_name(Path(out).stem + f".release-{config['reference_version']}")
        event = shared if shared is not None else release_reference(config, folder)
        if event.get("final_state") != "FINISHED":
            raise
        return build_failure_trace(Path(out), config, e, event, time.monotonic() - t0)


def build_failure_trace(out: Path, config: dict[str, Any], failure: Any, event: dict[str, Any],
                        seconds: float) -> dict[str, Any]:
    """Write the trace of a job whose graph Flink could not build on V, while it built and ran on R.

    The header, ``flink.reference_failed`` (the Java exception raised inside ``job()``), R's
    ``flink.release_reference`` and ``end`` (``release-differential`` decides it from the trace).
    Returns :func:`~rollcheck.flink_replay.recording.record.record`'s summary.

    Parameters
    ----------
    out : Path
        The trace file to write.
    config : dict
        The recording's configuration.
    failure : ModuleFailure
        The failure raised inside ``job()`` on V (its Java exception and reason).
    event : dict
        R's ``flink.release_reference`` event (a finished run).
    seconds : float
        The time the recording took, s.
    """
    from rollcheck.pyimpl.patternio import atomic_write_text

    v = str(config.get("engine_version"))
    from rollcheck.flink_replay.recording.record import HEADER_CONFIG_KEYS
    header = {"format": "rollcheck.trace/1", "source": "flink", "seed": config.get("seed", 0),
              "processes": ["source", "keyed"], "job": "module", "engine_version": v,
              "config": {k: config.get(k) for k in HEADER_CONFIG_KEYS},
              "flink": {"pyflink": v, "job_id": None, "final_state": "NOT_RUN",
                        "failure_cause": f"{failure.java} raised inside job()"},
              "key": None, "module": config.get("module_arg", config.get("module")),
              "sink_guarantee": config.get("sink_guarantee") or "exactly-once"}
    failed = {"seq": 1, "kind": "flink.reference_failed", "engine_version": v, "phase": "job()",
              "exception": failure.java,
              "message": " ".join(failure.reason.replace(" (the job module's own failure)", "").split())[:2000]}
    events = [failed, {**{k: x for k, x in event.items() if k != "seq"}, "seq": 2}, {"seq": 3, "kind": "end"}]
    atomic_write_text(out, "".join(json.dumps(x) + "\n" for x in [header, *events]))
    return {"trace": str(out), "events": len(events), "checkpoint_dir": None, "restored_checkpoint": None,
            "seconds": round(seconds, 1), "final_state": "NOT_RUN", "engine_failure": failure.java}


def needs_release_reference(config: dict[str, Any], version: str | None = None) -> bool:
    """Whether a recording of ``config`` also runs the failure-free run on its reference release.

    It does for a user's job module recorded with ``--engine-version V`` whose reference release is
    not V.

    Parameters
    ----------
    config : dict
        The recording's configuration.
    version : str, optional
        The release recorded; None: ``config["engine_version"]``.

    Returns
    -------
    bool
        True when the reference release's failure-free run is needed.
    """
    v = version or config.get("engine_version")
    r = config.get("reference_version")
    return config.get("job") == "module" and bool(config.get("engine_version")) and bool(r) and r != v


def config_key(config: dict[str, Any]) -> str:
    """What identifies the failure-free run on R of ``config``: the keys of :data:`_SAME`, as JSON.

    The same for every failure and every release V under test.

    Examples
    --------
    >>> a = {"module": "/j.py", "backend": "hashmap", "failure": "task", "engine_version": "2.2.1"}
    >>> config_key(a) == config_key({**a, "failure": "twice", "engine_version": "1.20.5"})
    True
    """
    return json.dumps({k: config.get(k) for k in _SAME}, sort_keys=True, default=str)


def release_reference(config: dict[str, Any], run: Path) -> dict[str, Any]:
    """Run the job of ``config`` failure-free on ``config["reference_version"]``, in that release's environment.

    Parameters
    ----------
    config : dict
        The recording's config.
    run : Path
        The run folder (made afresh).

    Returns
    -------
    dict
        The ``flink.release_reference`` event (without ``seq``).

    Raises
    ------
    InvalidInputError
        The reference release is out of range or cannot be installed (exit 2 naming it).
    InconclusiveError
        PyFlink or a JDK is missing, or the job process did not end within its limit.
    InternalError
        rollcheck's own code raised inside the job on R (a bug in rollcheck).
    """
    from rollcheck.flink_replay.environment import find_flink, tap_jar
    from rollcheck.flink_replay.recording.record import (
        _job_file,
        _tx_lines,
        job_outcome,
        write_run_folder,
    )

    version = str(config["reference_version"])
    t0 = time.monotonic()
    env = find_flink(version)
    jar = tap_jar(env)
    if run.exists():
        shutil.rmtree(run)
    run.mkdir(parents=True)
    # the failure-free run: no failure, no rescale, no reference of its own, no BATCH run
    cfg = dict(config, run_dir=str(run.resolve()), tap_jar=str(jar), engine_version=env.version, failure=None,
               fail_at_record=None, rescale=None, reference=False, batch_equivalent=False, cluster_rest_port=None)
    rocksdb_dir = write_run_folder(run, cfg)
    (run / "tmp").mkdir()
    penv = dict(os.environ, LOG4J_PROPERTIES=str(run / "log4j.properties"), FLINK_LOG_DIR=str(run),
                PYTHONPATH=str(_job_file().parent), TMPDIR=str(run / "tmp"))
    penv.pop("PYTHONSTARTUP", None)
    penv["JVM_ARGS"] = (penv.get("JVM_ARGS", "") + f" -Djava.io.tmpdir={run / 'tmp'}").strip()
    event: dict[str, Any] = {"kind": "flink.release_reference", "engine_version": env.version}
    try:
        with open(run / "job.out", "w") as so:
            try:
                p = children.run([str(env.python), str(_job_file()), str(run / "config.json")], stdout=so,
                                 stderr=subprocess.STDOUT, env=penv, timeout=float(config["timeout_s"]) + 180)
            except subprocess.TimeoutExpired:
                raise InconclusiveError(f"the failure-free run on apache-flink {version} did not end within "
                                        f"{config['timeout_s']} s (log: {run})") from None
    finally:
        if rocksdb_dir is not None:
            shutil.rmtree(rocksdb_dir, ignore_errors=True)
    try:
        job_outcome(run, cfg, p.returncode)
    except InvalidInputError as e:  # the module's own failure on R (its import, a call, an API R lacks)
        event.update(final_state="NOT_RUN", user_error=e.reason, lines=[])
    except InconclusiveError as e:
        event.update(final_state="NO_RESULT", failure_cause=None, reason=str(e), lines=[])
    else:
        info = json.loads((run / "run.json").read_text())
        event.update(final_state=info.get("final_state"), lines=_tx_lines(run / "tx"))
        if info.get("final_state") != "FINISHED":
            event["failure_cause"] = info.get("failure_cause")
    event["seconds"] = round(time.monotonic() - t0, 1)
    return event


def add_to_trace(path: Path, event: dict[str, Any]) -> int:
    """Insert ``event`` into the trace file ``path`` just before its ``end`` (renumbering ``end``).

    Returns the number of events after it.

    Parameters
    ----------
    path : Path
        The trace file (rewritten).
    event : dict
        The event (its ``seq`` is replaced).

    Returns
    -------
    int
        The new ``end`` event's ``seq``.
    """
    lines = path.read_text(encoding="utf-8").splitlines()
    end = json.loads(lines[-1])
    if end.get("kind") != "end":
        raise ValueError(f"{path}: the trace does not end with an end event")
    seq = int(end["seq"])
    new = [*lines[:-1], json.dumps({"seq": seq, **{k: v for k, v in event.items() if k != "seq"}}),
           json.dumps({**end, "seq": seq + 1})]
    path.write_text("\n".join(new) + "\n", encoding="utf-8")
    return seq + 1
