"""The query under test: load a user's query module and check its contract.

A query module (``docs/your-query.md``) gives ``SCHEMA`` (the input rows as a Spark DDL string),
``batches(seed)`` (the input, one list of rows per micro-batch), ``query(df)`` (the streaming
transformation), ``OUTPUT_MODE`` and ``KEY`` — or, reading several streams, ``SOURCES`` (source
name -> DDL) instead of ``SCHEMA``, ``batches(seed)`` giving one dict ``{source: rows}`` per
micro-batch and ``query(**sources)``; optionally ``sink``/``read_output`` (its own
``foreachBatch`` sink, given together), ``SINK_GUARANTEE`` and ``query_next`` (an allowed change of
``query``, with its signature, run from ``query``'s checkpoint by the ``upgrade`` failure). :func:`load_query` imports it (a
``.py`` file or an importable module) and returns a :class:`UserQuery`, or refuses it with one
:class:`~rollcheck.pyimpl.errors.InvalidInputError` naming the attribute; every call into the
module runs within its time limit (:mod:`rollcheck.infra.calllimit`).
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import inspect
import keyword
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from rollcheck.infra.calllimit import DEFAULT_QUERY_CALL_TIMEOUT, call_limited, check_limit
from rollcheck.pyimpl.errors import InvalidInputError, UserCodeTimeout

__all__ = ["OUTPUT_MODES", "SINGLE_SOURCE", "Batch", "UserQuery", "ddl_columns", "load_query", "total_rows"]

OUTPUT_MODES = ("append", "update", "complete")
#: The name of the one source of a ``SCHEMA`` module (its input as one ``{source: rows}`` dict).
SINGLE_SOURCE = "input"
#: One micro-batch of input: source name -> rows (a source absent has no new data in it).
Batch = dict[str, list[tuple[Any, ...]]]


def total_rows(batches: list[Batch]) -> int:
    """The number of input rows over every batch and source.

    >>> total_rows([{"a": [(1,), (2,)]}, {"b": [(3,)]}, {}])
    3
    """
    return sum(len(rows) for b in batches for rows in b.values())


@dataclass
class UserQuery:
    """A loaded query module, its contract attributes checked."""

    spec: str
    module: ModuleType
    #: source name -> Spark DDL (a ``SCHEMA`` module: ``{SINGLE_SOURCE: SCHEMA}``)
    sources: dict[str, str]
    output_mode: str
    key: list[str]
    #: seconds each call into the module may take (``--call-timeout``)
    call_timeout: float = DEFAULT_QUERY_CALL_TIMEOUT
    #: the module's ``SINK_GUARANTEE`` (``"exactly-once"`` when it declares none)
    sink_guarantee: str = "exactly-once"
    #: the module gives ``SOURCES`` (``query`` takes its streams by name)
    multi: bool = False

    @property
    def schema(self) -> str | None:
        """The ``SCHEMA`` of a one-source module (None with ``SOURCES``)."""
        return None if self.multi else self.sources[SINGLE_SOURCE]

    @property
    def columns(self) -> list[str]:
        """The input columns of a one-source module (the first source's with ``SOURCES``)."""
        return ddl_columns(next(iter(self.sources.values())))

    def source_columns(self, name: str) -> list[str]:
        """The columns of source ``name`` (its DDL schema)."""
        return ddl_columns(self.sources[name])

    def run_query(self, dfs: dict[str, Any], which: str = "query") -> Any:
        """``query`` (or ``which="query_next"``) on one streaming (or batch) DataFrame per source.

        Within the call limit: positionally for a ``SCHEMA`` module, by source name for a
        ``SOURCES`` one.

        Parameters
        ----------
        dfs : dict
            Source name -> DataFrame.
        which : str, optional
            ``query`` or ``query_next``.

        Returns
        -------
        DataFrame
            What the user's function returned.
        """
        if self.multi:
            return call_limited(getattr(self.module, which), limit=self.call_timeout, file=self.spec,
                                method=which, **dfs)
        return self.call(which, dfs[SINGLE_SOURCE])

    @property
    def has_next(self) -> bool:
        """Whether the module gives ``query_next`` (the ``upgrade`` failure's changed query)."""
        return callable(getattr(self.module, "query_next", None))

    @property
    def has_sink(self) -> bool:
        """Whether the module brings its own ``foreachBatch`` sink."""
        return callable(getattr(self.module, "sink", None))

    def call(self, method: str, *args: Any, on_expire: Any = None) -> Any:
        """``module.method(*args)`` within :attr:`call_timeout`.

        Else :class:`~rollcheck.pyimpl.errors.UserCodeTimeout` naming the file, the method, the
        limit.

        Parameters
        ----------
        method : str
            The module's function.
        *args : Any
            Its arguments.
        on_expire : callable, optional
            Called when the limit expires.

        Returns
        -------
        Any
            What the function returned.
        """
        return call_limited(getattr(self.module, method), *args, limit=self.call_timeout, file=self.spec,
                            method=method, on_expire=on_expire)

    def batches(self, seed: int) -> list[Batch]:
        """The user's input, checked.

        One ``{source: rows}`` dict per micro-batch (a ``SCHEMA`` module's lists of rows come as
        ``{SINGLE_SOURCE: rows}``), every row of its source's width.
        """
        try:
            data = self.call("batches", seed)
        except UserCodeTimeout:
            raise
        except Exception as e:  # the user's code: one clear line, no traceback
            raise InvalidInputError(f"batches({seed}) raised {type(e).__name__}: {e}", source=self.spec,
                                    location="batches") from None
        if not isinstance(data, list | tuple) or not data:
            raise InvalidInputError("batches(seed) must return a non-empty list of batches",
                                    source=self.spec, location="batches")
        widths = {n: self.source_columns(n) for n in self.sources}
        out: list[Batch] = []
        for b, batch in enumerate(data):
            if self.multi:
                if not isinstance(batch, dict):
                    raise InvalidInputError("with SOURCES, a batch must be a dict {source name: rows}",
                                            source=self.spec, location=f"batches(seed)[{b}]")
                unknown = [str(n) for n in batch if n not in self.sources]
                if unknown:
                    raise InvalidInputError(f"batch names the unknown source {unknown[0]!r} (SOURCES: "
                                            f"{', '.join(self.sources)})", source=self.spec,
                                            location=f"batches(seed)[{b}]")
                items = {n: batch[n] for n in self.sources if n in batch and batch[n] is not None}
            else:
                items = {SINGLE_SOURCE: batch}
            checked: Batch = {}
            for name, rows in items.items():
                where = f"batches(seed)[{b}]" + (f"[{name!r}]" if self.multi else "")
                if not isinstance(rows, list | tuple):
                    raise InvalidInputError("a batch must be a list of rows", source=self.spec, location=where)
                cols = widths[name]
                for i, r in enumerate(rows):
                    if not isinstance(r, list | tuple) or len(r) != len(cols):
                        raise InvalidInputError(f"a row must be a tuple of {len(cols)} values "
                                                f"({', '.join(cols)})", source=self.spec, location=f"{where}[{i}]")
                if rows or not self.multi:
                    checked[name] = [tuple(r) for r in rows]
            out.append(checked)
        if self.multi and total_rows(out) == 0:
            raise InvalidInputError("batches(seed) gives no row for any source", source=self.spec,
                                    location="batches")
        return out


def ddl_columns(schema: str) -> list[str]:
    """The column names of a Spark DDL schema string (top-level commas only).

    Examples
    --------
    >>> ddl_columns("ts TIMESTAMP, `user id` STRING, s STRUCT<a: INT, b: INT>")
    ['ts', 'user id', 's']
    """
    parts: list[str] = []
    cur: list[str] = []
    depth = 0
    for ch in schema:
        if ch in "<(":
            depth += 1
        elif ch in ">)":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    names = []
    for p in parts:
        p = p.strip()
        if not p:
            raise InvalidInputError(f"empty column in SCHEMA {schema!r}", location="SCHEMA")
        if p.startswith("`"):
            end = p.find("`", 1)
            if end < 0:
                raise InvalidInputError(f"unbalanced backquote in SCHEMA {schema!r}", location="SCHEMA")
            names.append(p[1:end])
        else:
            names.append(p.replace(":", " ").split()[0])
    return names


def _import(spec: str) -> ModuleType:
    if spec.endswith(".py"):
        path = Path(spec)
        if not path.is_file():
            raise InvalidInputError("query module file not found", source=spec, location="--module")
        name = "rollcheck_user_query_" + hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:10]
        if name in sys.modules:
            return sys.modules[name]
        ispec = importlib.util.spec_from_file_location(name, path)
        assert ispec is not None and ispec.loader is not None
        mod = importlib.util.module_from_spec(ispec)
        sys.modules[name] = mod
        try:
            ispec.loader.exec_module(mod)
        except Exception as e:
            del sys.modules[name]
            raise InvalidInputError(f"cannot load the query module: {type(e).__name__}: {e}",
                                    source=spec, location="--module") from None
        return mod
    try:
        return importlib.import_module(spec)
    except ImportError as e:
        raise InvalidInputError(f"cannot import the query module: {e}", source=spec, location="--module") from None


