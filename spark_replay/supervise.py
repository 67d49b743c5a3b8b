"""Driver supervision for the Spark recorders: driver children and JVMs that die with rollcheck.

A ``kill`` failure SIGKILLs a Spark *driver* (the Python process and its JVM) and starts a new one
on the same checkpoint, so the recorders (:mod:`~rollcheck.spark_replay.query`,
:mod:`~rollcheck.spark_replay.wordcount`) run each attempt's driver as a child process. This
module is the one supervision loop they share:

- :func:`run_driver` starts ``python -m MODULE --child`` in a process group of its own
  (:mod:`rollcheck.pyimpl.children`: the driver, the JVM PySpark starts for it and Spark's Python
  workers die when rollcheck dies, however it dies), hands it a JSON *spec* on standard input,
  SIGKILLs the group when the driver asks for its own kill (the file ``MARKERS/kill-requested``,
  written by :func:`request_kill` at the injection point), enforces an optional time limit, and
  removes the driver's scratch folder ``WORKDIR/tmp-N`` (its ``TMPDIR`` and ``java.io.tmpdir``: a
  SIGKILLed driver cannot clean up after itself) on every exit path.
- :func:`child_main` is the driver side: read the spec, run the recorder's function, write the
  reply (a JSON file in the scratch folder: the user's code may print to standard output, which
  goes to rollcheck's standard error), and turn the recorder's errors into reply fields that the
  parent raises again as the same error class (bad input, environment, user-code time limit).
- :func:`spark_gateway_in_group` starts PySpark's JVM in a process group that dies with the
  current process (used by :func:`rollcheck.spark_replay.session.spark_session`): a recording
  that runs Spark in rollcheck's own process leaves no JVM behind when rollcheck is SIGKILLed.

References
----------
``specs/cli.md`` ("Faults the commands survive"); ``specs/spark.md`` (the ``kill`` failure).
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rollcheck.pyimpl import children
from rollcheck.pyimpl.errors import (
    EnvironmentFault,
    InvalidInputError,
    UserCodeTimeout,
    environment_fault,
)

__all__ = [
    "KILL_REQUEST",
    "DriverOutcome",
    "run_driver",
    "request_kill",
    "child_main",
    "spark_gateway_in_group",
]

#: The file (in the markers folder) by which a driver asks to be SIGKILLed now.
KILL_REQUEST = "kill-requested"
_POLL_S = 0.05


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
    """Where a driver's standard output goes: rollcheck's standard error (never its stdout, which
    may carry ``--json`` output)."""
    try:
        return sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):
        return subprocess.DEVNULL


def run_driver(module: str, spec: dict[str, Any], *, workdir: Path, n: int, markers: Path,
               timeout: float | None = None, watch: Callable[[Any], bool] | None = None) -> DriverOutcome:
    """Run one driver child ``python -m module --child`` to its end, its kill or its time limit.

    Parameters
    ----------
    module : str
        The recorder module whose ``__main__`` calls :func:`child_main`.
    spec : dict
        JSON-able arguments for the child (the key ``reply`` is added).
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
        points of :mod:`rollcheck.spark_replay.killpoints`), which counts as ``killed``. It also
        serves the driver's own kill requests (:data:`KILL_REQUEST`), so that every kill is
        recorded by the one who struck it.

    Raises
    ------
    InvalidInputError, EnvironmentFault, UserCodeTimeout
        Raised again from the child's reply (same message).
    RuntimeError
        The driver died in another way (its exit code and the end of its reply).
    """
    scratch = workdir / f"tmp-{n}"
    scratch.mkdir(parents=True, exist_ok=False)
    reply_file = scratch / "reply.json"
    kill_request = markers / KILL_REQUEST
    env = {**os.environ, "TMPDIR": str(scratch), "JAVA_TOOL_OPTIONS": f"-Djava.io.tmpdir={scratch}"}
    t0 = time.perf_counter()
    killed = False
    try:
        with children.spawn([sys.executable, "-m", module, "--child"], stdin=subprocess.PIPE,
                            stdout=_child_stdout(), env=env) as proc:
            assert proc.stdin is not None
            with contextlib.suppress(BrokenPipeError):
                proc.stdin.write(json.dumps({**spec, "reply": str(reply_file)}).encode())
                proc.stdin.close()
            deadline = None if timeout is None else time.monotonic() + timeout
            while proc.poll() is None:
                if watch is not None and watch(proc):  # killpoints.KillSupervisor struck
                    killed = True
                    break
                if watch is None and kill_request.exists():  # with watch, the watcher serves requests
                    kill_request.unlink()
                    proc.kill_group()
                    killed = True
                    break
                if deadline is not None and time.monotonic() > deadline:
                    proc.kill_group()
                    raise UserCodeTimeout(str(spec.get("module", module)), "the driver", timeout or 0.0)
                if watch is None:
                    time.sleep(_POLL_S)
            proc.kill_group()  # stragglers of an ended driver (its JVM) die with the group
        rc = proc.returncode
        reply: dict[str, Any] = {}
        if not killed and reply_file.exists():
            with contextlib.suppress(OSError, ValueError):
                reply = json.loads(reply_file.read_text(encoding="utf-8"))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    seconds = time.perf_counter() - t0
    if killed or rc == -signal.SIGKILL and not reply:
        return DriverOutcome(rc, True, {}, seconds)
    _raise_from_reply(reply, spec)
    if rc not in (0, 4) or not reply:
        raise RuntimeError(f"the Spark driver ({module}) exited with {rc}: {reply or 'no reply'}")
    return DriverOutcome(rc, False, reply, seconds)


def _raise_from_reply(reply: dict[str, Any], spec: dict[str, Any]) -> None:
    if "invalid" in reply:
        raise InvalidInputError(reply["invalid"])
    if "environment" in reply:
        raise EnvironmentFault(**reply["environment"])
    if "timeout" in reply:
        raise UserCodeTimeout(**reply["timeout"])


def request_kill(markers: Path) -> None:
    """In a driver child: ask the parent to SIGKILL this driver's group now, and wait for it."""
    (markers / KILL_REQUEST).write_text(str(os.getpid()), encoding="utf-8")
    time.sleep(600)
    raise RuntimeError("the supervisor did not kill this driver within 600 s")


