"""The query under test: load a user's query module and check its contract.

A query module (``docs/your-query.md``) gives ``SCHEMA`` (the input rows as a Spark DDL string),
``batches(seed)`` (the input, one list of rows per micro-batch), ``query(df)`` (the streaming
transformation), ``OUTPUT_MODE`` and ``KEY``; optionally ``sink``/``read_output`` (its own
``foreachBatch`` sink, given together) and ``SINK_GUARANTEE``. :func:`load_query` imports it (a
``.py`` file or an importable module) and returns a :class:`UserQuery`, or refuses it with one
:class:`~rollcheck.pyimpl.errors.InvalidInputError` naming the attribute; every call into the
module runs within its time limit (:mod:`rollcheck.pyimpl.calllimit`).
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from rollcheck.pyimpl.calllimit import DEFAULT_QUERY_CALL_TIMEOUT, call_limited, check_limit
from rollcheck.pyimpl.errors import InvalidInputError, UserCodeTimeout

__all__ = ["OUTPUT_MODES", "UserQuery", "ddl_columns", "load_query"]

OUTPUT_MODES = ("append", "update", "complete")


@dataclass
class UserQuery:
    """A loaded query module, its contract attributes checked."""

    spec: str
    module: ModuleType
    schema: str
    columns: list[str]
    output_mode: str
    key: list[str]
    #: seconds each call into the module may take (``--call-timeout``)
    call_timeout: float = DEFAULT_QUERY_CALL_TIMEOUT
    #: the module's ``SINK_GUARANTEE`` (``"exactly-once"`` when it declares none)
    sink_guarantee: str = "exactly-once"

    @property
    def has_sink(self) -> bool:
        return callable(getattr(self.module, "sink", None))

    def call(self, method: str, *args: Any, on_expire: Any = None) -> Any:
        """``module.method(*args)`` within :attr:`call_timeout` (else
        :class:`~rollcheck.pyimpl.errors.UserCodeTimeout` naming the file, the method, the limit)."""
        return call_limited(getattr(self.module, method), *args, limit=self.call_timeout, file=self.spec,
                            method=method, on_expire=on_expire)

    def batches(self, seed: int) -> list[list[tuple[Any, ...]]]:
        """The user's input, checked: a list of batches, each a list of rows of the schema's width."""
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
        out = []
        for b, rows in enumerate(data):
            if not isinstance(rows, list | tuple):
                raise InvalidInputError("a batch must be a list of rows", source=self.spec,
                                        location=f"batches(seed)[{b}]")
            for i, r in enumerate(rows):
                if not isinstance(r, list | tuple) or len(r) != len(self.columns):
                    raise InvalidInputError(f"a row must be a tuple of {len(self.columns)} values "
                                            f"({', '.join(self.columns)})", source=self.spec,
                                            location=f"batches(seed)[{b}][{i}]")
            out.append([tuple(r) for r in rows])
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

    Raises
    ------
    InvalidInputError
        Naming the module and the missing or malformed attribute.
    """
    mod = _import(spec)
    for name in ("SCHEMA", "batches", "query", "OUTPUT_MODE", "KEY"):
        if not hasattr(mod, name):
            raise InvalidInputError(f"the query module has no {name}", source=spec, location=name)
    if not isinstance(mod.SCHEMA, str) or not mod.SCHEMA.strip():
        raise InvalidInputError("SCHEMA must be a DDL string", source=spec, location="SCHEMA")
    for name in ("batches", "query"):
        if not callable(getattr(mod, name)):
            raise InvalidInputError(f"{name} must be a function", source=spec, location=name)
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
    cols = ddl_columns(mod.SCHEMA)
    from rollcheck.pyimpl.attribution import check_guarantee

    try:
        guarantee = check_guarantee(getattr(mod, "SINK_GUARANTEE", None))
    except ValueError as e:
        raise InvalidInputError(str(e), source=spec, location="SINK_GUARANTEE") from None
    if guarantee != "exactly-once" and not has_sink:
        raise InvalidInputError("SINK_GUARANTEE is about the module's own sink, and it has none (rollcheck's "
                                "default sink is exactly-once)", source=spec, location="SINK_GUARANTEE")
    return UserQuery(spec, mod, mod.SCHEMA, cols, mod.OUTPUT_MODE, list(key), check_limit(call_timeout),
                     guarantee)
