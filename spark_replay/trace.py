"""Execution traces in the ``rollcheck.trace/1`` format (JSON Lines), written as events happen.

A trace is a header line followed by one JSON object per event (``docs`` and
``specs/spark.md#trace-format``). Every event carries ``seq`` (1, 2, ... over the whole file,
across attempts), ``kind``, ``run`` (the id of the recording) and ``attempt`` (1 for the first
driver, +1 for every restart). The writer appends one line and flushes it to the operating system
per event (``os.write`` on an ``O_APPEND`` descriptor); ``t`` is the wall-clock time in seconds, so a recorder killed at any point leaves a
valid prefix, possibly followed by one incomplete line.

The message-passing recorder writes the engine-neutral core vocabulary of ``rollcheck.trace/1``
(``specs/formats.md#trace``: header ``processes``; ``send``, ``deliver``, ``checkpoint``,
``failure``, ``recovery``, ``output``, ``end``); such traces are checked by
:mod:`rollcheck.pyimpl.traces` (``rollcheck check trace``), which streams the file itself. The
fields this writer adds to every event (``run``, ``attempt``, ``t``) are extra fields the generic
checks ignore.

The reader (:func:`read_trace`, a list over :class:`rollcheck.pyimpl.traces.reader.TraceLines`, the
one reader of the format) accepts such a prefix: it stops at the first line that is not
terminated by a newline and reports the trace as truncated after the last complete event. A
complete line that is not a JSON object of the right shape is *malformed* and raises
:class:`~rollcheck.pyimpl.errors.InvalidInputError` naming the line number (exit code 2 on the CLI).
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rollcheck.pyimpl.errors import InvalidInputError
from rollcheck.pyimpl.traces.reader import TRACE_FORMAT, read_events

__all__ = ["TRACE_FORMAT", "TraceWriter", "Trace", "read_trace", "parse_trace_text"]


class TraceWriter:
    """Append-only writer of a ``rollcheck.trace/1`` file, safe to share between threads.

    Opening an existing trace continues it: the sequence numbers go on from the last complete
    event and the attempt number is one more than the highest recorded (a restarted driver after
    a SIGKILL continues the file its predecessor wrote). An incomplete last line left by a killed
    writer is cut off first, so the file stays a valid trace.

    Parameters
    ----------
    path : str or Path
        The trace file.
    header : dict, optional
        Fields of the header line (``source``, ``seed``, ``config``); required for a new file.
    enabled : bool
        When false every call is a no-op (for measuring the recorder's overhead).

    Examples
    --------
    >>> import tempfile, os
    >>> d = tempfile.mkdtemp()
    >>> w = TraceWriter(os.path.join(d, "t.jsonl"), {"source": "doc", "seed": 1, "config": {}})
    >>> w.emit("restart", resume_batch=0)
    1
    >>> w.close()
    >>> t = read_trace(os.path.join(d, "t.jsonl"))
    >>> [e["kind"] for e in t.events], t.truncated
    (['restart'], False)
    >>> import shutil; shutil.rmtree(d)
    """

    def __init__(self, path: str | Path, header: dict[str, Any] | None = None, *, enabled: bool = True,
                 run: str | None = None):
        self.path = Path(path)
        self.enabled = enabled
        self._lock = threading.Lock()
        self._fd: int | None = None
        self.seq = 0
        self.attempt = 1
        self.run = run or uuid.uuid4().hex[:12]
        self.previous: list[dict[str, Any]] = []
        self.late: list[str] = []  # kinds of events delivered after the end event (not written)
        self._ended = False
        if not enabled:
            return
        if self.path.exists() and self.path.stat().st_size > 0:
            trace = read_trace(self.path)
            self.previous = trace.events
            self.seq = trace.events[-1]["seq"] if trace.events else 0
            self.attempt = 1 + max((int(e.get("attempt", 1)) for e in trace.events), default=0)
            self.run = str(trace.header.get("run", self.run))
            good = trace.complete_bytes
            if good < self.path.stat().st_size:
                os.truncate(self.path, good)
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)
        else:
            if header is None:
                raise InvalidInputError("a new trace needs a header", source=str(self.path))
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_TRUNC, 0o644)
            head = {"format": TRACE_FORMAT, **header, "run": self.run, "t": round(time.time(), 3)}
            self._write(head)

    def _write(self, obj: dict[str, Any]) -> None:
        assert self._fd is not None
        os.write(self._fd, (json.dumps(obj, separators=(",", ":"), sort_keys=False) + "\n").encode())

    def emit(self, kind: str, **fields: Any) -> int:
        """Append one event and return its sequence number (0 when disabled).

        Parameters
        ----------
        kind : str
            The event's kind.
        **fields : Any
            The event's fields.
        """
        if not self.enabled:
            return 0
        with self._lock:
            if self._ended:
                # an asynchronous observer (Spark's listener bus) delivered late: nothing may follow
                # the end event of a trace, so the late observation is not written; it is counted
                # and named on close
                self.late.append(kind)
                return 0
            self._ended = kind == "end"
            self.seq += 1
            self._write({"seq": self.seq, "kind": kind, "run": self.run, "attempt": self.attempt,
                         "t": round(time.time(), 3), **fields})
            return self.seq

    def close(self) -> None:
        """Flush and close the trace file."""
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None
            if self.late:
                kinds = ", ".join(sorted(set(self.late)))
                print(f"rollcheck: {self.path}: {len(self.late)} observation(s) arrived after the "
                      f"trace's end event and were not written ({kinds})", file=sys.stderr)
                self.late = []

    def __enter__(self) -> TraceWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass
class Trace:
    """A parsed trace: header, complete events, and whether the file ended in an incomplete line."""

    header: dict[str, Any]
    events: list[dict[str, Any]] = field(default_factory=list)
    truncated: bool = False
    truncated_after_seq: int | None = None
    complete_bytes: int = 0
    source: str | None = None

    @property
    def source_kind(self) -> str:
        """The header's ``source`` (empty without one)."""
        return str(self.header.get("source", ""))

    def of_kind(self, *kinds: str) -> list[dict[str, Any]]:
        """The events whose kind is one of ``kinds``."""
        return [e for e in self.events if e["kind"] in kinds]


def parse_trace_text(data: bytes, source: str | None = None) -> Trace:
    """Parse the bytes of a trace file (see :func:`read_trace`).

    Parameters
    ----------
    data : bytes
        The trace file's bytes.
    source : str, optional
        The file's name for errors.

    Returns
    -------
    Trace
        The parsed trace.
    """
    lines, events = read_events(source or "<trace>", data=data, accept_unterminated=False)
    return Trace(header=lines.header, events=events, truncated=lines.truncated,
                 truncated_after_seq=lines.truncated_after_seq if lines.truncated else None,
                 complete_bytes=lines.complete_bytes, source=source)


def read_trace(path: str | Path) -> Trace:
    r"""Read a ``rollcheck.trace/1`` file, tolerating an incomplete last line.

    Raises
    ------
    InvalidInputError
        The file cannot be read, or a complete line is malformed (the location names the line).

    Examples
    --------
    >>> t = parse_trace_text(b'{"format":"rollcheck.trace/1"}\n{"seq":1,"kind":"send"}\n{"seq":2,"ki')
    >>> len(t.events), t.truncated, t.truncated_after_seq
    (1, True, 1)
    """
    p = Path(path)
    lines, events = read_events(p, accept_unterminated=False)
    return Trace(header=lines.header, events=events, truncated=lines.truncated,
                 truncated_after_seq=lines.truncated_after_seq if lines.truncated else None,
                 complete_bytes=lines.complete_bytes, source=str(p))
