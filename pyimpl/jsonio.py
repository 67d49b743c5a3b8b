"""Reading JSON input safely: one loader for every input file of rollcheck.

:func:`load_json_file`, :func:`loads_json` and :func:`loads_json_line` turn every way a document
can be malformed (unreadable path, empty file, BOM, bytes that are not UTF-8, malformed JSON,
nesting deeper than :data:`MAX_DEPTH`, integers longer than :data:`MAX_INT_DIGITS` digits,
``NaN``/``Infinity``, optionally duplicate keys) into one
:class:`~rollcheck.pyimpl.errors.InvalidInputError` naming the file and the place. Names taken
from the input are echoed through :func:`safe_name`, so a message is one printable bounded line.
See docs/internals/pyimpl-core.md#jsonio.

References
----------
.. [1] T. Bray (ed.). The JavaScript Object Notation (JSON) Data Interchange Format. RFC 8259, §6
   (numbers: "Numeric values that cannot be represented ... such as Infinity and NaN are not
   permitted") and §8.1 (no byte-order mark).
"""

from __future__ import annotations

import json
import math
import os
import re
import stat
import sys
from collections.abc import Callable
from typing import Any

from rollcheck.pyimpl.errors import InvalidInputError

__all__ = [
    "MAX_DEPTH",
    "MAX_INT_DIGITS",
    "MAX_NAME_CHARS",
    "MAX_STREAM_BYTES",
    "load_json_file",
    "loads_json",
    "loads_json_line",
    "read_input_bytes",
    "decode_utf8",
    "safe_name",
]

MAX_DEPTH = 100
"""Deepest nesting of arrays/objects accepted in an input document."""

MAX_INT_DIGITS = 100
"""Longest integer literal (digits) accepted in an input document."""

MAX_NAME_CHARS = 80
"""Names echoed in messages are cut to this many characters (then ``…``)."""

MAX_STREAM_BYTES = 2**28
"""At most this much is read from an input that is not a regular file (a pipe, a device)."""

_BOM = b"\xef\xbb\xbf"

#: Recursion levels the limit allows beyond :data:`MAX_DEPTH` (json.loads, JSONDecoder.decode,
#: raw_decode, and the number hooks called at the innermost level): a document nested at most
#: :data:`MAX_DEPTH` levels is always read, whatever its innermost values; containers holding no
#: number may reach two levels more before the refusal; every refused document is deeper than the
#: bound. Measured from the interpreter's own recursion depth (:func:`_recursion_depth`).
_DECODER_FRAMES = 4


def safe_name(value: Any, limit: int = MAX_NAME_CHARS) -> str:
    r"""``repr``-like, printable, one-line, bounded text of a value taken from the input.

    Lone surrogates (``"\ud800"``, which cannot be encoded to UTF-8) and control characters are
    written as escapes; text longer than ``limit`` characters is cut and marked with ``…``.

    Parameters
    ----------
    value : object
        A value taken from the input.
    limit : int, optional
        The most characters kept.

    Examples
    --------
    >>> safe_name("P0")
    "'P0'"
    >>> safe_name("a\ud800b")
    "'a\\ud800b'"
    >>> safe_name("x" * 100, limit=10)
    "'xxxxxxxxxx…' (100 characters)"
    """
    if isinstance(value, str):
        n = len(value)
        cut = value[:limit]
        text = repr(cut)  # escapes control characters and lone surrogates, keeps printable text
        if n > limit:
            text = text[:-1] + "…" + text[-1] + f" ({n} characters)"
        return text
    if isinstance(value, (list, dict)):
        return f"a JSON {'array' if isinstance(value, list) else 'object'} of {len(value)} entries"
    text = repr(value)
    if len(text) > limit:
        text = text[:limit] + f"… ({len(text)} characters)"
    return text


def _line_col(text: str | bytes, pos: int) -> str:
    nl = "\n" if isinstance(text, str) else b"\n"
    line = text.count(nl, 0, pos) + 1  # type: ignore[arg-type]
    col = pos - (text.rfind(nl, 0, pos) + 1)  # type: ignore[arg-type]
    return f"line {line} column {col + 1}"


def read_input_bytes(path: str | os.PathLike[str], *, max_bytes: int | None = None) -> bytes:
    """The bytes of an input file; unreadable, empty or (with ``max_bytes``) too large → exit 2.

    Parameters
    ----------
    path : str or path-like
        The input file, or a stream such as a pipe.
    max_bytes : int, optional
        The largest size accepted (None: no limit for a file, a fixed cap for a stream).

    Examples
    --------
    >>> read_input_bytes("/nonexistent/x.json")
    Traceback (most recent call last):
    ...
    rollcheck.pyimpl.errors.InvalidInputError: /nonexistent/x.json: cannot read file: No such file or directory
    """
    source = str(path)
    if os.path.isdir(path):
        raise InvalidInputError("is a directory, not a file", source=source)
    try:
        with open(path, "rb") as fh:
            st = os.fstat(fh.fileno())
            if stat.S_ISREG(st.st_mode):
                if max_bytes is not None and st.st_size > max_bytes:
                    raise InvalidInputError(f"file of {st.st_size} bytes is larger than the limit of "
                                            f"{max_bytes} bytes", source=source)
                data = fh.read()
            else:  # a pipe or a device (/dev/zero): read at most the limit, never for ever
                cap = max_bytes if max_bytes is not None else MAX_STREAM_BYTES
                data = fh.read(cap + 1)
                if len(data) > cap:
                    raise InvalidInputError(f"more than {cap} bytes from a stream that is not a regular file",
                                            source=source)
    except OSError as e:
        raise InvalidInputError(f"cannot read file: {e.strerror or e}", source=source) from None
    if not data.strip():
        raise InvalidInputError("empty file", source=source)
    return data


