"""A standalone Flink session cluster for the ``taskmanager`` failure (one TaskManager is killed).

One JobManager and two TaskManager processes, each with slots for the whole job, so the job
restarts on the survivor.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

from rollcheck.flink_replay.recording.run_folder import LOG4J
from rollcheck.flink_replay.releases import cluster_config_name
from rollcheck.infra import children
from rollcheck.pyimpl.errors import InconclusiveError

__all__ = ["CLUSTER_CONFIG", "start_cluster"]

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


def start_cluster(run: Path, env: Any, penv: dict[str, str], slots: int,
                  procs: list[Any], job_dir: Path) -> int:
    """Start a standalone session cluster: one JobManager and two TaskManager processes.

    Each TaskManager has enough slots for the whole job, so the job can restart on the survivor
    when the other one is killed. Returns the REST port; the processes are appended to ``procs``.
    ``job_dir`` (the folder of the job process's script) goes on the TaskManagers' ``PYTHONPATH``.
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
    tenv = dict(penv, PYTHONPATH=os.pathsep.join([str(job_dir), site]))
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
