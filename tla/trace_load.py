"""Loading a trace for TLC trace validation.

A pattern, a ``rollcheck.trace/1`` file or an engine-neutral trace (every execution between
failures, :class:`TracePattern`).

:func:`load_trace_events` refuses a declared process count above :data:`MAX_PROCESSES` before
anything is built, naming the field.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rollcheck.pyimpl.errors import InvalidInputError
from rollcheck.pyimpl.jsonio import decode_utf8, loads_json, loads_json_line, read_input_bytes
from rollcheck.pyimpl.pattern import CHECKPOINT, DELIVER, SEND, Event, Pattern

__all__ = ["MAX_PROCESSES", "TracePattern", "load_trace_events"]

MAX_PROCESSES = 1000
"""Most processes a trace or pattern may name for TLC trace validation (``allow_large`` lifts it).

The model's state holds n × n matrices (``ckpt``, ``taken``, ``sent_to``, ``min_to``) and TLC
evaluates every step over all of them: 1,000 processes are already 4 million entries per state. A
header that announces more (``config.processes: 300000000``) is refused before anything is built,
naming the field, instead of running without bound.
"""



@dataclass(frozen=True, eq=False)
class TracePattern(Pattern):
    """The first execution of an engine-neutral trace, carrying every segment and the seqs.

    :func:`validate_trace` validates all ``segments`` (not only this pattern) and reports seqs.
    """

    segments: tuple[Any, ...] = ()
    seqs: tuple[int, ...] = ()
    lines: dict[int, int] = field(default_factory=dict, repr=False)
    source: str = ""


def _load_core_trace(path: Path) -> TracePattern:
    from rollcheck.pyimpl.traces import check_trace_file

    _report, checker = check_trace_file(path, keep_segments=True)
    segs = tuple(checker.segments)
    first = segs[0]
    return TracePattern(first.pattern.processes, first.pattern.events, segments=segs,
                        seqs=tuple(first.seqs), source=str(path))


def _check_processes(count: int, source: str, field: str, allow_large: bool, location: str = "line 1") -> None:
    """Refuse a declared process count above :data:`MAX_PROCESSES` (unless ``allow_large``)."""
    if count > MAX_PROCESSES and not allow_large:
        raise InvalidInputError(f"{field}: {count} processes is above the limit of {MAX_PROCESSES} for TLC "
                                "trace validation (pass --allow-large to run it anyway)",
                                source=source, location=location)


def load_trace_events(path: str | Path, *, allow_large: bool = False) -> Pattern:
    """Read a pattern file or a ``rollcheck.trace/1`` file into a :class:`Pattern`.

    An engine-neutral trace (header with ``processes``) comes back as a :class:`TracePattern`
    carrying every execution between failures; of an older trace file only the protocol's events
    before its first failure count. Header sizes are bounded by :data:`MAX_PROCESSES` before
    anything is built. Details: docs/internals/tla.md#trace_load.

    Parameters
    ----------
    path : str or Path
        The pattern or trace file.
    allow_large : bool, optional
        Accept more than :data:`MAX_PROCESSES` processes.

    Returns
    -------
    Pattern
        A :class:`TracePattern` for an engine-neutral trace.

    Raises
    ------
    InvalidInputError
        Unreadable file, not JSON, unknown format, a header size above its limit (naming the
        field), or an invalid event (naming the line or ``events[k]``).
    """
    from rollcheck.pyimpl.patternio import pattern_from_dict

    p = Path(path)
    text = decode_utf8(read_input_bytes(p), str(p))
    # a pattern is one JSON document; a JSON Lines trace fails fast here ("Extra data"), and is then
    # read line by line (every parse under the input bounds of rollcheck.pyimpl.jsonio: nesting,
    # NaN, number sizes)
    first = text.split("\n", 1)[0]
    try:
        doc = loads_json(text, str(p))
    except InvalidInputError as whole:
        try:
            loads_json_line(first, str(p), 1)  # JSON Lines: the first line is a value of its own
        except InvalidInputError as e:
            if e.reason.startswith("malformed JSON") and "\n" in text.strip():
                raise whole from None  # one document over several lines: its own error
            raise
        doc = None
    if isinstance(doc, dict) and doc.get("format") == "rollcheck.pattern/1":
        if isinstance(doc.get("processes"), list):
            _check_processes(len(doc["processes"]), str(p), "processes", allow_large, location="")
        return pattern_from_dict(doc, source=str(p))
    head = loads_json_line(first, str(p), 1)
    if isinstance(head, dict) and head.get("format") == "rollcheck.trace/1" and "processes" in head:
        if isinstance(head["processes"], list):
            _check_processes(len(head["processes"]), str(p), "processes", allow_large)
        return _load_core_trace(p)
    return _pattern_from_trace(text, str(p), allow_large)


def _pattern_from_trace(text: str, source: str, allow_large: bool = False) -> Pattern:
    lines = text.split("\n")
    if not lines or not lines[0].strip():
        raise InvalidInputError("empty file", source=source)
    head = loads_json_line(lines[0], source, 1)
    if not isinstance(head, dict) or head.get("format") not in ("rollcheck.trace/1", "rollcheck.pattern/1"):
        fmt = head.get("format") if isinstance(head, dict) else None
        raise InvalidInputError(f"expected format 'rollcheck.trace/1' or 'rollcheck.pattern/1', got {fmt!r}",
                                source=source, location="line 1")
    if head.get("format") == "rollcheck.pattern/1":
        from rollcheck.pyimpl.patternio import pattern_from_dict

        return pattern_from_dict(head, source=source)
    config: dict[str, Any] = head["config"] if isinstance(head.get("config"), dict) else {}
    for key in ("processes", "processes_names"):  # every size the header declares, bounded up front
        v = config.get(key)
        if isinstance(v, list) or (isinstance(v, int) and not isinstance(v, bool)):
            _check_processes(len(v) if isinstance(v, list) else v, source, f"config.{key}", allow_large)
    listed = config.get("processes")
    if not isinstance(listed, list):
        listed = config.get("processes_names")
    if not isinstance(listed, list) and isinstance(config.get("processes"), int):
        listed = [f"P{k}" for k in range(config["processes"])]
    names: list[str] = [str(x) for x in listed] if isinstance(listed, list) else []
    index = {n: k for k, n in enumerate(names)}
    raw: list[tuple[int, dict[str, Any]]] = []
    for ln, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        try:
            obj = loads_json_line(line, source, ln)
        except InvalidInputError as e:
            if e.reason.startswith("malformed JSON") and (ln == len(lines)
                                                         or all(not x.strip() for x in lines[ln:])):
                break  # truncated last line: the trace is a valid prefix
            raise
        if not isinstance(obj, dict):
            raise InvalidInputError("not a JSON object", source=source, location=f"line {ln}")
        if obj.get("kind") in ("failure", "restart"):
            break  # a rollback follows: the protocol run proper ends here
        if obj.get("kind") in (SEND, DELIVER, CHECKPOINT):
            raw.append((ln, obj))
    events: list[Event] = []

    def proc(v: Any, ln: int, what: str) -> int:
        if isinstance(v, int) and not isinstance(v, bool):
            v = f"P{v}"
        if not isinstance(v, str) or not v:
            raise InvalidInputError(f"{what}: expected a process name, got {v!r}", source=source, location=f"line {ln}")
        if v not in index:
            index[v] = len(names)
            names.append(v)
        return index[v]

    for ln, obj in raw:
        kind = obj["kind"]
        pr = proc(obj.get("process"), ln, "process")
        if kind == SEND:
            mid = obj.get("message")
            if not isinstance(mid, str | int):
                raise InvalidInputError("send without a message id", source=source, location=f"line {ln}")
            events.append(Event(pr, SEND, str(mid), proc(obj.get("to"), ln, "to")))
        elif kind == DELIVER:
            mid = obj.get("message")
            if not isinstance(mid, str | int):
                raise InvalidInputError("deliver without a message id", source=source, location=f"line {ln}")
            events.append(Event(pr, DELIVER, str(mid)))
        else:
            events.append(Event(pr, CHECKPOINT, forced=bool(obj.get("forced", False))))
    _check_processes(len(names), source, "processes (named by the events)", allow_large, location="")
    try:
        return Pattern(tuple(names) or ("P0",), tuple(events))
    except InvalidInputError as e:
        raise e.with_source(source) from None
