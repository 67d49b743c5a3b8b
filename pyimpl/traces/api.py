"""Checking a trace file end to end, and converting its first run to a pattern.

References
----------
``specs/formats.md#trace``; FERDiS paper §5.3 and §6.1.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rollcheck.pyimpl.errors import InvalidInputError
from rollcheck.pyimpl.pattern import Pattern
from rollcheck.pyimpl.traces.checker import TraceChecker, reference_from_list
from rollcheck.pyimpl.traces.reader import TraceLines
from rollcheck.pyimpl.verdict import Report

__all__ = ["check_trace_file", "check_trace_lines", "trace_to_pattern", "resolve_trace_protocol"]


def resolve_trace_protocol(spec: str | None, header: dict[str, Any], source: str | None = None) -> Any:
    """The protocol to check against: ``spec`` (any protocol spec) or else the header's built-in name.

    A header may only name a built-in protocol: a trace file never makes rollcheck import code.

    Parameters
    ----------
    spec : str or None
        A protocol spec given by the user (None or empty: the header's).
    header : dict
        The trace's header.
    source : str, optional
        The trace file's name for messages.

    Returns
    -------
    Protocol or None
        The protocol, or None when neither names one.
    """
    from rollcheck.pyimpl.protocols import is_builtin_spec, resolve_protocol

    if spec:
        return resolve_protocol(spec)
    name = header.get("protocol")
    if name is None:
        return None
    if not isinstance(name, str) or not is_builtin_spec(name):
        raise InvalidInputError(f"protocol: the header may name a built-in protocol only, got {name!r} "
                                "(give MODULE:CLASS with --protocol)", source=source, location="line 1")
    try:
        return resolve_protocol(name)
    except InvalidInputError as e:
        raise InvalidInputError(f"protocol: {e.reason}", source=source, location="line 1") from None


def check_trace_file(path: str | Path, *, protocol: str | None = None, reference: Any = None,
                     virtual: bool = True, strict: bool = False, keep_segments: bool = False,
                     keep_first: bool = False, segment_limit: int | None = None,
                     reference_source: str = "reference", tlc: Any = None,
                     extra: Any = (), adapter: Any = None) -> tuple[Report, TraceChecker]:
    r"""Stream ``path`` through a :class:`TraceChecker` and return its report (and the checker).

    Parameters
    ----------
    path : str or Path
        A ``rollcheck.trace/1`` file with the engine-neutral header.
    protocol : str, optional
        A protocol spec (built-in name, ``MODULE:CLASS``, ``file.py:CLASS``); default: the
        header's ``protocol``.
    reference : list, optional
        Reference outputs, a list of ``{"process", "key", "value"}``.
    virtual : bool
        Survivors may keep their volatile state.
    strict : bool
        Also validate every line against the JSON Schema.
    tlc : tuple, optional
        ``(validate, model protocol or None, why not, requested)``: the ``tlc-trace`` check.
    extra : list of TraceCheck
        An engine adapter's own check plug-ins.
    adapter : Adapter, optional
        Maps the engine's header and events onto the core vocabulary
        (:class:`~rollcheck.pyimpl.traces.adapter.Adapter`).

    Raises
    ------
    InvalidInputError
        A malformed trace, naming ``FILE: line N (seq S): field: reason``.

    Examples
    --------
    >>> from importlib.resources import files
    >>> import os, tempfile
    >>> f = os.path.join(tempfile.mkdtemp(), "t.jsonl")
    >>> _ = open(f, "w").write(
    ...     '{"format": "rollcheck.trace/1", "source": "toy", "processes": ["a", "b"], "protocol": "hmnr"}\n'
    ...     '{"seq": 1, "kind": "send", "process": "a", "message": "m1", "to": "b"}\n'
    ...     '{"seq": 2, "kind": "deliver", "process": "b", "message": "m1"}\n'
    ...     '{"seq": 3, "kind": "end"}\n')
    >>> report, _ = check_trace_file(f)
    >>> report.conformant, [(c.name, c.ok) for c in report.checks]
    (True, [('pattern-valid', True), ('forced-checkpoints', True), ('no-useless-checkpoints', True), ('recovery-line', None), ('log-replay', None)])
    >>> import shutil; shutil.rmtree(os.path.dirname(f))
    """
    source = str(path)
    validator = None
    if strict:
        from rollcheck.pyimpl.traces.schema import line_validator

        validator = line_validator(source)
    lines = TraceLines(path, validator=validator)
    return check_trace_lines(lines, protocol=protocol, reference=reference, virtual=virtual,
                             keep_segments=keep_segments, keep_first=keep_first,
                             segment_limit=segment_limit, reference_source=reference_source, tlc=tlc,
                             extra=extra, adapter=adapter)


def check_trace_lines(lines: Any, *, protocol: str | None = None, reference: Any = None,
                      virtual: bool = True, keep_segments: bool = False, keep_first: bool = False,
                      segment_limit: int | None = None, reference_source: str = "reference",
                      tlc: Any = None, extra: Any = (), adapter: Any = None) -> tuple[Report, TraceChecker]:
    """:func:`check_trace_file` on an already opened trace.

    ``lines`` (a :class:`~rollcheck.pyimpl.traces.reader.TraceLines`) has ``header`` and ``source``,
    iterates ``(line, event)`` pairs, and then knows ``truncated`` and ``truncated_after_seq``; the
    other parameters and the result are those of :func:`check_trace_file`.

    Parameters
    ----------
    lines : TraceLines
        The opened trace.
    protocol, reference, virtual, keep_segments, keep_first, segment_limit, reference_source, tlc, extra, adapter
        As for :func:`check_trace_file`.
    """
    source = lines.source
    header = lines.header if adapter is None else adapter.header(lines.header)
    proto = resolve_trace_protocol(protocol, header, source)
    ref = None
    if reference is not None:
        names = header.get("processes")
        ref = reference_from_list(reference, names if isinstance(names, list) else None,
                                  source=reference_source)
    checker = TraceChecker(header, source, protocol=proto, reference=ref, virtual=virtual,
                           keep_segments=keep_segments, keep_first=keep_first, segment_limit=segment_limit,
                           tlc=tlc, extra=extra)
    checker.run(lines if adapter is None else adapter.events(header, lines))
    report = checker.finish(lines.truncated, lines.truncated_after_seq)
    return report, checker


def trace_to_pattern(path: str | Path) -> Pattern:
    r"""The run before the first failure (the whole effective execution if nothing failed).

    Examples
    --------
    >>> import os, tempfile
    >>> f = os.path.join(tempfile.mkdtemp(), "t.jsonl")
    >>> _ = open(f, "w").write('{"format": "rollcheck.trace/1", "processes": ["a", "b"]}\n'
    ...     '{"seq": 1, "kind": "checkpoint", "process": "a", "index": 1, "forced": false}\n')
    >>> trace_to_pattern(f)
    Pattern(processes=['a', 'b'], events=1, messages=0, checkpoints=[1, 0])
    >>> import shutil; shutil.rmtree(os.path.dirname(f))
    """
    _report, checker = check_trace_file(path, keep_first=True)
    if checker.first_pattern is not None:
        return checker.first_pattern[0]
    return checker.final_pattern()
