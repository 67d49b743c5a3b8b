"""Elastic data slices (EDS): events, slices, slice records and output queues.

Source: Wei, Zhuang, Li, Liu, *Reliable stream data processing for elastic distributed stream
processing systems* (SPATE), Cluster Computing 2019, §4.1 (data model, slice model, slice
splitting and merging, IST/OST dependency tracking) and §5.1 (queue trimming).
Rules restated in ``specs/elastic.md#slices``.

Index conventions
-----------------
* Keys are the integers ``0 .. K-1``; keys never change along the pipeline.
* Every edge of the pipeline carries one *substream per key*; the events of key ``k`` on an edge
  are numbered ``1, 2, 3, ...`` (the paper's per-stream sequence numbers, refined per key so that
  numbering survives any repartition). An operator emits at most one output per input and the
  output keeps the input's sequence number, so ``du``/``dd`` are the identity within a key.
* A slice ``s = {k, su(s), sd(s)}``: ``k`` is the round in which the task formed the slice,
  ``su(s)[key]`` the last input sequence number of ``key`` in the slice, ``sd(s)[key]`` the last
  output sequence number of ``key`` it produced (absent when it produced none for that key).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

__all__ = [
    "Event",
    "Slice",
    "SliceRecord",
    "OutputQueue",
    "last_seq",
    "split_slice",
    "merge_slices",
    "split_records",
    "merge_records",
]


class Event(NamedTuple):
    """One event ``e = {seq, <key, value>}`` of a per-key substream."""

    key: int
    seq: int
    value: int


def last_seq(events: Iterable[Event]) -> dict[int, int]:
    """Per key, the largest sequence number among ``events`` (the paper's ``I``/``O`` functions).

    Examples
    --------
    >>> last_seq([Event(1, 1, 5), Event(2, 1, 0), Event(1, 2, 7)])
    {1: 2, 2: 1}
    """
    out: dict[int, int] = {}
    for e in events:
        if e.seq > out.get(e.key, 0):
            out[e.key] = e.seq
    return out


@dataclass(frozen=True)
class Slice:
    """A finite run of events that a task formed (input side) or produced (output side) in round ``k``.

    Examples
    --------
    >>> s = Slice(3, (Event(0, 1, 4), Event(1, 1, 2), Event(0, 2, 9)))
    >>> s.last_seq()
    {0: 2, 1: 1}
    >>> sorted(split_slice(s, {0: "a", 1: "b"}))
    ['a', 'b']
    """

    k: int
    events: tuple[Event, ...]

    def last_seq(self) -> dict[int, int]:
        """The last sequence number per key in the slice."""
        return last_seq(self.events)

    def restrict(self, keys: Iterable[int] | Mapping[int, object]) -> Slice:
        """The slice with only the events of ``keys``."""
        keyset = set(keys)
        return Slice(self.k, tuple(e for e in self.events if e.key in keyset))

    def __len__(self) -> int:
        return len(self.events)


def split_slice(s: Slice, owner: Mapping[int, str]) -> dict[str, Slice]:
    """Slice splitting (SPATE Eq. 1): partition the events of ``s`` by the owner of their key.

    Every event goes to exactly one part; the order of the events of each key is kept.

    Parameters
    ----------
    s : Slice
        The slice.
    owner : mapping of int to str
        Per key, its task.

    Returns
    -------
    dict of str to Slice
        Per task, its part (tasks without events left out).
    """
    parts: dict[str, list[Event]] = {}
    for e in s.events:
        parts.setdefault(owner[e.key], []).append(e)
    return {t: Slice(s.k, tuple(evs)) for t, evs in parts.items()}


def merge_slices(slices: Iterable[Slice]) -> list[Slice]:
    """Slice merging (SPATE Eq. 2): slices of the same round ``k`` become one, ordered by ``k``.

    The merged parts must have disjoint keys (they come from tasks of one operator).

    Examples
    --------
    >>> merged = merge_slices([Slice(1, (Event(0, 1, 1),)), Slice(1, (Event(2, 1, 1),)),
    ...                        Slice(2, (Event(0, 2, 1),))])
    >>> [(m.k, len(m)) for m in merged]
    [(1, 2), (2, 1)]
    """
    by_k: dict[int, list[Event]] = {}
    for s in slices:
        by_k.setdefault(s.k, []).extend(s.events)
    return [Slice(k, tuple(by_k[k])) for k in sorted(by_k)]


@dataclass(frozen=True)
class SliceRecord:
    """The IST/OST entry of one processed slice: ``{k, su(s), sd(s)}`` plus the checkpoint flag.

    ``checkpointed`` is set once the task has taken a checkpoint after processing the slice;
    until then a stateful task may not send the L1-ACK that would let its upstream trim the
    slice (SPATE §5.1.1).
    """

    k: int
    su: Mapping[int, int]
    sd: Mapping[int, int]
    checkpointed: bool = False

    def restrict(self, keys: Iterable[int]) -> SliceRecord | None:
        """The record with only the entries of ``keys`` (None when none is left)."""
        keyset = set(keys)
        su = {k: v for k, v in self.su.items() if k in keyset}
        sd = {k: v for k, v in self.sd.items() if k in keyset}
        if not su and not sd:
            return None
        return SliceRecord(self.k, su, sd, self.checkpointed)


def split_records(records: Iterable[SliceRecord], keys: Iterable[int]) -> list[SliceRecord]:
    """The records of a new task that owns ``keys`` (projection of su/sd on its keys).

    Parameters
    ----------
    records : iterable of SliceRecord
        The old tasks' records.
    keys : iterable of int
        The keys of the new task.

    Returns
    -------
    list of SliceRecord
        The projected records (those without its keys left out).
    """
    keyset = set(keys)
    out = []
    for r in records:
        p = r.restrict(keyset)
        if p is not None:
            out.append(p)
    return out


def merge_records(records: Iterable[SliceRecord]) -> list[SliceRecord]:
    """Merge records of several tasks: same ``k`` → union of su/sd, checkpointed only if all were."""
    by_k: dict[int, SliceRecord] = {}
    for r in records:
        old = by_k.get(r.k)
        if old is None:
            by_k[r.k] = SliceRecord(r.k, dict(r.su), dict(r.sd), r.checkpointed)
        else:
            su = {**old.su, **r.su}
            sd = {**old.sd, **r.sd}
            by_k[r.k] = SliceRecord(r.k, su, sd, old.checkpointed and r.checkpointed)
    return [by_k[k] for k in sorted(by_k)]


@dataclass
class OutputQueue:
    """The output queue QO of a task: post-process slices kept as backup until an L1-ACK trims them.

    Examples
    --------
    >>> q = OutputQueue()
    >>> q.append(Slice(1, (Event(0, 1, 3), Event(1, 1, 4))))
    >>> q.append(Slice(2, (Event(0, 2, 5),)))
    >>> len(q), q.trim({0: 1}), len(q)
    (3, 1, 2)
    >>> q.trim({0: 2, 1: 1}), len(q), q.slices
    (2, 0, [])
    """

    slices: list[Slice] = field(default_factory=list)

    def append(self, s: Slice) -> None:
        """Append ``s`` unless it is empty."""
        if s.events:
            self.slices.append(s)

    def trim(self, l1: Mapping[int, int]) -> int:
        """Drop every event whose key's L1 watermark covers it; return how many were dropped."""
        dropped = 0
        kept: list[Slice] = []
        for s in self.slices:
            evs = tuple(e for e in s.events if e.seq > l1.get(e.key, 0))
            dropped += len(s.events) - len(evs)
            if evs:
                kept.append(Slice(s.k, evs))
        self.slices = kept
        return dropped

    def events(self, keys: Iterable[int] | None = None) -> list[Event]:
        """The queued events in order, only those of ``keys`` when given."""
        keyset = None if keys is None else set(keys)
        return [e for s in self.slices for e in s.events if keyset is None or e.key in keyset]

    def restrict(self, keys: Iterable[int]) -> OutputQueue:
        """A queue of the slices restricted to ``keys``."""
        keyset = set(keys)
        out = OutputQueue()
        for s in self.slices:
            out.append(s.restrict(keyset))
        return out

    def copy(self) -> OutputQueue:
        """A shallow copy (the slices are immutable)."""
        return OutputQueue(list(self.slices))

    def __len__(self) -> int:
        return sum(len(s.events) for s in self.slices)
