"""Key partitions ``D(κ) → tasks`` and the split/merge of keyed running status on scaling.

Source: SPATE §3.2.1 (key partition), §3.3 (online adjustment function f), §4.1.3 (slice
splitting and merging), §4.2 (checkpoint state split/merge). Rules: ``specs/elastic.md#scaling``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TypeVar

from rollcheck.pyimpl.errors import InvalidInputError

__all__ = ["Partition", "contiguous_ranges", "repartition_keyed"]

V = TypeVar("V")


def contiguous_ranges(keys: int, parts: int) -> list[range]:
    """Split ``0..keys-1`` into ``parts`` contiguous, balanced, non-empty ranges.

    Parameters
    ----------
    keys : int
        The number of keys.
    parts : int
        The number of ranges (1..``keys``).

    Examples
    --------
    >>> contiguous_ranges(8, 3)
    [range(0, 3), range(3, 6), range(6, 8)]
    """
    if not 1 <= parts <= keys:
        raise InvalidInputError(f"parallelism must be between 1 and the number of keys {keys}, got {parts}")
    base, extra = divmod(keys, parts)
    out, lo = [], 0
    for i in range(parts):
        hi = lo + base + (1 if i < extra else 0)
        out.append(range(lo, hi))
        lo = hi
    return out


@dataclass(frozen=True)
class Partition:
    """The owner task of every key of one operator (its mapping state, SPATE §3.2.3).

    Examples
    --------
    >>> p = Partition(("a", "a", "b"))
    >>> p.tasks, p.keys_of("a")
    (('a', 'b'), frozenset({0, 1}))
    """

    owner: tuple[str, ...]

    @property
    def tasks(self) -> tuple[str, ...]:
        """The task names, in order of their first key."""
        seen: dict[str, None] = {}
        for t in self.owner:
            seen.setdefault(t, None)
        return tuple(seen)

    def keys_of(self, task: str) -> frozenset[int]:
        """The keys ``task`` owns."""
        return frozenset(k for k, t in enumerate(self.owner) if t == task)

    def __getitem__(self, key: int) -> str:
        return self.owner[key]

    def as_dict(self) -> dict[int, str]:
        """The partition as ``{key: task}``."""
        return dict(enumerate(self.owner))


def repartition_keyed(parts: Iterable[Mapping[int, V]], owner: Mapping[int, str]) -> dict[str, dict[int, V]]:
    """Merge keyed maps of the old tasks and split them by the new owners (the reference rule).

    Every key's entry goes to exactly the task that owns the key after scaling; nothing is lost
    and nothing is duplicated. Tasks that receive no entry get an empty map.

    Parameters
    ----------
    parts : iterable of mapping of int to object
        The old tasks' keyed maps (a key in at most one).
    owner : mapping of int to str
        Per key, its task after scaling.

    Returns
    -------
    dict of str to dict
        Per new task, its keyed map.

    Examples
    --------
    >>> repartition_keyed([{0: 5, 1: 6}, {2: 7}], {0: "x", 1: "y", 2: "y"})
    {'x': {0: 5}, 'y': {1: 6, 2: 7}}
    """
    out: dict[str, dict[int, V]] = {t: {} for t in dict.fromkeys(owner.values())}
    for part in parts:
        for k, v in part.items():
            if k in out.get(owner[k], {}):
                raise InvalidInputError(f"key {k} is held by two old tasks")
            out[owner[k]][k] = v
    return out
