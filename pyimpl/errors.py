"""The exception hierarchy of rollcheck.

Three outcomes matter to a verification tool and each has its own type: the input was bad
(:class:`InvalidInputError`, exit code 2 on the CLI), a property does not hold
(:class:`PropertyViolation`, exit code 1), or nothing was actually checked
(:class:`InconclusiveError`, exit code 3). A broken internal invariant is a bug in rollcheck itself
(:class:`InternalError`, exit code 4). Two kinds of exit-2 errors are not the input's fault and say
so: the machine refused (:class:`EnvironmentFault`: disk full, read-only, permission denied,
recognised in Python's ``OSError`` and in the JVM's own messages by :func:`environment_fault`), and
the user's code did not return within its limit (:class:`UserCodeTimeout`). Library code raises these instead of bare ValueErrors and
RuntimeErrors.
"""

from __future__ import annotations

import errno as _errno
import os
import re
from typing import Any

__all__ = [
    "RollcheckError",
    "InvalidInputError",
    "EnvironmentFault",
    "UserCodeTimeout",
    "environment_fault",
    "environment_fault_in_text",
    "ENVIRONMENT_ERRNOS",
    "PropertyViolation",
    "InconclusiveError",
    "InternalError",
    "TerminationRequested",
]


class RollcheckError(Exception):
    """Base class of every error rollcheck raises on purpose."""


class InvalidInputError(RollcheckError, ValueError):
    """Input that violates a format or a precondition.

    Parameters
    ----------
    reason : str
        What is wrong, in words a user can act on.
    source : str, optional
        The file (or other origin) of the input.
    location : str, optional
        Where in the input: ``events[3]``, ``processors.p.chain[2]``, a line number, ...
    """

    def __init__(self, reason: str, *, source: str | None = None, location: str | None = None):
        self.reason = reason
        self.source = source
        self.location = location
        super().__init__(self.__str__())

    def with_source(self, source: str) -> InvalidInputError:
        """Return a copy of this error that names ``source`` as the input file."""
        return InvalidInputError(self.reason, source=source, location=self.location)

    def __str__(self) -> str:
        parts = [p for p in (self.source, self.location) if p]
        return ": ".join([*parts, self.reason])


class PropertyViolation(RollcheckError, AssertionError):
    """A property that must hold does not; ``counterexample`` carries the evidence.

    Parameters
    ----------
    message : str
        What does not hold.
    counterexample : object, optional
        The evidence (a schedule, a pattern, ...).
    """

    def __init__(self, message: str, counterexample: Any = None):
        self.counterexample = counterexample
        super().__init__(message)


class InconclusiveError(RollcheckError):
    """A check examined nothing (zero examples, empty state space, missing tool, timeout)."""


class InternalError(RollcheckError, RuntimeError):
    """An internal invariant of rollcheck does not hold: a bug in rollcheck, not in the input.

    The CLI reports it in one line with exit code 4 (the traceback only with ``--debug``).
    """


class TerminationRequested(KeyboardInterrupt):
    """The process was asked to stop (SIGTERM, SIGINT): raised so that the stack unwinds.

    A subclass of :class:`KeyboardInterrupt`, so every ``except KeyboardInterrupt`` / ``finally``
    that cleans up after Ctrl-C (child processes, temporary folders, half-written files) also runs
    when ``timeout`` or a scheduler sends SIGTERM. ``signum`` is the signal's number; the CLI exits
    with ``128 + signum`` (130 for SIGINT, 143 for SIGTERM).
    """

    def __init__(self, signum: int):
        self.signum = signum
        super().__init__(f"terminated by signal {signum}")


#: The OS errors that are the environment's, not the input's nor rollcheck's (exit 2).
ENVIRONMENT_ERRNOS = {e for e in (_errno.ENOSPC, _errno.EROFS, _errno.EACCES,
                                  getattr(_errno, "EDQUOT", None), _errno.EFBIG) if e is not None}
# The same reasons as the JVM (and other tools) print them: strerror texts, no errno.
_REASONS = {os.strerror(e): e for e in ENVIRONMENT_ERRNOS}
_REASON_RE = re.compile("|".join(re.escape(r) for r in sorted(_REASONS, key=len, reverse=True)))
# "java.io.FileNotFoundException: /x/y (No space left on device)" and "/x/y: No space left ..."
_PATH_RE = re.compile(r"(/[^\s:()\"']+)(?:\s*\(|: )(?:" + _REASON_RE.pattern + ")")


