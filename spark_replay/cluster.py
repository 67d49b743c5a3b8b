"""A real Spark standalone cluster on loopback, started and stopped by rollcheck, and its executors.

``rollcheck spark matrix --failures executor --cluster local-standalone`` (and ``spark record query
--failure executor --cluster local-standalone``) needs what only a cluster has: executors in JVMs of
their own, so that one can be SIGKILLed while the driver goes on. :class:`LocalStandaloneCluster`
starts a master and two workers with the pinned pyspark's own launcher
(``pyspark/bin/spark-class org.apache.spark.deploy.master.Master`` / ``...worker.Worker``), bound to
127.0.0.1 on free ports, one core and a little memory per worker, work folders and logs in a
temporary folder; it waits until both workers registered (the master's JSON at its web UI port)
and stops everything at the end. Every JVM is a member of one
:class:`rollcheck.infra.children.ProcessGroup` (the executors a worker launches stay in its
group), so the whole cluster dies with rollcheck however rollcheck dies (the group's watchdog, and
Linux's parent-death signal for the launchers).

:func:`executor_processes` finds the executor JVMs of an application by their command line
(``org.apache.spark.executor.CoarseGrainedExecutorBackend ... --executor-id N ... --app-id APP``),
read with psutil; :func:`kill_executor` SIGKILLs one. A user's own cluster (``--master
spark://H:P``) works the same way as long as its executors run on this machine.

References
----------
Spark documentation, "Spark Standalone Mode" (starting a cluster by hand: ``spark-class
org.apache.spark.deploy.master.Master``, ``--host``, ``--port``, ``--webui-port``, worker
``--cores``, ``--memory``, ``--work-dir``); "Job Scheduling" and the configuration page
(``spark.task.maxFailures``: 4 on a cluster).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from rollcheck.infra.children import ProcessGroup
from rollcheck.spark_replay.session import log4j2_properties

__all__ = ["CLUSTERS", "LocalStandaloneCluster", "ExecutorProcess", "executor_processes", "kill_executor",
           "free_port", "cluster_conf", "validate_cluster", "on_cluster", "EXECUTOR_CLASS",
           "strike_executor"]

#: The clusters rollcheck can start itself (``--cluster``).
CLUSTERS = ("local-standalone",)
#: The executor JVM's main class (its command line names it).
EXECUTOR_CLASS = "org.apache.spark.executor.CoarseGrainedExecutorBackend"


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (the kernel's choice)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def validate_cluster(cluster: str | None, master: str | None) -> None:
    """Check ``--cluster`` against ``--master`` (exit 2 naming the flag).

    Parameters
    ----------
    cluster : str or None
        The ``--cluster`` given.
    master : str or None
        The ``--master`` given.

    Examples
    --------
    >>> validate_cluster("local-standalone", None)
    >>> validate_cluster("yarn", None)
    Traceback (most recent call last):
    ...
    rollcheck.pyimpl.errors.InvalidInputError: --cluster: unknown cluster 'yarn'; use local-standalone, or --master spark://HOST:PORT for your own
    >>> validate_cluster("local-standalone", "spark://127.0.0.1:7077")
    Traceback (most recent call last):
    ...
    rollcheck.pyimpl.errors.InvalidInputError: --cluster: give --cluster or --master spark://..., not both
    """
    from rollcheck.pyimpl.errors import InvalidInputError

    if cluster is None:
        return
    if cluster not in CLUSTERS:
        raise InvalidInputError(f"unknown cluster {cluster!r}; use {', '.join(CLUSTERS)}, or --master "
                                "spark://HOST:PORT for your own", location="--cluster")
    if master is not None:
        raise InvalidInputError("give --cluster or --master spark://..., not both", location="--cluster")


def on_cluster(master: str | None) -> bool:
    """Whether ``master`` is a standalone cluster's URL (executors in JVMs of their own).

    >>> on_cluster("spark://127.0.0.1:7077"), on_cluster("local[2]"), on_cluster(None)
    (True, False, False)
    """
    return bool(master) and str(master).startswith("spark://")


def cluster_conf(master: str | None) -> dict[str, str]:
    """The driver's settings on a standalone cluster.

    Small executors (one core each, so that the two workers run one executor each), the failed
    executor not excluded; nothing in local mode.

    >>> cluster_conf("spark://127.0.0.1:7077")["spark.executor.memory"]
    '512m'
    >>> cluster_conf("local[2]")
    {}
    """
    if not on_cluster(master):
        return {}
    return {"spark.executor.memory": "512m", "spark.executor.cores": "1", "spark.cores.max": "2",
            "spark.excludeOnFailure.enabled": "false", "spark.network.timeout": "60s",
            "spark.executor.heartbeatInterval": "2s"}


@dataclass(frozen=True)
class ExecutorProcess:
    """One executor JVM of an application: its process id, executor id and application id."""

    pid: int
    executor_id: str
    app_id: str


def _arg_after(argv: list[str], flag: str) -> str | None:
    try:
        return argv[argv.index(flag) + 1]
    except (ValueError, IndexError):
        return None


def executor_processes(app_id: str | None = None) -> list[ExecutorProcess]:
    """The executor JVMs running on this machine (of application ``app_id`` when given), by pid.

    Found by their command lines (psutil): a worker starts each executor as ``java ...
    CoarseGrainedExecutorBackend --driver-url ... --executor-id N ... --app-id APP ...``.

    Parameters
    ----------
    app_id : str, optional
        Keep only the executors of this application.

    Returns
    -------
    list of ExecutorProcess
        Sorted by executor id (numerically for numeric ids).
    """
    out = []
    for proc in psutil.process_iter():
        try:
            argv = proc.cmdline()
        except psutil.Error:  # gone, a zombie, or not ours to read
            continue
        if EXECUTOR_CLASS not in argv:
            continue
        eid, app = _arg_after(argv, "--executor-id"), _arg_after(argv, "--app-id")
        if eid is None or app is None or (app_id is not None and app != app_id):
            continue
        out.append(ExecutorProcess(proc.pid, eid, app))
    return sorted(out, key=lambda e: (len(e.executor_id), e.executor_id))


def kill_executor(ex: ExecutorProcess, timeout: float = 10.0) -> bool:
    """SIGKILL one executor JVM; True once its process is gone (within ``timeout``).

    A zombie (dead, not yet reaped by its worker) counts as gone.

    Parameters
    ----------
    ex : ExecutorProcess
        The executor.
    timeout : float, optional
        The wait (s) for the process to go.

    Returns
    -------
    bool
        True once the process is gone.
    """
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(ex.pid, signal.SIGKILL)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            state = psutil.Process(ex.pid).status()
        except psutil.Error:
            return True
        if state in (psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD):
            return True
        time.sleep(0.02)
    return False


@dataclass
class LocalStandaloneCluster:
    """A master and ``workers`` workers on 127.0.0.1 (module docstring); a context manager.

    Attributes
    ----------
    master_url : str
        ``spark://127.0.0.1:PORT`` once started (the driver's ``--master``).
    ui_url : str
        The master's web UI, whose ``/json/`` lists the registered workers.
    """

    workers: int = 2
    worker_memory: str = "1g"
    start_timeout: float = 180.0
    root: Path | None = None
    master_url: str = ""
    ui_url: str = ""
    _group: ProcessGroup | None = None
    _own_root: bool = False
    _logs: list[Path] = field(default_factory=list)

    def __enter__(self) -> LocalStandaloneCluster:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _spark_class(self) -> tuple[Path, Path]:
        import pyspark

        home = Path(pyspark.__file__).resolve().parent
        return home, home / "bin" / "spark-class"

    def start(self) -> None:
        """Start the master and the workers and wait until every worker registered."""
        home, spark_class = self._spark_class()
        if self.root is None:
            self.root = Path(tempfile.mkdtemp(prefix="rollcheck-cluster-"))
            self._own_root = True
        self.root.mkdir(parents=True, exist_ok=True)
        conf = self.root / "conf"
        conf.mkdir(exist_ok=True)
        (conf / "log4j2.properties").write_text(log4j2_properties("warn"), encoding="utf-8")
        env = {**os.environ, "SPARK_HOME": str(home), "SPARK_CONF_DIR": str(conf), "SPARK_LOCAL_IP": "127.0.0.1",
               "SPARK_DAEMON_MEMORY": "256m", "SPARK_LOG_DIR": str(self.root / "logs"),
               "SPARK_NO_DAEMONIZE": "1"}
        env.pop("SPARK_MASTER_HOST", None)
        port, ui = free_port(), free_port()
        self.master_url, self.ui_url = f"spark://127.0.0.1:{port}", f"http://127.0.0.1:{ui}"
        self._group = ProcessGroup()
        try:
            self._spawn("master", [str(spark_class), "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                                   "--port", str(port), "--webui-port", str(ui)], env)
            self._wait(lambda d: d is not None, "the master did not answer")
            for w in range(self.workers):
                work = self.root / f"worker-{w}"
                work.mkdir(exist_ok=True)
                self._spawn(f"worker-{w}", [str(spark_class), "org.apache.spark.deploy.worker.Worker",
                                            "--host", "127.0.0.1", "--port", str(free_port()),
                                            "--webui-port", str(free_port()), "--cores", "1",
                                            "--memory", self.worker_memory, "--work-dir", str(work),
                                            self.master_url], env)
            self._wait(lambda d: d is not None and self.alive_workers(d) >= self.workers,
                       f"{self.workers} workers did not register")
        except BaseException:
            self.stop()
            raise

    def _spawn(self, name: str, argv: list[str], env: dict[str, str]) -> None:
        assert self._group is not None and self.root is not None
        log = self.root / f"{name}.log"
        self._logs.append(log)
        with open(log, "wb") as fh:
            self._group.spawn(argv, env=env, stdin=subprocess.DEVNULL, stdout=fh, stderr=fh,
                              cwd=str(self.root))

    def state(self) -> dict[str, Any] | None:
        """The master's JSON (``/json/``), or None when it does not answer."""
        try:
            with urllib.request.urlopen(self.ui_url + "/json/", timeout=2) as r:  # noqa: S310 (loopback)
                return dict(json.loads(r.read().decode()))
        except (OSError, ValueError):
            return None

    @staticmethod
    def alive_workers(state: dict[str, Any]) -> int:
        """The registered workers that are alive, from the master's JSON."""
        return sum(1 for w in state.get("workers") or [] if w.get("state") == "ALIVE")

    def _wait(self, ok: Any, what: str) -> None:
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if self._group is None or not self._group.alive:
                break
            if ok(self.state()):
                return
            time.sleep(0.5)
        tail = ""
        for log in self._logs:
            with contextlib.suppress(OSError):
                lines = [ln for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
                if lines:
                    tail += f" [{log.name}: {lines[-1][:200]}]"
        raise RuntimeError(f"the local standalone cluster did not start: {what} within "
                           f"{self.start_timeout:g} s{tail}")

    def stop(self) -> None:
        """SIGKILL every JVM of the cluster (master, workers, executors) and remove its folder."""
        if self._group is not None:
            self._group.kill()
            self._group = None
        if self._own_root and self.root is not None:
            shutil.rmtree(self.root, ignore_errors=True)


def _executor_list(spark: Any) -> list[dict[str, Any]]:
    """The executors Spark's driver knows.

    Dead ones included (its status store, kept by Spark's listener of executor added/removed
    events): id, active, removal reason.
    """
    items = spark.sparkContext._jsc.sc().statusStore().executorList(False)
    out = []
    for i in range(items.length()):
        e = items.apply(i)
        reason = e.removeReason()
        out.append({"id": str(e.id()), "active": bool(e.isActive()),
                    "remove_reason": str(reason.get()) if reason.isDefined() else None})
    return out


def strike_executor(spark: Any, timeout: float = 60.0) -> dict[str, Any]:
    """In the driver: SIGKILL one executor JVM of this application and wait for its removal.

    The executor is the lowest executor id alive; the wait ends when Spark's driver lists it as
    removed. Returns the failure event's facts: ``executor_id``, ``pid``, ``app_id``,
    ``process_gone``, ``removed``, ``remove_reason``, ``executors_before``/``executors_after``
    (the driver's list), ``seconds``.

    Parameters
    ----------
    spark : SparkSession
        The driver's session.
    timeout : float, optional
        The wait (s) for Spark to list the executor as removed.

    Returns
    -------
    dict
        The failure event's facts.

    Raises
    ------
    RuntimeError
        No executor process of this application runs on this machine (local mode, or a remote
        cluster): the failure cannot be injected.
    """
    app = spark.sparkContext.applicationId
    t0 = time.monotonic()
    before = _executor_list(spark)
    active = {e["id"] for e in before if e["active"]}
    procs = [p for p in executor_processes(app) if p.executor_id in active]
    if not procs:
        raise RuntimeError(f"no executor JVM of application {app} runs on this machine (executors known to the "
                           f"driver: {sorted(active) or 'none'}): the executor failure needs a standalone cluster "
                           "whose workers run here (--cluster local-standalone)")
    victim = procs[0]
    gone = kill_executor(victim)
    removed, reason, after = False, None, before
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        after = _executor_list(spark)
        mine = next((e for e in after if e["id"] == victim.executor_id), None)
        if mine is not None and not mine["active"]:
            removed, reason = True, mine["remove_reason"]
            break
        time.sleep(0.1)
    return {"executor_id": victim.executor_id, "pid": victim.pid, "app_id": app, "process_gone": gone,
            "removed": removed, "remove_reason": reason, "executors_before": before, "executors_after": after,
            "seconds": round(time.monotonic() - t0, 3)}
