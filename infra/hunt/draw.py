"""Draw one value of a Hypothesis strategy from a seed: the hunt's programs and fault schedules.

:func:`draw` gives value number ``index`` of a run with seed ``seed``, the same every time, with
each option of the strategy drawn about equally often. See docs/internals/infra.md#hunt-draw.

Examples
--------
>>> from hypothesis import strategies as st
>>> s = st.lists(st.integers(0, 9), min_size=1, max_size=4)
>>> draw(s, 7, 0) == draw(s, 7, 0)
True
>>> len({tuple(draw(s, 7, i)) for i in range(20)}) > 5
True
>>> from collections import Counter
>>> c = Counter(draw(st.sampled_from("abc"), 1, i) for i in range(90))
>>> sorted(c) == ["a", "b", "c"] and min(c.values()) > 15
True
"""

from __future__ import annotations

import hashlib
from typing import Any, TypeVar

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st
from hypothesis.strategies import SearchStrategy

__all__ = ["draw", "draw_seed"]

T = TypeVar("T")

#: Examples asked of Hypothesis per draw: the first is the simplest value; the second is kept.
_EXAMPLES = 2


def draw_seed(seed: int, index: int, salt: str = "") -> int:
    """The Hypothesis seed of draw ``index`` of a run with ``seed`` (a stable hash, not ``hash()``).

    Parameters
    ----------
    seed : int
        The run's seed.
    index : int
        The draw's number.
    salt : str, optional
        Separates draws of different things with the same index.

    Returns
    -------
    int
        A 64-bit seed.

    Examples
    --------
    >>> draw_seed(1, 2) == draw_seed(1, 2) != draw_seed(1, 3)
    True
    """
    h = hashlib.blake2b(f"{seed}/{index}/{salt}".encode(), digest_size=8).digest()
    return int.from_bytes(h, "big")


def draw(strategy: SearchStrategy[T], seed: int, index: int = 0, *, salt: str = "") -> T:
    """The value number ``index`` of ``strategy`` for ``seed``: the same on every call.

    Parameters
    ----------
    strategy : SearchStrategy
        What to draw (a program, a fault schedule, a batch of rows).
    seed, index : int
        The hunt's seed and the draw's number in it.
    salt : str
        Separates independent sequences of the same seed (programs, schedules).

    Returns
    -------
    The drawn value. An exception the strategy raises propagates.
    """
    seen: list[Any] = []

    @hypothesis_seed(draw_seed(seed, index, salt))
    @settings(max_examples=_EXAMPLES, database=None, phases=[Phase.generate], deadline=None,
              suppress_health_check=list(HealthCheck), derandomize=False, print_blob=False)
    @given(st.tuples(st.integers(0, 2**63 - 1), strategy))
    def _collect(value: Any) -> None:
        seen.append(value[1])

    _collect()
    if not seen:  # pragma: no cover - Hypothesis always calls the test at least once
        raise RuntimeError("Hypothesis drew no value")
    return seen[1] if len(seen) > 1 else seen[0]
