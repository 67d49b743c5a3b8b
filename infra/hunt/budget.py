"""A hunt's budget: wall-clock time (``--budget 30m``) or a number of programs (``--programs N``).

Examples
--------
>>> parse_duration("1h30m"), parse_duration("90s"), parse_duration("2h"), parse_duration("45")
(5400.0, 90.0, 7200.0, 45.0)
>>> format_seconds(1390.2)
'23m10s'
>>> b = Budget(programs=3)
>>> b.allows_program(2), b.allows_program(3)
(True, False)
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field

from rollcheck.pyimpl.errors import InvalidInputError

__all__ = ["DEFAULT_BUDGET", "Budget", "format_seconds", "parse_duration"]

#: The time budget when neither ``--budget`` nor ``--programs`` is given.
DEFAULT_BUDGET = "30m"

_DURATION = re.compile(r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+(?:\.\d+)?)s)?")


def parse_duration(text: str, flag: str = "--budget") -> float:
    """Seconds of ``30m``, ``90s``, ``2h``, ``1h30m`` or a bare number of seconds.

    Parameters
    ----------
    text : str
        The duration.
    flag : str, optional
        The flag named in the error.

    Returns
    -------
    float
        Seconds.

    Raises
    ------
    InvalidInputError
        Naming ``flag`` when ``text`` is none of these or is zero.
    """
    s = text.strip().lower()
    seconds: float
    if re.fullmatch(r"\d+(?:\.\d+)?", s):
        seconds = float(s)
    else:
        m = _DURATION.fullmatch(s)
        if not s or m is None or not any(m.groups()):
            raise InvalidInputError(f"{text!r} is not a duration (e.g. 90s, 30m, 2h, 1h30m)", location=flag)
        h, mi, se = m.groups()
        seconds = int(h or 0) * 3600 + int(mi or 0) * 60 + float(se or 0)
    if seconds <= 0:
        raise InvalidInputError(f"{text!r}: the budget must be more than zero", location=flag)
    return seconds


def format_seconds(seconds: float) -> str:
    """``1h02m``, ``23m10s`` or ``42s``: a duration for the progress line."""
    s = max(0, int(round(seconds)))
    h, rest = divmod(s, 3600)
    m, sec = divmod(rest, 60)
    if h:
        return f"{h}h{m:02d}m"
    if m:
        return f"{m}m{sec:02d}s"
    return f"{sec}s"


@dataclass
class Budget:
    """What a hunt may still spend: seconds from its start, or a total number of programs.

    Parameters
    ----------
    seconds : float or None
        The time budget of this run (None: no time limit).
    programs : int or None
        The total number of programs of the hunt, counted over every resumed run.
    """

    seconds: float | None = None
    programs: int | None = None
    started: float = field(default_factory=time.monotonic)

    def elapsed(self) -> float:
        """Seconds since this run started."""
        return time.monotonic() - self.started

    def left(self) -> float | None:
        """Seconds left of a time budget (never negative), None for a program budget."""
        if self.seconds is None:
            return None
        return max(0.0, self.seconds - self.elapsed())

    def expired(self) -> bool:
        """Whether the time budget is spent."""
        left = self.left()
        return left is not None and left <= 0

    def allows_program(self, index: int) -> bool:
        """Whether program number ``index`` (0-based, over the whole hunt) may be generated."""
        if self.programs is not None and index >= self.programs:
            return False
        return not self.expired()
