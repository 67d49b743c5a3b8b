"""The local basic-checkpoint policy of UC and CIC: a timer that restarts after *any* checkpoint.

A process takes a basic checkpoint when ``interval`` units have passed since its last checkpoint,
basic or forced. Restarting only after basic checkpoints would let a forced checkpoint be followed
at once by a basic one ("flurries"). The unit is whatever the driver counts: simulated time, or
the number of local events (count-based policy).

References
----------
FERDiS paper §5.3 and §7.2.2; (the "local policy");
``specs/protocols.md#timer``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from rollcheck.pyimpl.errors import InvalidInputError

__all__ = ["BasicTimer", "count_schedule"]


@dataclass(frozen=True)
class BasicTimer:
    """An immutable restartable timer.

    Parameters
    ----------
    interval : float
        Units between a checkpoint and the next basic one (> 0).
    last : float
        Time (or count) of the latest checkpoint, basic or forced.

    Examples
    --------
    >>> t = BasicTimer(10.0)
    >>> t.due(9.5), t.due(10.0), t.deadline
    (False, True, 10.0)
    >>> t = t.restart(7.0)        # a forced checkpoint at time 7 restarts the timer
    >>> t.due(10.0), t.deadline
    (False, 17.0)
    """

    interval: float
    last: float = 0.0

    def __post_init__(self) -> None:
        if not self.interval > 0:
            raise InvalidInputError(f"basic-checkpoint interval must be > 0, got {self.interval!r}")

    @property
    def deadline(self) -> float:
        """When the next basic checkpoint is due if no checkpoint happens before."""
        return self.last + self.interval

    def due(self, now: float) -> bool:
        """Whether a basic checkpoint is due at ``now``."""
        return now >= self.last + self.interval

    def restart(self, now: float) -> BasicTimer:
        """The timer after a checkpoint (basic or forced) at ``now``."""
        return BasicTimer(self.interval, now)


def count_schedule(kinds: Iterable[str], every: int, forced_at: Sequence[int] = ()) -> list[int]:
    """Positions in a local event list before which a count-based basic checkpoint is taken.

    A checkpoint comes after ``every`` local events since the latest checkpoint, basic or forced;
    ``forced_at`` lists local positions preceded by a forced checkpoint (they restart the count).

    Parameters
    ----------
    kinds : iterable of str
        The local events' kinds (only their number matters).
    every : int
        Local events between checkpoints (>= 1).
    forced_at : sequence of int, optional
        Local positions preceded by a forced checkpoint.

    Examples
    --------
    >>> count_schedule(["send"] * 7, 3)
    [3, 6]
    >>> count_schedule(["send"] * 7, 3, forced_at=[2])
    [5]
    """
    if every < 1:
        raise InvalidInputError(f"checkpoint every must be >= 1, got {every!r}")
    forced = set(forced_at)
    timer = BasicTimer(every)
    out = []
    for pos, _ in enumerate(kinds):
        if pos in forced:
            timer = timer.restart(pos)
        elif timer.due(pos):
            out.append(pos)
            timer = timer.restart(pos)
    return out
