"""Warm Spark drivers: one long-lived driver per matrix worker for the cells that need no new process.

Details: ``docs/internals/spark-matrix.md`` (section ``warm``).
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rollcheck.pyimpl.errors import InvalidInputError

__all__ = ["WARM_FAILURES", "WarmReply", "WarmDriver", "WarmPool", "serve", "forget_user_modules", "LEAK_FOR_TESTS"]

#: The failures a warm driver runs (besides the failure-free reference).
WARM_FAILURES = ("task", "sink")
#: Environment variable naming a marker file: while it exists, a warm driver leaks a streaming query
#: after its next cell (and removes the marker) — how the tests damage a driver on purpose.
LEAK_FOR_TESTS = "ROLLCHECK_WARM_LEAK_MARKER"
_SUPERVISED = "ROLLCHECK_SUPERVISED_DRIVER"  # supervise.py: the JVM stays in the driver's own group


@dataclass
class WarmReply:
    """One cell's outcome in a warm driver.

    ``exit``: the recording's exit code (0 done, 3 ended otherwise, 2 bad input, 4 internal; None:
    no answer); ``error``: the one line a fresh child would have printed; ``damaged``: why the
    driver cannot run another cell (the cell's result is then not to be trusted unless ``retire``);
    ``retire``: the result stands but the driver is replaced; ``cpu_seconds``, ``seconds``: its cost.
    """

    exit: int | None
    result: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    damaged: str | None = None
    retire: bool = False
    cpu_seconds: float = 0.0
    seconds: float = 0.0


class WarmDriver:
    """A long-lived Spark driver child (module docstring).

    Parameters
    ----------
    workdir : Path
        Its folder: ``warm-N.log`` and the scratch folder ``warm-N.tmp`` (removed when it ends).
    n : int
        Its number (a matrix worker's drivers are numbered 1, 2, ... as they are replaced).
    master : str, optional
        The Spark master of every cell it runs.
    runner : ChildRunner, optional
        The matrix's runner: :meth:`~rollcheck.infra.matrix.ChildRunner.stop` kills it too.
    release : str, optional
        The pyspark release it runs (None: the running interpreter's).
    """

    def __init__(self, workdir: Path, n: int, master: str | None = None, runner: Any = None,
                 release: str | None = None) -> None:
        self.workdir, self.n, self.master, self.runner = Path(workdir), n, master, runner
        self.release = release
        self.log = self.workdir / f"warm-{n}.log"
        self.scratch = self.workdir / f"warm-{n}.tmp"
        self.proc: Any = None
        self._started = time.perf_counter()
        self.cells = 0
        self._r = -1
        self._buf = b""

    @property
    def alive(self) -> bool:
        """Whether the driver process is running."""
        return self.proc is not None and self.proc.poll() is None

    def start(self, timeout: float = 300.0) -> None:
        """Start the driver and wait until its Spark session is up.

        RuntimeError when it is not, or when it runs another release than :attr:`release`.
        """
        from rollcheck.infra import children
        from rollcheck.spark_replay.releases import child_environment, spark_environment

        self._started = time.perf_counter()
        python = spark_environment(self.release)  # made before the cells ran (matrix.prepare_releases)
        self.workdir.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(self.scratch, ignore_errors=True)
        self.scratch.mkdir(parents=True)
        r, w = os.pipe()
        env = child_environment(python, {**os.environ, "TMPDIR": str(self.scratch),
                                         "JAVA_TOOL_OPTIONS": f"-Djava.io.tmpdir={self.scratch}", _SUPERVISED: "1"})
        argv = [str(python), "-m", "rollcheck.spark_replay.matrix.warm", str(w), self.master or "", str(os.getpid())]
        with open(self.log, "ab") as log:
            self.proc = children.spawn(argv, stdin=subprocess.PIPE, stdout=log, stderr=log, env=env, pass_fds=(w,))
        os.close(w)
        self._r = r
        if self.runner is not None:
            self.runner.adopt(self.proc)
        hello = self._read_line(timeout)
        if not hello or not hello.get("ready"):
            self.close()
            raise RuntimeError(f"the warm Spark driver did not start: {_tail(self.log) or 'no answer'}")
        if self.release is not None and hello.get("pyspark") != self.release:
            self.close()
            raise RuntimeError(f"the warm Spark driver runs pyspark {hello.get('pyspark')}, not {self.release}")

    def attach(self, runner: Any) -> None:
        """Let ``runner`` (the matrix now using the driver) kill it on stop, instead of the last one."""
        if runner is self.runner or self.proc is None:
            return
        if self.runner is not None:
            self.runner.release(self.proc)
        self.runner = runner
        if runner is not None:
            runner.adopt(self.proc)

    def run(self, config: Path, timeout: float, cell_log: Path | None = None) -> WarmReply:
        """Run the cell of the configuration file ``config``.

        Return its :class:`WarmReply` (``exit`` None and ``damaged`` set when the driver did not
        answer within ``timeout``).

        Parameters
        ----------
        config : Path
            The cell's configuration file.
        timeout : float
            The limit (s) on the driver's answer.
        cell_log : Path, optional
            Where the cell's log lines go.
        """
        from rollcheck.infra.matrix.cost import TreeCpu

        assert self.proc is not None and self.proc.stdin is not None
        start = self.log.stat().st_size if self.log.exists() else 0
        # sampled only while a cell runs (an idle driver of a long-lived pool costs nothing to watch);
        # the processes' CPU counts from their start, so the first cell of a driver pays for its
        # start (a fresh engine), the others find it warm
        with TreeCpu(self.proc.pid) as meter:
            c0, t0 = (0.0, self._started) if self.cells == 0 else (meter.seconds(), time.perf_counter())
            self.cells += 1
            try:
                self.proc.stdin.write((json.dumps({"config": str(config)}) + "\n").encode())
                self.proc.stdin.flush()
                doc = self._read_line(timeout)
            except (BrokenPipeError, OSError):
                doc = None
        reply = WarmReply(exit=None, cpu_seconds=round(meter.seconds() - c0, 3),
                          seconds=round(time.perf_counter() - t0, 3))
        if doc is None:
            reply.damaged = (f"the cell did not end within {timeout:.0f} s" if self.alive
                             else f"the warm driver died (exit {self.proc.poll()})")
        else:
            reply.exit, reply.result, reply.error = doc.get("exit"), doc.get("result") or {}, doc.get("error")
            reply.damaged, reply.retire = doc.get("damaged"), bool(doc.get("retire"))
        if cell_log is not None:
            _copy_from(self.log, start, cell_log)
        return reply

    def _read_line(self, timeout: float) -> dict[str, Any] | None:
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0 or self._r < 0:
                return None
            ready, _, _ = select.select([self._r], [], [], min(left, 1.0))
            if not ready:
                if not self.alive:
                    return None
                continue
            chunk = os.read(self._r, 65536)
            if not chunk:
                return None
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        with contextlib.suppress(ValueError):
            doc = json.loads(line.decode("utf-8", errors="replace"))
            return doc if isinstance(doc, dict) else None
        return None

    def close(self) -> None:
        """End the driver (its whole process group) and remove its scratch folder."""
        if self.proc is not None:
            with contextlib.suppress(Exception):
                if self.proc.stdin is not None:
                    self.proc.stdin.close()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=5)
            self.proc.kill_group()
            with contextlib.suppress(Exception):
                self.proc.wait(timeout=10)
            if self.runner is not None:
                self.runner.release(self.proc)
        if self._r >= 0:
            os.close(self._r)
            self._r = -1
        shutil.rmtree(self.scratch, ignore_errors=True)


class WarmPool:
    """Idle :class:`WarmDriver` s lent to matrix workers one cell at a time, by (release, master).

    A worker takes an idle driver of the cell's release (or starts one), runs the cell and gives
    it back; a damaged driver is replaced. A new driver ends idle ones (the least recently used
    first) while ``limit`` or more are alive. The pool outlives the matrices that use it until
    :meth:`close` (its owner's job: a matrix closes only the pool it made).

    Parameters
    ----------
    workdir : Path
        The drivers' folder (``warm-N.log``).
    master : str, optional
        The Spark master of every cell (unless :meth:`run` names another).
    limit : int
        How many drivers may live at once (busy drivers are never ended for a new one): the
        number of workers that use the pool times the releases they run; the default 2 keeps one
        worker's drivers of a release V and of its reference release R both warm.
    """

    def __init__(self, workdir: Path, master: str | None = None, limit: int = 2) -> None:
        self.workdir, self.master, self.limit = Path(workdir), master, max(1, int(limit))
        self._idle: list[WarmDriver] = []  # least recently used first
        self._busy: set[WarmDriver] = set()
        self._failed_starts: dict[tuple[str | None, str], int] = {}
        self._serial = 0
        self._lock = threading.Lock()

    def run(self, config: Path, runner: Any, log: Path, timeout: float, release: str | None = None,
            master: str | None = None) -> tuple[int | None, str] | None:
        """Run the cell of ``config`` in a driver of ``release``.

        ``(exit, result as JSON)``, or ``(None, why)`` when it could not be decided; run again on a
        fresh driver when the driver was damaged (never a verdict from a dirty engine). None when no
        driver could be started (the caller runs a fresh child). The CPU it cost and whether the
        engine was warm go to ``runner``'s account
        (:meth:`~rollcheck.infra.matrix.ChildRunner.charge`).

        Parameters
        ----------
        config : Path
            The cell's configuration file.
        runner : ChildRunner
            The matrix's runner (charged the cost).
        log : Path
            The cell's log.
        timeout : float
            The limit (s) on the driver's answer.
        release : str, optional
            The pyspark release; None for this environment's.
        master : str, optional
            The Spark master; None for the pool's.
        """
        why = ""
        for _ in range(2):
            drv = self._take(runner, timeout, release, master if master is not None else self.master)
            if drv is None:
                return None
            reply = drv.run(config, timeout, log)
            runner.charge(reply.cpu_seconds, engine="warm" if drv.cells > 1 else "fresh")
            if reply.damaged or reply.retire:
                self._retire(drv)
            else:
                self._give_back(drv)
            if reply.damaged and not reply.retire:
                why = reply.damaged
                if runner.stopping:
                    return None, why
                continue
            return reply.exit, json.dumps(reply.result)
        return None, f"the warm Spark driver was damaged twice: {why}"

    def _take(self, runner: Any, timeout: float, release: str | None, master: str | None) -> WarmDriver | None:
        from rollcheck.spark_replay.releases import pinned_release

        release = None if release == pinned_release() else release  # the running interpreter's
        key = (release, master or "")
        victims: list[WarmDriver] = []
        with self._lock:
            if runner.stopping:
                return None
            victims = [d for d in self._idle if not d.alive]
            self._idle = [d for d in self._idle if d.alive]
            drv = next((d for d in reversed(self._idle) if (d.release, d.master or "") == key), None)
            if drv is not None:
                self._idle.remove(drv)
                self._busy.add(drv)
            elif self._failed_starts.get(key, 0) >= 2:
                return None
            else:
                while self._idle and len(self._idle) + len(self._busy) >= self.limit:
                    victims.append(self._idle.pop(0))
                self._serial += 1
                n = self._serial
        for v in victims:
            v.close()
        if drv is not None:
            drv.attach(runner)
            if drv.alive:
                return drv
            self._retire(drv)  # killed by a stopping runner: a fresh one
            return self._take(runner, timeout, release, master)
        drv = WarmDriver(self.workdir, n, master, runner, release)
        with self._lock:
            self._busy.add(drv)
        try:
            drv.start(timeout)
        except (RuntimeError, OSError, InvalidInputError):
            with self._lock:
                self._busy.discard(drv)
                self._failed_starts[key] = self._failed_starts.get(key, 0) + 1
            return None
        with self._lock:
            self._failed_starts.pop(key, None)
        return drv

    def _give_back(self, drv: WarmDriver) -> None:
        with self._lock:
            self._busy.discard(drv)
            self._idle.append(drv)

    def _retire(self, drv: WarmDriver) -> None:
        with self._lock:
            self._busy.discard(drv)
            if drv in self._idle:
                self._idle.remove(drv)
        drv.close()

    def drivers(self) -> list[WarmDriver]:
        """The drivers alive now (idle and busy)."""
        with self._lock:
            return [d for d in [*self._idle, *self._busy] if d.alive]

    def close(self) -> None:
        """End every driver (the busy ones too: their cells come back without an answer)."""
        with self._lock:
            drivers, self._idle, self._busy = [*self._idle, *self._busy], [], set()
        for d in drivers:
            d.close()


def _copy_from(src: Path, start: int, dst: Path) -> None:
    """Append ``src`` from byte ``start`` on to ``dst`` (a cell's part of its driver's log)."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(OSError), open(src, "rb") as f, open(dst, "wb") as out:
        f.seek(start)
        shutil.copyfileobj(f, out)


def _tail(path: Path) -> str:
    with contextlib.suppress(OSError):
        lines = [ln for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
        return lines[-1][:400] if lines else ""
    return ""


# ----------------------------------------------------------------------------- the driver side
def _one_cell(base: Any, config: str) -> dict[str, Any]:
    """Run one cell in a new session of ``base``'s context; the reply (module docstring)."""
    from rollcheck.pyimpl.errors import (
        EnvironmentFault,
        InconclusiveError,
        InvalidInputError,
        UserCodeTimeout,
        environment_fault,
    )
    from rollcheck.spark_replay.matrix.cell import CellConfig, recording_exit, run_cell

    spark = base.newSession()
    reply: dict[str, Any] = {}
    try:
        cfg = CellConfig.read(config)
        res = run_cell(cfg, spark=spark)
        reply = {"exit": recording_exit(str(res.get("status"))), "result": res}
    except UserCodeTimeout as e:  # the user's code did not return: its thread may still run
        reply = {"exit": 2, "error": f"rollcheck: error: {e}", "retire": True}
    except EnvironmentFault as e:
        reply = {"exit": 2, "error": f"rollcheck: environment error: {e}"}
    except InvalidInputError as e:
        reply = {"exit": 2, "error": f"rollcheck: error: {e}"}
    except InconclusiveError as e:
        reply = {"exit": 3, "error": f"rollcheck: inconclusive: {e}"}
    except Exception as e:  # noqa: BLE001 - the machine's fault is exit 2, anything else 4
        fault = environment_fault(e, config)
        reply = ({"exit": 2, "error": f"rollcheck: environment error: {fault}"} if fault is not None else
                 {"exit": 4, "error": f"rollcheck: internal error: {type(e).__name__}: {e} (a bug in rollcheck)"})
    if reply.get("error"):
        print(reply["error"], file=sys.stderr, flush=True)
    _leak_for_tests(spark)
    reply["damaged"] = _damage(base, spark)
    return reply


def _leak_for_tests(spark: Any) -> None:
    marker = os.environ.get(LEAK_FOR_TESTS)
    if marker and Path(marker).exists():
        Path(marker).unlink()
        spark.readStream.format("rate").load().writeStream.format("noop").queryName("leaked-for-tests").start()


def _damage(base: Any, spark: Any) -> str | None:
    """Why this driver cannot run another cell, or None."""
    try:
        base.sparkContext._jvm.java.lang.System.currentTimeMillis()
    except Exception:  # noqa: BLE001 - any failure to answer: the JVM is gone
        return "the driver's JVM does not answer"
    try:
        active = [q.name or str(q.id) for s in (spark, base) for q in s.streams.active]
    except Exception as e:  # noqa: BLE001
        return f"the driver cannot list its streaming queries: {type(e).__name__}"
    if active:
        with contextlib.suppress(Exception):
            for q in spark.streams.active:
                q.stop()
        return f"a streaming query was still active after the cell: {', '.join(active)}"
    return None


def forget_user_modules(before: set[str]) -> list[str]:
    """Drop from ``sys.modules`` the user's modules imported since ``before`` (a set of names).

    The query modules (``rollcheck_user_query_*``) and every module whose file lies outside Python's
    own folders (the standard library, site-packages) and is not rollcheck's; return their names.

    Examples
    --------
    >>> import sys, types
    >>> before = set(sys.modules)
    >>> sys.modules["rollcheck_user_query_demo"] = types.ModuleType("rollcheck_user_query_demo")
    >>> forget_user_modules(before)
    ['rollcheck_user_query_demo']
    """
    keep = tuple(str(Path(p).resolve()) + os.sep for p in {sys.prefix, sys.base_prefix, sys.exec_prefix})
    gone = []
    for name in sorted(set(sys.modules) - before):
        if name == "rollcheck" or name.startswith("rollcheck."):
            continue
        mod = sys.modules.get(name)
        where = getattr(mod, "__file__", None)
        ours = isinstance(where, str) and not str(Path(where).resolve()).startswith(keep)
        if name.startswith("rollcheck_user_query_") or ours:
            sys.modules.pop(name, None)
            gone.append(name)
    return gone


def serve(reply_fd: int, master: str | None, parent: int | None = None) -> int:
    """The driver's main loop: one Spark session, one cell per request line, one reply line each.

    Parameters
    ----------
    reply_fd : int
        The file descriptor replies are written to.
    master : str or None
        The Spark master; None for local.
    parent : int, optional
        The parent's pid (the driver dies with it).
    """
    import pyspark

    from rollcheck.infra import children
    from rollcheck.spark_replay.cluster import cluster_conf
    from rollcheck.spark_replay.query.config import session_conf
    from rollcheck.spark_replay.session import spark_session

    children.die_with_parent(parent=parent)
    out = os.fdopen(reply_fd, "w", buffering=1)
    conf = {**session_conf("hdfs"), **cluster_conf(master or None)}
    with spark_session(master or None, app_name="rollcheck-warm", conf=conf) as base:
        base.sparkContext.setLogLevel("OFF")
        before = set(sys.modules)
        out.write(json.dumps({"ready": True, "pyspark": pyspark.__version__}) + "\n")
        for line in sys.stdin:
            if not line.strip():
                continue
            reply = _one_cell(base, str(json.loads(line)["config"]))
            forget_user_modules(before)  # an edited module (or helper file) is read again by the next cell
            out.write(json.dumps(reply, default=str) + "\n")
            if reply.get("damaged") or reply.get("retire"):
                break
    return 0


if __name__ == "__main__":
    sys.exit(serve(int(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else None,
                   int(sys.argv[3]) if len(sys.argv) > 3 else None))