def load_query(spec: str, call_timeout: float = DEFAULT_QUERY_CALL_TIMEOUT) -> UserQuery:
    """Load ``FILE.py`` or ``MODULE`` and check the contract (module docstring).

    Parameters
    ----------
    spec : str
        ``FILE.py`` or a module name.
    call_timeout : float, optional
        The limit (s) of each call into the module.

    Returns
    -------
    UserQuery
        The loaded and checked module.

    Raises
    ------
    InvalidInputError
        Naming the module and the missing or malformed attribute.
    """
    mod = _import(spec)
    has_schema, has_sources = hasattr(mod, "SCHEMA"), hasattr(mod, "SOURCES")
    if has_schema and has_sources:
        raise InvalidInputError("give SCHEMA (one input stream) or SOURCES (several), not both", source=spec,
                                location="SOURCES")
    for name in ("SOURCES" if has_sources else "SCHEMA", "batches", "query", "OUTPUT_MODE", "KEY"):
        if not hasattr(mod, name):
            raise InvalidInputError(f"the query module has no {name}", source=spec, location=name)
    for name in ("batches", "query") + (("query_next",) if hasattr(mod, "query_next") else ()):
        if not callable(getattr(mod, name)):
            raise InvalidInputError(f"{name} must be a function", source=spec, location=name)
    if has_sources:
        sources = _check_sources(spec, mod)
        if hasattr(mod, "query_next"):
            _check_sources(spec, mod, "query_next")
    else:
        if not isinstance(mod.SCHEMA, str) or not mod.SCHEMA.strip():
            raise InvalidInputError("SCHEMA must be a DDL string", source=spec, location="SCHEMA")
        ddl_columns(mod.SCHEMA)
        sources = {SINGLE_SOURCE: mod.SCHEMA}
    if mod.OUTPUT_MODE not in OUTPUT_MODES:
        raise InvalidInputError(f"OUTPUT_MODE must be one of {OUTPUT_MODES}, got {mod.OUTPUT_MODE!r}",
                                source=spec, location="OUTPUT_MODE")
    key = mod.KEY
    if isinstance(key, str) or not isinstance(key, list | tuple) or not all(isinstance(k, str) for k in key):
        raise InvalidInputError("KEY must be a list of output column names", source=spec, location="KEY")
    has_sink, has_read = callable(getattr(mod, "sink", None)), callable(getattr(mod, "read_output", None))
    if has_sink != has_read:
        raise InvalidInputError("give sink and read_output together (rollcheck must read what your sink "
                                "wrote)", source=spec, location="sink" if has_sink else "read_output")
    from rollcheck.pyimpl.attribution import check_guarantee

    try:
        guarantee = check_guarantee(getattr(mod, "SINK_GUARANTEE", None))
    except ValueError as e:
        raise InvalidInputError(str(e), source=spec, location="SINK_GUARANTEE") from None
    if guarantee != "exactly-once" and not has_sink:
        raise InvalidInputError("SINK_GUARANTEE is about the module's own sink, and it has none (rollcheck's "
                                "default sink is exactly-once)", source=spec, location="SINK_GUARANTEE")
    return UserQuery(spec, mod, sources, mod.OUTPUT_MODE, list(key), check_limit(call_timeout), guarantee,
                     multi=has_sources)


