"""Plan generated job modules without running them, to learn whether Flink accepts each program.

Run with the PyFlink environment's Python (``.venv-flink``), one process for many modules, the
job process's folder ``job/`` on ``sys.path`` (as the recorder runs ``job/main.py``)::

    python hunt/plan.py OUT.jsonl MODULE.py ...

For each module: the job-module loader of the recorder (``job/user.py``: import, ``KEY``,
``SOURCES``, ``records(0)``), then ``job(env, source[s])`` on a fresh streaming environment at
parallelism 2 whose sources hand out the module's records as the recorder does, then the stream
graph of the job (``get_execution_plan``): the Table planner optimises and translates every query
while ``job()`` converts it to a DataStream, and the graph is what Flink would submit. No job runs.
One JSON line per module: ``{"module", "status", "exception", "detail", "seconds"}`` with status
``planned``, ``rejected`` (Flink refused the program: a validation, table or parser exception),
``error`` (Flink failed otherwise while planning: ``exception`` names the Java class) or ``module``
(the module itself failed: it did not load, declare ``KEY`` or return records and a DataStream).

This module imports only the standard library, ``pyflink`` and the job process's ``user`` module.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback

__all__ = ["plan_module", "REFUSALS", "main"]

#: Java exceptions by which Flink refuses a program at analysis (the program, not a crash).
REFUSALS = ("org.apache.flink.table.api.ValidationException", "org.apache.flink.table.api.TableException",
            "org.apache.flink.sql.parser.impl.ParseException", "org.apache.flink.table.api.SqlParserException",
            "org.apache.calcite.sql.validate.SqlValidatorException", "org.apache.calcite.runtime.CalciteContextException",
            "org.apache.flink.table.planner.plan.optimize.program.FlinkOptimizeProgram",
            "org.apache.calcite.plan.RelOptPlanner$CannotPlanException",
            "org.apache.flink.api.common.InvalidProgramException")


def _java(e: BaseException) -> tuple[str | None, str]:
    je = getattr(e, "java_exception", None)
    if je is None:
        return None, f"{type(e).__name__}: {e}"
    try:
        cls = str(je.getClass().getName())
        msg = str(je.getMessage() or "")
        cause = je.getCause()
        while cause is not None:  # the root cause names what the planner refused
            cls_c, msg_c = str(cause.getClass().getName()), str(cause.getMessage() or "")
            if cls_c in REFUSALS or cls not in REFUSALS:
                cls, msg = cls_c, msg_c
            cause = cause.getCause()
        return cls, msg
    except Exception:  # noqa: BLE001 - the gateway may be gone
        return type(e).__name__, str(e)


def _sources(env, recs, names):
    from pyflink.common import Types

    def stream(rows):
        n = len(rows)
        return env.from_collection(list(range(max(1, n))), type_info=Types.LONG()) \
            .filter(lambda i: i < n).map(lambda i: rows[int(i)])

    if names is None:
        return stream(recs)
    return {name: stream(list(recs.get(name) or [])) for name in names}


def plan_module(path: str) -> dict:
    """Load, build and plan one module (module docstring); never raises."""
    from pyflink.common import Types
    from pyflink.datastream import RuntimeExecutionMode, StreamExecutionEnvironment
    from pyflink.datastream.data_stream import DataStream
    from user import KeyDeclarationError, check_sources, load_user_module, resolve_key

    t0 = time.time()

    def done(status: str, exception: str | None, detail: str) -> dict:
        return {"module": path, "status": status, "exception": exception, "detail": detail.strip()[:400],
                "seconds": round(time.time() - t0, 2)}

    try:
        mod = load_user_module(path)
        resolve_key(mod)
        names = check_sources(mod)
        recs = mod.records(0)
    except (KeyDeclarationError, Exception) as e:  # noqa: BLE001 - the module's own failure
        return done("module", type(e).__name__, f"{type(e).__name__}: {e}")
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    env.set_runtime_mode(RuntimeExecutionMode.STREAMING)
    try:
        out = mod.job(env, _sources(env, recs, names))
        if not isinstance(out, DataStream):
            return done("module", "TypeError", f"job() returned {type(out).__name__}, not a DataStream")
        out.map(lambda r: str(r), output_type=Types.STRING()).print()
        env.get_execution_plan()
    except Exception as e:  # noqa: BLE001 - the planner's or the module's failure, sorted below
        cls, msg = _java(e)
        if cls is None:
            return done("module", type(e).__name__, msg + " | " + traceback.format_exc(limit=3).replace("\n", " "))
        return done("rejected" if cls in REFUSALS else "error", cls, msg)
    return done("planned", None, "")


def main(argv: list[str]) -> int:
    """``hunt/plan.py OUT.jsonl MODULE.py ...``: one line per module to OUT.jsonl (appended as each ends)."""
    out, modules = argv[0], argv[1:]
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "job"))
    with open(out, "a") as f:
        for m in modules:
            f.write(json.dumps(plan_module(m)) + "\n")
            f.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
