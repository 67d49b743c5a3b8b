"""The user's job module: importing it, calling it within a time limit, reading ``KEY``.

A job module gives ``records(seed)``, ``job(env, source)``, ``KEY`` and optionally ``FIELDS``,
``sink`` and ``read_output``. Its failures are recorded for the recorder in the run folder as
``user-error.json`` (``{"call", "error", "kind"}``): the call that failed (``records``, ``job``,
``sink``, ``read_output``, ``import``) or the attribute that is wrong (``KEY``, ``FIELDS``); the
recorder turns it into exit 2 naming the file.

This module runs in the PyFlink environment (``.venv-flink``), imported by ``job.py``; like it, it
imports only the standard library, ``pyflink`` and its sibling ``job_*`` modules.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import sys

__all__ = ["UserCodeError", "KeyDeclarationError", "user_error", "call_user", "load_user_module", "resolve_key",
           "load_user_job"]


class UserCodeError(Exception):
    """The user's module failed, hung or returned something of the wrong type (named by the call)."""


def user_error(run_dir: str, call: str, message: str, *, kind: str = "call", java: str | None = None) -> None:
    """Record the user's module's failure for the recorder: ``call`` names the call (``kind``
    ``call``: ``records``, ``job``, ...; ``import``) or the module attribute (``attribute``: ``KEY``,
    ``FIELDS``); ``java`` the class of the Java exception when Flink's JVM raised it inside the call
    (a ``Py4JJavaError``: Flink's planner, say; whose fault it is, only another release can tell).
    The first record stays (a task that fails again writes nothing more)."""
    if os.path.exists(os.path.join(run_dir, "user-error.json")):
        return
    with open(os.path.join(run_dir, "user-error.json.tmp"), "w") as f:
        json.dump({"call": call, "error": message, "kind": kind, "java": java}, f)
    os.replace(os.path.join(run_dir, "user-error.json.tmp"), os.path.join(run_dir, "user-error.json"))


def _java_class(e: BaseException) -> str | None:
    """The Java exception's class name of a ``Py4JJavaError`` (None for a Python exception)."""
    je = getattr(e, "java_exception", None)
    if je is None:
        return None
    try:
        return str(je.getClass().getName())
    except Exception:  # noqa: BLE001 - the gateway may be gone; the Python name still says it was Java
        return type(e).__name__


def call_user(run_dir: str, what: str, limit: float, fn, *args):
    """Call the user's ``fn`` with a time limit (SIGALRM in this, the main, thread)."""

    def _alarm(signum, frame):  # noqa: ARG001 - signal handler signature
        raise TimeoutError(f"did not return within {limit:g} s")

    old = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, limit)
    try:
        return fn(*args)
    except TimeoutError as e:
        user_error(run_dir, what, str(e))
        raise UserCodeError(what) from None
    except Exception as e:  # noqa: BLE001 - the user's code failed on its own
        user_error(run_dir, what, f"raised {type(e).__name__}: {e}", java=_java_class(e))
        raise UserCodeError(what) from None
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def load_user_module(path: str):
    """Import the user's job file by path; its functions are pickled by value for the workers."""
    import cloudpickle

    name = "rollcheck_user_" + os.path.splitext(os.path.basename(path))[0].replace("-", "_")
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise UserCodeError("import")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    cloudpickle.register_pickle_by_value(mod)
    return mod


class KeyDeclarationError(Exception):
    """``KEY`` or ``FIELDS`` of the user's module do not say which output fields identify a row."""

    def __init__(self, name: str, message: str) -> None:
        self.name = name
        super().__init__(message)


