"""Logical times, spans as frontiers, and the transformers φ between time domains.

Times are sequence numbers ``(edge, n)``, epochs ``t`` or loop times ``(t, c)``. A *span* (a set
of times) is a compact frontier with exact set semantics: :class:`SeqFrontier`,
:class:`EpochFrontier`, :class:`LoopFrontier`, or :class:`TimeSet` and :class:`Union` (the
concrete ⊤ of a live processor). A transformer φ maps a span at the sender to the times on the
edge that are fixed; each is monotone except :class:`BridgePerEpoch`, the deliberately wrong
bridge. See docs/internals/pyimpl-spans.md#times.

References
----------
.. [1] I. Gog, M. Isard, M. Abadi. "Falkirk Wheel: Rollback Recovery for Dataflow Systems",
   SoCC 2021, §3.1 (logical times), §3.2 (transformers: sequence numbers, epochs to sequence
   numbers, entering a loop).

Definitions and the monotonicity theorem: ``specs/spans.md#times`` and ``specs/spans.md#phi``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass, field

from typing_extensions import override

__all__ = [
    "ALL",
    "Span",
    "SeqFrontier",
    "EpochFrontier",
    "LoopFrontier",
    "TimeSet",
    "Union",
    "concrete_top",
    "Transformer",
    "Identity",
    "Conservative",
    "LoopEntry",
    "LoopFeedback",
    "LoopExit",
    "Bridge",
    "BridgePerEpoch",
]

ALL = 1 << 60  # a loop counter bound meaning "every iteration" (a completed epoch)

Time = Hashable


class Span(ABC):
    """A set of logical times with exact membership."""

    @abstractmethod
    def contains(self, t: Time) -> bool:
        """True iff time ``t`` is in the span."""

    def restrict(self, universe: Iterable[Time]) -> frozenset:
        """The finite set ``{t in universe : t in self}``."""
        return frozenset(t for t in universe if self.contains(t))

    def complete_epochs(self, epochs: Iterable[int]) -> set[int]:
        """The epochs among ``epochs`` of which this span holds every time (used by loop exit)."""
        return set()

    def __contains__(self, t: Time) -> bool:
        return self.contains(t)


@dataclass(frozen=True)
class SeqFrontier(Span):
    """``{(e, n) : 1 <= n <= prefix[e]}``.

    >>> s = SeqFrontier({"e": 2})
    >>> [("e", 2) in s, ("e", 3) in s, ("f", 1) in s]
    [True, False, False]
    """

    prefix: Mapping[str, int] = field(default_factory=dict)

    @override
    def contains(self, t: Time) -> bool:
        return isinstance(t, tuple) and len(t) == 2 and 1 <= t[1] <= self.prefix.get(t[0], 0)

    def __hash__(self) -> int:
        return hash(tuple(sorted(self.prefix.items())))


@dataclass(frozen=True)
class EpochFrontier(Span):
    """``{t : 0 <= t <= epoch}``; ``epoch = -1`` is empty.

    >>> [1 in EpochFrontier(1), 2 in EpochFrontier(1)]
    [True, False]
    """

    epoch: int = -1

    @override
    def contains(self, t: Time) -> bool:
        return isinstance(t, int) and 0 <= t <= self.epoch

    @override
    def complete_epochs(self, epochs: Iterable[int]) -> set[int]:
        return {t for t in epochs if t <= self.epoch}


@dataclass(frozen=True)
class LoopFrontier(Span):
    """``{(t, c) : 0 <= c <= counter[t]}``; ``counter[t] = ALL`` means the whole epoch ``t``.

    >>> s = LoopFrontier({0: ALL, 1: 2})
    >>> [(0, 99) in s, (1, 2) in s, (1, 3) in s, (2, 0) in s]
    [True, True, False, False]
    """

    counter: Mapping[int, int] = field(default_factory=dict)

    @override
    def contains(self, t: Time) -> bool:
        return isinstance(t, tuple) and len(t) == 2 and 0 <= t[1] <= self.counter.get(t[0], -1)

    @override
    def complete_epochs(self, epochs: Iterable[int]) -> set[int]:
        return {t for t in epochs if self.counter.get(t, -1) >= ALL}

    def __hash__(self) -> int:
        return hash(tuple(sorted(self.counter.items())))


@dataclass(frozen=True)
class TimeSet(Span):
    """An explicit finite set of times (e.g. a selective span)."""

    times: frozenset = frozenset()

    @override
    def contains(self, t: Time) -> bool:
        return t in self.times


@dataclass(frozen=True)
class Union(Span):
    """``a ∪ b``."""

    a: Span
    b: Span

    @override
    def contains(self, t: Time) -> bool:
        return self.a.contains(t) or self.b.contains(t)

    @override
    def complete_epochs(self, epochs: Iterable[int]) -> set[int]:
        ep = list(epochs)
        return self.a.complete_epochs(ep) | self.b.complete_epochs(ep)


def concrete_top(last_checkpoint: Span, processed: Iterable[Time]) -> Span:
    """The concrete ⊤ of a live processor: its last checkpoint plus every time it processed.

    Not "all times": a time nobody has processed yet is outside ⊤, so an unlogged message in
    flight at such a time still forces its sender to roll back (``specs/spans.md#top``).

    >>> top = concrete_top(EpochFrontier(0), [1])
    >>> [0 in top, 1 in top, 2 in top]
    [True, True, False]

    Parameters
    ----------
    last_checkpoint : Span
        The processor's last checkpoint.
    processed : iterable of Time
        The times of the events it processed.
    """
    return Union(last_checkpoint, TimeSet(frozenset(processed)))


class Transformer(ABC):
    """φ_e: maps a span at the sender to the set of times on ``e`` it fixes (over a universe)."""

    monotone = True

    @abstractmethod
    def __call__(self, s: Span, universe: Iterable[Time]) -> frozenset:
        """φ(s) restricted to ``universe``."""


@dataclass(frozen=True)
class Identity(Transformer):
    """φ(s) = s (sender and receiver share a time domain, messages keep their times)."""

    @override
    def __call__(self, s: Span, universe: Iterable[Time]) -> frozenset:
        return s.restrict(universe)


@dataclass(frozen=True)
class Conservative(Transformer):
    """φ(s) = ∅: nothing is known about the sender (always safe, preserves least work)."""

    @override
    def __call__(self, s: Span, universe: Iterable[Time]) -> frozenset:
        return frozenset()


@dataclass(frozen=True)
class LoopEntry(Transformer):
    """Entering a loop: φ(s) = {(t, c) : t ∈ s} (§3.2, "Entering a loop").

    >>> sorted(LoopEntry()(EpochFrontier(0), [(0, 0), (1, 0)]))
    [(0, 0)]
    """

    @override
    def __call__(self, s: Span, universe: Iterable[Time]) -> frozenset:
        return frozenset(t for t in universe if s.contains(t[0]))  # type: ignore[index]


@dataclass(frozen=True)
class LoopFeedback(Transformer):
    """The feedback edge increments the counter: φ(s) = {(t, c+1) : (t, c) ∈ s}.

    >>> sorted(LoopFeedback()(LoopFrontier({0: 1}), [(0, 1), (0, 2), (0, 3)]))
    [(0, 1), (0, 2)]
    """

    @override
    def __call__(self, s: Span, universe: Iterable[Time]) -> frozenset:
        return frozenset(t for t in universe if t[1] >= 1 and s.contains((t[0], t[1] - 1)))  # type: ignore[index]


@dataclass(frozen=True)
class LoopExit(Transformer):
    """Leaving a loop: φ(s) = {t : every (t, c) is in s}."""

    @override
    def __call__(self, s: Span, universe: Iterable[Time]) -> frozenset:
        u = list(universe)
        done = s.complete_epochs(u)  # type: ignore[arg-type]
        return frozenset(t for t in u if t in done)


def _largest_prefix_epoch(s: Span, epochs: Iterable[int]) -> int:
    e = -1
    for t in sorted(set(epochs)):
        if t != e + 1 or not s.contains(t):
            break
        e = t
    return e


@dataclass(frozen=True)
class Bridge(Transformer):
    """Epochs to sequence numbers with running totals (§3.2, "Connecting epochs and ...").

    If the sender sent ``total[E]`` messages on the edge in epochs ``0..E`` and ``s`` holds every
    epoch ``0..E``, φ(s) = {(e, n) : n <= total[E]}. ``counts[t]`` is the number of messages the
    sender sent in epoch ``t``.

    >>> b = Bridge("e", (3, 1))
    >>> sorted(b(EpochFrontier(1), [("e", n) for n in range(1, 5)]))
    [('e', 1), ('e', 2), ('e', 3), ('e', 4)]
    """

    edge: str
    counts: tuple[int, ...]

    def bound(self, s: Span) -> int:
        """The largest sequence number φ(s) fixes (the running total to its last whole epoch)."""
        e = _largest_prefix_epoch(s, range(len(self.counts)))
        return sum(self.counts[: e + 1])

    @override
    def __call__(self, s: Span, universe: Iterable[Time]) -> frozenset:
        k = self.bound(s)
        return frozenset(t for t in universe if t[0] == self.edge and t[1] <= k)  # type: ignore[index]


@dataclass(frozen=True)
class BridgePerEpoch(Bridge):
    """WRONG on purpose: uses the count of the last epoch instead of the running total.

    So φ is not monotone (``specs/spans.md#phi``).
    """

    monotone = False

    @override
    def bound(self, s: Span) -> int:
        e = _largest_prefix_epoch(s, range(len(self.counts)))
        return self.counts[e] if e >= 0 else 0