def _check_sources(spec: str, mod: ModuleType, fn: str = "query") -> dict[str, str]:
    """``SOURCES`` checked against the parameters of ``query``.

    Names usable as parameter and folder names, DDL strings. Or ``query_next``. Which must name
    exactly the sources.
    """
    sources = mod.SOURCES
    if not isinstance(sources, dict) or not sources:
        raise InvalidInputError("SOURCES must be a non-empty dict {source name: DDL string}", source=spec,
                                location="SOURCES")
    for name, ddl in sources.items():
        if not isinstance(name, str) or not name.isidentifier() or keyword.iskeyword(name):
            raise InvalidInputError(f"source name {name!r} must be a Python identifier (query takes the source "
                                    "by that name)", source=spec, location="SOURCES")
        if not isinstance(ddl, str) or not ddl.strip():
            raise InvalidInputError(f"SOURCES[{name!r}] must be a DDL string", source=spec, location="SOURCES")
        try:
            ddl_columns(ddl)
        except InvalidInputError as e:
            raise InvalidInputError(e.reason.replace("SCHEMA", f"SOURCES[{name!r}]"), source=spec,
                                    location="SOURCES") from None
    try:
        params = inspect.signature(getattr(mod, fn)).parameters.values()
    except (TypeError, ValueError):
        return dict(sources)
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return dict(sources)
    named = [p.name for p in params if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                                   inspect.Parameter.KEYWORD_ONLY)]
    required = {p.name for p in params if p.default is inspect.Parameter.empty
                and p.kind is not inspect.Parameter.VAR_POSITIONAL}
    missing = sorted(set(sources) - set(named))
    extra = sorted(required - set(sources))
    if missing or extra:
        what = (f"has no parameter for the source(s) {', '.join(missing)}" if missing
                else f"takes {', '.join(extra)}, which SOURCES does not name")
        raise InvalidInputError(f"{fn}({', '.join(named)}) {what}: its parameters must be the source names "
                                f"({', '.join(sources)})", source=spec, location=fn)
    return dict(sources)
