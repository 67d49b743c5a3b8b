"""Orphans, in-transit messages and consistency of global checkpoints.

A *cut* (global checkpoint) gives one index per process: ``cut[i] = x`` selects C[i,x], and
``cut[i] = p.volatile_index(i)`` (= last+1) selects the volatile state V[i]. Definitions:
``specs/conventions.md`` §Consistency.

References
----------
.. [1] FERDiS paper (``ferdis-…``), §4 (consistent global states, in-transit and orphan messages).
.. [2] E. N. Elnozahy et al., "A survey of rollback-recovery protocols", §2.2 (as cited by FERDiS).
"""

from __future__ import annotations

from collections.abc import Sequence

from rollcheck.pyimpl.errors import InvalidInputError
from rollcheck.pyimpl.pattern import Message, Pattern

__all__ = ["check_cut", "orphans", "in_transit", "is_consistent"]


def check_cut(p: Pattern, cut: Sequence[int]) -> tuple[int, ...]:
    """Validate a cut against ``p`` (one index per process, 0..last+1) and return it as a tuple.

    Parameters
    ----------
    p : Pattern
        The checkpoint and communication pattern.
    cut : sequence of int
        A checkpoint index per process (``last+1``: the volatile state).
    """
    cut = tuple(cut)
    if len(cut) != p.n:
        raise InvalidInputError(f"a cut needs {p.n} indices, got {len(cut)}", location="cut")
    for i, x in enumerate(cut):
        if not isinstance(x, int) or not 0 <= x <= p.volatile_index(i):
            raise InvalidInputError(
                f"index {x!r} out of range 0..{p.volatile_index(i)} for {p.processes[i]}",
                location=f"cut[{i}]",
            )
    return cut


def orphans(p: Pattern, cut: Sequence[int]) -> list[Message]:
    """Messages sent after the sender's chosen checkpoint and delivered before the receiver's.

    Parameters
    ----------
    p : Pattern
        The checkpoint and communication pattern.
    cut : sequence of int
        A checkpoint index per process (``last+1``: the volatile state).

    Returns
    -------
    list of Message
        The orphan messages, in pattern order.

    Examples
    --------
    >>> from rollcheck.pyimpl.pattern import PatternBuilder
    >>> b = PatternBuilder(2); b.checkpoint(0); b.deliver(1, b.send(0, 1)); b.checkpoint(1)
    1
    1
    >>> [m.id for m in orphans(b.build(), (1, 1))]
    ['m0']
    """
    cut = check_cut(p, cut)
    return [
        m
        for m in p.messages
        if m.deliver_interval is not None
        and m.send_interval >= cut[m.sender]
        and m.deliver_interval < cut[m.receiver]
    ]


def in_transit(p: Pattern, cut: Sequence[int]) -> list[Message]:
    """Messages sent before the sender's chosen checkpoint and not delivered before the receiver's.

    These form the channel state that a restart from ``cut`` must replay.

    Parameters
    ----------
    p : Pattern
        The checkpoint and communication pattern.
    cut : sequence of int
        A checkpoint index per process (``last+1``: the volatile state).

    Returns
    -------
    list of Message
        The in-transit messages, in pattern order.
    """
    cut = check_cut(p, cut)
    return [
        m
        for m in p.messages
        if m.send_interval < cut[m.sender]
        and (m.deliver_interval is None or m.deliver_interval >= cut[m.receiver])
    ]


def is_consistent(p: Pattern, cut: Sequence[int]) -> bool:
    """True iff ``cut`` has no orphan message.

    Parameters
    ----------
    p : Pattern
        The checkpoint and communication pattern.
    cut : sequence of int
        A checkpoint index per process (``last+1``: the volatile state).
    """
    return not orphans(p, cut)