def resolve_key(module) -> list[int]:
    """The user's ``KEY`` as indices into the output tuple.

    ``KEY`` lists the output fields that identify a row: indices into the output tuple (one int or
    a list/tuple of them), or names of ``FIELDS`` (the names of the output tuple's fields, in
    order), as a Spark query names its columns. Everything that the module alone shows to be wrong
    raises :class:`KeyDeclarationError` naming ``KEY`` (or ``FIELDS``): a name without ``FIELDS``,
    a name not among them, an index beyond them, a negative index, a missing or empty ``KEY``.
    An index beyond the output tuple without ``FIELDS`` shows at the first output row.
    """
    fields = getattr(module, "FIELDS", None)
    if fields is not None:
        if not isinstance(fields, (list, tuple)) or not fields or \
                not all(isinstance(f, str) and f for f in fields):
            raise KeyDeclarationError("FIELDS", f"must be a non-empty list of field names (str), got {fields!r:.80}")
        dup = sorted({f for f in fields if list(fields).count(f) > 1})
        if dup:
            raise KeyDeclarationError("FIELDS", f"names {dup[0]!r} twice")
    if not hasattr(module, "KEY"):
        raise KeyDeclarationError("KEY", "missing: list the output fields that identify a row (indices into the "
                                  "output tuple, or names of FIELDS)")
    spec = module.KEY
    items = [spec] if isinstance(spec, (int, str)) else list(spec) if isinstance(spec, (list, tuple)) else None
    if items is None:
        raise KeyDeclarationError("KEY", f"must be indices into the output tuple or names of FIELDS, "
                                  f"got {type(spec).__name__} {spec!r:.80}")
    if not items:
        raise KeyDeclarationError("KEY", "is empty: list the output fields that identify a row")
    out: list[int] = []
    for item in items:
        if isinstance(item, bool) or not isinstance(item, (int, str)):
            raise KeyDeclarationError("KEY", f"{item!r:.60} is neither an index into the output tuple nor a name "
                                      "of FIELDS")
        if isinstance(item, str):
            if fields is None:
                raise KeyDeclarationError("KEY", f"{item!r} is a name, but the module has no FIELDS (the names of "
                                          "the output tuple's fields, in order): add FIELDS or give indices")
            if item not in fields:
                raise KeyDeclarationError("KEY", f"{item!r} is not one of FIELDS {tuple(fields)!r}")
            out.append(list(fields).index(item))
            continue
        if item < 0:
            raise KeyDeclarationError("KEY", f"index {item} is negative: indices count from 0")
        if fields is not None and item >= len(fields):
            raise KeyDeclarationError("KEY", f"index {item} is beyond FIELDS {tuple(fields)!r} "
                                      f"({len(fields)} fields)")
        out.append(item)
    return out


def load_user_job(cfg: dict):
    """Import the user's module, check ``KEY`` (before Flink starts) and call ``records(seed)``.

    Returns ``(module, records, key_idx)``: the records cut to ``max_records`` when a finding is
    being shrunk, ``KEY`` as indices into the output tuple.

    Raises
    ------
    UserCodeError
        The module failed, hung, returned the wrong type or declares a bad ``KEY`` (recorded in
        ``user-error.json`` first).
    """
    run_dir = cfg["run_dir"]
    limit = float(cfg.get("call_timeout", 300))
    import cloudpickle  # noqa: F401 - rollcheck's own import, outside the time limit of the user's import
    user = call_user(run_dir, "import", limit, load_user_module, cfg["module"])
    try:
        key_idx = resolve_key(user)
    except KeyDeclarationError as e:  # seen from the module: before Flink starts
        user_error(run_dir, e.name, str(e), kind="attribute")
        raise UserCodeError(e.name) from None
    recs = call_user(run_dir, "records", limit, user.records, int(cfg.get("seed", 0)))
    if not isinstance(recs, list) or not all(isinstance(r, tuple) for r in recs):
        bad = next((i for i, r in enumerate(recs) if not isinstance(r, tuple)), None) \
            if isinstance(recs, list) else None
        user_error(run_dir, "records", f"must return a list of tuples, got {type(recs).__name__}"
                   + (f" with element [{bad}] of type {type(recs[bad]).__name__}" if bad is not None else ""))
        raise UserCodeError("records")
    if not recs:
        user_error(run_dir, "records", "returned no records")
        raise UserCodeError("records")
    if cfg.get("max_records"):
        # a finding being shrunk: the first N records of the user's input only
        recs = recs[: int(cfg["max_records"])]
    return user, recs, key_idx
