"""The exception hierarchy of rollcheck.

Three outcomes matter to a verification tool and each has its own type: the input was bad
(:class:`InvalidInputError`, exit code 2 on the CLI), a property does not hold
(:class:`PropertyViolation`, exit code 1), or nothing was actually checked
(:class:`InconclusiveError`, exit code 3). A broken internal invariant is a bug in rollcheck itself
(:class:`InternalError`, exit code 4). Library code raises these instead of bare ValueErrors and
RuntimeErrors.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "RollcheckError",
    "InvalidInputError",
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
    """A property that must hold does not; ``counterexample`` carries the evidence."""

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
