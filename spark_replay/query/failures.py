"""Whose failure is it: a query's failure text read for the engine's exception or the user's code.

A query that fails in Spark reports one text (the JVM's trace, py4j's and the Python worker's
tracebacks). :func:`engine_code_raised` tells the engine's exception (Spark's plan, or pyspark's
own code the user's function called) from the user's module's; :func:`engine_failure` names the
specific exception and its root cause (``Caused by:``) behind the wrappers; :data:`OVERLOAD_SIGNS`
are the machine's fault; :func:`reference_failure_is_engines` decides when the failure-free run's
own failure is a finding (the reference release ran the module to its end, :func:`release_ran`).
"""

from __future__ import annotations

import os
import re
from typing import Any

from rollcheck.spark_replay.checkpoint.watcher import PREFIX
from rollcheck.spark_replay.query.module import UserQuery

__all__ = ["OVERLOAD_SIGNS", "raising_frame", "engine_code_raised", "engine_failure", "release_ran",
           "reference_failure_is_engines", "user_exception"]

#: What Spark says when a Python worker it started did not connect back in time. Spark waits a fixed
#: 10 s for a worker started without its daemon (the driver-side runner of ``transformWithState`` in
#: pandas starts one); on an overloaded machine the worker's imports take longer. The machine's
#: fault, not the query's.
OVERLOAD_SIGNS = ("Python worker failed to connect back",
                  "Timed out while waiting for the Python worker to connect back")


def _exception_name(text: str) -> str:
    """The engine's exception class (or error class) named in a query failure's message."""
    for pat in (r"\[([A-Z][A-Z0-9_.]+)\]", r"((?:[a-z]+\.)+[A-Z]\w*(?:Exception|Error))"):
        m = re.search(pat, text)
        if m:
            return m.group(1)
    return "StreamingQueryException"


def _user_code_raised(text: str, uq: UserQuery) -> bool:
    """Whether the failure's traceback runs through the user's module (their code raised)."""
    spec = uq.spec
    names = {os.path.abspath(spec), os.path.basename(spec)} if spec.endswith(".py") else {spec.replace(".", "/")}
    return any(f'File "{n}' in text or (n in text and "PythonException" in text) for n in names)


_FRAME = re.compile(r'File "([^"]+)", line \d+')
_CAUSE = re.compile(r"Caused by: ((?:[a-zA-Z_$][\w$]*\.)+[A-Z][\w$]*)(?:: ?(.*))?")


def raising_frame(text: str) -> str | None:
    r"""The file of the innermost Python frame in a failure's text (the code that raised), if any.

    Examples
    --------
    >>> raising_frame('Traceback:\n  File "/u/q.py", line 3, in f\n  File "/x/pyspark/sql/state.py", line 9')
    '/x/pyspark/sql/state.py'
    >>> raising_frame("java.util.NoSuchElementException: None.get") is None
    True
    """
    frames = _FRAME.findall(text.replace("\\n", "\n"))
    return frames[-1] if frames else None


def engine_code_raised(text: str, uq: UserQuery) -> bool:
    """Whether a query failure is the engine's.

    No frame of the user's module in its traceback (an exception of Spark's plan), or the innermost
    Python frame lies in pyspark's own package (an exception of pyspark's code the user's function
    called, e.g. ``GroupState``).

    Parameters
    ----------
    text : str
        The failure's traceback text.
    uq : UserQuery
        The loaded query module.

    Returns
    -------
    bool
        True for the engine's failure, False for the user's code.
    """
    if not _user_code_raised(text, uq):
        return True
    frame = raising_frame(text)
    return frame is not None and f"{os.sep}pyspark{os.sep}" in frame


