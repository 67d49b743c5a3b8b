"""Driver supervision for the Spark recorders: driver children and JVMs that die with rollcheck.

Details: ``docs/internals/spark-core.md`` (section ``supervise``).

References
----------
``specs/cli.md`` ("Faults the commands survive"); ``specs/spark.md`` (the ``kill`` failure).
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rollcheck.infra import children
from rollcheck.pyimpl.errors import (
    EnvironmentFault,
    InvalidInputError,
    UserCodeTimeout,
    environment_fault,
)

__all__ = [
    "claim_once",
    "KILL_REQUEST",
    "DriverOutcome",
    "run_driver",
    "request_kill",
    "child_main",
    "environment_guard",
    "give_up_on_user_code",
    "spark_gateway_in_group",
]

#: The file (in the markers folder) by which a driver asks to be SIGKILLed now.
KILL_REQUEST = "kill-requested"
_POLL_S = 0.05
#: Bytes of pipe buffer for a driver's reply (it is read when the driver has ended).
_REPLY_MAX = 1 << 20


@dataclass
class DriverOutcome:
    """How one driver child ended.

    ``killed`` is True when the group was SIGKILLed on the driver's own request (the injected
    ``kill`` failure); ``reply`` is the driver's reply (empty when it was killed or died).
    """

    returncode: int
    killed: bool
    reply: dict[str, Any]
    seconds: float


def _child_stdout() -> Any:
    """Where a driver's standard output goes.

    Rollcheck's standard error (never its stdout, which may carry ``--json`` output).
    """
    try:
        return sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):
        return subprocess.DEVNULL


def run_driver(module: str, spec: dict[str, Any], *, workdir: Path, n: int, markers: Path,
               timeout: float | None = None, watch: Callable[[Any], bool] | None = None,
               python: str | Path | None = None, env: dict[str, str] | None = None) -> DriverOutcome:
    """Run one driver child ``python -m module --child`` to its end, its kill or its time limit.

    Parameters
    ----------
    module : str
        The recorder module whose ``__main__`` calls :func:`child_main`.
    spec : dict
        JSON-able arguments for the child (the key ``reply_fd`` is added).
    workdir : Path
        The recording's work folder; the child's scratch folder ``tmp-<n>`` is created in it and
        removed when this function returns or raises.
    n : int
        The driver's number (1, 2, ...).
    markers : Path
        The folder where the driver writes :data:`KILL_REQUEST`.
    timeout : float, optional
        Wall-clock limit for the whole driver; on expiry the group is killed and
        :class:`UserCodeTimeout` is raised (naming ``spec["module"]`` if present).
    watch : callable, optional
        Called with the driver's process in every round of the wait (it may block up to about
        ``_POLL_S``); it returns True when it has killed the driver at a kill point (the kill
        points of :mod:`rollcheck.spark_replay.faults.killpoints`), which counts as ``killed``. It also
        serves the driver's own kill requests (:data:`KILL_REQUEST`), so that every kill is
        recorded by the one who struck it.
    python : path, optional
        The interpreter of the driver (default: the running one); another pyspark release's
        environment (:func:`rollcheck.spark_replay.releases.spark_environment`) with ``env``
        from :func:`rollcheck.spark_replay.releases.child_environment`.
    env : dict, optional
        The driver's process environment (default: the running process's).

    Raises
    ------
    InvalidInputError, EnvironmentFault, UserCodeTimeout
        Raised again from the child's reply (same message).
    RuntimeError
        The driver died in another way (its exit code and the end of its reply).
    """
    scratch = workdir / f"tmp-{n}"
    scratch.mkdir(parents=True, exist_ok=False)
    argv, env = _driver_command(module, scratch, python, env)
    t0 = time.perf_counter()
    killed = False
    # the reply comes through a pipe: it needs no disk space (a full disk is a reply too)
    r, w = os.pipe()
    reply_fd = w  # the same number in the child (pass_fds)
    os.set_blocking(r, False)
    with contextlib.suppress(AttributeError, OSError):  # Linux: room for any reply (read at the end)
        fcntl.fcntl(w, fcntl.F_SETPIPE_SZ, _REPLY_MAX)
    try:
        with children.spawn(argv, stdin=subprocess.PIPE,
                            stdout=_child_stdout(), env=env, pass_fds=(w,)) as proc:
            os.close(w)
            w = -1
            assert proc.stdin is not None
            with contextlib.suppress(BrokenPipeError):
                proc.stdin.write(json.dumps({**spec, "reply_fd": reply_fd, "parent": os.getpid()}).encode())
                proc.stdin.close()
            killed = _wait_for_driver(proc, module, spec, markers / KILL_REQUEST, timeout, watch)
            proc.kill_group()  # stragglers of an ended driver (its JVM) die with the group
        rc = proc.returncode
        reply = _read_reply(r, killed)
    finally:
        os.close(r)
        if w >= 0:
            os.close(w)
        shutil.rmtree(scratch, ignore_errors=True)
    seconds = time.perf_counter() - t0
    if killed or rc == -signal.SIGKILL and not reply:
        return DriverOutcome(rc, True, {}, seconds)
    _raise_from_reply(reply, spec)
    if rc not in (0, 4) or not reply:
        raise RuntimeError(f"the Spark driver ({module}) exited with {rc}: {reply or 'no reply'}")
    return DriverOutcome(rc, False, reply, seconds)


def _driver_command(module: str, scratch: Path, python: str | Path | None,
                    env: dict[str, str] | None) -> tuple[list[str], dict[str, str]]:
    """The driver child's command line and environment (``scratch`` its temporary folder)."""
    env = {**(os.environ if env is None else env), "TMPDIR": str(scratch),
           "JAVA_TOOL_OPTIONS": f"-Djava.io.tmpdir={scratch}", _SUPERVISED: "1"}
    argv = [str(python or sys.executable), "-m", module, "--child"]
    if python is not None and Path(python) != Path(sys.executable):
        argv.insert(1, "-s")  # another release's environment: not even the user's site folder
    return argv, env


