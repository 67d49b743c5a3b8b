"""Failures as Flink reports them: the root cause on one line, and whose code raised.

Flink reports a failed job as a Java exception text with its causes (the REST API's
``root-exception``, or the client's exception); an exception raised by Python code in PyFlink's
thread mode is a ``pemja.core.PythonException`` whose frames name the Python functions
(``at /dir/module.function(module.py:12)``). :func:`classify_failure` reads those frames into a
typed error record — the user's code (exit 2) or rollcheck's own (exit 4) — that the job process
writes as ``engine-error.json`` for the recorder.

This module runs in the PyFlink environment (``.venv-flink``), imported by ``main.py``; like it, it
imports only the standard library, ``pyflink`` and its sibling ``job_*`` modules.
"""

from __future__ import annotations

import os
import re

if __package__:  # imported as rollcheck.flink_replay (tests, the recorder's helpers)
    from .files import write_json
else:  # run by main.py in the PyFlink environment: this folder is on sys.path
    from files import write_json  # type: ignore[no-redef]

__all__ = ["root_cause_text", "classify_failure", "driver_error", "write_engine_error", "INJECTED"]


def root_cause_text(text: str) -> str | None:
    """The innermost ``Caused by`` of a Java exception text, on one line.

    That is the job's own failure, not the restart strategy's wrapper.
    """
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
    Python functions; in process mode the Python worker's traceback is part of the text). The
    innermost frame that belongs to someone decides: one in the user's job module
    (``module_path``) or in another file outside PyFlink and rollcheck gives ``code: "user"``; one
    of rollcheck's own code (the Python files beside this one, the ``rollcheck.flink`` Java
    operators) gives ``code: "rollcheck"``. The record names the function (``Class.method`` when
    the file shows it), the file, the line, the exception type and message. None for the failure
    rollcheck injects, and for a failure of the engine itself (no such frame).

    Parameters
    ----------
    text : str
        The job's failure as Flink reports it.
    module_path : str or None
        The user's job module.

    Returns
    -------
    dict or None
        The typed error record.
    """
    if not text or INJECTED in text:
        return None
    ours = os.path.dirname(os.path.abspath(__file__))
    user_path = os.path.abspath(module_path) if module_path else None
    for etype, message, frames in reversed(_exception_blocks(text)):  # the deepest cause first
        for path, function, file, line_no, java in frames:  # innermost frame first
            code = None
            if java:
                code = "rollcheck" if path.startswith("rollcheck.flink.") else None
                function = f"{path.rsplit('.', 1)[-1]}.{function}"
            elif os.path.dirname(path) == ours:
                code = "rollcheck"
            elif path == user_path or not any(part in path for part in ("site-packages", "/pyflink/", "/lib/python")):
                code = "user"
            if code is not None:
                if not java:
                    function = _qualname(path, line_no, function)
                return {"code": code, "function": function, "file": file if java else path, "line": line_no,
                        "type": etype, "message": message[:400]}
    return None


#: a frame of a Python traceback (process mode: the worker's traceback inside the Java text)
_PY_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<function>\S+)')
#: the last line of a Python traceback: the exception type and message
_PY_LAST = re.compile(r"^(?P<type>[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Warning)|[A-Z]\w*): ?(?P<message>.*)$")


def _exception_blocks(text: str) -> list[tuple[str, str, list[tuple[str, str, str, int, bool]]]]:
    """The exceptions of a failure text, outermost first: ``(type, message, frames)``.

    Frames are innermost first as ``(path, function, file, line, is_java)`` (a Python frame's path is
    its file's absolute path).
    """
    blocks: list[tuple[str, str, list[tuple[str, str, str, int, bool]]]] = []
    lines = [raw.rstrip() for raw in text.splitlines()]
    i = 0
    while i < len(lines):
        line = lines[i].strip()
        i += 1
        if not line or line.startswith("..."):
            continue
        if line.endswith("Traceback (most recent call last):"):
            frames: list[tuple[str, str, str, int, bool]] = []
            while i < len(lines):
                m = _PY_FRAME.match(lines[i])
                if m is not None:
                    frames.append((os.path.abspath(m.group("file")), m.group("function"),
                                   os.path.basename(m.group("file")), int(m.group("line")), False))
                    i += 1
                    continue
                last = _PY_LAST.match(lines[i].strip())
                if last is not None and not lines[i].startswith(" "):
                    blocks.append((last.group("type").rsplit(".", 1)[-1], last.group("message").strip(),
                                   frames[::-1]))
                    i += 1
                    break
                i += 1  # the source line of a frame
            continue
        m = _FRAME.match(line)
        if m is not None and blocks:
            where, file = m.group("where"), m.group("file")
            is_java = not where.startswith("/")
            path = where if is_java else where + os.path.splitext(file)[1]  # a Python frame: path without ".py"
            blocks[-1][2].append((path, m.group("function"), file, int(m.group("line")), is_java))
            continue
        header = line[len("Caused by: "):] if line.startswith("Caused by: ") else line
        py = _PY_EXC.search(header)
        if py is not None:
            blocks.append((py.group("type"), py.group("message").strip(), []))
        else:
            etype, _, message = header.partition(": ")
            blocks.append((etype.strip(), message.strip(), []))
    return blocks


def driver_error(e: BaseException) -> dict | None:
    """The typed error record of an exception rollcheck's own code raised in the job process.

    The innermost frame in rollcheck's files beside this one names the function.

    Parameters
    ----------
    e : BaseException
        The exception, raised outside the engine.

    Returns
    -------
    dict or None
        The record; None when the exception came from the engine's gateway (``py4j``: the JVM's own
        failure, reported with its reason) or no frame of rollcheck's took part.

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
    """``engine-error.json``: the first typed error record of the run (whose code raised, where).

    Parameters
    ----------
    run_dir : str
        The run folder.
    error : dict
        The typed error record (kept only if none is there yet).
    """
    path = os.path.join(run_dir, "engine-error.json")
    if not os.path.exists(path):
        write_json(path, error)
