"""The JSON Schema of ``rollcheck.trace/1`` (package data) applied line by line: the strict mode.

The fast path (:class:`~rollcheck.pyimpl.traces.checker.TraceChecker`) validates by hand in one
pass; ``rollcheck check trace --strict`` and ``rollcheck trace validate --strict`` also run a
generic JSON-Schema validator over every line, which is much slower and reports the same defects
with the schema's wording. The schema documents the format; ``specs/formats.md#trace`` has the
rules a per-line schema cannot state.
"""

from __future__ import annotations

import json
from functools import cache
from importlib.resources import files
from typing import Any

from rollcheck.pyimpl.traces.reader import trace_error

__all__ = ["trace_schema", "line_validator"]


@cache
def trace_schema() -> dict[str, Any]:
    """The schema document (``rollcheck.pyimpl.schemas/trace.schema.json``).

    Examples
    --------
    >>> sorted(trace_schema()["$defs"])[:3]
    ['event', 'header', 'message_id']
    """
    text = (files("rollcheck.pyimpl.schemas") / "trace.schema.json").read_text(encoding="utf-8")
    return json.loads(text)


def line_validator(source: str | None) -> Any:
    """A ``validator(obj, line_no, is_header)`` for :class:`~rollcheck.pyimpl.traces.reader.TraceLines`."""
    import jsonschema

    schema = trace_schema()
    defs = schema["$defs"]
    head = jsonschema.Draft202012Validator({"$defs": defs, "$ref": "#/$defs/header"})
    event = jsonschema.Draft202012Validator({"$defs": defs, "$ref": "#/$defs/event"})

    def validate(obj: Any, line: int, is_header: bool) -> None:
        v = head if is_header else event
        errors = sorted(v.iter_errors(obj), key=lambda e: list(e.absolute_path))
        if errors:
            err = errors[0]
            path = ".".join(str(p) for p in err.absolute_path) or None
            seq = obj.get("seq") if isinstance(obj, dict) and type(obj.get("seq")) is int else None
            raise trace_error(source, line, seq, path, f"schema: {err.message}")

    return validate