def _wait_for_driver(proc: children.Child, module: str, spec: dict[str, Any], kill_request: Path,
                     timeout: float | None, watch: Callable[[Any], bool] | None) -> bool:
    """Wait for the driver's end: True when it was killed at a kill point or on its own request."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while proc.poll() is None:
        if watch is not None and watch(proc):  # killpoints.KillSupervisor struck
            return True
        if watch is None and kill_request.exists():  # with watch, the watcher serves requests
            kill_request.unlink()
            proc.kill_group()
            return True
        if deadline is not None and time.monotonic() > deadline:
            proc.kill_group()
            raise UserCodeTimeout(str(spec.get("module", module)), "the driver", timeout or 0.0)
        if watch is None:
            time.sleep(_POLL_S)
    return False


def _read_reply(fd: int, killed: bool) -> dict[str, Any]:
    """The ended driver's reply from the pipe (empty when it was killed or wrote none that parses)."""
    chunks: list[bytes] = []
    _drain(fd, chunks)
    reply: dict[str, Any] = {}
    if not killed and chunks:
        with contextlib.suppress(ValueError):
            reply = json.loads(b"".join(chunks).decode("utf-8", errors="replace"))
    return reply


def _drain(fd: int, chunks: list[bytes]) -> None:
    """Append to ``chunks`` what the non-blocking pipe ``fd`` holds now."""
    while True:
        try:
            b = os.read(fd, 65536)
        except BlockingIOError:
            return
        if not b:
            return
        chunks.append(b)


def _raise_from_reply(reply: dict[str, Any], spec: dict[str, Any]) -> None:
    """Raise again the bad input, environment fault or time limit a driver's reply carries."""
    if "invalid" in reply:
        bad = reply["invalid"]
        if isinstance(bad, dict):  # the file and the attribute, as the driver named them
            raise InvalidInputError(str(bad.get("reason")), source=bad.get("source"), location=bad.get("location"))
        raise InvalidInputError(str(bad))
    if "environment" in reply:
        raise EnvironmentFault(**reply["environment"])
    if "timeout" in reply:
        raise UserCodeTimeout(**reply["timeout"])


def claim_once(marker: Path) -> bool:
    """Create ``marker`` exclusively.

    True for the one caller (of any process) that created it, False once it exists — how an injected
    failure fires once per recording.

    >>> import tempfile, pathlib
    >>> m = pathlib.Path(tempfile.mkdtemp()) / "failed"
    >>> claim_once(m), claim_once(m)
    (True, False)
    """
    try:
        fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return False
    os.close(fd)
    return True


def request_kill(markers: Path) -> None:
    """In a driver child: ask the parent to SIGKILL this driver's group now, and wait for it."""
    (markers / KILL_REQUEST).write_text(str(os.getpid()), encoding="utf-8")
    time.sleep(600)
    raise RuntimeError("the supervisor did not kill this driver within 600 s")


def _write_reply(fd: int, obj: dict[str, Any]) -> None:
    """Write the reply (cut to fit the pipe: the parent reads it when the driver has ended)."""
    bad = obj.get("invalid")
    if isinstance(bad, dict) and len(str(bad.get("reason"))) > 4000:
        obj = {**obj, "invalid": {**bad, "reason": str(bad["reason"])[:4000] + " …"}}
    data = json.dumps(obj).encode()
    if len(data) > _REPLY_MAX // 2:
        data = json.dumps({"status": obj.get("status", "failed"), "note": "reply too long"}).encode()
    while data:
        data = data[os.write(fd, data):]
    os.close(fd)


