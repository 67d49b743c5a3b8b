"""Draw one value of a Hypothesis strategy from a seed: the hunt's programs and fault schedules.

The hunt's grammars are Hypothesis strategies (composable, and they shrink well in property
tests). A hunt needs the other use: the value number ``index`` of a run with seed ``seed``, the same
every time. :func:`draw` runs the strategy through Hypothesis' own engine with a fixed seed (no
example database, generation only) and keeps a drawn value that is not the strategy's simplest one
— Hypothesis tries the simplest value first, which would make every program the same.

Examples
--------
>>> from hypothesis import strategies as st
>>> s = st.lists(st.integers(0, 9), min_size=1, max_size=4)
>>> draw(s, 7, 0) == draw(s, 7, 0)
True
>>> len({tuple(draw(s, 7, i)) for i in range(20)}) > 5
True
"""

from __future__ import annotations

import hashlib
from typing import Any, TypeVar

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis.strategies import SearchStrategy

__all__ = ["draw", "draw_seed"]

T = TypeVar("T")

#: Examples asked of Hypothesis per draw: its first is the strategy's simplest value, kept only
#: when no other came (a strategy with one value).
_EXAMPLES = 3


def draw_seed(seed: int, index: int, salt: str = "") -> int:
    """The Hypothesis seed of draw ``index`` of a run with ``seed`` (a stable hash, not ``hash()``).

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
    @given(strategy)
    def _collect(value: Any) -> None:
        seen.append(value)

    _collect()
    if not seen:  # pragma: no cover - Hypothesis always calls the test at least once
        raise RuntimeError("Hypothesis drew no value")
    return seen[1] if len(seen) > 1 else seen[0]
