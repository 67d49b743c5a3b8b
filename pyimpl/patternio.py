"""Reading and writing ``rollcheck.pattern/1`` documents (``specs/formats.md``).

Loading checks the document in one pass over the events (types, names, then the semantic rules
of :class:`rollcheck.pyimpl.pattern.Pattern`) so that a 10^6-event file loads in about the time ``json.load``
takes. The JSON Schema in ``rollcheck/pyimpl/schemas/pattern.schema.json`` (package data) documents the format and backs
``rollcheck validate --strict``.
"""

from __future__ import annotations

import contextlib
import errno
import gc
import json
import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rollcheck.pyimpl.errors import EnvironmentFault, InvalidInputError, environment_fault
from rollcheck.pyimpl.jsonio import decode_utf8, loads_json, read_input_bytes, safe_name
from rollcheck.pyimpl.pattern import CHECKPOINT, DELIVER, KINDS, SEND, Event, Pattern

__all__ = [
    "FORMAT",
    "pattern_from_dict",
    "pattern_to_dict",
    "load_pattern",
    "loads_pattern",
    "dump_pattern",
    "atomic_write_text",
    "atomic_output",
    "check_output_path",
    "estimate_memory",
    "MEMORY_LIMIT",
    "BYTES_PER_FILE_BYTE",
    "validate_schema",
]

FORMAT = "rollcheck.pattern/1"

MEMORY_LIMIT = 4 * 2**30
"""Patterns whose estimated peak memory is above this (4 GiB) are refused unless ``allow_large``."""

BYTES_PER_FILE_BYTE = 14
"""Measured peak memory per byte of pattern file (compact JSON, the worst case; indented files
need about 10): 467 MB for a 34.6 MB compact file of 300,000 messages, i.e. about 1.6 GB per
million messages, for every pattern command (``validate``, ``useless``, ``recovery-line``,
``render``)."""

_BASE_MEMORY = 64 * 2**20


def _type_name(v: Any) -> str:
    return "null" if v is None else type(v).__name__


