"""The user's job module: importing it, calling it within a time limit, reading ``KEY`` and ``SOURCES``.

A job module gives ``records(seed)``, ``job(env, source)``, ``KEY`` and optionally ``FIELDS``,
``sink`` and ``read_output``; a job with several input streams gives ``SOURCES`` (their names),
``records(seed) -> {name: [tuples]}`` and ``job(env, sources)`` with ``sources`` a dict of streams
by name (:func:`check_sources`, :func:`interleave`). Its failures are recorded for the recorder in the run folder as
``user-error.json`` (``{"call", "error", "kind"}``): the call that failed (``records``, ``job``,
``sink``, ``read_output``, ``import``) or the attribute that is wrong (``KEY``, ``FIELDS``); the
recorder turns it into exit 2 naming the file.

This module runs in the PyFlink environment (``.venv-flink``), imported by ``main.py``; like it, it
imports only the standard library, ``pyflink`` and its sibling ``job_*`` modules.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import sys

__all__ = ["UserCodeError", "KeyDeclarationError", "user_error", "call_user", "load_user_module", "resolve_key",
           "load_user_job", "check_sources", "interleave", "source_layout", "source_streams", "MAX_SOURCES"]

#: The most input streams a job module may name in ``SOURCES`` (one character each in the source
#: tap's table of which record belongs to which source).
MAX_SOURCES = 32


class UserCodeError(Exception):
    """The user's module failed, hung or returned something of the wrong type (named by the call)."""


def user_error(run_dir: str, call: str, message: str, *, kind: str = "call", java: str | None = None) -> None:
    """Record the user's module's failure for the recorder (the first record stays).

    Parameters
    ----------
    run_dir : str
        The run folder (``user-error.json`` goes there).
    call : str
        The call (``kind="call"``: ``records``, ``job``, ``import``, ...) or the module attribute
        (``kind="attribute"``: ``KEY``, ``FIELDS``).
    message : str
        The error, on one line.
    kind : str
        ``call`` (a call, ``import`` among them) or ``attribute``.
    java : str or None
        The class of the Java exception when Flink's JVM raised it inside the call (a
        ``Py4JJavaError``: Flink's planner, say; whose fault it is, only another release can tell).
    """
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


def check_sources(module) -> list[str] | None:
    """The module's ``SOURCES`` as a list of names, None for a one-source module (no ``SOURCES``).

    Raises
    ------
    KeyDeclarationError
        Naming ``SOURCES``: not a tuple/list, empty, a name that is not a non-empty string, a name
        given twice, more than :data:`MAX_SOURCES` names.

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> check_sources(SimpleNamespace(SOURCES=("deposits", "withdrawals")))
    ['deposits', 'withdrawals']
    >>> check_sources(SimpleNamespace()) is None
    True
    """
    if not hasattr(module, "SOURCES"):
        return None
    spec = module.SOURCES
    if not isinstance(spec, (tuple, list)):
        raise KeyDeclarationError("SOURCES", f"must be a tuple of the input streams' names (str), got "
                                  f"{type(spec).__name__} {spec!r:.80}")
    if not spec:
        raise KeyDeclarationError("SOURCES", "is empty: name the job's input streams (or drop SOURCES for one "
                                  "stream)")
    for name in spec:
        if not isinstance(name, str) or not name.strip():
            raise KeyDeclarationError("SOURCES", f"{name!r:.60} is not a source name (a non-empty string)")
    dup = sorted({n for n in spec if list(spec).count(n) > 1})
    if dup:
        raise KeyDeclarationError("SOURCES", f"names {dup[0]!r} twice")
    if len(spec) > MAX_SOURCES:
        raise KeyDeclarationError("SOURCES", f"names {len(spec)} sources, at most {MAX_SOURCES}")
    return list(spec)


def interleave(counts: list[int]) -> list[int]:
    """The order of one sequence over several sources: the source (index in ``counts``) of each record.

    The sources are merged in proportion (record ``i`` of source ``s`` stands at
    ``(i + 1/2) / counts[s]``; ties by source order), so that every source is as far through its
    records as the others at any point of the sequence.

    Examples
    --------
    >>> interleave([4, 2])
    [0, 1, 0, 0, 1, 0]
    >>> interleave([0, 3])
    [1, 1, 1]
    """
    from fractions import Fraction

    spots = [(Fraction(2 * i + 1, 2 * n), s) for s, n in enumerate(counts) for i in range(n)]
    return [s for _, s in sorted(spots)]


def source_layout(names: list[str], per_source: dict, max_records: int | None = None,
                  drop: list[str] | None = None) -> tuple[list[tuple], dict]:
    """The records of every source as one sequence (:func:`interleave`) and its layout.

    Returns ``(records, layout)``: ``records[g]`` the g-th record of the sequence (cut to its first
    ``max_records``; the sources named in ``drop`` left out, for a finding being shrunk),
    ``layout = {"names", "records", "order"}``: the names, each source's number of records in the
    sequence, and ``order``, one character per record, ``chr(48 + s)`` for source ``s``.

    Examples
    --------
    >>> recs, lay = source_layout(["a", "b"], {"a": [(1,), (2,)], "b": [(9,)]})
    >>> recs, lay["records"], lay["order"]
    ([(1,), (9,), (2,)], [2, 1], '010')
    """
    lists = [[] if n in (drop or []) else list(per_source.get(n) or []) for n in names]
    order = interleave([len(x) for x in lists])
    if max_records:
        order = order[: int(max_records)]
    nxt = [0] * len(names)
    recs: list[tuple] = []
    for s in order:
        recs.append(lists[s][nxt[s]])
        nxt[s] += 1
    return recs, {"names": list(names), "records": nxt, "order": "".join(chr(48 + s) for s in order)}


