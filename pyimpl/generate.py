"""Seeded random basic schedules: one generator for the runners, benchmarks and tests.

A schedule is a pattern whose checkpoints are basic ones: at each step a random process sends to
a random other process, a random pending message is delivered (so channels are not FIFO), or a
random process checkpoints. The same seed always gives the same pattern.
"""

from __future__ import annotations

import random

from rollcheck.pyimpl.pattern import Pattern, PatternBuilder

__all__ = ["pattern_document", "random_pattern"]


def random_pattern(n: int, steps: int, seed: int | str, p_send: float = 0.4,
                   p_deliver: float = 0.85) -> Pattern:
    """A random schedule of ``steps`` steps on ``n`` processes.

    Each step draws ``x`` uniformly: ``x < p_send`` sends, ``x < p_deliver`` delivers a random
    pending message (when there is one), otherwise a random process takes a basic checkpoint.

    Parameters
    ----------
    n : int
        The number of processes.
    steps : int
        The number of steps.
    seed : int or str
        The seed.
    p_send : float, optional
        The probability of a send.
    p_deliver : float, optional
        ``p_send`` plus the probability of a delivery.

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


def pattern_document(messages: int, processes: int = 50, seed: int = 20261122) -> dict:
    """A large random pattern document (a ``rollcheck.pattern/1`` dict) for benchmarks.

    Sends go to random peers and are delivered after a random delay (a few stay in transit at the
    end); a random process takes a checkpoint after every 10th send.

    Parameters
    ----------
    messages : int
        Number of messages sent.
    processes : int
        Number of processes.
    seed : int
        Seed of the random choices (the same seed gives the same document).

    Returns
    -------
    dict
        The document, ready for ``json.dump``.

    Examples
    --------
    >>> doc = pattern_document(100, processes=5, seed=1)
    >>> doc["format"], len(doc["processes"]), doc == pattern_document(100, processes=5, seed=1)
    ('rollcheck.pattern/1', 5, True)
    """
    rnd = random.Random(seed)
    names = [f"P{i}" for i in range(processes)]
    events: list[dict] = []
    pending: list[tuple[int, str, int]] = []  # (due step, id, receiver)
    step = 0
    for k in range(messages):
        s = rnd.randrange(processes)
        r = rnd.randrange(processes - 1)
        r += r >= s
        mid = f"m{k}"
        events.append({"process": names[s], "kind": "send", "message": mid, "to": names[r]})
        pending.append((step + rnd.randint(1, 60), mid, r))
        step += 1
        if len(pending) > 64 or rnd.random() < 0.9:
            pending.sort()
            while pending and pending[0][0] <= step:
                _, m, rr = pending.pop(0)
                events.append({"process": names[rr], "kind": "deliver", "message": m})
        if k % 10 == 9:
            events.append({"process": names[rnd.randrange(processes)], "kind": "checkpoint"})
    for _, m, rr in pending[: len(pending) // 2]:
        events.append({"process": names[rr], "kind": "deliver", "message": m})
    return {"format": "rollcheck.pattern/1", "processes": names, "events": events}
