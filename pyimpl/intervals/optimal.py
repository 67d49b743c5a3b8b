"""The utilization-optimal checkpoint interval ``T*`` and the classic first-order baselines.

``T*`` maximises the utilization of :mod:`rollcheck.pyimpl.intervals.utilization`; it uses the
principal branch of the Lambert W function and depends on ``c`` and ``λ`` only (not on ``R``,
``n`` or ``δ``). Young's, Daly's and Zhuang et al.'s intervals are the baselines the utilization
paper compares against. Units as in :mod:`rollcheck.pyimpl.intervals.utilization`.

References
----------
.. [1] S. Jayasekara, A. Harwood, S. Karunasekera. A Utilization Model for Optimization of
   Checkpoint Intervals in Distributed Stream Processing Systems. §3.4, §4.3, §5.1.
.. [3] J. W. Young. A First Order Approximation to the Optimum Checkpoint Interval. CACM 1974.
.. [4] J. T. Daly. A Higher Order Estimate of the Optimum Checkpoint Interval for Restart
   Dumps. FGCS 2006 (first-order formula as quoted in [1] §5.1).
.. [5] Y. Zhuang et al. An Optimal Checkpointing Model with Online OCI Adjustment for Stream
   Processing Applications. ICCCN 2018 (formula as quoted in [1] §5.1).
"""

from __future__ import annotations

import math

from rollcheck.pyimpl.errors import InvalidInputError
from rollcheck.pyimpl.intervals._validate import _check_cost, _finite, _nonneg

__all__ = [
    "optimal_interval",
    "failure_rate_for_optimal",
    "young_interval",
    "daly_interval",
    "zhuang_interval",
    "baseline_intervals",
]


def _lambertw0(z: float) -> float:
    from scipy.special import lambertw

    w = lambertw(z, 0)
    return float(w.real)


def optimal_interval(failure_rate: float, checkpoint_cost: float, *, branch: int = 0) -> float:
    """The interval ``T*`` maximising utilization, §3.4 and §4.3 of [1].

    ``T* = (cλ + W₀(−e^{−cλ−1}) + 1)/λ`` with ``W₀`` the principal branch of Lambert W
    (``scipy.special.lambertw(z, 0)``). It is the same for Eqs. 3, 4 and 10: it does not depend
    on ``R``, ``n`` or ``δ``. Near ``cλ → 0`` the argument approaches the branch point ``−1/e``
    where the formula loses digits, so the value is polished by Newton steps on the stationarity
    condition ``x − (y + expm1(−y)) = 0`` (``x = cλ``, ``y = λT*``; a series for small ``y``),
    which is the same equation.
    ``T* → √(2c/λ)`` as ``cλ → 0``.

    Parameters
    ----------
    failure_rate : float
        ``λ > 0``.
    checkpoint_cost : float
        ``c > 0``.
    branch : int
        Lambert W branch; only ``0`` is correct (``-1`` exists for the mutation tests and gives
        ``T* < c``).

    Examples
    --------
    >>> round(optimal_interval(0.005, 5.0), 3)
    46.452
    """
    lam = float(_finite(failure_rate, "failure_rate"))
    c = float(_finite(checkpoint_cost, "checkpoint_cost"))
    if lam <= 0:
        raise InvalidInputError(
            f"failure_rate must be > 0 for an optimum (without failures U grows towards 1 as T grows), got {failure_rate}",
            location="failure_rate",
        )
    if c <= 0:
        raise InvalidInputError(f"checkpoint_cost must be > 0 for an optimum, got {checkpoint_cost}", location="checkpoint_cost")
    x = c * lam
    if branch == 0:
        y = x + _lambertw0(-math.exp(-x - 1.0)) + 1.0
        y = _polish(x, y)
    else:
        from scipy.special import lambertw

        y = x + float(lambertw(-math.exp(-x - 1.0), branch).real) + 1.0
    return y / lam


def _polish(x: float, y: float) -> float:
    """Newton steps on ``g(y) = x − y − expm1(−y)`` (the root is λT*, with y > 0)."""
    if not (y > 0 and math.isfinite(y)):
        y = math.sqrt(2 * x) if x < 1 else x + 1.0
    for _ in range(8):
        g = x - _y_plus_expm1_neg(y)
        dg = math.expm1(-y)
        if dg == 0:
            break
        step = g / dg
        y_new = y - step
        if y_new <= 0:
            y_new = y / 2
        if abs(y_new - y) <= 1e-15 * y:
            y = y_new
            break
        y = y_new
    return y


def _y_plus_expm1_neg(y: float) -> float:
    """``y + expm1(−y)`` without cancellation (series for small ``y``)."""
    if y < 1e-3:
        return y * y * (0.5 - y * (1 / 6 - y * (1 / 24 - y * (1 / 120 - y / 720))))
    return y + math.expm1(-y)


