"""Failures as Flink reports them: the root cause on one line, and whose code raised.

Flink reports a failed job as a Java exception text with its causes (the REST API's
``root-exception``, or the client's exception); an exception raised by Python code in PyFlink's
thread mode is a ``pemja.core.PythonException`` whose frames name the Python functions
(``at /dir/module.function(module.py:12)``). :func:`classify_failure` reads those frames into a
typed error record — the user's code (exit 2) or rollcheck's own (exit 4) — that the job process
writes as ``engine-error.json`` for the recorder.

This module runs in the PyFlink environment (``.venv-flink``), imported by ``job.py``; like it, it
imports only the standard library, ``pyflink`` and its sibling ``job_*`` modules.
"""

from __future__ import annotations

import os
import re

if __package__:  # imported as rollcheck.flink_replay (tests, the recorder's helpers)
    from .job_io import write_json
else:  # run by job.py in the PyFlink environment: this folder is on sys.path
    from job_io import write_json  # type: ignore[no-redef]

__all__ = ["root_cause_text", "classify_failure", "driver_error", "write_engine_error", "INJECTED"]


def root_cause_text(text: str) -> str | None:
    """The innermost ``Caused by`` of a Java exception text (the job's own failure, not the restart
    strategy's wrapper), on one line."""
    if not text.strip():
        return None
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    caused = [ln[len("Caused by: "):] for ln in lines if ln.startswith("Caused by: ")]
    return (caused[-1] if caused else lines[0])[:400]


#: a frame of a Python function in PyFlink's thread mode (pemja) or of a Java method, as the
#: exception text prints it: ``at /dir/module.function(module.py:12)``
_FRAME = re.compile(r"^\s*at (?P<where>.+)\.(?P<function>[^.(]+)\((?P<file>[^():]+):(?P<line>\d+)\)\s*$")
#: the header of an exception raised by Python code in the engine
_PY_EXC = re.compile(r"pemja\.core\.PythonException: <class '(?:[\w.]+\.)?(?P<type>\w+)'>: ?(?P<message>.*)$")
#: the failure rollcheck injects on purpose (not an error of anyone's code)
INJECTED = "rollcheck: injected"


def _qualname(path: str, line: int, function: str) -> str:
    """``Class.method`` for the function defined around ``line`` of ``path`` (else ``function``)."""
    import ast

    try:
        with open(path) as f:
            tree = ast.parse(f.read())
    except (OSError, SyntaxError, ValueError):
        return function
    best = function

    def walk(node, prefix: str) -> None:
        nonlocal best
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = prefix + child.name
                end = getattr(child, "end_lineno", None) or child.lineno
                if child.lineno <= line <= end:
                    if not isinstance(child, ast.ClassDef) and child.name == function:
                        best = name
                    walk(child, name + ".")
            else:
                walk(child, prefix)

    walk(tree, "")
    return best


def classify_failure(text: str, module_path: str | None) -> dict | None:
    """Whose code raised the exception that failed the job: a typed error record, or None.

    ``text`` is the job's failure as Flink reports it (the Java exception with its causes; a Python
    exception raised in thread mode is a ``pemja.core.PythonException`` whose frames name the
    Python functions). The innermost frame that belongs to someone decides: one in the user's job
    module (``module_path``) or in another file outside PyFlink and rollcheck gives ``code:
    "user"``; one of rollcheck's own code (the Python files beside this one, the ``rollcheck.flink``
    Java operators) gives ``code: "rollcheck"``. The record names the function (``Class.method``
    when the file shows it), the file, the line, the exception type and message. None for the
    failure rollcheck injects, and for a failure of the engine itself (no such frame).
    """
    if not text or INJECTED in text:
        return None
    ours = os.path.dirname(os.path.abspath(__file__))
    user_stem = os.path.splitext(os.path.abspath(module_path))[0] if module_path else None
    # the exception blocks: a header line and its frames; Java prints the outermost first
    blocks: list[tuple[str, list[re.Match]]] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        m = _FRAME.match(line)
        if m is not None and blocks:
            blocks[-1][1].append(m)
        elif not line.startswith("..."):
            header = line[len("Caused by: "):] if line.startswith("Caused by: ") else line
            blocks.append((header, []))
    for header, frames in reversed(blocks):  # the deepest cause first
        py = _PY_EXC.search(header)
        if py is not None:
            etype, message = py.group("type"), py.group("message").strip()
        else:
            etype, _, message = header.partition(": ")
            etype, message = etype.strip(), message.strip()
        for fr in frames:  # innermost frame first
            where, function = fr.group("where"), fr.group("function")
            line_no = int(fr.group("line"))
            if where.startswith("/"):  # a Python frame: the file's path without ".py"
                folder = os.path.dirname(where)
                path = where + os.path.splitext(fr.group("file"))[1]
                if folder == ours:
                    return {"code": "rollcheck", "function": _qualname(path, line_no, function),
                            "file": path, "line": line_no, "type": etype, "message": message[:400]}
                if where == user_stem or ("site-packages" not in where and "/pyflink/" not in where
                                          and "/lib/python" not in where):
                    return {"code": "user", "function": _qualname(path, line_no, function),
                            "file": path, "line": line_no, "type": etype, "message": message[:400]}
            elif where.startswith("rollcheck.flink."):
                return {"code": "rollcheck", "function": f"{where.rsplit('.', 1)[-1]}.{function}",
                        "file": fr.group("file"), "line": line_no, "type": etype, "message": message[:400]}
    return None


def driver_error(e: BaseException) -> dict | None:
    """The typed error record of an exception raised in the job process itself (outside the
    engine) by rollcheck's own code: the innermost frame in rollcheck's files beside this one
    names the function. None when the exception came from the engine's gateway (``py4j``: the
    JVM's own failure, reported with its reason) or no frame of rollcheck's took part.

    Examples
    --------
    >>> import tempfile
    >>> try:
    ...     write_json(os.path.join(tempfile.mkdtemp(), "x.json"), {"a": object()})
    ... except Exception as exc:
    ...     rec = driver_error(exc)
    >>> rec["code"], rec["function"], rec["type"]
    ('rollcheck', 'write_json', 'TypeError')
    """
    import errno
    import traceback

    if type(e).__module__.split(".")[0] in ("py4j", "pyflink"):
        return None
    if isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM,
                                              errno.EFBIG):
        return None  # the machine's refusal, not a bug (the recorder names it from the log)
    ours = os.path.dirname(os.path.abspath(__file__))
    frames = [f for f in traceback.extract_tb(e.__traceback__)
              if os.path.dirname(os.path.abspath(f.filename)) == ours]
    if not frames:
        return None
    f = frames[-1]
    return {"code": "rollcheck", "function": _qualname(f.filename, f.lineno or 0, f.name), "file": f.filename,
            "line": f.lineno, "type": type(e).__name__, "message": str(e)[:400]}


def write_engine_error(run_dir: str, error: dict) -> None:
    """``engine-error.json``: the first typed error record of the run (whose code raised, where)."""
    path = os.path.join(run_dir, "engine-error.json")
    if not os.path.exists(path):
        write_json(path, error)