def engine_failure(text: str, checkpoint: str) -> dict[str, Any]:
    r"""The record of an engine exception.

    ``{"checkpoint", "exception", "message", "cause"}`` (``cause``: the root ``Caused by:`` of the
    JVM's trace, where there is one).

    Parameters
    ----------
    text : str
        The exception's text (with the JVM's trace).
    checkpoint : str
        The query's checkpoint folder.

    Returns
    -------
    dict
        ``checkpoint``, ``exception``, ``message``, ``cause`` (None when no ``Caused by:``).

    Examples
    --------
    >>> f = engine_failure("org.apache.spark.SparkException: [CANNOT_LOAD_STATE_STORE] x\n"
    ...                    "Caused by: java.lang.NumberFormatException: For input string: \")\"", "/ck")
    >>> f["exception"], f["cause"]
    ('CANNOT_LOAD_STATE_STORE', 'java.lang.NumberFormatException: For input string: ")"')

    A batch that fails inside ``foreachBatch`` (the recorder's sink collects it) is wrapped in
    ``FOREACH_BATCH_USER_FUNCTION_ERROR``; the exception is the one it carries:

    >>> engine_failure("[STREAM_FAILED] Query terminated with exception: [FOREACH_BATCH_USER_FUNCTION_ERROR] "
    ...                "An error occurred\n[CANNOT_LOAD_STATE_STORE.UNCATEGORIZED] An error occurred during "
    ...                "loading state.", "/ck")["exception"]
    'CANNOT_LOAD_STATE_STORE.UNCATEGORIZED'
    """
    causes = _CAUSE.findall(text)
    cause = None
    if causes:
        name, msg = causes[-1]
        cause = f"{name}: {msg.strip()}" if msg and msg.strip() else name
    classes = [c for c in re.findall(r"\[([A-Z][A-Z0-9_.]+)\]", text) if c not in _WRAPPERS]
    java = re.findall(r"((?:[a-z][a-z0-9_]*\.)+[A-Z]\w*(?:Exception|Error))", text)
    specific = [j for j in java if j not in _WRAPPERS]
    exception = (classes or specific or java or [_exception_name(text)])[0]
    lines = [ln.strip().lstrip(": ") for ln in text.replace("\\n", "\n").splitlines() if ln.strip().lstrip(": ")]
    message = next((ln for ln in lines if exception in ln), lines[0] if lines else "?")
    return {"checkpoint": checkpoint, "exception": exception, "message": message[:2000], "cause": cause}


#: Exceptions that only carry another (the query's failure, py4j's call, the Python worker's).
_WRAPPERS = frozenset({"STREAM_FAILED", "FOREACH_BATCH_USER_FUNCTION_ERROR", "org.apache.spark.SparkException", "py4j.protocol.Py4JJavaError",
                       "org.apache.spark.sql.streaming.StreamingQueryException",
                       "pyspark.errors.exceptions.captured.StreamingQueryException",
                       "pyspark.errors.exceptions.captured.PythonException",
                       "org.apache.spark.api.python.PythonException"})


def release_ran(previous: list[dict[str, Any]]) -> bool:
    """Whether the trace so far holds the reference release's failure-free run with its output.

    ``spark.release_reference``: that release ran the module to its end.
    """
    return any(e.get("kind") == PREFIX + "release_reference" and e.get("output") is not None for e in previous)


def reference_failure_is_engines(error_text: str, uq: UserQuery, *, release_ok: bool, sink_raised: bool,
                                 overloaded: bool) -> bool:
    """Whether the failure-free run's own failure is a finding against the engine.

    The reference release ran the same module to its end (``release_ok``), and the exception is the
    engine's (:func:`engine_code_raised`), not the user's sink's nor the overloaded machine's.
    Otherwise it stays the module's own failure (exit 2): a module that fails everywhere is the
    user's.

    Parameters
    ----------
    error_text : str
        The failure's traceback text.
    uq : UserQuery
        The loaded query module.
    release_ok : bool
        The reference release ran the module to its end.
    sink_raised : bool
        The user's sink raised.
    overloaded : bool
        The machine was overloaded.

    Returns
    -------
    bool
        True when the failure is a finding against the engine.
    """
    return release_ok and not sink_raised and not overloaded and engine_code_raised(error_text, uq)


def user_exception(method: str, batch_id: int, e: BaseException, spec: str) -> str:
    """One line naming the user's ``method``, the line of the module it raised at, the exception.

    Parameters
    ----------
    method : str
        The user's function (e.g. ``sink``).
    batch_id : int
        The batch it ran on.
    e : BaseException
        What it raised.
    spec : str
        The module's path.

    Returns
    -------
    str
        The one line.

    Examples
    --------
    >>> try:
    ...     {}["ledger"]
    ... except KeyError as e:
    ...     user_exception("sink", 2, e, "q.py")
    "sink(batch_df, 2, out_dir) raised KeyError: 'ledger'"
    """
    import traceback

    stem = os.path.splitext(os.path.abspath(spec))[0]
    frames = [f for f in traceback.extract_tb(e.__traceback__)
              if os.path.splitext(os.path.abspath(f.filename))[0] == stem]
    where = f" at line {frames[-1].lineno} ({frames[-1].name})" if frames else ""
    return f"{method}(batch_df, {batch_id}, out_dir) raised {type(e).__name__}: {e}{where}"
