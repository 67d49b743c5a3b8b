"""Random schedules beyond the exhaustive bound, steered at the protocol under test.

:func:`steered_schedules` draws schedules of up to 6 processes and 60 events with swarm testing
(each draws its shape first); :func:`zigzag_score` counts unforced zigzag closings, which the
check hands to Hypothesis's ``target()``. See docs/internals/properties.md#explore-steered.

References
----------
A. Groce et al., "Swarm testing", ISSTA 2012; FERDiS paper §5.3 (Z-paths);
``specs/protocols.md#random``.
"""

from __future__ import annotations

from hypothesis import strategies as st

from rollcheck.properties.explore.engine import CKPT, DELIVER, SEND
from rollcheck.properties.explore.words import word_to_pattern
from rollcheck.pyimpl.pattern import CHECKPOINT, Pattern
from rollcheck.pyimpl.pattern import DELIVER as P_DELIVER
from rollcheck.pyimpl.pattern import SEND as P_SEND

__all__ = ["steered_schedules", "zigzag_score"]


@st.composite
def steered_schedules(draw: st.DrawFn, max_processes: int = 6, max_events: int = 60,
                      min_processes: int = 2) -> Pattern:
    """A basic schedule of swarm-drawn shape (see the module docstring).

    Examples
    --------
    >>> from hypothesis import find
    >>> p = find(steered_schedules(), lambda p: p.n >= 3 and p.num_messages >= 4)
    >>> p.n >= 3 and not any(e.forced for e in p.events)
    True
    """
    n = draw(st.integers(min_processes, max_processes), label="processes")
    idle = draw(st.sets(st.integers(0, n - 1), max_size=max(0, n - 2)), label="idle")
    live = [i for i in range(n) if i not in idle]
    w_send = draw(st.integers(1, 4), label="send weight")
    w_deliver = draw(st.integers(2, 6), label="deliver weight")
    w_ckpt = draw(st.integers(1, 3), label="checkpoint weight")
    relay = draw(st.booleans(), label="relay")
    burst = draw(st.integers(1, 3), label="burst")
    size = draw(st.integers(1, max_events), label="events")
    # one draw for all the choices (a draw per event costs more than running the protocol); each
    # choice shrinks towards 0: deliver the oldest message, the lowest process
    choices = draw(st.lists(st.integers(0, 1 << 16), min_size=size, max_size=size), label="choices")
    word: list[tuple[int, int, int]] = []
    transit: list[tuple[int, int, int]] = []  # (pos, src, dst)
    pending_relay: list[tuple[int, int]] = []  # (process, do not send back to)
    total = w_send + w_deliver + w_ckpt
    k = 0
    while len(word) < size and k < len(choices):
        c = choices[k]
        k += 1
        if relay and pending_relay:
            p, avoid = pending_relay.pop()
            targets = [q for q in live if q not in (p, avoid)] or [q for q in live if q != p]
            q = targets[c % len(targets)]
            transit.append((len(word), p, q))
            word.append((p, SEND, q))
            continue
        r, c = c % total, c // total
        if r < w_deliver and transit:
            # deliver a message in transit (any of them: channels are not FIFO)
            t = transit.pop(c % len(transit))
            word.append((t[2], DELIVER, t[0]))
            if relay and len(live) > 2:
                pending_relay.append((t[2], t[1]))
        elif r < w_deliver + w_send:
            p = live[c % len(live)]
            c //= len(live)
            others = [q for q in live if q != p]
            for _ in range(burst):
                if len(word) >= size:
                    break
                q = others[c % len(others)]
                c //= len(others)
                transit.append((len(word), p, q))
                word.append((p, SEND, q))
        else:
            word.append((live[c % len(live)], CKPT, 0))
    return word_to_pattern(n, word)


def zigzag_score(out: Pattern) -> int:
    """Deliveries of ``out`` that close a zigzag without a forced checkpoint.

    At each, the protocol did not force although the receiver had sent in its current interval.

    Examples
    --------
    >>> from rollcheck.pyimpl import PatternBuilder
    >>> b = PatternBuilder(2)
    >>> m = b.send(0, 1); k = b.send(1, 0); b.deliver(1, m); b.deliver(0, k)
    >>> zigzag_score(b.build())
    2
    """
    sent_here = [False] * out.n
    score = 0
    prev_forced = [False] * out.n
    for e in out.events:
        i = e.process
        if e.kind == CHECKPOINT:
            sent_here[i] = False
            prev_forced[i] = bool(e.forced)
            continue
        if e.kind == P_SEND:
            sent_here[i] = True
        elif e.kind == P_DELIVER and sent_here[i] and not prev_forced[i]:
            score += 1
        prev_forced[i] = False
    return score
