"""Save the evidence of a protocol check: the counterexample, its picture, the failing schedule.

References
----------
``specs/protocols.md#your-protocol``.
"""

from __future__ import annotations

import re
import tempfile
from pathlib import Path
from typing import Any

from rollcheck.pyimpl.errors import InvalidInputError
from rollcheck.pyimpl.pattern import CHECKPOINT, Pattern
from rollcheck.testing._guard import UserCodeError

__all__ = ["slug", "save_pattern", "basic_events", "user_error", "with_input", "folder"]


def slug(name: str) -> str:
    """``name`` as a file name stem.

    >>> slug("path/to/p.py:My Proto")
    'path-to-p.py-My-Proto'
    """
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-") or "protocol"


def folder(out: str | Path | None) -> Path:
    """``out``, or a fresh temporary directory when it is None."""
    return Path(out) if out is not None else Path(tempfile.mkdtemp(prefix="rollcheck-"))


def save_pattern(p: Pattern, out: Path, stem: str, picture: bool, title: str) -> tuple[str, str | None]:
    """Write ``p`` as ``out/stem.json`` and, with ``picture``, ``out/stem.png`` (Z-cycles marked).

    Returns the two paths (the picture's None without ``picture``); a folder that cannot be
    written is bad input (exit 2).

    Parameters
    ----------
    p : Pattern
        The pattern saved.
    out : Path
        The folder (created if missing).
    stem : str
        File name without suffix.
    picture : bool
        Also draw it.
    title : str
        The picture's title.

    Returns
    -------
    tuple of (str, str or None)
        The JSON path and the picture's.
    """
    from rollcheck.pyimpl.patternio import dump_pattern

    json_path = out / f"{stem}.json"
    try:
        out.mkdir(parents=True, exist_ok=True)
        dump_pattern(p, json_path)
    except OSError as e:
        raise InvalidInputError(f"cannot write the counterexample there: {e.strerror or e}",
                                source=str(out), location="out") from None
    png: str | None = None
    if picture:
        from rollcheck.pyimpl.render import render_pattern

        try:
            png = str(render_pattern(p, out / f"{stem}.png", zcycles=True, title=title))
        except OSError as e:
            raise InvalidInputError(f"cannot write the picture there: {e.strerror or e}",
                                    source=str(out), location="out") from None
    return str(json_path), png


def basic_events(p: Pattern) -> int:
    """Sends, deliveries and basic checkpoints of ``p`` (forced checkpoints not counted)."""
    return sum(1 for e in p.events if not (e.kind == CHECKPOINT and e.forced))


def user_error(e: Any, out: str | Path | None, name: str) -> UserCodeError:
    """A :class:`ProtocolCodeError` of the explorer as the user's error, its schedule saved.

    Parameters
    ----------
    e : ProtocolCodeError
        The explorer's error (its ``word`` is the schedule).
    out : str or Path, optional
        Folder for the saved schedule (None: a fresh temporary one).
    name : str
        The protocol's name (the saved file's stem).

    Returns
    -------
    UserCodeError
        Naming the saved schedule, when there is one.
    """
    from rollcheck.properties.explore import word_to_pattern

    reason = e.reason
    if e.word:
        # the processes keep their ids: a protocol may treat them differently
        n = max([p for p, _, _ in e.word] + [a for _, k, a in e.word if k == 1] + [1]) + 1
        path, _ = save_pattern(word_to_pattern(n, e.word), folder(out),
                               f"{slug(name)}-error-input", False, "")
        reason = f"{reason} (the schedule is saved in {path})"
    return UserCodeError(reason, source=e.source, location=e.location)


def with_input(e: UserCodeError, seen: list[Pattern], out: str | Path | None, name: str) -> UserCodeError:
    """The user's error, naming the (shrunk) schedule it happened on, saved as a pattern file.

    Parameters
    ----------
    e : UserCodeError
        The user's error.
    seen : list of Pattern
        Schedules run so far (the last one failed).
    out : str or Path, optional
        Folder for the saved schedule (None: a fresh temporary one).
    name : str
        The protocol's name (the saved file's stem).

    Returns
    -------
    UserCodeError
        ``e`` itself when nothing was run.
    """
    if not seen:
        return e
    path, _ = save_pattern(seen[-1], folder(out), f"{slug(name)}-error-input", False, "")
    return UserCodeError(f"{e.reason} (the schedule is saved in {path})", source=e.source,
                         location=e.location)
