"""Reading and writing ``rollcheck.pattern/1`` documents (``specs/formats.md``).

Loading checks the document in one pass over the events (types, names, then the semantic rules
of :class:`rollcheck.pyimpl.pattern.Pattern`) so that a 10^6-event file loads in about the time ``json.load``
takes. The JSON Schema in ``rollcheck/pyimpl/schemas/pattern.schema.json`` (package data) documents the format and backs
``rollcheck validate --strict``.
"""

from __future__ import annotations

import gc
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from rollcheck.pyimpl.errors import InvalidInputError
from rollcheck.pyimpl.pattern import CHECKPOINT, DELIVER, KINDS, SEND, Event, Pattern

__all__ = [
    "FORMAT",
    "pattern_from_dict",
    "pattern_to_dict",
    "load_pattern",
    "loads_pattern",
    "dump_pattern",
    "atomic_write_text",
    "validate_schema",
]

FORMAT = "rollcheck.pattern/1"


def _type_name(v: Any) -> str:
    return "null" if v is None else type(v).__name__


def pattern_from_dict(doc: Any, source: str | None = None) -> Pattern:
    """Build a :class:`Pattern` from a parsed JSON document, validating it.

    Raises
    ------
    InvalidInputError
        Naming ``source``, the JSON path (``events[k]`` / ``events[k].field``) and the reason.

    Examples
    --------
    >>> p = pattern_from_dict({"format": "rollcheck.pattern/1", "processes": ["a", "b"],
    ...     "events": [{"process": "a", "kind": "send", "message": "x", "to": "b"}]})
    >>> [m.id for m in p.in_transit]
    ['x']
    """

    def bad(reason: str, location: str | None = None) -> InvalidInputError:
        return InvalidInputError(reason, source=source, location=location)

    if not isinstance(doc, dict):
        raise bad(f"expected a JSON object, got {_type_name(doc)}")
    fmt = doc.get("format")
    if fmt != FORMAT:
        raise bad(f"expected format {FORMAT!r}, got {fmt!r}", "format")
    procs = doc.get("processes")
    if not isinstance(procs, list) or not procs:
        raise bad("expected a non-empty list of process names", "processes")
    index: dict[str, int] = {}
    for k, name in enumerate(procs):
        if not isinstance(name, str) or not name:
            raise bad(f"expected a non-empty string, got {name!r}", f"processes[{k}]")
        if name in index:
            raise bad(f"duplicate process name {name!r}", f"processes[{k}]")
        index[name] = k
    raw = doc.get("events")
    if not isinstance(raw, list):
        raise bad(f"expected a list, got {_type_name(raw)}", "events")
    # Millions of small tuples would trigger the cyclic garbage collector over and over; nothing
    # built here can form a cycle, so it is paused while the pattern is built.
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _build(doc, procs, index, raw, bad, source)
    finally:
        if gc_was_enabled:
            gc.enable()


def _build(doc: Any, procs: list[str], index: dict[str, int], raw: list[Any], bad: Any,
           source: str | None) -> Pattern:
    events: list[Event] = []
    append = events.append
    for k, ev in enumerate(raw):
        if type(ev) is not dict:
            raise bad(f"expected an object, got {_type_name(ev)}", f"events[{k}]")
        name = ev.get("process")
        proc = index.get(name) if isinstance(name, str) else None
        if proc is None:
            if name is None:
                raise bad("missing field 'process'", f"events[{k}]")
            raise bad(f"unknown process {name!r}", f"events[{k}].process")
        kind = ev.get("kind")
        if kind == SEND:
            mid = ev.get("message")
            if type(mid) is not str:
                raise bad(f"expected a string message id, got {_type_name(mid)}", f"events[{k}].message")
            to_name = ev.get("to")
            to = index.get(to_name) if isinstance(to_name, str) else None
            if to is None:
                if not isinstance(to_name, str):
                    raise bad(f"expected a process name, got {_type_name(to_name)}", f"events[{k}].to")
                raise bad(f"unknown process {to_name!r}", f"events[{k}].to")
            append(Event(proc, SEND, mid, to))
        elif kind == DELIVER:
            mid = ev.get("message")
            if type(mid) is not str:
                raise bad(f"expected a string message id, got {_type_name(mid)}", f"events[{k}].message")
            append(Event(proc, DELIVER, mid))
        elif kind == CHECKPOINT:
            forced = ev.get("forced", False)
            if type(forced) is not bool:
                raise bad(f"expected true or false, got {_type_name(forced)}", f"events[{k}].forced")
            append(Event(proc, CHECKPOINT, None, None, forced))
        elif kind is None:
            raise bad("missing field 'kind'", f"events[{k}]")
        else:
            raise bad(f"unknown kind {kind!r} (expected one of {', '.join(KINDS)})", f"events[{k}].kind")
    try:
        return Pattern(tuple(procs), tuple(events))
    except InvalidInputError as e:
        raise e.with_source(source) if source else e from None


def pattern_to_dict(p: Pattern) -> dict[str, Any]:
    """The ``rollcheck.pattern/1`` document of ``p`` (``forced`` written only when true)."""
    names = p.processes
    out: list[dict[str, Any]] = []
    for ev in p.events:
        if ev.kind == SEND:
            assert ev.to is not None
            out.append({"process": names[ev.process], "kind": SEND, "message": ev.message, "to": names[ev.to]})
        elif ev.kind == DELIVER:
            out.append({"process": names[ev.process], "kind": DELIVER, "message": ev.message})
        else:
            d: dict[str, Any] = {"process": names[ev.process], "kind": CHECKPOINT}
            if ev.forced:
                d["forced"] = True
            out.append(d)
    return {"format": FORMAT, "processes": list(names), "events": out}


def loads_pattern(text: str, source: str | None = None) -> Pattern:
    """Parse a pattern from JSON text."""
    if not text.strip():
        raise InvalidInputError("empty file", source=source)
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise InvalidInputError(
            f"malformed JSON: {e.msg}", source=source, location=f"line {e.lineno} column {e.colno}"
        ) from None
    return pattern_from_dict(doc, source)


def load_pattern(path: str | os.PathLike[str]) -> Pattern:
    """Read and validate a pattern file.

    Raises
    ------
    InvalidInputError
        If the file cannot be read, is empty, is not JSON, or is not a valid pattern.
    """
    source = str(path)
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError as e:
        raise InvalidInputError(f"cannot read file: {e.strerror}", source=source) from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InvalidInputError(f"not UTF-8 text (byte {e.start})", source=source) from None
    return loads_pattern(text, source)


def atomic_write_text(path: str | os.PathLike[str], text: str) -> None:
    """Write ``text`` to ``path`` atomically: a temporary file in the same folder, then rename."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def dump_pattern(p: Pattern, path: str | os.PathLike[str]) -> None:
    """Write ``p`` as a ``rollcheck.pattern/1`` file, atomically."""
    atomic_write_text(path, json.dumps(pattern_to_dict(p), indent=1) + "\n")


def validate_schema(doc: Any, source: str | None = None) -> None:
    """Check ``doc`` against ``rollcheck/pyimpl/schemas/pattern.schema.json`` (package data) with jsonschema (the strict mode)."""
    import jsonschema

    from importlib.resources import files

    schema = json.loads((files("rollcheck.pyimpl.schemas") / "pattern.schema.json").read_text(encoding="utf-8"))
    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(doc), key=lambda e: list(e.absolute_path))
    if errors:
        err = errors[0]
        loc = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err.absolute_path).lstrip(".")
        raise InvalidInputError(f"schema: {err.message}", source=source, location=loc or None)
