"""A recording's run folder: what the job process is given and what went wrong in it.

:func:`write_run_folder` writes the job's ``config.json`` and ``log4j.properties``;
:func:`job_outcome` raises what the job process left behind (the user's module failing a call, an
exception inside the engine, a full disk, a job without result), each named as whose fault it is.
"""

from __future__ import annotations

import errno
import json
import os
import tempfile
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

from rollcheck.pyimpl.errors import InconclusiveError, InternalError, InvalidInputError

__all__ = ["LOG4J", "MIN_FREE_BYTES", "INJECTED_TEXT", "ModuleFailure", "write_run_folder", "job_outcome"]

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


def _job_file() -> Path:
    return Path(str(resources.files("rollcheck.flink_replay.job").joinpath("main.py")))



#: errors of the environment (not of rollcheck, not of the user's job): disk full, read-only, denied
_ENV_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM}
#: what a recording writes (checkpoints, logs, the trace): refuse to start with less free space
MIN_FREE_BYTES = 64 * 1024 * 1024
#: the text of the failure rollcheck injects (job.failures.INJECTED): never the engine's exception
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



class ModuleFailure(InvalidInputError):
    """The user's module failed a call (exit 2).

    ``call`` names it, ``java`` the class of the Java exception when Flink's JVM raised it inside the
    call (None for the module's Python exception).

    Parameters
    ----------
    reason : str
        What failed, in words.
    source : str, optional
        The module's file.
    call : str, optional
        The call that failed (``job``, ``sink``, ...).
    java : str, optional
        The Java exception's class.
    """

    def __init__(self, reason: str, *, source: str | None = None, call: str = "", java: str | None = None):
        super().__init__(reason, source=source)
        self.call = call
        self.java = java



def write_run_folder(run: Path, cfg: dict[str, Any]) -> str | None:
    """Write the job process's ``config.json`` and ``log4j.properties`` into ``run``.

    With the RocksDB backend, also make a temporary folder for RocksDB's local files (named in
    ``cfg``) and return it (the caller removes it when the job ended).

    Parameters
    ----------
    run : Path
        The run folder.
    cfg : dict
        The job's configuration (written as ``config.json``).

    Returns
    -------
    str or None
        RocksDB's temporary folder, or None.
    """
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

    The job process (:mod:`rollcheck.flink_replay.job.main`) leaves typed records in the run folder
    (or in its ``reference/`` folder, for the failure-free run of a user's job): ``user-error.json``
    (the user's module, exit 2) and ``engine-error.json`` (an exception inside the engine: the user's
    code, exit 2, or rollcheck's own, exit 4). A disk that filled up under the job is the
    environment's fault (exit 2); a job that ended without ``run.json`` and without such a record is
    inconclusive with the reason. ``discard`` runs before an error of the user's module is raised (the
    run folder goes). See docs/internals/flink-recording.md#run_folder.

    Parameters
    ----------
    run : Path
        The run folder.
    config : dict
        The recording's configuration.
    returncode : int
        The job process's exit code.
    discard : callable, optional
        Removes the run folder.

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
    """Why a job process ended without ``run.json``, in one line, never empty.

    The reference run's failure cause, the job's last output lines, or the log's last error.
    """
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
