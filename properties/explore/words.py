"""Words of the explorer as patterns, and back: the bridge to the rest of rollcheck.

References
----------
``specs/protocols.md#exhaustive``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rollcheck.properties.explore.engine import CKPT, DELIVER, SEND
from rollcheck.pyimpl.pattern import Pattern, PatternBuilder

__all__ = ["word_to_pattern", "pattern_to_word", "active_processes", "drop_idle"]


def active_processes(n: int, word: Sequence[tuple[int, int, int]]) -> list[int]:
    """The processes (of ``n``) that have at least one event in ``word``, or receive a message.

    Examples
    --------
    >>> active_processes(4, [(0, 1, 2), (2, 0, 0)])
    [0, 2]
    """
    used = {p for p, _, _ in word} | {arg for p, kind, arg in word if kind == SEND}
    return [i for i in range(n) if i in used]


def drop_idle(n: int, word: Sequence[tuple[int, int, int]]) -> tuple[int, tuple[tuple[int, int, int], ...]]:
    """``(n', word')``: the word with its idle processes removed and the others renumbered.

    Examples
    --------
    >>> drop_idle(3, [(0, 1, 2), (2, 2, 0)])
    (2, ((0, 1, 1), (1, 2, 0)))
    """
    keep = active_processes(n, word)
    new = {p: k for k, p in enumerate(keep)}
    out = tuple((new[p], kind, new[arg] if kind == SEND else arg) for p, kind, arg in word)
    return len(keep), out


def word_to_pattern(n: int, word: Sequence[tuple[int, int, int]], processes: Sequence[str] | None = None
                    ) -> Pattern:
    """The basic schedule of ``word`` as a pattern (messages ``m1``, ``m2``, … in send order).

    Examples
    --------
    >>> p = word_to_pattern(2, [(1, SEND, 0), (0, DELIVER, 0), (0, CKPT, 0)])
    >>> [(e.process, e.kind, e.message) for e in p.events]
    [(1, 'send', 'm1'), (0, 'deliver', 'm1'), (0, 'checkpoint', None)]
    """
    b = PatternBuilder(list(processes) if processes is not None else n)
    ids: dict[int, str] = {}
    for pos, (p, kind, arg) in enumerate(word):
        if kind == CKPT:
            b.checkpoint(p)
        elif kind == SEND:
            ids[pos] = b.send(p, arg, f"m{len(ids) + 1}")
        elif kind == DELIVER:
            b.deliver(p, ids[arg])
        else:
            raise ValueError(f"unknown event kind {kind!r} at {pos}")
    return b.build()


def pattern_to_word(p: Pattern) -> tuple[tuple[int, int, int], ...]:
    """The basic schedule of ``p`` (forced checkpoints dropped) as an explorer word.

    Examples
    --------
    >>> p = word_to_pattern(2, [(1, SEND, 0), (0, DELIVER, 0), (0, CKPT, 0)])
    >>> pattern_to_word(p)
    ((1, 1, 0), (0, 2, 0), (0, 0, 0))
    """
    pos: dict[str | None, int] = {}
    out: list[tuple[int, int, int]] = []
    for e in p.events:
        if e.kind == "checkpoint":
            if not e.forced:
                out.append((e.process, CKPT, 0))
        elif e.kind == "send":
            assert e.to is not None
            pos[e.message] = len(out)
            out.append((e.process, SEND, e.to))
        else:
            out.append((e.process, DELIVER, pos[e.message]))
    return tuple(out)


def describe(word: Sequence[tuple[int, int, int]]) -> list[dict[str, Any]]:
    """The word as readable dictionaries (for messages and JSON)."""
    names = {CKPT: "checkpoint", SEND: "send", DELIVER: "deliver"}
    return [{"process": p, "kind": names[k], "arg": a} for p, k, a in word]