def _exit_now(code: int) -> None:
    """End the driver at once: a thread of the user's code past its limit may never return.

    And the interpreter would wait for it. The parent kills what is left of the process group.
    """
    with contextlib.suppress(Exception):
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(code)


_REPLY_FD: list[int] = []


def give_up_on_user_code(err: UserCodeTimeout) -> None:
    """User code past its limit cannot be stopped (a thread blocked in C code).

    In a driver child, reply and end the process now (stopping Spark would wait for that thread);
    elsewhere raise.
    """
    if _REPLY_FD:
        _write_reply(_REPLY_FD[0], {"timeout": err.fields()})
        _exit_now(2)
    raise err


def child_main(run: Callable[[dict[str, Any]], dict[str, Any]]) -> int:
    """The driver child's main: ``run(spec)`` with the spec read from standard input.

    Exit code 0 when the reply's ``status`` is ``"done"``, 4 when the attempt ended otherwise,
    2 for bad input, environment faults and user-code time limits (in the reply).
    """
    spec = json.loads(sys.stdin.read())
    children.die_with_parent(parent=spec.get("parent"))  # set already by the spawn hook (main thread)
    reply_fd = int(spec["reply_fd"])
    _REPLY_FD[:] = [reply_fd]
    try:
        res = run(spec)
    except UserCodeTimeout as e:
        _write_reply(reply_fd, {"timeout": e.fields()})
        _exit_now(2)
    except EnvironmentFault as e:
        _write_reply(reply_fd, {"environment": e.fields()})
        return 2
    except InvalidInputError as e:
        _write_reply(reply_fd, {"invalid": {"reason": e.reason, "source": e.source, "location": e.location}})
        return 2
    except Exception as e:
        fault = environment_fault(e, spec.get("root"))
        if fault is None:
            raise
        _write_reply(reply_fd, {"environment": fault.fields()})
        return 2
    _write_reply(reply_fd, res)
    return 0 if res.get("status") == "done" else 4


@contextlib.contextmanager
def environment_guard(path: str | Path) -> Iterator[None]:
    """Turn any error caused by the environment into an :class:`EnvironmentFault`.

    Such errors are a full disk, a read-only file system, a missing permission (in Python or in
    the JVM's message); the fault names the error's own path, else ``path``: never "the query
    failed", never an internal error.
    """
    try:
        yield
    except EnvironmentFault:
        raise
    except UserCodeTimeout:
        raise
    except Exception as e:
        fault = environment_fault(e, str(path))
        if fault is None:
            raise
        raise fault from None


# ----------------------------------------------------------------------------- the JVM
_JVM_LOCK = threading.Lock()
#: Set in a driver child's environment by :func:`run_driver`.
_SUPERVISED = "ROLLCHECK_SUPERVISED_DRIVER"
_JVM_GROUP: list[children.ProcessGroup] = []


def _end_jvm_gently(group: children.ProcessGroup, gateway: Any) -> None:
    """At a normal interpreter exit.

    Let the JVM run its shutdown hooks (Spark removes its scratch folders) by closing its standard
    input, then kill whatever is left of the group.
    """
    proc = getattr(gateway, "proc", None)
    try:
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(Exception):
                gateway.shutdown()
            with contextlib.suppress(OSError, ValueError):
                if proc.stdin is not None:
                    proc.stdin.close()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=10)
    finally:
        group.kill()


def spark_gateway_in_group(settings: dict[str, Any]) -> None:
    """Start PySpark's JVM (if this process has none yet) in a process group that dies with us.

    ``settings`` are the Spark settings of the first session (``spark.master``,
    ``spark.driver.extraJavaOptions``, ...): given to ``spark-submit`` as PySpark would. PySpark
    then uses this gateway for every session of the process. Where process groups are not
    available (no ``/bin/sh``), PySpark starts its JVM itself as usual.
    """
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    with _JVM_LOCK:
        if SparkContext._gateway is not None:  # one JVM per process: PySpark reuses it
            return
        if os.environ.get(_SUPERVISED):  # a driver child: its JVM stays in the driver's own group,
            return                       # which dies with rollcheck and is killed as one
        try:
            group = children.ProcessGroup()
        except OSError:
            return
        conf = SparkConf(loadDefaults=False)
        for k, v in settings.items():
            conf.set(k, str(v))
        try:
            gateway = launch_gateway(conf, popen_kwargs={"process_group": group.pgid})
        except BaseException:
            group.kill()
            raise
        SparkContext._ensure_initialized(gateway=gateway)
        _JVM_GROUP.append(group)
        atexit.register(_end_jvm_gently, group, gateway)