class EnvironmentFault(InvalidInputError):
    """The machine refused: no space left, a read-only file system, permission denied.

    Exit code 2 like bad input (the user must act), but the message says it is the environment's
    doing, with the path and the OS reason, e.g. ``o.jsonl: No space left on device [ENOSPC]``;
    never a violation (1), never a bug in rollcheck (4), never the user's query or protocol.

    Parameters
    ----------
    path : str
        The file or folder being written (``"?"`` when the OS did not say).
    reason : str
        The OS reason (``strerror``).
    errno : int, optional
        The error number, when known.

    Examples
    --------
    >>> str(EnvironmentFault("/data/o.jsonl", "No space left on device", 28))
    '/data/o.jsonl: No space left on device [ENOSPC] (an environment problem: free space or write elsewhere)'
    """

    def __init__(self, path: str, reason: str, errno: int | None = None):
        self.path = path
        self.errno = errno
        self.os_reason = reason
        name = _errno.errorcode.get(errno, "") if errno is not None else ""
        advice = {_errno.ENOSPC: "free space or write elsewhere",
                  getattr(_errno, "EDQUOT", -1): "free space or write elsewhere",
                  _errno.EFBIG: "write elsewhere",
                  _errno.EROFS: "write elsewhere", _errno.EACCES: "check the permissions or write elsewhere"}
        tail = f" [{name}]" if name else ""
        note = f" (an environment problem: {advice.get(errno, 'check the machine')})" \
            if errno is not None else " (an environment problem)"
        super().__init__(reason + tail + note, source=path)

    def fields(self) -> dict[str, Any]:
        """The constructor's arguments (to carry the error across a process boundary)."""
        return {"path": self.path, "reason": self.os_reason, "errno": self.errno}


class UserCodeTimeout(InvalidInputError):
    """A call into the user's code (query module, protocol, job module) did not return in time.

    Parameters
    ----------
    file : str
        The user's file.
    method : str
        The function or method called.
    limit : float
        The time limit (seconds).

    Examples
    --------
    >>> str(UserCodeTimeout("q.py", "batches", 300))
    'q.py: batches: did not return within 300 s (--call-timeout)'
    """

    def __init__(self, file: str, method: str, limit: float):
        self.file = file
        self.method = method
        self.limit = float(limit)
        shown = int(limit) if float(limit).is_integer() else limit
        super().__init__(f"did not return within {shown} s (--call-timeout)", source=file,
                         location=method)

    def fields(self) -> dict[str, Any]:
        """The constructor's arguments (to carry the error across a process boundary)."""
        return {"file": self.file, "method": self.method, "limit": self.limit}


def environment_fault(exc: BaseException, path: str | None = None) -> EnvironmentFault | None:
    """The :class:`EnvironmentFault` behind ``exc``, or None if it is not the environment's.

    Recognised: an :class:`OSError` whose errno is in :data:`ENVIRONMENT_ERRNOS`, anywhere in the
    chain of causes, and the same reasons in the text of any exception (a JVM's stack trace
    relayed by Py4J or Spark: "java.io.IOException: No space left on device"). ``path`` is named
    when the error itself does not name one.

    Parameters
    ----------
    exc : BaseException
        The error caught.
    path : str, optional
        The path to name when the error names none.

    Examples
    --------
    >>> environment_fault(OSError(28, "No space left on device", "/t/o.jsonl")).path
    '/t/o.jsonl'
    >>> f = environment_fault(RuntimeError("java.io.FileNotFoundException: /t/ck/0 (Read-only file system)"))
    >>> f.path, f.os_reason
    ('/t/ck/0', 'Read-only file system')
    >>> environment_fault(ValueError("bad value")) is None
    True
    """
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        if isinstance(cur, EnvironmentFault):
            return cur
        if isinstance(cur, OSError) and cur.errno in ENVIRONMENT_ERRNOS:
            where = cur.filename if cur.filename is not None else path
            return EnvironmentFault(os.fsdecode(where) if where is not None else "?",
                                    cur.strerror or os.strerror(cur.errno or 0), cur.errno)
        cur = cur.__cause__ or cur.__context__
    try:
        text = str(exc)
    except Exception:  # noqa: BLE001 -- a broken __str__ of someone else's exception
        return None
    return environment_fault_in_text(text, path)


def environment_fault_in_text(text: str, path: str | None = None) -> EnvironmentFault | None:
    """The :class:`EnvironmentFault` a message reports (a JVM's stack trace, a report row's detail).

    The first OS reason of :data:`ENVIRONMENT_ERRNOS` in ``text`` and the path written before it
    (else ``path``); None when ``text`` names none.

    Parameters
    ----------
    text : str
        The message.
    path : str, optional
        The path to name when ``text`` names none.

    Examples
    --------
    >>> str(environment_fault_in_text("OSError: /r/x.png: No space left on device [ENOSPC]"))
    '/r/x.png: No space left on device [ENOSPC] (an environment problem: free space or write elsewhere)'
    """
    m = _REASON_RE.search(text)
    if m is None:
        return None
    reason = m.group(0)
    pm = _PATH_RE.search(text)
    where = pm.group(1) if pm else path
    return EnvironmentFault(where if where is not None else "?", reason, _REASONS[reason])