def _check_records(run_dir: str, recs, names: list[str] | None) -> None:
    """Raise :class:`UserCodeError` (recorded first) when ``records(seed)`` returned the wrong shape.

    The right one: a list of tuples for one source, ``{name: [tuples]}`` over ``SOURCES`` names for
    several.
    """

    def bad_list(value, what: str) -> str | None:
        if not isinstance(value, list):
            return f"{what} a list of tuples, got {type(value).__name__}"
        i = next((i for i, r in enumerate(value) if not isinstance(r, tuple)), None)
        if i is not None:
            return (f"{what} a list of tuples, got {type(value).__name__} with element [{i}] of type "
                    f"{type(value[i]).__name__}")
        return None

    if names is None:
        problem = bad_list(recs, "must return")
        if problem is not None and isinstance(recs, dict):
            problem += " (a dict of input streams by name needs SOURCES naming them)"
    elif not isinstance(recs, dict):
        problem = (f"must return a dict {{source name: [tuples]}} over SOURCES {tuple(names)!r}, got "
                   f"{type(recs).__name__}")
    else:
        unknown = [k for k in recs if k not in names]
        problem = (f"names source {unknown[0]!r:.60}, which is not one of SOURCES {tuple(names)!r}" if unknown
                   else next((p for n in names if n in recs and (p := bad_list(recs[n], f"[{n!r}] must be"))),
                             None))
    if problem is not None:
        user_error(run_dir, "records", problem)
        raise UserCodeError("records")


def load_user_job(cfg: dict):
    """Import the user's module, check ``KEY`` and ``SOURCES`` and call ``records(seed)``.

    The checks run before Flink starts.

    Parameters
    ----------
    cfg : dict
        The run's config (``module``, ``run_dir``, ``seed``, ``call_timeout``, ``max_records``, ...).

    Returns
    -------
    tuple
        ``(module, records, key_idx, layout)``: the records (one sequence over every source,
        :func:`source_layout`) cut to ``max_records`` when a finding is being shrunk, ``KEY`` as
        indices into the output tuple, and the sources' layout (None for a one-source module).

    Raises
    ------
    UserCodeError
        The module failed, hung, returned the wrong type or declares a bad ``KEY`` or ``SOURCES``
        (recorded in ``user-error.json`` first).
    """
    run_dir = cfg["run_dir"]
    limit = float(cfg.get("call_timeout", 300))
    import cloudpickle  # noqa: F401 - rollcheck's own import, outside the time limit of the user's import
    user = call_user(run_dir, "import", limit, load_user_module, cfg["module"])
    try:
        key_idx = resolve_key(user)
        names = check_sources(user)
    except KeyDeclarationError as e:  # seen from the module: before Flink starts
        user_error(run_dir, e.name, str(e), kind="attribute")
        raise UserCodeError(e.name) from None
    recs = call_user(run_dir, "records", limit, user.records, int(cfg.get("seed", 0)))
    _check_records(run_dir, recs, names)
    if not recs or (names is not None and not any(recs.values())):
        user_error(run_dir, "records", "returned no records" + (" (every source is empty)" if names else ""))
        raise UserCodeError("records")
    layout = None
    if names is not None:
        recs, layout = source_layout(names, recs, cfg.get("max_records"), cfg.get("drop_sources"))
        if not recs:
            user_error(run_dir, "records", "left no records once the sources were cut")
            raise UserCodeError("records")
    elif cfg.get("max_records"):
        # a finding being shrunk: the first N records of the user's input only
        recs = recs[: int(cfg["max_records"])]
    return user, recs, key_idx, layout


def source_streams(ds, layout: dict, input_class) -> dict:
    """One stream per source name of a job with several input streams.

    Each holds the records of the one checkpointed sequence (numbers) that belong to the source
    (``layout["order"]``), as the user's records (``input_class``). The split is right after the pace
    step, in the source's task: the source's checkpointed offsets cover every source's records.
    """
    from pyflink.datastream.functions import FilterFunction

    order = layout["order"]

    class OfSource(FilterFunction):
        """Keeps the sequence numbers of source ``s``."""

        def __init__(self, s: int) -> None:
            self.mark = chr(48 + s)

        def filter(self, value):
            return order[int(value)] == self.mark

    class Sources(dict):
        """The streams by name; a name not in ``SOURCES`` says so (the user's ``job()`` raised it)."""

        def __missing__(self, key):
            raise KeyError(f"{key!r} is not one of SOURCES {tuple(self)!r}")

    return Sources({name: ds.filter(OfSource(s)).name(f"rollcheck-source-{name}").map(input_class())
                    .name(f"rollcheck-input-{name}") for s, name in enumerate(layout["names"])})
