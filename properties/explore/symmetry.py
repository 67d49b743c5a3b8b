"""Checking a protocol's ``symmetric`` claim before the explorer relies on it.

:func:`refute_symmetry` compares the forced decisions on random schedules and on the same
schedules with permuted process ids, at every process count the bounds use.
See docs/internals/properties.md#explore-symmetry.

References
----------
``specs/protocols.md#exhaustive``.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from typing import Any

from rollcheck.properties.explore.calls import CallTimeout, ProtocolCalls, Watchdog, method_codes
from rollcheck.properties.explore.engine import CKPT, DELIVER, SEND

__all__ = ["random_word", "forced_decisions", "permute_word", "refute_symmetry"]


def random_word(rng: random.Random, n: int, length: int) -> tuple[tuple[int, int, int], ...]:
    """A random basic schedule (explorer word) of ``n`` processes and ``length`` events.

    Examples
    --------
    >>> w = random_word(random.Random(1), 3, 8)
    >>> len(w), all(0 <= p < 3 for p, _, _ in w)
    (8, True)
    """
    word: list[tuple[int, int, int]] = []
    transit: list[tuple[int, int]] = []  # (pos, dst)
    for pos in range(length):
        p = rng.randrange(n)
        mine = [t for t in transit if t[1] == p]
        r = rng.random()
        if mine and r < 0.45:
            t = rng.choice(mine)
            transit.remove(t)
            word.append((p, DELIVER, t[0]))
        elif r < 0.8:
            q = rng.choice([k for k in range(n) if k != p])
            transit.append((pos, q))
            word.append((p, SEND, q))
        else:
            word.append((p, CKPT, 0))
    return tuple(word)


def permute_word(word: Sequence[tuple[int, int, int]], perm: Sequence[int]) -> tuple[tuple[int, int, int], ...]:
    """``word`` with process ``p`` renamed ``perm[p]``.

    Examples
    --------
    >>> permute_word([(0, SEND, 1), (1, DELIVER, 0)], [1, 0])
    ((1, 1, 0), (0, 2, 0))
    """
    return tuple((perm[p], k, perm[a] if k == SEND else a) for p, k, a in word)


def forced_decisions(calls: Any, n: int, word: Sequence[tuple[int, int, int]]) -> tuple[bool, ...]:
    """The protocol's ``must_force`` decision at each delivery of ``word``, in word order."""
    st = [calls.initial(i, n) for i in range(n)]
    pbs: dict[int, tuple[int, Any]] = {}
    out = []
    for pos, (p, kind, arg) in enumerate(word):
        if kind == CKPT:
            st[p] = calls.on_checkpoint(st[p], False)
        elif kind == SEND:
            st[p], pb = calls.on_send(st[p], arg)
            pbs[pos] = (p, pb)
        else:
            src, pb = pbs[arg]
            f = calls.must_force(st[p], src, pb)
            s = calls.on_checkpoint(st[p], True) if f else st[p]
            st[p] = calls.on_deliver(s, src, pb)
            out.append(bool(f))
    return tuple(out)


def refute_symmetry(proto: Any, label: str, call_timeout: float | None = 10.0, *,
                    processes: Iterable[int] = (2, 3, 4), samples: int = 100,
                    seed: int = 0) -> str | None:
    """A description of a schedule on which ``proto`` is not symmetric, or None.

    ``samples`` random schedules are drawn for each process count of ``processes`` (the counts the
    exhaustive bounds use), each run as drawn and under a random renaming of its processes.

    Examples
    --------
    >>> from rollcheck.pyimpl.protocols import BCS
    >>> refute_symmetry(BCS(), "bcs") is None
    True
    >>> class Lopsided(BCS):                  # P0 never forces
    ...     def must_force(self, st, src, pb): return st.i != 0 and pb > st.lc
    >>> refute_symmetry(Lopsided(), "lopsided")  # doctest: +ELLIPSIS
    'on a schedule of ... events, renaming processes ... changes the forced deliveries ...'
    >>> class FifthApart(BCS):                # P4 never forces: only 5 processes or more show it
    ...     def must_force(self, st, src, pb): return st.i != 4 and pb > st.lc
    >>> refute_symmetry(FifthApart(), "fifth", processes=[2, 3, 4]) is None
    True
    >>> refute_symmetry(FifthApart(), "fifth", processes=[2, 5])  # doctest: +ELLIPSIS
    'on a schedule of ... events, renaming processes [0, 1, 2, 3, 4] as ...'
    """
    rng = random.Random(seed)
    calls = ProtocolCalls(proto, label, checking=True)
    draws = [n for n in sorted(set(processes)) for _ in range(samples)]
    with Watchdog(method_codes(proto), call_timeout):
        for n in draws:
            word = random_word(rng, n, rng.randint(max(4, n), max(16, 3 * n)))
            perm = list(range(n))
            rng.shuffle(perm)
            try:
                a = forced_decisions(calls, n, word)
                b = forced_decisions(calls, n, permute_word(word, perm))
            except CallTimeout:
                raise
            except Exception:
                continue  # the calibration names the user's errors; not a symmetry question
            if a != b:
                return (f"on a schedule of {len(word)} events, renaming processes {list(range(n))} "
                        f"as {perm} changes the forced deliveries from {list(a)} to {list(b)}")
    return None
