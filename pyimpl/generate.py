"""Seeded random basic schedules: one generator for the runners, benchmarks and tests.

A schedule is a pattern whose checkpoints are basic ones: at each step a random process sends to
a random other process, a random pending message is delivered (so channels are not FIFO), or a
random process checkpoints. The same seed always gives the same pattern.
"""

from __future__ import annotations

import random

from pyimpl.pattern import Pattern, PatternBuilder

__all__ = ["random_pattern"]


def random_pattern(n: int, steps: int, seed: int | str, p_send: float = 0.4,
                   p_deliver: float = 0.85) -> Pattern:
    """A random schedule of ``steps`` steps on ``n`` processes.

    Each step draws ``x`` uniformly: ``x < p_send`` sends, ``x < p_deliver`` delivers a random
    pending message (when there is one), otherwise a random process takes a basic checkpoint.

    Examples
    --------
    >>> random_pattern(3, 30, 1) == random_pattern(3, 30, 1)
    True
    >>> random_pattern(2, 0, 5).events
    ()
    """
    r = random.Random(seed)
    b = PatternBuilder(n)
    pending: list[tuple[int, str]] = []
    for _ in range(steps):
        x = r.random()
        if x < p_send:
            s = r.randrange(n)
            d = r.choice([k for k in range(n) if k != s])
            pending.append((d, b.send(s, d)))
        elif x < p_deliver and pending:
            d, m = pending.pop(r.randrange(len(pending)))
            b.deliver(d, m)
        else:
            b.checkpoint(r.randrange(n))
    return b.build()
