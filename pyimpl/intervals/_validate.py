"""Precondition checks shared by the checkpoint-interval models (private).

Every check raises :class:`~rollcheck.pyimpl.errors.InvalidInputError` naming the offending
parameter in ``location``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rollcheck.pyimpl.errors import InvalidInputError

__all__: list[str] = []


def _finite(x: Any, name: str) -> np.ndarray:
    try:
        a = np.asarray(x, dtype=float)
    except (TypeError, ValueError):
        raise InvalidInputError(f"{name} must be a number, got {x!r}", location=name) from None
    if not np.all(np.isfinite(a)):
        raise InvalidInputError(f"{name} must be finite, got {x!r}", location=name)
    return a


def _check_common(
    interval: Any,
    failure_rate: float,
    checkpoint_cost: float,
    restart_cost: float = 0.0,
    depth: int = 1,
    token_delay: float = 0.0,
) -> np.ndarray:
    lam = _finite(failure_rate, "failure_rate")
    if np.any(lam < 0):
        raise InvalidInputError(f"failure_rate must be >= 0, got {failure_rate}", location="failure_rate")
    _check_cost(checkpoint_cost, interval)
    r = _finite(restart_cost, "restart_cost")
    if np.any(r < 0):
        raise InvalidInputError(f"restart_cost must be >= 0, got {restart_cost}", location="restart_cost")
    _check_dag(depth, token_delay)
    return np.asarray(interval, dtype=float)


def _check_cost(checkpoint_cost: float, interval: Any) -> None:
    c = _finite(checkpoint_cost, "checkpoint_cost")
    if np.any(c < 0):
        raise InvalidInputError(f"checkpoint_cost must be >= 0, got {checkpoint_cost}", location="checkpoint_cost")
    t = _finite(interval, "interval")
    if np.any(t <= c):
        bad = float(np.min(t))
        raise InvalidInputError(
            f"interval must exceed the checkpoint cost {float(c)} (a period includes its checkpoint), got {bad}",
            location="interval",
        )


def _check_dag(depth: int, token_delay: float) -> None:
    n: Any = depth
    integral = isinstance(n, (int, np.integer)) or (isinstance(n, float) and n.is_integer())
    if isinstance(n, bool) or not integral:
        raise InvalidInputError(f"depth must be an integer >= 1, got {depth!r}", location="depth")
    if n < 1:
        raise InvalidInputError(f"depth must be an integer >= 1, got {depth!r}", location="depth")
    d = _finite(token_delay, "token_delay")
    if np.any(d < 0):
        raise InvalidInputError(f"token_delay must be >= 0, got {token_delay}", location="token_delay")


def _scalar_or_array(a: np.ndarray) -> Any:
    return float(a) if a.ndim == 0 else a


def _nonneg(x: float, name: str) -> float:
    v = float(_finite(x, name))
    if v < 0:
        raise InvalidInputError(f"{name} must be >= 0, got {x}", location=name)
    return v

