"""Values said in words for a verify row's detail: names joined as a sentence, not Python reprs.

A row's detail is read by a person (the report's tables): ``useless P0:2 and P1:3``, not
``useless ['P0:2', 'P1:3']``; ``none`` for an empty list or a missing value, not ``[]`` or ``None``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["and_join", "mapping_words", "word"]


def word(value: Any, none: str = "none") -> str:
    """One value in words: ``none`` for None, a list or a mapping joined, anything else ``str``.

    A list is said as :func:`and_join` says it, a mapping as :func:`mapping_words`.

    >>> word(None), word(3), word(True), word(["a", "b"]), word({"p": 1})
    ('none', '3', 'True', 'a and b', 'p 1')
    """
    if value is None:
        return none
    if isinstance(value, Mapping):
        return mapping_words(value, none=none)
    if isinstance(value, (list, tuple, set, frozenset)):
        return and_join(sorted(value, key=str) if isinstance(value, (set, frozenset)) else value, none=none)
    return str(value)


def and_join(items: Iterable[Any], none: str = "none") -> str:
    """Names joined as in a sentence: commas, then ``and`` before the last; ``none`` when empty.

    >>> and_join([]), and_join(["P0:1"]), and_join(["P0:1", "P1:2"]), and_join(["a", "b", "c"])
    ('none', 'P0:1', 'P0:1 and P1:2', 'a, b and c')
    """
    names = [word(x, none) for x in items]
    if not names:
        return none
    if len(names) == 1:
        return names[0]
    return f"{', '.join(names[:-1])} and {names[-1]}"


def mapping_words(mapping: Mapping[Any, Any], none: str = "none") -> str:
    """A mapping as ``key value`` pairs joined by :func:`and_join` (in the mapping's order).

    A value of several names is put in parentheses.

    >>> mapping_words({"p": 1, "q": "top"}), mapping_words({"a": [2, 3], "b": [4]}), mapping_words({})
    ('p 1 and q top', 'a (2 and 3) and b 4', 'none')
    """
    def said(v: Any) -> str:
        w = word(v, none)
        return f"({w})" if isinstance(v, (list, tuple, set, frozenset, Mapping)) and len(v) > 1 else w

    return and_join((f"{k} {said(v)}" for k, v in mapping.items()), none=none)
