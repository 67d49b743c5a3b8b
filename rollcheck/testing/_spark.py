"""``check protocol --spark``: the exhaustive frontier walked by Spark tasks.

Each task walks below its prefixes with the local workers' code
(:func:`rollcheck.properties.explore.explorer.run_tasks`); the driver merges the results as a
local run does, so verdict, counts and counterexample are the same. The user's class travels by
value. ``local[*]`` by default; any master URL works. See
docs/internals/testing.md#exhaustive-phase-on-spark-_spark.

References
----------
``specs/protocols.md#exhaustive``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import sys
import time
from collections.abc import Callable
from typing import Any

__all__ = ["spark_runner", "SparkRunner", "DEFAULT_MASTER"]

#: The master when ``--master`` is not given: every core of this machine.
DEFAULT_MASTER = "local[*]"


def _by_value(proto: Any) -> list[str]:
    """Register every user module of ``proto``'s class hierarchy for pickling by value."""
    from pyspark import cloudpickle

    done = []
    for cls in type(proto).__mro__:
        name = cls.__module__
        if name in ("builtins", "abc") or name.startswith(("rollcheck", "typing", "collections")):
            continue
        mod = sys.modules.get(name)
        if mod is None or name in done:
            continue
        cloudpickle.register_pickle_by_value(mod)
        done.append(name)
    # the state and piggyback classes may live in helper modules imported by the user's file
    for name, mod in list(sys.modules.items()):
        path = getattr(mod, "__file__", None) or ""
        if name.startswith("rollcheck_user_protocol_") and name not in done:
            cloudpickle.register_pickle_by_value(mod)
            done.append(name)
        elif path and name not in done and _beside(path, done):
            cloudpickle.register_pickle_by_value(mod)
            done.append(name)
    return done


def _beside(path: str, modules: list[str]) -> bool:
    """True when ``path`` lies in the folder of one of ``modules`` (the user's helper files)."""
    from pathlib import Path

    folder = Path(path).parent
    for name in modules:
        f = getattr(sys.modules.get(name), "__file__", None)
        if f and Path(f).parent == folder and "site-packages" not in f:
            return True
    return False


def _task(job: Any, remaining: float | None) -> Callable[[Any], Any]:
    def run(partition: Any) -> Any:
        from rollcheck.properties.explore.calls import ProtocolCodeError
        from rollcheck.properties.explore.explorer import run_tasks

        local = job
        if remaining is not None:  # each executor's own clock
            local = dataclasses.replace(job, deadline=time.monotonic() + remaining)
        try:
            return [("ok", run_tasks(local, list(partition)))]
        except ProtocolCodeError as e:
            return [("error", e)]

    return run


class SparkRunner:
    """Run the prefixes of each bound as Spark tasks on one session.

    The session opens at the first bound and stops at :meth:`close` (``check_protocol`` closes it
    however the run ends).
    """

    def __init__(self, master: str | None = None):
        self.master = master or DEFAULT_MASTER
        self._stack = contextlib.ExitStack()
        self._spark: Any = None

    def __call__(self, job: Any, prefixes: list[tuple[Any, ...]]) -> Any:
        from rollcheck.spark_replay.session import spark_session

        _by_value(job.proto)
        remaining = None if job.deadline is None else max(0.0, job.deadline - time.monotonic())
        shipped = dataclasses.replace(job, deadline=None)
        if self._spark is None:
            self._spark = self._stack.enter_context(
                spark_session(self.master, app_name="rollcheck-explore"))
        sc = self._spark.sparkContext
        rdd = sc.parallelize(prefixes, numSlices=max(1, len(prefixes)))
        results = rdd.mapPartitions(_task(shipped, remaining)).collect()
        total, complete, best = 0, True, None
        for status, value in results:
            if status == "error":
                raise value
            k, c, v = value
            total += k
            complete = complete and c
            if v is not None and (best is None or v < best):
                best = v
        return total, complete, best

    def close(self) -> None:
        """Stop the session (if one was started)."""
        self._spark = None
        self._stack.close()


def spark_runner(master: str | None = None) -> SparkRunner:
    """Make a :class:`SparkRunner` on ``master`` (default ``local[*]``).

    Calling it, ``runner(job, prefixes)`` returns ``(schedules, complete, smallest violation)``.
    """
    return SparkRunner(master)
