"""Streaming reader of ``rollcheck.trace/1`` files (JSON Lines) that tolerates a truncated tail.

The reader goes through the file line by line and never holds more than one line: a header line,
then one JSON object per event with ``seq`` 1, 2, … without gaps and a string ``kind``. It checks
only the framing; the meaning of the core kinds is checked by :mod:`rollcheck.pyimpl.traces.checker`.

A writer that is killed mid-line leaves a last line without its newline. Such a line is accepted
when it is a complete JSON object (hand-written files often lack the final newline) and otherwise
reported as *truncated* (:attr:`TraceLines.truncated`), never as an error: the trace is the valid
prefix before it. Every other defect is an :class:`~rollcheck.pyimpl.errors.InvalidInputError`
whose location names the line and the ``seq``: ``FILE: line N (seq S): field: reason``.

References
----------
``specs/formats.md#trace`` (the format); the append-and-flush discipline of the recorders.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rollcheck.pyimpl.errors import InvalidInputError
from rollcheck.pyimpl.jsonio import MAX_DEPTH, loads_json

__all__ = ["TRACE_FORMAT", "TraceLines", "read_events", "read_header", "trace_error", "location"]

TRACE_FORMAT = "rollcheck.trace/1"
_SHALLOW = MAX_DEPTH  # a line with at most this many brackets cannot nest deeper than the bound
_BOMS = (b"\xef\xbb\xbf", b"\xff\xfe", b"\xfe\xff")


def location(line: int, seq: int | None, after: int | None = None) -> str:
    """``line N (seq S)``, or ``line N (after seq S)`` when the line's own seq is unknown.

    Parameters
    ----------
    line : int
        The line number.
    seq : int or None
        The line's ``seq`` (None: unknown).
    after : int, optional
        The last ``seq`` read before the line.

    Examples
    --------
    >>> location(12, 11), location(3, None, 1)
    ('line 12 (seq 11)', 'line 3 (after seq 1)')
    """
    if seq is not None:
        return f"line {line} (seq {seq})"
    if after is not None:
        return f"line {line} (after seq {after})"
    return f"line {line}"


def trace_error(source: str | None, line: int, seq: int | None, field: str | None, reason: str,
                after: int | None = None) -> InvalidInputError:
    """The error for a bad trace line: ``FILE: line N (seq S): field: reason``.

    Parameters
    ----------
    source : str or None
        The trace file's name.
    line : int
        The line number.
    seq : int or None
        The line's ``seq`` (None: unknown).
    field : str or None
        The offending field (None: the line as a whole).
    reason : str
        What is wrong.
    after : int, optional
        The last ``seq`` read before the line.
    """
    return InvalidInputError(f"{field}: {reason}" if field else reason, source=source,
                             location=location(line, seq, after))


class TraceLines:
    r"""The lines of a trace file, read lazily: ``header`` at once, events by iteration.

    Parameters
    ----------
    path : str or Path
        The trace file.
    data : bytes, optional
        The trace's bytes (``path`` then only names it in messages).
    accept_unterminated : bool
        Accept a last line without its newline when it is a complete JSON object (hand-written
        files). False: any unterminated last line is the incomplete tail of a killed writer
        (the recorders' own reader, which continues such a file).
    validator : callable, optional
        Called as ``validator(obj, line_no, is_header)`` on every parsed line before any other
        check (the ``--strict`` JSON-Schema mode); it raises :class:`InvalidInputError`.

    Attributes
    ----------
    header : dict
        The first line.
    truncated : bool
        True when the file ended in an incomplete line (known once iteration is finished).
    truncated_after_seq : int or None
        The last complete ``seq`` when truncated.
    last_seq : int
        The ``seq`` of the last event read.
    lines : int
        Number of the last line read.
    complete_bytes : int
        Bytes up to the end of the last event read (where a writer continues the file).

    Raises
    ------
    InvalidInputError
        The file cannot be read or is not a trace (at construction), or a complete line is
        malformed (during iteration).

    Examples
    --------
    >>> import os, tempfile
    >>> f = os.path.join(tempfile.mkdtemp(), "t.jsonl")
    >>> _ = open(f, "w").write('{"format": "rollcheck.trace/1", "processes": ["a"]}\n'
    ...                        '{"seq": 1, "kind": "end"}\n{"seq": 2, "ki')
    >>> t = TraceLines(f)
    >>> [obj["kind"] for _line, obj in t], t.truncated, t.truncated_after_seq
    (['end'], True, 1)
    >>> import shutil; shutil.rmtree(os.path.dirname(f))
    """

    def __init__(self, path: str | Path, validator: Any = None, *, data: bytes | None = None,
                 accept_unterminated: bool = True):
        self.path = Path(path)
        self.source = str(path)
        self.validator = validator
        self.accept_unterminated = accept_unterminated
        self.truncated = False
        self.truncated_after_seq: int | None = None
        self.last_seq = 0
        self.lines = 0
        self._data = data
        try:
            self._fh: Any = io.BytesIO(data) if data is not None else open(self.path, "rb")  # noqa: SIM115
        except OSError as e:
            raise InvalidInputError(f"cannot read trace: {e.strerror}", source=self.source) from None
        first = self._fh.readline()
        self.lines = 1
        self.complete_bytes = len(first)
        if not first.strip():
            self._fh.close()
            raise InvalidInputError("empty file: expected a header line", source=self.source, location="line 1")
        if first.startswith(_BOMS):
            self._fh.close()
            raise trace_error(self.source, 1, None, None,
                              "the file starts with a byte-order mark; write UTF-8 without a BOM")
        try:
            head = self._parse(first, 1, None, header=True)
        except InvalidInputError:
            self._fh.close()
            self._not_a_trace()
            raise
        if head is None:  # the header itself is incomplete
            self._fh.close()
            raise InvalidInputError("truncated header line", source=self.source, location="line 1")
        if head.get("format") != TRACE_FORMAT:
            self._fh.close()
            if head.get("format") == "rollcheck.pattern/1":
                self._not_a_trace()
            raise trace_error(self.source, 1, None, "format",
                              f"expected {TRACE_FORMAT!r}, got {head.get('format')!r}")
        if validator is not None:
            validator(head, 1, True)
        self.header: dict[str, Any] = head

    def close(self) -> None:
        """Stop reading (iteration closes the file by itself at its end)."""
        self._fh.close()

    def _not_a_trace(self) -> None:
        """Raise a helpful error when the file is a whole-document pattern rather than a trace."""
        try:
            doc = loads_json(self._data if self._data is not None else self.path.read_bytes())
        except (OSError, ValueError):  # (InvalidInputError is a ValueError)
            return
        if isinstance(doc, dict) and doc.get("format") == "rollcheck.pattern/1":
            raise InvalidInputError("this is a rollcheck.pattern/1 file, not a rollcheck.trace/1 trace "
                                    "(give it to useless, recovery-line, protocol, …)",
                                    source=self.source, location="line 1")

    def _parse(self, raw: bytes, line: int, after: int | None, header: bool = False) -> dict[str, Any] | None:
        """Parse one line under the input bounds of :func:`~rollcheck.pyimpl.jsonio.loads_json`.

        The bounds: nesting, NaN/Infinity, integer digits. None for an incomplete last line.
        """
        complete = raw.endswith(b"\n")
        try:
            obj = loads_json(raw)
        except InvalidInputError as e:
            cut = e.reason.startswith(("malformed JSON", "not UTF-8"))
            if not complete and cut:
                return None  # a writer killed mid-line (or mid-character)
            reason = e.reason
            if reason.startswith("malformed JSON: "):
                reason = f"not valid JSON ({reason[len('malformed JSON: '):]})"
            elif reason.startswith("not UTF-8") and e.location:
                reason = f"not UTF-8 text ({e.location.split(' (')[0]})"
            raise trace_error(self.source, line, None, None, reason, after=after) from None
        if not isinstance(obj, dict):
            if not complete and not header:
                return None
            raise trace_error(self.source, line, None, None, "a trace line must be a JSON object", after=after)
        return obj

    def __iter__(self) -> Iterator[tuple[int, dict[str, Any]]]:
        fh = self._fh
        source = self.source
        validator = self.validator
        line = 1
        last = 0
        loads = json.loads
        pos = self.complete_bytes
        strict_tail = not self.accept_unterminated
        try:
            for raw in fh:
                line += 1
                pos += len(raw)
                if raw.endswith(b"\n"):
                    # the plain decoder for the common line; one that may be deep, non-finite or
                    # malformed goes through the bounded one (exact message, no RecursionError)
                    if (raw.count(b"[") + raw.count(b"{") > _SHALLOW or b"NaN" in raw
                            or b"Infinity" in raw):
                        obj = self._parse(raw, line, last)
                    else:
                        try:
                            obj = loads(raw)
                        except ValueError:  # (UnicodeDecodeError is a ValueError too)
                            obj = self._parse(raw, line, last)
                    if type(obj) is not dict:
                        if not raw.strip():
                            continue  # a blank line
                        raise trace_error(source, line, None, None, "a trace line must be a JSON object",
                                          after=last)
                else:
                    if not raw.strip():
                        continue
                    obj = None if strict_tail else self._parse(raw, line, last)
                    if obj is None:
                        self.truncated = True
                        self.truncated_after_seq = last
                        break
                if validator is not None:
                    validator(obj, line, False)
                seq = obj.get("seq")
                if type(seq) is not int:
                    raise trace_error(source, line, None, "seq", f"expected an integer, got {seq!r}", after=last)
                if seq != last + 1:
                    raise trace_error(source, line, seq, "seq",
                                      f"expected {last + 1} after {last} (seq numbers have no gaps)")
                if type(obj.get("kind")) is not str:
                    raise trace_error(source, line, seq, "kind", f"expected a string, got {obj.get('kind')!r}")
                last = seq
                self.last_seq = seq
                self.lines = line
                self.complete_bytes = pos
                yield line, obj
        finally:
            fh.close()


def read_events(path: str | Path, *, data: bytes | None = None, accept_unterminated: bool = True,
                validator: Any = None) -> tuple[TraceLines, list[dict[str, Any]]]:
    r"""Read a whole trace: the reader (header, ``truncated``, ...) and its events in a list.

    Each event gets its line number as ``"_line"``. This is :class:`TraceLines` (the one reader
    of ``rollcheck.trace/1``) for callers that need the events more than once.

    Parameters
    ----------
    path : str or Path
        The trace file.
    data : bytes, optional
        The trace's bytes (``path`` then only names it in messages).
    accept_unterminated : bool, optional
        Accept a complete last line without its newline.
    validator : callable, optional
        Called on every parsed line, as for :class:`TraceLines`.

    Returns
    -------
    tuple
        The :class:`TraceLines` and the list of events.

    Examples
    --------
    >>> t, evs = read_events("t.jsonl", data=b'{"format": "rollcheck.trace/1"}\n{"seq": 1, "kind": "end"}\n')
    >>> [(e["kind"], e["_line"]) for e in evs], t.truncated, t.complete_bytes
    ([('end', 2)], False, 58)
    """
    lines = TraceLines(path, validator, data=data, accept_unterminated=accept_unterminated)
    events = []
    for line, obj in lines:
        obj["_line"] = line
        events.append(obj)
    return lines, events


def read_header(path: str | Path) -> dict[str, Any]:
    """The header line of a trace (the file is closed again; events are not read)."""
    lines = TraceLines(path)
    lines.close()
    return lines.header