def pattern_from_dict(doc: Any, source: str | None = None) -> Pattern:
    """Build a :class:`Pattern` from a parsed JSON document, validating it.

    Parameters
    ----------
    doc : object
        The parsed JSON document.
    source : str, optional
        The file name that error messages give (None: none).

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
            raise bad(f"expected a non-empty string, got {safe_name(name)}", f"processes[{k}]")
        if name in index:
            raise bad(f"duplicate process name {safe_name(name)}", f"processes[{k}]")
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
    try:
        return _build_events(procs, index, raw, bad, source, events)
    except InvalidInputError as e:
        # A field error at events[k]: an event before k may already break a semantic rule
        # (delivery before send, duplicate id, ...). Report the first offending event: the
        # semantic rules are checked in one pass in order, so the prefix tells.
        if events:
            try:
                Pattern(tuple(procs), tuple(events))
            except InvalidInputError as first:
                raise _capped(first, source) from None
        raise e


def _build_events(procs: list[str], index: dict[str, int], raw: list[Any], bad: Any,
                  source: str | None, events: list[Event]) -> Pattern:
    append = events.append
    for k, ev in enumerate(raw):
        if type(ev) is not dict:
            raise bad(f"expected an object, got {_type_name(ev)}", f"events[{k}]")
        name = ev.get("process")
        proc = index.get(name) if isinstance(name, str) else None
        if proc is None:
            if name is None:
                raise bad("missing field 'process'", f"events[{k}]")
            raise bad(f"unknown process {safe_name(name)}", f"events[{k}].process")
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
                raise bad(f"unknown process {safe_name(to_name)}", f"events[{k}].to")
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
            raise bad(f"unknown kind {safe_name(kind)} (expected one of {', '.join(KINDS)})", f"events[{k}].kind")
    try:
        return Pattern(tuple(procs), tuple(events))
    except InvalidInputError as e:
        raise _capped(e, source) from None


def _capped(e: InvalidInputError, source: str | None) -> InvalidInputError:
    """``e`` naming ``source``, with a reason of bounded length (names in it may be huge)."""
    reason = e.reason
    if len(reason) > 300:
        reason = reason[:300] + f"… ({len(e.reason)} characters)"
    reason = reason.encode("utf-8", "backslashreplace").decode("utf-8")
    return InvalidInputError(reason, source=source or e.source, location=e.location)


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


def loads_pattern(text: str | bytes, source: str | None = None) -> Pattern:
    """Parse a pattern from JSON text (the checks of :func:`rollcheck.pyimpl.jsonio.loads_json`).

    Parameters
    ----------
    text : str or bytes
        The JSON text.
    source : str, optional
        The file name that error messages give (None: none).

    Examples
    --------
    >>> loads_pattern('{"format": "rollcheck.pattern/1", "processes": ["a"], "events": [], "x": NaN}')
    Traceback (most recent call last):
    ...
    rollcheck.pyimpl.errors.InvalidInputError: line 1 column 74: NaN is not a JSON number (NaN and Infinity are not allowed)
    """
    return pattern_from_dict(loads_json(text, source), source)


def estimate_memory(file_size: int) -> int:
    """Estimated peak memory (bytes) of a pattern command on a pattern file of ``file_size`` bytes.

    Examples
    --------
    >>> estimate_memory(300 * 2**20) > MEMORY_LIMIT
    True
    """
    return _BASE_MEMORY + BYTES_PER_FILE_BYTE * int(file_size)


def load_pattern(path: str | os.PathLike[str], *, allow_large: bool = False) -> Pattern:
    """Read and validate a pattern file.

    Before reading, the peak memory is estimated from the file size (:func:`estimate_memory`);
    above :data:`MEMORY_LIMIT` the file is refused (unless ``allow_large``) rather than the process
    dying half-way.

    Parameters
    ----------
    path : str or path-like
        The pattern file (or a stream such as ``/dev/stdin``).
    allow_large : bool, optional
        Read it even when the memory estimate is above the limit.

    Raises
    ------
    InvalidInputError
        If the file cannot be read, is empty, too large, is not JSON, or is not a valid pattern.
    """
    source = str(path)
    try:
        size = os.stat(path).st_size
    except OSError:
        size = 0
    need = estimate_memory(size)
    if need > MEMORY_LIMIT and not allow_large:
        raise InvalidInputError(
            f"a pattern file of {size / 2**20:.0f} MiB needs about {need / 2**30:.1f} GiB of memory, "
            f"above the limit of {MEMORY_LIMIT / 2**30:.0f} GiB (pass --allow-large to try anyway)",
            source=source)
    # a stream (pipe, device) has no size to estimate from: read at most what the limit allows
    data = read_input_bytes(path, max_bytes=None if allow_large else
                            (MEMORY_LIMIT - _BASE_MEMORY) // BYTES_PER_FILE_BYTE)
    text = decode_utf8(data, source)
    del data
    return loads_pattern(text, source)


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _write_protected(st: os.stat_result) -> bool:
    return not (st.st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))


def check_output_path(path: str | os.PathLike[str], location: str | None = None, *,
                      directory: bool = False) -> Path:
    """Check, before any work starts, that ``path`` can be written (a file, or a folder if ``directory``).

    Refused: a file path that names a folder (or a folder path that names a file), a path under a
    regular file, a folder that is not writable, a write-protected existing file.

    Parameters
    ----------
    path : str or path-like
        The output path to check.
    location : str, optional
        What error messages name (a flag such as ``-o``).
    directory : bool, optional
        ``path`` is to be a folder, not a file.

    Returns
    -------
    Path
        ``path`` as a :class:`~pathlib.Path`.

    Examples
    --------
    >>> check_output_path("/etc/passwd/x.json", "-o")
    Traceback (most recent call last):
    ...
    rollcheck.pyimpl.errors.InvalidInputError: -o: /etc/passwd is a file, not a folder: cannot write /etc/passwd/x.json
    """
    p = Path(path)
    name = str(path)
    if not name.strip():
        raise InvalidInputError("empty output path", location=location)
    if p.exists() or p.is_symlink():
        if directory:
            if not p.is_dir():
                raise InvalidInputError(f"{name} exists and is not a folder", location=location)
            if not os.access(p, os.W_OK | os.X_OK) or _write_protected(p.stat()):
                raise InvalidInputError(f"folder {name} is not writable", location=location)
            return p
        if p.is_dir():
            raise InvalidInputError(f"{name} is a folder; give a file name", location=location)
        if not p.is_file():
            raise InvalidInputError(f"{name} is not a regular file", location=location)
        st = p.stat()
        if _write_protected(st) or not os.access(p, os.W_OK):
            raise InvalidInputError(f"{name} is write-protected; refusing to replace it", location=location)
    anc = p.absolute().parent
    while not anc.exists() and anc != anc.parent:
        anc = anc.parent
    if not anc.is_dir():
        raise InvalidInputError(f"{anc} is a file, not a folder: cannot write {name}", location=location)
    if not os.access(anc, os.W_OK | os.X_OK) or _write_protected(anc.stat()):
        if os.statvfs(anc).f_flag & os.ST_RDONLY:  # the machine's, not the user's: say so
            raise EnvironmentFault(name, os.strerror(errno.EROFS), errno.EROFS)
        raise InvalidInputError(f"folder {anc} is not writable: cannot write {name}", location=location)
    return p


@contextlib.contextmanager
def atomic_output(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; on success it replaces ``path``, else it is removed.

    The replaced file keeps its mode; a new file gets the permissions the umask allows (not the
    0600 of a temporary file). A write-protected ``path`` is refused.
    """
    target = check_output_path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        mode = stat.S_IMODE(os.stat(target).st_mode)
    except OSError:
        mode = 0o666 & ~_umask()
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=f".tmp{target.suffix}", dir=target.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        fault = environment_fault(e, str(target)) if isinstance(e, OSError) else None
        if fault is not None:  # disk full / read-only / no permission: name the file, not the temporary
            raise EnvironmentFault(str(target), fault.os_reason, fault.errno) from None
        raise


