"""Protocols named on the command line: a built-in name, ``MODULE:CLASS`` or ``path/file.py:CLASS``.

A user's protocol is a subclass of :class:`~rollcheck.pyimpl.protocols.base.Protocol` defined in an
importable module or in a Python file; :func:`resolve_protocol` turns such a *spec* into a fresh
protocol object, with a one-line :class:`~rollcheck.pyimpl.errors.InvalidInputError` (exit 2) when
the spec names nothing usable.

References
----------
``specs/protocols.md#your-protocol``.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import inspect
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from rollcheck.pyimpl.errors import InvalidInputError
from rollcheck.pyimpl.protocols.base import Protocol
from rollcheck.pyimpl.protocols.catalog import get_protocol

__all__ = ["is_builtin_spec", "resolve_protocol", "protocol_label"]


def is_builtin_spec(spec: str) -> bool:
    """True when ``spec`` is a plain name (no ``:``), i.e. a built-in protocol or variant."""
    return ":" not in spec


def _load_file(path: Path, spec: str) -> ModuleType:
    if not path.is_file():
        raise InvalidInputError(f"no such file {str(path)!r}", source=spec, location="protocol")
    digest = hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:12]
    modname = f"rollcheck_user_protocol_{digest}"
    if modname in sys.modules:
        return sys.modules[modname]
    mspec = importlib.util.spec_from_file_location(modname, path)
    if mspec is None or mspec.loader is None:
        raise InvalidInputError(f"cannot import {str(path)!r} as Python", source=spec, location="protocol")
    module = importlib.util.module_from_spec(mspec)
    folder = str(path.resolve().parent)
    added = folder not in sys.path
    if added:
        sys.path.insert(0, folder)  # the user's file may import its neighbours
    sys.modules[modname] = module
    try:
        mspec.loader.exec_module(module)
    except BaseException as e:  # the user's code failed to import: bad input, not our bug
        sys.modules.pop(modname, None)
        if isinstance(e, KeyboardInterrupt):
            raise
        raise InvalidInputError(f"importing {str(path)!r} failed: {type(e).__name__}: {e}",
                                source=spec, location="protocol") from None
    finally:
        if added:
            sys.path.remove(folder)
    return module


def _load_module(name: str, spec: str) -> ModuleType:
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as e:
        raise InvalidInputError(f"no module named {e.name!r}", source=spec, location="protocol") from None
    except BaseException as e:
        if isinstance(e, KeyboardInterrupt):
            raise
        raise InvalidInputError(f"importing module {name!r} failed: {type(e).__name__}: {e}",
                                source=spec, location="protocol") from None


def resolve_protocol(spec: Any) -> Protocol:
    """A fresh protocol object for ``spec``.

    Parameters
    ----------
    spec : str, Protocol or type
        A built-in name (``"hmnr"``, a variant such as ``"hmnr-no-c1"``), ``"MODULE:CLASS"``
        (an importable module), ``"path/to/file.py:CLASS"``, a :class:`Protocol` subclass or an
        instance (returned as is).

    Returns
    -------
    Protocol

    Raises
    ------
    InvalidInputError
        Unknown name, missing file or module, missing class, a class that is not a
        :class:`Protocol` subclass, or a class that cannot be instantiated without arguments.

    Examples
    --------
    >>> resolve_protocol("hmnr").name
    'hmnr'
    >>> type(resolve_protocol("rollcheck.pyimpl.protocols.bcs:BCS")).__name__
    'BCS'
    >>> resolve_protocol("rollcheck.pyimpl.protocols.bcs:Nope")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    rollcheck.pyimpl.errors.InvalidInputError: rollcheck.pyimpl.protocols.bcs:Nope: protocol: ... has no class 'Nope'
    """
    if isinstance(spec, Protocol):
        return spec
    if inspect.isclass(spec):
        return _instantiate(spec, getattr(spec, "__qualname__", repr(spec)))
    if not isinstance(spec, str) or not spec.strip():
        raise InvalidInputError(f"a protocol is a name, MODULE:CLASS or FILE.py:CLASS, not {spec!r}",
                                location="protocol")
    if is_builtin_spec(spec):
        return get_protocol(spec)
    target, _, clsname = spec.rpartition(":")
    if not target or not clsname.isidentifier():
        raise InvalidInputError("expected MODULE:CLASS or path/to/file.py:CLASS", source=spec,
                                location="protocol")
    looks_like_file = target.endswith(".py") or os.sep in target or "/" in target
    module = _load_file(Path(target), spec) if looks_like_file else _load_module(target, spec)
    cls = getattr(module, clsname, None)
    if cls is None:
        raise InvalidInputError(f"{target!r} has no class {clsname!r}", source=spec, location="protocol")
    return _instantiate(cls, spec)


def _instantiate(cls: Any, spec: str) -> Protocol:
    if not (inspect.isclass(cls) and issubclass(cls, Protocol)):
        raise InvalidInputError("not a subclass of rollcheck.testing.Protocol", source=spec,
                                location="protocol")
    if inspect.isabstract(cls):
        missing = ", ".join(sorted(getattr(cls, "__abstractmethods__", ())))
        raise InvalidInputError(f"the protocol class does not implement: {missing}", source=spec,
                                location="protocol")
    try:
        proto = cls()
    except Exception as e:
        raise InvalidInputError(f"cannot instantiate the protocol class without arguments: "
                                f"{type(e).__name__}: {e}", source=spec, location="protocol") from None
    if getattr(proto, "name", "?") in ("?", "", None):
        proto.name = cls.__name__
    return proto


def protocol_label(spec: Any) -> str:
    """The name to report for ``spec``: the protocol's ``name`` attribute or its class name."""
    proto = resolve_protocol(spec)
    return str(proto.name)
