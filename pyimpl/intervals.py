"""Checkpoint-interval models: utilization and the optimal interval, total recovery time.

Two families of models decide how often a stream processor should checkpoint.

*Utilization* (Jayasekara, Harwood and Karunasekera, "A Utilization Model for Optimization of
Checkpoint Intervals in Distributed Stream Processing Systems", §3–§4): the long-run fraction of
time spent on useful work when a system checkpoints every ``T`` time units at cost ``c``, fails
as a Poisson process of rate ``λ`` (also while checkpointing and while restarting), needs ``R`` to
detect a failure and restart, and (for a DAG of operators) passes the checkpoint token along a
critical path of ``n`` operators with delay ``δ`` per hop. The optimum ``T*`` uses the principal
branch of the Lambert W function and depends on ``c`` and ``λ`` only.

*Total recovery time* (Geldenhuys, Thamsen and Kao, "Chiron: Optimizing Fault Tolerance in
QoS-aware Distributed Stream Processing Jobs", §III–§IV): a geometric-series heuristic for the
time from a failure until the job has caught up with its input, and an optimiser that fits
second-order polynomials of latency and TRT over profiling points and picks the checkpoint
interval (CI) with the lowest predicted latency whose predicted TRT meets a bound.

Index conventions: all times are in one user-chosen unit and ``λ`` is per that unit. A *period*
``T`` includes its checkpoint cost ``c`` (the checkpoint completes at the end of the period), so
``T > c`` is required. ``n`` counts operators on the critical path including source and sink, so
the system-wide checkpoint completes ``(n − 1)·δ`` after the source took it. The theorems checked
by the properties are in ``specs/intervals.md``.

References
----------
.. [1] S. Jayasekara, A. Harwood, S. Karunasekera. A Utilization Model for Optimization of
   Checkpoint Intervals in Distributed Stream Processing Systems. Eqs. 1, 3, 4, 5, 10; §3.4, §4.3.
.. [2] M. K. Geldenhuys, L. Thamsen, O. Kao. Chiron: Optimizing Fault Tolerance in QoS-aware
   Distributed Stream Processing Jobs. §III Eqs. 1–5, §IV-B/C.
.. [3] J. W. Young. A First Order Approximation to the Optimum Checkpoint Interval. CACM 1974.
.. [4] J. T. Daly. A Higher Order Estimate of the Optimum Checkpoint Interval for Restart
   Dumps. FGCS 2006 (first-order formula as quoted in [1] §5.1).
.. [5] Y. Zhuang et al. An Optimal Checkpointing Model with Online OCI Adjustment for Stream
   Processing Applications. ICCCN 2018 (formula as quoted in [1] §5.1).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rollcheck.pyimpl.errors import InvalidInputError

__all__ = [
    "utilization_no_failure",
    "utilization_no_restart",
    "utilization_single",
    "utilization_dag_no_failure",
    "utilization_dag",
    "utilization",
    "optimal_interval",
    "failure_rate_for_optimal",
    "young_interval",
    "daly_interval",
    "zhuang_interval",
    "baseline_intervals",
    "CASES",
    "READINGS",
    "TRTBreakdown",
    "total_recovery_time",
    "trt_breakdown",
    "trt_limit",
    "QuadraticFit",
    "fit_quadratic",
    "ProfilingPoint",
    "CIChoice",
    "optimise_ci",
]

CASES = ("best", "average", "worst")
READINGS = ("eq3", "eq2")


# --------------------------------------------------------------------------------------------
# precondition checks


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


# --------------------------------------------------------------------------------------------
# utilization (Jayasekara et al., Eqs. 1, 3, 4, 5, 10)


def utilization_no_failure(interval: Any, checkpoint_cost: float) -> Any:
    """Utilization without failures, Eq. 1 of [1]: ``U = (T − c)/T``.

    Examples
    --------
    >>> utilization_no_failure(10.0, 2.0)
    0.8
    """
    _check_cost(checkpoint_cost, interval)
    t = np.asarray(interval, dtype=float)
    return _scalar_or_array((t - checkpoint_cost) / t)


def utilization_no_restart(interval: Any, failure_rate: float, checkpoint_cost: float) -> Any:
    """Utilization with failures and negligible restart cost, Eq. 3 of [1].

    ``U = λ(T − c)/(e^{λT} − 1)``; equals :func:`utilization_single` with ``R = 0``.

    Examples
    --------
    >>> round(utilization_no_restart(46.452, 0.005, 5.0), 4)
    0.7927
    """
    return utilization_single(interval, failure_rate, checkpoint_cost, 0.0)


def utilization_single(interval: Any, failure_rate: float, checkpoint_cost: float, restart_cost: float = 0.0) -> Any:
    """Utilization of one process with failures during work, checkpointing and restart, Eq. 4 of [1].

    ``U = λ(T − c)/(e^{λ(R+T)} − e^{λR})``, computed as ``λ(T − c)e^{−λR}/expm1(λT)``; with
    ``λ = 0`` it is the limit ``(T − c)/T`` (Eq. 1).

    Examples
    --------
    >>> round(utilization_single(46.452, 0.005, 5.0, 10.0), 4)
    0.7541
    """
    return utilization_dag(interval, failure_rate, checkpoint_cost, restart_cost, 1, 0.0)


def utilization_dag_no_failure(interval: Any, checkpoint_cost: float, depth: int, token_delay: float) -> Any:
    """Utilization of a DAG without failures when the token staggering is *not* overlapped, Eq. 5 of [1].

    ``U = (T − c)/(T + (n − 1)δ)``. Note: Eq. 10 does not tend to Eq. 5 as ``λ → 0`` but to Eq. 1,
    because §4.2 of [1] overlaps the staggered checkpoints with computation (``specs/intervals.md``).

    Examples
    --------
    >>> utilization_dag_no_failure(10.0, 2.0, 3, 1.0)
    0.6666666666666666
    """
    _check_cost(checkpoint_cost, interval)
    _check_dag(depth, token_delay)
    t = np.asarray(interval, dtype=float)
    return _scalar_or_array((t - checkpoint_cost) / (t + (depth - 1) * token_delay))


def utilization_dag(
    interval: Any,
    failure_rate: float,
    checkpoint_cost: float,
    restart_cost: float = 0.0,
    depth: int = 1,
    token_delay: float = 0.0,
) -> Any:
    """Utilization of a DAG of operators with system-wide checkpoints, Eq. 10 of [1].

    ``U = λ e^{δλ}(T − c)/(e^{λ(R+T+δn)} − e^{λ(R+δn)})``, evaluated stably as
    ``λ(T − c)·e^{−λ(R+(n−1)δ)}/expm1(λT)``. This is Eq. 4 with the restart cost ``R``
    replaced by ``R + (n − 1)δ`` (``specs/intervals.md#dag-as-single``); ``n = 1`` gives Eq. 4,
    additionally ``R = 0`` gives Eq. 3, and ``λ = 0`` gives the limit Eq. 1.

    Parameters
    ----------
    interval : float or array
        Checkpoint period ``T`` (``T > c``).
    failure_rate : float
        ``λ >= 0``, failures per time unit.
    checkpoint_cost : float
        ``c >= 0``.
    restart_cost : float
        ``R >= 0``: time to detect a failure and restart.
    depth : int
        ``n >= 1``: operators on the critical path (source and sink included).
    token_delay : float
        ``δ >= 0``: token delay between consecutive operators.

    Returns
    -------
    float or ndarray
        Utilization in ``[0, 1]``.

    Raises
    ------
    InvalidInputError
        Negative rates or costs, ``T <= c``, ``n < 1``.

    Examples
    --------
    >>> t = optimal_interval(0.005, 5.0)
    >>> round(utilization_dag(t, 0.005, 5.0, 10.0, depth=50, token_delay=0.5), 3)
    0.667
    """
    t = _check_common(interval, failure_rate, checkpoint_cost, restart_cost, depth, token_delay)
    lam = float(failure_rate)
    if lam == 0.0:
        return _scalar_or_array((t - checkpoint_cost) / t)
    lost = lam * (restart_cost + (depth - 1) * token_delay)
    with np.errstate(over="ignore"):
        u = lam * (t - checkpoint_cost) * np.exp(-lost) / np.expm1(lam * t)
    return _scalar_or_array(np.asarray(u, dtype=float))


def utilization(
    interval: Any,
    failure_rate: float,
    checkpoint_cost: float,
    restart_cost: float = 0.0,
    depth: int = 1,
    token_delay: float = 0.0,
) -> Any:
    """The general utilization model (Eq. 10 of [1] and its special cases); see :func:`utilization_dag`.

    Examples
    --------
    >>> round(utilization(30.0, 0.005, 5.0, 10.0), 4)
    0.7347
    """
    return utilization_dag(interval, failure_rate, checkpoint_cost, restart_cost, depth, token_delay)


# --------------------------------------------------------------------------------------------
# optimal interval


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

    Examples
    --------
    >>> young_interval(0.005, 5.0)
    44.721359549995796
    """
    lam, c = _positive_rate_cost(failure_rate, checkpoint_cost)
    return math.sqrt(2 * c / lam)


def daly_interval(failure_rate: float, checkpoint_cost: float, restart_cost: float = 0.0) -> float:
    """Daly's first-order interval ``√(2c(1/λ + R))`` [4] (as quoted in [1] §5.1).

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

    Examples
    --------
    >>> round(zhuang_interval(0.005, 5.0, 10.0), 3)
    46.098
    """
    lam, c = _positive_rate_cost(failure_rate, checkpoint_cost)
    r = _nonneg(restart_cost, "restart_cost")
    return math.sqrt(2 * c * (1 / lam + r) + c * c)


def baseline_intervals(failure_rate: float, checkpoint_cost: float, restart_cost: float = 0.0) -> dict[str, float]:
    """``{"optimal": T*, "young": ..., "daly": ..., "zhuang": ...}`` for the same parameters."""
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


def _nonneg(x: float, name: str) -> float:
    v = float(_finite(x, name))
    if v < 0:
        raise InvalidInputError(f"{name} must be >= 0, got {x}", location=name)
    return v


# --------------------------------------------------------------------------------------------
# total recovery time (Chiron, §III)


@dataclass(frozen=True)
class TRTBreakdown:
    """The terms of the TRT heuristic for one checkpoint interval and one case.

    Attributes
    ----------
    case : str
        ``best`` / ``average`` / ``worst`` (``E = 0``, ``CI/2``, ``CI``).
    reprocess : float
        ``E``.
    first_term : float
        ``a_1`` (``E+T_o+R+W`` with the Eq. 3 reading, times ``U`` with the Eq. 2 reading).
    terms : int
        ``n``: the first ``k`` whose term ``a_k`` is below the threshold (that term included).
    catch_up : float
        ``S_n = a_1(1 − U^n)/(1 − U)``.
    trt : float
        ``T_o + R + S_n``.
    """

    case: str
    reprocess: float
    first_term: float
    terms: int
    catch_up: float
    trt: float


def _check_trt_inputs(ci: float, timeout: float, recovery: float, warmup: float, ratio: float,
                      case: str, reading: str, threshold: float) -> None:
    for name, v in (("ci", ci), ("timeout", timeout), ("recovery", recovery), ("warmup", warmup)):
        _nonneg(v, name)
    u = float(_finite(ratio, "ratio"))
    if not 0 <= u < 1:
        raise InvalidInputError(
            f"ratio U = I_avg/I_max must satisfy 0 <= U < 1 (the job must be able to catch up), got {ratio}",
            location="ratio",
        )
    if case not in CASES:
        raise InvalidInputError(f"case must be one of {CASES}, got {case!r}", location="case")
    if reading not in READINGS:
        raise InvalidInputError(f"reading must be one of {READINGS}, got {reading!r}", location="reading")
    t = float(_finite(threshold, "threshold"))
    if t <= 0:
        raise InvalidInputError(f"threshold must be > 0, got {threshold}", location="threshold")


def trt_breakdown(
    ci: float,
    *,
    timeout: float,
    recovery: float,
    warmup: float,
    ratio: float,
    case: str = "average",
    reading: str = "eq3",
    threshold: float = 1.0,
) -> TRTBreakdown:
    """The Chiron total-recovery-time heuristic with its terms, §III of [2].

    ``E`` is 0, ``CI/2`` or ``CI`` (best/average/worst). With the default Eq. 3 reading the
    catch-up terms are ``a_k = (E + T_o + R + W)·U^{k−1}``; with ``reading="eq2"`` the first term
    is already multiplied by ``U`` (Eq. 2: ``C(1) = (E+T_o+R+W)·U``) and ``a_k`` gains a factor
    ``U``. ``n`` is the first ``k`` with ``a_k < threshold`` (one time unit by default, as the
    paper recommends), ``S_n = a_1(1 − U^n)/(1 − U)`` (Eq. 4) and ``TRT = T_o + R + S_n`` (Eq. 5).

    Parameters
    ----------
    ci : float
        Checkpoint interval (same unit as the periods).
    timeout, recovery, warmup : float
        ``T_o`` (heartbeat timeout), ``R`` (recovery), ``W`` (warm-up), all ``>= 0``.
    ratio : float
        ``U = I_avg/I_max`` with ``0 <= U < 1`` (Eq. 1).
    case : {"best", "average", "worst"}
    reading : {"eq3", "eq2"}
    threshold : float
        Stop at the first term below this (``> 0``).

    Examples
    --------
    >>> b = trt_breakdown(10.0, timeout=5.0, recovery=3.0, warmup=2.0, ratio=0.5, case="worst")
    >>> b.first_term, b.terms, b.catch_up, b.trt
    (20.0, 6, 39.375, 47.375)
    """
    _check_trt_inputs(ci, timeout, recovery, warmup, ratio, case, reading, threshold)
    e = {"best": 0.0, "average": ci / 2.0, "worst": float(ci)}[case]
    base = e + timeout + recovery + warmup
    a1 = base * ratio if reading == "eq2" else base
    n = 1
    term = a1
    while term >= threshold:
        n += 1
        term *= ratio
        if n > 100_000:  # ratio is < 1, so this only guards against pathological rounding
            break
    s = a1 * (1.0 - ratio**n) / (1.0 - ratio)
    return TRTBreakdown(case, e, a1, n, s, timeout + recovery + s)


def total_recovery_time(
    ci: float,
    *,
    timeout: float,
    recovery: float,
    warmup: float,
    ratio: float,
    case: str = "average",
    reading: str = "eq3",
    threshold: float = 1.0,
) -> float:
    """``TRT`` of the Chiron heuristic (Eq. 5 of [2]); see :func:`trt_breakdown`.

    Examples
    --------
    >>> total_recovery_time(10.0, timeout=5.0, recovery=3.0, warmup=2.0, ratio=0.5, case="best")
    27.375
    """
    return trt_breakdown(ci, timeout=timeout, recovery=recovery, warmup=warmup, ratio=ratio,
                         case=case, reading=reading, threshold=threshold).trt


def trt_limit(
    ci: float,
    *,
    timeout: float,
    recovery: float,
    warmup: float,
    ratio: float,
    case: str = "average",
    reading: str = "eq3",
) -> float:
    """The closed-form limit of the TRT as the threshold tends to 0: ``T_o + R + a_1/(1 − U)``.

    Examples
    --------
    >>> trt_limit(10.0, timeout=5.0, recovery=3.0, warmup=2.0, ratio=0.5, case="worst")
    48.0
    """
    b = trt_breakdown(ci, timeout=timeout, recovery=recovery, warmup=warmup, ratio=ratio,
                      case=case, reading=reading, threshold=1.0)
    return timeout + recovery + b.first_term / (1.0 - ratio)


# --------------------------------------------------------------------------------------------
# the CI optimiser (Chiron, §IV-B/C)


@dataclass(frozen=True)
class QuadraticFit:
    """A least-squares polynomial ``y ≈ c0 + c1·x + c2·x²`` with its coefficient of determination."""

    coefficients: tuple[float, float, float]
    r_squared: float
    domain: tuple[float, float]
    _poly: Any = field(repr=False, compare=False, default=None)

    def __call__(self, x: Any) -> Any:
        v = self._poly(np.asarray(x, dtype=float))
        return float(v) if np.ndim(v) == 0 else v

    def roots_of(self, level: float) -> list[float]:
        """Real ``x`` with ``fit(x) = level`` (stable quadratic formula in the scaled variable)."""
        a0, a1, a2 = (list(self._poly.coef) + [0.0, 0.0, 0.0])[:3]
        a0 -= level
        off, scl = self._poly.mapparms()
        scale = max(abs(a0), abs(a1), abs(a2), 1e-300)
        us: list[float] = []
        if abs(a2) <= 1e-13 * scale:
            if abs(a1) > 1e-13 * scale:
                us = [-a0 / a1]
        else:
            disc = a1 * a1 - 4 * a2 * a0
            if disc >= 0:
                q = -(a1 + math.copysign(math.sqrt(disc), a1)) / 2
                us = [q / a2] + ([a0 / q] if q != 0 else [])
        xs = []
        for u in us:
            x = (u - off) / scl
            for _ in range(3):  # Newton polish on the original variable
                d = float(self._poly.deriv()(x))
                if d == 0:
                    break
                x -= (float(self._poly(x)) - level) / d
            xs.append(float(x))
        return sorted(xs)

    def stationary_points(self) -> list[float]:
        r = self._poly.deriv().roots()
        return [float(z.real) for z in np.atleast_1d(r) if abs(z.imag) <= 1e-12]


def fit_quadratic(x: Sequence[float], y: Sequence[float], *, what: str = "y") -> QuadraticFit:
    """Fit a second-order polynomial (k = 2 regression, as in [2] §V-A) to ``(x, y)``.

    Needs at least 3 distinct ``x`` values.

    Examples
    --------
    >>> f = fit_quadratic([0, 1, 2, 3], [1, 2, 5, 10])
    >>> [round(c, 9) for c in f.coefficients], round(f.r_squared, 9)
    ([1.0, 0.0, 1.0], 1.0)
    """
    from numpy.polynomial import Polynomial

    xs = np.asarray(x, dtype=float)
    ys = np.asarray(y, dtype=float)
    if xs.shape != ys.shape or xs.ndim != 1:
        raise InvalidInputError(f"{what}: x and y must be equal-length lists", location=what)
    if len(np.unique(xs)) < 3:
        raise InvalidInputError(
            f"{what}: a second-order fit needs at least 3 distinct checkpoint intervals, got {len(np.unique(xs))}",
            location=what,
        )
    if not (np.all(np.isfinite(xs)) and np.all(np.isfinite(ys))):
        raise InvalidInputError(f"{what}: values must be finite numbers", location=what)
    p = Polynomial.fit(xs, ys, 2)
    coef = p.convert().coef
    coef = np.concatenate([coef, np.zeros(3 - len(coef))])
    resid = ys - p(xs)
    ss_tot = float(np.sum((ys - ys.mean()) ** 2))
    r2 = 1.0 - float(np.sum(resid**2)) / ss_tot if ss_tot > 0 else 1.0
    return QuadraticFit((float(coef[0]), float(coef[1]), float(coef[2])), r2,
                        (float(xs.min()), float(xs.max())), p)


@dataclass(frozen=True)
class ProfilingPoint:
    """One profiling run: checkpoint interval, average latency and (measured or estimated) TRT."""

    ci: float
    latency: float
    trt: float


@dataclass(frozen=True)
class CIChoice:
    """The optimiser's answer: CI, predicted latency ``P(CI)`` and TRT ``A(CI)``, and the fits."""

    ci: float
    latency: float
    trt: float
    bound: float
    ci_range: tuple[float, float]
    latency_fit: QuadraticFit
    trt_fit: QuadraticFit
    feasible: tuple[tuple[float, float], ...]


def optimise_ci(
    points: Sequence[ProfilingPoint],
    bound: float,
    *,
    ci_range: tuple[float, float] | None = None,
) -> CIChoice:
    """Pick the CI that minimises predicted latency under a TRT bound, §IV-C of [2].

    Fits ``P(CI)`` (latency) and ``A(CI)`` (TRT) as second-order polynomials, computes the set of
    CIs in ``ci_range`` (default: the profiled range; the fits are not trusted outside it) with
    ``A(CI) <= bound`` exactly from the roots of ``A − bound``, and minimises ``P`` over it
    (end points and the stationary point of ``P``). The paper inverts ``A`` at the bound; that
    choice coincides with ours only when ``P`` decreases over the feasible set.

    Raises
    ------
    InvalidInputError
        Fewer than 3 distinct CIs, a non-positive bound, or no CI in range meets the bound (the
        message gives the smallest predicted TRT).

    Examples
    --------
    >>> pts = [ProfilingPoint(ci, 1000 + 3e6 / ci, 50 + ci / 500) for ci in (1000, 10000, 20000, 40000, 60000)]
    >>> ch = optimise_ci(pts, bound=120.0)
    >>> round(ch.ci), ch.trt <= 120.0
    (35000, True)
    """
    if not points:
        raise InvalidInputError("no profiling points", location="points")
    b = float(_finite(bound, "bound"))
    if b <= 0:
        raise InvalidInputError(f"the TRT bound must be > 0, got {bound}", location="bound")
    cis = [p.ci for p in points]
    lat = fit_quadratic(cis, [p.latency for p in points], what="latency")
    trt = fit_quadratic(cis, [p.trt for p in points], what="trt")
    lo, hi = ci_range if ci_range is not None else (min(cis), max(cis))
    lo, hi = float(lo), float(hi)
    if not (math.isfinite(lo) and math.isfinite(hi)) or lo > hi or lo < 0:
        raise InvalidInputError(f"bad CI range [{lo}, {hi}]", location="ci_range")
    feasible = _feasible_intervals(trt, b, lo, hi)
    if not feasible:
        grid = np.linspace(lo, hi, 1001)
        cand = [*grid, *[s for s in trt.stationary_points() if lo <= s <= hi]]
        best = min(cand, key=lambda x: trt(x))
        raise InvalidInputError(
            f"no checkpoint interval in [{lo:g}, {hi:g}] satisfies A(CI) <= {b:g}: the smallest "
            f"predicted TRT is {trt(best):.6g} at CI = {best:.6g}",
            location="bound",
        )
    best_ci, best_lat = None, math.inf
    for a, z in feasible:
        cand = [a, z, *[s for s in lat.stationary_points() if a < s < z]]
        for x in cand:
            v = lat(x)
            if v < best_lat:
                best_ci, best_lat = x, v
    assert best_ci is not None
    return CIChoice(float(best_ci), float(best_lat), float(trt(best_ci)), b, (lo, hi), lat, trt, tuple(feasible))


def _feasible_intervals(fit: QuadraticFit, bound: float, lo: float, hi: float) -> list[tuple[float, float]]:
    """Maximal sub-intervals of [lo, hi] where fit(x) <= bound, ends refined to be feasible."""
    cuts = [lo, *[r for r in fit.roots_of(bound) if lo < r < hi], hi]
    pieces: list[tuple[float, float]] = []
    for a, z in zip(cuts, cuts[1:], strict=False):
        mid = (a + z) / 2
        if fit(mid) <= bound or (a == z and fit(a) <= bound):
            pieces.append((_inward(fit, bound, a, mid), _inward(fit, bound, z, mid)))
    if len(cuts) == 2 and lo == hi and fit(lo) <= bound:
        pieces = [(lo, hi)]
    merged: list[tuple[float, float]] = []
    for a, z in pieces:
        if merged and a <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(z, merged[-1][1]))
        else:
            merged.append((a, z))
    return merged


def _inward(fit: QuadraticFit, bound: float, end: float, mid: float) -> float:
    """Move ``end`` towards the feasible ``mid`` until fit(end) <= bound (root rounding)."""
    if fit(end) <= bound:
        return end
    a, z = end, mid  # fit(a) > bound >= fit(z)
    for _ in range(200):
        m = (a + z) / 2
        if m in (a, z):
            break
        if fit(m) <= bound:
            z = m
        else:
            a = m
    return z
