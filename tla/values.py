"""Parse TLA+ values as TLC prints them into Python values.

TLC prints counterexample states as ``var = value`` conjunctions; each value becomes plain Python
data: ``int``, ``str``, ``bool``, ``tuple`` (sequences), ``frozenset`` (sets), ``dict`` (records
and finite functions) or :class:`ModelValue`. :func:`to_jsonable` converts the result further to
JSON-compatible data. The full mapping: docs/internals/tla.md#values.

References
----------
L. Lamport, *Specifying Systems*, Addison-Wesley 2002, §16 (the syntax of values) and §14.5
(TLC's output of values).
"""

from __future__ import annotations

import json
from typing import Any

from rollcheck.pyimpl.errors import InvalidInputError

__all__ = ["ModelValue", "FrozenDict", "parse_value", "parse_state", "to_jsonable"]

#: Bounds on what a printed TLA+ value may ask for (TLC never prints such values for our models):
#: digits of one integer, elements of one ``a..b`` range.
MAX_INT_DIGITS = 1000
MAX_RANGE = 1_000_000


class ModelValue(str):
    """A TLC model value (an uninterpreted constant), e.g. ``p1`` from ``CONSTANT Procs = {p1}``."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"ModelValue({str.__repr__(self)})"

    # A model value never equals a string (TLC keeps them apart too).
    def __eq__(self, other: object) -> bool:
        return isinstance(other, ModelValue) and str.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        return hash(("ModelValue", str(self)))


class FrozenDict(dict):  # type: ignore[type-arg]
    """A record or function value: a ``dict`` that is hashable, so it can sit in a set."""

    __slots__ = ()

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(frozenset(self.items()))


_ESCAPES = {'"': '"', "\\": "\\", "n": "\n", "t": "\t", "r": "\r", "f": "\f"}


class _Parser:
    def __init__(self, text: str):
        self.s = text
        self.i = 0
        self.n = len(text)

    # -------------------------------------------------------------- helpers
    def error(self, what: str) -> InvalidInputError:
        snippet = self.s[self.i : self.i + 20]
        return InvalidInputError(f"{what} at offset {self.i} (near {snippet!r})", location="TLA+ value")

    def ws(self) -> None:
        s, i, n = self.s, self.i, self.n
        while i < n and s[i] in " \t\r\n":
            i += 1
        self.i = i

    def peek(self, tok: str) -> bool:
        self.ws()
        return self.s.startswith(tok, self.i)

    def take(self, tok: str) -> bool:
        if self.peek(tok):
            self.i += len(tok)
            return True
        return False

    def expect(self, tok: str) -> None:
        if not self.take(tok):
            raise self.error(f"expected {tok!r}")

    # -------------------------------------------------------------- grammar
    def value(self) -> Any:
        self.ws()
        if self.i >= self.n:
            raise self.error("unexpected end of value")
        c = self.s[self.i]
        if c == "<" and self.s.startswith("<<", self.i):
            self.i += 2
            return tuple(self.items(">>"))
        if c == "{":
            self.i += 1
            return frozenset(self.items("}"))
        if c == "[":
            return self.record()
        if c == "(":
            return self.function()
        if c == '"':
            return self.string()
        if c == "-" or c.isdigit():
            lo = self.integer()
            if self.take(".."):
                hi = self.integer()
                if hi - lo + 1 > MAX_RANGE:
                    raise self.error(f"range {lo}..{hi} has more than {MAX_RANGE} elements")
                return frozenset(range(lo, hi + 1))
            return lo
        if c.isalpha() or c == "_":
            word = self.identifier()
            if word == "TRUE":
                return True
            if word == "FALSE":
                return False
            return ModelValue(word)
        raise self.error(f"unexpected character {c!r}")

    def items(self, close: str) -> list[Any]:
        out: list[Any] = []
        if self.take(close):
            return out
        while True:
            out.append(self.value())
            if self.take(close):
                return out
            self.expect(",")

    def record(self) -> Any:
        self.expect("[")
        out = FrozenDict()
        if self.take("]"):
            return ()
        while True:
            self.ws()
            key = self.identifier()
            self.expect("|->")
            out[key] = self.value()
            if self.take("]"):
                return out
            self.expect(",")

    def function(self) -> Any:
        self.expect("(")
        out = FrozenDict()
        while True:
            key = self.value()
            self.expect(":>")
            val = self.value()
            try:
                out[key] = val
            except TypeError:
                raise self.error("unhashable function argument") from None
            if self.take(")"):
                return out
            self.expect("@@")

    def string(self) -> str:
        s, i = self.s, self.i + 1
        buf: list[str] = []
        while i < self.n:
            c = s[i]
            if c == '"':
                self.i = i + 1
                return "".join(buf)
            if c == "\\" and i + 1 < self.n:
                buf.append(_ESCAPES.get(s[i + 1], s[i + 1]))
                i += 2
                continue
            buf.append(c)
            i += 1
        raise self.error("unterminated string")

    def integer(self) -> int:
        self.ws()
        j = self.i
        if j < self.n and self.s[j] == "-":
            j += 1
        k = j
        while k < self.n and self.s[k].isdigit():
            k += 1
        if k == j:
            raise self.error("expected an integer")
        text = self.s[self.i : k]
        if k - j > MAX_INT_DIGITS:
            raise self.error(f"integer with {k - j} digits (more than {MAX_INT_DIGITS})")
        self.i = k
        return int(text)

    def identifier(self) -> str:
        j = self.i
        while j < self.n and (self.s[j].isalnum() or self.s[j] == "_"):
            j += 1
        if j == self.i:
            raise self.error("expected an identifier")
        word = self.s[self.i : j]
        self.i = j
        return word


def parse_value(text: str) -> Any:
    """Parse one TLA+ value printed by TLC.

    Raises
    ------
    InvalidInputError
        If ``text`` is not a complete TLA+ value (the message gives the offset).

    Examples
    --------
    >>> parse_value('[a |-> <<1, "q">>, b |-> {2, 1}]')
    {'a': (1, 'q'), 'b': frozenset({1, 2})}
    >>> parse_value('(0 :> TRUE @@ 1 :> FALSE)')
    {0: True, 1: False}
    >>> parse_value('1..3') == frozenset({1, 2, 3})
    True
    >>> parse_value('p1')
    ModelValue('p1')
    """
    p = _Parser(text)
    try:
        v = p.value()
    except RecursionError:
        raise p.error("value nested too deeply") from None
    p.ws()
    if p.i != p.n:
        raise p.error("trailing text after value")
    return v


def parse_state(text: str) -> dict[str, Any]:
    r"""Parse a state ``/\ x = v /\ y = w`` (or a single ``x = v``) into ``{"x": v, "y": w}``.

    Values may span several lines; each conjunct starts with ``/\`` at the start of a line.

    Examples
    --------
    >>> parse_state('/\\ x = 1\n/\\ y = <<2,\n  3>>')
    {'x': 1, 'y': (2, 3)}
    >>> parse_state('x = "a"')
    {'x': 'a'}
    """
    lines = text.strip("\n").split("\n")
    chunks: list[str] = []
    for line in lines:
        if line.startswith("/\\ "):
            chunks.append(line[3:])
        elif chunks:
            chunks[-1] += "\n" + line
        elif line.strip():
            chunks.append(line)
    out: dict[str, Any] = {}
    for chunk in chunks:
        name, sep, rest = chunk.partition(" = ")
        if not sep or not name.strip().replace("_", "").isalnum():
            raise InvalidInputError(f"expected 'variable = value', got {chunk[:40]!r}", location="TLA+ state")
        out[name.strip()] = parse_value(rest)
    return out


def _order(x: Any) -> tuple[int, Any]:
    """Sort key of JSON-compatible data: numbers, then strings, then the rest by their JSON text."""
    if isinstance(x, bool):
        return (2, json.dumps(x))
    if isinstance(x, int):
        return (0, x)
    if isinstance(x, str):
        return (1, x)
    return (2, json.dumps(x, sort_keys=True))


def to_jsonable(v: Any) -> Any:
    """Convert a parsed value into JSON-compatible data (deterministic order).

    Examples
    --------
    >>> to_jsonable(parse_value('[s |-> {3, 1}, f |-> (1 :> "a")]'))
    {'s': [1, 3], 'f': [[1, 'a']]}
    """
    if isinstance(v, bool | int | str):
        return str(v) if isinstance(v, ModelValue) else v
    if isinstance(v, tuple):
        return [to_jsonable(x) for x in v]
    if isinstance(v, frozenset | set):
        return sorted((to_jsonable(x) for x in v), key=_order)
    if isinstance(v, dict):
        if all(isinstance(k, str) for k in v):
            return {str(k): to_jsonable(x) for k, x in v.items()}
        pairs = [[to_jsonable(k), to_jsonable(x)] for k, x in v.items()]
        return sorted(pairs, key=lambda kv: _order(kv[0]))
    raise TypeError(f"not a TLA+ value: {v!r}")