def atomic_write_text(path: str | os.PathLike[str], text: str) -> None:
    """Write ``text`` to ``path`` atomically: a temporary file in the same folder, then rename.

    The mode of a replaced file is kept; a new file gets the umask's permissions; a
    write-protected file is refused with :class:`InvalidInputError`; nothing is left behind on
    failure or interruption. Lone surrogates in ``text`` are written as backslash escapes.

    Parameters
    ----------
    path : str or path-like
        The file to write.
    text : str
        The content, written as UTF-8.

    Examples
    --------
    >>> import tempfile, os, stat
    >>> with tempfile.TemporaryDirectory() as d:
    ...     f = os.path.join(d, "a.txt")
    ...     atomic_write_text(f, "x")
    ...     oct(stat.S_IMODE(os.stat(f).st_mode)) == oct(0o666 & ~_umask()), sorted(os.listdir(d))
    (True, ['a.txt'])
    """
    with atomic_output(path) as tmp:
        with open(tmp, "w", encoding="utf-8", errors="backslashreplace") as fh:
            fh.write(text)


def dump_pattern(p: Pattern, path: str | os.PathLike[str]) -> None:
    """Write ``p`` as a ``rollcheck.pattern/1`` file, atomically.

    Parameters
    ----------
    p : Pattern
        The pattern to write.
    path : str or path-like
        The file to write.
    """
    atomic_write_text(path, json.dumps(pattern_to_dict(p), indent=1) + "\n")


def validate_schema(doc: Any, source: str | None = None) -> None:
    """Check ``doc`` against ``rollcheck/pyimpl/schemas/pattern.schema.json`` (package data) with jsonschema (the strict mode).

    Parameters
    ----------
    doc : object
        The parsed JSON document.
    source : str, optional
        The file name that error messages give (None: none).
    """
    from importlib.resources import files

    import jsonschema

    schema = json.loads((files("rollcheck.pyimpl.schemas") / "pattern.schema.json").read_text(encoding="utf-8"))
    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(doc), key=lambda e: list(e.absolute_path))
    if errors:
        err = errors[0]
        loc = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err.absolute_path).lstrip(".")
        msg = err.message if len(err.message) <= 300 else err.message[:300] + "…"
        msg = msg.encode("utf-8", "backslashreplace").decode("utf-8")
        raise InvalidInputError(f"schema: {msg}", source=source, location=loc or None)