def _write_reply(path: str, obj: dict[str, Any]) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(obj, fh)
    os.replace(tmp, path)


def child_main(run: Callable[[dict[str, Any]], dict[str, Any]]) -> int:
    """The driver child's main: ``run(spec)`` with the spec read from standard input.

    Exit code 0 when the reply's ``status`` is ``"done"``, 4 when the attempt ended otherwise,
    2 for bad input, environment faults and user-code time limits (in the reply).
    """
    children.die_with_parent()  # set already by the parent's hook on Linux; harmless twice
    spec = json.loads(sys.stdin.read())
    reply_path = spec["reply"]
    try:
        res = run(spec)
    except UserCodeTimeout as e:
        _write_reply(reply_path, {"timeout": e.fields()})
        return 2
    except InvalidInputError as e:
        _write_reply(reply_path, {"invalid": str(e)})
        return 2
    except Exception as e:
        fault = environment_fault(e)
        if fault is None:
            raise
        _write_reply(reply_path, {"environment": fault.fields()})
        return 2
    _write_reply(reply_path, res)
    return 0 if res.get("status") == "done" else 4


# ----------------------------------------------------------------------------- the JVM
_JVM_LOCK = threading.Lock()
_JVM_GROUP: list[children.ProcessGroup] = []


def _end_jvm_gently(group: children.ProcessGroup, gateway: Any) -> None:
    """At a normal interpreter exit: let the JVM run its shutdown hooks (Spark removes its scratch
    folders) by closing its standard input, then kill whatever is left of the group."""
    proc = getattr(gateway, "proc", None)
    try:
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(Exception):
                gateway.shutdown()
            with contextlib.suppress(OSError, ValueError):
                if proc.stdin is not None:
                    proc.stdin.close()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=20)
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
