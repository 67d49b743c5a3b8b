"""The deterministic keyed operators of the elastic simulator.

Every operator maps one input event to at most one output event of the same key, which keeps the
input's sequence number (``specs/elastic.md#model``). Stateful operators keep one integer of
state per key; this is the *processing state* of SPATE §3.2.1 that checkpoints copy.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["OperatorKind", "KINDS", "apply_operator"]


@dataclass(frozen=True)
class OperatorKind:
    """An operator: ``step(state, value) -> (new_state, output or None)``.

    For a stateless operator ``state`` is always ``None``.
    """

    name: str
    stateful: bool
    step: Callable[[int | None, int], tuple[int | None, int | None]]


def _affine(state: int | None, value: int) -> tuple[int | None, int | None]:
    return None, 3 * value + 1


def _filter(state: int | None, value: int) -> tuple[int | None, int | None]:
    return None, (None if value % 3 == 0 else value)


def _sum(state: int | None, value: int) -> tuple[int | None, int | None]:
    total = (state or 0) + value
    return total, total


def _max(state: int | None, value: int) -> tuple[int | None, int | None]:
    m = value if state is None else max(state, value)
    return m, m


def _count(state: int | None, value: int) -> tuple[int | None, int | None]:
    c = (state or 0) + 1
    return c, 100 * c + value % 100


KINDS: dict[str, OperatorKind] = {
    "affine": OperatorKind("affine", False, _affine),
    "filter": OperatorKind("filter", False, _filter),
    "sum": OperatorKind("sum", True, _sum),
    "max": OperatorKind("max", True, _max),
    "count": OperatorKind("count", True, _count),
}


def apply_operator(kind: str, state: int | None, value: int) -> tuple[int | None, int | None]:
    """Apply operator ``kind`` to one input value.

    Parameters
    ----------
    kind : str
        The operator kind (a key of :data:`KINDS`).
    state : int or None
        The key's state (None: none yet; always None when stateless).
    value : int
        The input value.

    Returns
    -------
    tuple
        The new state and the output value (None: no output).

    Examples
    --------
    >>> apply_operator("sum", 4, 3)
    (7, 7)
    >>> apply_operator("filter", None, 6)
    (None, None)
    """
    return KINDS[kind].step(state, value)
