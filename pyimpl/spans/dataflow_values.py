"""The JSON values of a dataflow description (``rollcheck.dataflow/1``).

Logical times (an epoch, or ``[epoch, c1, ..., cn]`` with ``n`` loop counters), objects and
arrays, each validated naming its JSON path (exit 2).
"""

from __future__ import annotations

import json
from typing import Any

from rollcheck.pyimpl.errors import InvalidInputError

__all__ = ["Time", "cmp_key", "parse_time", "time_json", "epoch_of", "json_object", "json_array"]

Time = int | tuple[int, ...]


def cmp_key(t: Time) -> tuple[int, ...]:
    """A time as a tuple, ordered lexicographically (an epoch is a 1-tuple).

    >>> cmp_key(3), cmp_key((1, 2))
    ((3,), (1, 2))
    """
    return (t,) if isinstance(t, int) else t


def parse_time(v: Any, loops: int, loc: str, what: str) -> Time:
    """``v`` as a time of a domain with ``loops`` loop counters, else exit 2 naming ``what`` at ``loc``.

    Parameters
    ----------
    v : object
        The JSON value.
    loops : int
        The loop counters of the time domain (0: epochs).
    loc : str
        The JSON path for messages.
    what : str
        The field's name for messages.
    """
    if loops == 0:
        if type(v) is int and v >= 0:
            return v
        raise InvalidInputError(f"{what} must be an epoch (an integer >= 0), got {json.dumps(v)[:60]}",
                                location=loc)
    if (type(v) is list and len(v) == loops + 1 and all(type(x) is int and x >= 0 for x in v)):
        return tuple(v)
    raise InvalidInputError(f"{what} must be [epoch, {', '.join(f'c{i + 1}' for i in range(loops))}] "
                            f"(integers >= 0), got {json.dumps(v)[:60]}", location=loc)


def time_json(t: Time) -> Any:
    """A time as JSON: an epoch, or ``[epoch, c1, ...]``."""
    return list(t) if isinstance(t, tuple) else t


def epoch_of(t: Time) -> int:
    """The epoch of a time."""
    return t if isinstance(t, int) else t[0]


def json_object(v: Any, loc: str, allowed: set[str], required: tuple[str, ...] = ()) -> dict:
    """``v`` as an object with only ``allowed`` fields and every ``required`` one, else exit 2 at ``loc``.

    Parameters
    ----------
    v : object
        The JSON value.
    loc : str
        The JSON path for messages.
    allowed : set of str
        The fields it may have.
    required : tuple of str, optional
        The fields it must have.
    """
    if type(v) is not dict:
        raise InvalidInputError(f"expected an object, got {type(v).__name__}", location=loc)
    extra = set(v) - allowed
    if extra:
        raise InvalidInputError(f"unknown field(s) {sorted(extra)}"[:200], location=loc)
    for f in required:
        if f not in v:
            raise InvalidInputError(f"missing {f!r}", location=loc)
    return v


def json_array(v: Any, loc: str) -> list:
    """``v`` as an array, else exit 2 at ``loc``.

    Parameters
    ----------
    v : object
        The JSON value.
    loc : str
        The JSON path for messages.
    """
    if type(v) is not list:
        raise InvalidInputError(f"expected an array, got {type(v).__name__}", location=loc)
    return v