def failure_rate_for_optimal(interval: float, checkpoint_cost: float) -> float:
    """The failure rate ``λ`` for which ``interval`` is the optimum ``T*`` (inverse of :func:`optimal_interval`).

    Solves the stationarity condition ``e^{λT}(1 − λ(T − c)) = 1`` for ``λ > 0``
    (bracketing root search; ``T* `` decreases strictly as ``λ`` grows).

    Parameters
    ----------
    interval : float
        The interval ``T`` that is to be optimal (time units).
    checkpoint_cost : float
        The checkpoint cost ``c`` (> 0, below ``interval``).

    Returns
    -------
    float
        The failure rate ``λ`` (per time unit).

    Examples
    --------
    >>> round(failure_rate_for_optimal(1800.0, 1.0) * 3600, 4)   # c = 1 s, T = 30 min: per hour
    0.0022
    """
    from scipy.optimize import brentq

    _check_cost(checkpoint_cost, interval)
    c, t = float(checkpoint_cost), float(interval)
    if c <= 0:
        raise InvalidInputError("checkpoint_cost must be > 0", location="checkpoint_cost")

    def f(lam: float) -> float:
        return math.log(optimal_interval(lam, c)) - math.log(t)

    lo, hi = 1e-300, 1.0 / c
    while f(hi) > 0:
        hi *= 10
    lo = hi
    while f(lo) < 0:
        lo /= 10
    return float(brentq(f, lo, hi, xtol=1e-300, rtol=1e-14))


def young_interval(failure_rate: float, checkpoint_cost: float) -> float:
    """Young's first-order interval ``√(2c/λ)`` [3].

    Parameters
    ----------
    failure_rate : float
        The failure rate ``λ`` (> 0, per time unit).
    checkpoint_cost : float
        The checkpoint cost ``c`` (> 0).

    Examples
    --------
    >>> young_interval(0.005, 5.0)
    44.721359549995796
    """
    lam, c = _positive_rate_cost(failure_rate, checkpoint_cost)
    return math.sqrt(2 * c / lam)


def daly_interval(failure_rate: float, checkpoint_cost: float, restart_cost: float = 0.0) -> float:
    """Daly's first-order interval ``√(2c(1/λ + R))`` [4] (as quoted in [1] §5.1).

    Parameters
    ----------
    failure_rate : float
        The failure rate ``λ`` (> 0, per time unit).
    checkpoint_cost : float
        The checkpoint cost ``c`` (> 0).
    restart_cost : float, optional
        The restart cost ``R`` (>= 0).

    Examples
    --------
    >>> round(daly_interval(0.005, 5.0, 10.0), 3)
    45.826
    """
    lam, c = _positive_rate_cost(failure_rate, checkpoint_cost)
    r = _nonneg(restart_cost, "restart_cost")
    return math.sqrt(2 * c * (1 / lam + r))


def zhuang_interval(failure_rate: float, checkpoint_cost: float, restart_cost: float = 0.0) -> float:
    """Zhuang et al.'s interval ``√(2c(1/λ + R) + c²)`` [5] (as quoted in [1] §5.1).

    Parameters
    ----------
    failure_rate : float
        The failure rate ``λ`` (> 0, per time unit).
    checkpoint_cost : float
        The checkpoint cost ``c`` (> 0).
    restart_cost : float, optional
        The restart cost ``R`` (>= 0).

    Examples
    --------
    >>> round(zhuang_interval(0.005, 5.0, 10.0), 3)
    46.098
    """
    lam, c = _positive_rate_cost(failure_rate, checkpoint_cost)
    r = _nonneg(restart_cost, "restart_cost")
    return math.sqrt(2 * c * (1 / lam + r) + c * c)


def baseline_intervals(failure_rate: float, checkpoint_cost: float, restart_cost: float = 0.0) -> dict[str, float]:
    """``{"optimal": T*, "young": ..., "daly": ..., "zhuang": ...}`` for the same parameters.

    Parameters
    ----------
    failure_rate : float
        The failure rate ``λ`` (> 0, per time unit).
    checkpoint_cost : float
        The checkpoint cost ``c`` (> 0).
    restart_cost : float, optional
        The restart cost ``R`` (>= 0; Young's and the optimum ignore it).
    """
    return {
        "optimal": optimal_interval(failure_rate, checkpoint_cost),
        "young": young_interval(failure_rate, checkpoint_cost),
        "daly": daly_interval(failure_rate, checkpoint_cost, restart_cost),
        "zhuang": zhuang_interval(failure_rate, checkpoint_cost, restart_cost),
    }


def _positive_rate_cost(failure_rate: float, checkpoint_cost: float) -> tuple[float, float]:
    lam = float(_finite(failure_rate, "failure_rate"))
    c = float(_finite(checkpoint_cost, "checkpoint_cost"))
    if lam <= 0:
        raise InvalidInputError(f"failure_rate must be > 0, got {failure_rate}", location="failure_rate")
    if c <= 0:
        raise InvalidInputError(f"checkpoint_cost must be > 0, got {checkpoint_cost}", location="checkpoint_cost")
    return lam, c