def decode_utf8(data: bytes, source: str | None = None) -> str:
    r"""UTF-8 text of ``data``; a BOM or an invalid byte → :class:`InvalidInputError` with its place.

    Parameters
    ----------
    data : bytes
        The input's bytes.
    source : str, optional
        The file name that error messages give (None: none).

    Examples
    --------
    >>> decode_utf8(b'{"a": 1}')
    '{"a": 1}'
    >>> decode_utf8(b'{"a":\n "\xff"}', "f.json")
    Traceback (most recent call last):
    ...
    rollcheck.pyimpl.errors.InvalidInputError: f.json: byte 8 (line 2 column 3): not UTF-8 text (invalid byte 0xff)
    """
    if data.startswith(_BOM):
        raise InvalidInputError("starts with a UTF-8 byte-order mark (BOM); save the file as UTF-8 without BOM",
                                source=source, location="byte 0")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        bad = data[e.start:e.start + 1].hex()
        raise InvalidInputError(f"not UTF-8 text (invalid byte 0x{bad})", source=source,
                                location=f"byte {e.start} ({_line_col(data, e.start)})") from None


class _Reject(Exception):
    def __init__(self, reason: str, literal: str):
        self.reason = reason
        self.literal = literal


def _parse_int(s: str) -> int:
    digits = len(s) - (s[0] == "-")
    if digits > MAX_INT_DIGITS:
        raise _Reject(f"integer of {digits} digits (the limit is {MAX_INT_DIGITS})", s)
    return int(s)


def _parse_float(s: str) -> float:
    if len(s) > MAX_INT_DIGITS + 30:
        raise _Reject(f"number literal of {len(s)} characters (the limit is {MAX_INT_DIGITS + 30})", s)
    x = float(s)
    if not math.isfinite(x):
        raise _Reject(f"number {s[:40]} is too large for a float (it would be infinite)", s)
    return x


def _bounded_float(convert: Callable[[str], Any]) -> Callable[[str], Any]:
    def parse(s: str) -> Any:
        if len(s) > MAX_INT_DIGITS + 30:
            raise _Reject(f"number literal of {len(s)} characters (the limit is {MAX_INT_DIGITS + 30})", s)
        return convert(s)
    return parse


def _parse_constant(s: str) -> Any:
    raise _Reject(f"{s} is not a JSON number (NaN and Infinity are not allowed)", s)


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    d = dict(pairs)
    if len(d) != len(pairs):
        seen: set[str] = set()
        for k, _ in pairs:
            if k in seen:
                raise _Reject(f"duplicate key {safe_name(k)} in an object", json.dumps(k))
            seen.add(k)
    return d


def _stack_depth() -> int:
    f = sys._getframe()
    n = 0
    while f is not None:
        n += 1
        f = f.f_back  # type: ignore[assignment]
    return n


_DEPTH_SAID = re.compile(r"recursion depth (\d+)")


def _recursion_depth() -> int:
    """The interpreter's recursion depth here, as the recursion limit counts it.

    It counts more than the Python frames (a C function calling back into Python counts too, as in
    a test runner's hooks), so the interpreter is asked: it refuses a limit below the current depth
    and names that depth. The frame count is the fallback should the message ever change.
    """
    old = sys.getrecursionlimit()
    try:
        sys.setrecursionlimit(1)
    except RecursionError as e:
        m = _DEPTH_SAID.search(str(e))
        if m:
            return int(m.group(1))
    else:  # pragma: no cover - a limit of 1 is below any depth
        sys.setrecursionlimit(old)
    return _stack_depth()


def loads_json(text: str | bytes, source: str | None = None, *, reject_duplicate_keys: bool = False,
               parse_float: Callable[[str], Any] | None = None) -> Any:
    """Parse one JSON document from input text under the rules of this module.

    Parameters
    ----------
    text : str or bytes
        The document (bytes are decoded with :func:`decode_utf8`).
    source : str, optional
        The file name used in messages.
    reject_duplicate_keys : bool
        Reject an object that names a key twice (slower: off for the large formats).
    parse_float : callable, optional
        Turns the literal of a number with a fraction or exponent into a value, in place of
        ``float`` (a format that refuses such numbers can keep them as markers); the literal's
        length is bounded as before, its value is then the hook's to judge.

    Raises
    ------
    InvalidInputError
        Naming ``source``, a place in the text and the reason.

    Examples
    --------
    >>> loads_json('{"a": [1, 2.5, "x"]}')
    {'a': [1, 2.5, 'x']}
    >>> loads_json('{"a": NaN}', "f.json")
    Traceback (most recent call last):
    ...
    rollcheck.pyimpl.errors.InvalidInputError: f.json: line 1 column 7: NaN is not a JSON number (NaN and Infinity are not allowed)
    >>> loads_json("[" * 1000 + "]" * 1000, "deep.json")
    Traceback (most recent call last):
    ...
    rollcheck.pyimpl.errors.InvalidInputError: deep.json: nested more than 100 levels deep (arrays/objects)
    """
    if isinstance(text, (bytes, bytearray)):
        text = decode_utf8(bytes(text), source)
    if text.startswith("\ufeff"):
        raise InvalidInputError("starts with a byte-order mark (BOM); save the file as UTF-8 without BOM",
                                source=source, location="byte 0")
    if not text.strip():
        raise InvalidInputError("empty file", source=source)
    kw: dict[str, Any] = {"parse_int": _parse_int, "parse_float": _parse_float if parse_float is None
                          else _bounded_float(parse_float), "parse_constant": _parse_constant}
    if reject_duplicate_keys:
        kw["object_pairs_hook"] = _no_duplicates
    old = sys.getrecursionlimit()
    # The C decoder counts its nesting against the recursion limit: a limit just above the current
    # stack caps the nesting of the document at no cost (and a deep document fails fast).
    cap = _recursion_depth() + MAX_DEPTH + _DECODER_FRAMES
    try:
        sys.setrecursionlimit(cap)
        try:
            return json.loads(text, **kw)
        finally:
            sys.setrecursionlimit(old)
    except RecursionError:
        raise InvalidInputError(f"nested more than {MAX_DEPTH} levels deep (arrays/objects)", source=source) from None
    except json.JSONDecodeError as e:
        raise InvalidInputError(f"malformed JSON: {e.msg}", source=source,
                                location=f"line {e.lineno} column {e.colno}") from None
    except _Reject as e:
        pos = text.find(e.literal)
        raise InvalidInputError(e.reason, source=source,
                                location=_line_col(text, pos) if pos >= 0 else None) from None
    except ValueError as e:  # the interpreter's own integer-size limit, should another path reach it
        raise InvalidInputError(f"malformed number: {e}", source=source) from None


def load_json_file(path: str | os.PathLike[str], *, max_bytes: int | None = None,
                   reject_duplicate_keys: bool = False, parse_float: Callable[[str], Any] | None = None) -> Any:
    r"""Read and parse a JSON input file (see the module notes for everything that is rejected).

    Parameters
    ----------
    path : str or path-like
        The input file.
    max_bytes : int, optional
        The largest size accepted (None: no limit).
    reject_duplicate_keys : bool, optional
        Refuse an object that repeats a key.
    parse_float : callable, optional
        Turns a number literal with a fraction or exponent into a value, as in :func:`loads_json`.

    Returns
    -------
    object
        The parsed document.

    Examples
    --------
    >>> import tempfile, os
    >>> with tempfile.TemporaryDirectory() as d:
    ...     p = os.path.join(d, "bom.json")
    ...     _ = open(p, "wb").write(b"\xef\xbb\xbf{}")
    ...     load_json_file(p)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    rollcheck.pyimpl.errors.InvalidInputError: .../bom.json: byte 0: starts with a UTF-8 byte-order mark (BOM); ...
    """
    source = str(path)
    data = read_input_bytes(path, max_bytes=max_bytes)
    return loads_json(decode_utf8(data, source), source, reject_duplicate_keys=reject_duplicate_keys,
                      parse_float=parse_float)


def loads_json_line(text: str | bytes, source: str | None, line: int) -> Any:
    """Parse one line of a JSON Lines input under the rules of :func:`loads_json`.

    An error names the file and ``line N`` (and the column within the line, when known).

    Parameters
    ----------
    text : str or bytes
        The line's text.
    source : str or None
        The file name that error messages give.
    line : int
        The line number that error messages give.

    Returns
    -------
    object
        The parsed value.

    Examples
    --------
    >>> loads_json_line('{"seq": 1}', "t.jsonl", 2)
    {'seq': 1}
    >>> loads_json_line("[" * 500 + "]" * 500, "t.jsonl", 7)
    Traceback (most recent call last):
    ...
    rollcheck.pyimpl.errors.InvalidInputError: t.jsonl: line 7: nested more than 100 levels deep (arrays/objects)
    >>> loads_json_line('{"a": Infinity}', "t.jsonl", 3)
    Traceback (most recent call last):
    ...
    rollcheck.pyimpl.errors.InvalidInputError: t.jsonl: line 3 (column 7): Infinity is not a JSON number (NaN and Infinity are not allowed)
    """
    try:
        return loads_json(text, source)
    except InvalidInputError as e:
        col = e.location.split("column ", 1)[1].rstrip(")") if e.location and "column " in e.location else None
        where = f"line {line}" + (f" (column {col})" if col else "")
        raise InvalidInputError(e.reason, source=source, location=where) from None
