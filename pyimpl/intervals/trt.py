"""Total recovery time (TRT): Chiron's geometric-series heuristic.

The time from a failure until the job has caught up with its input: the heartbeat timeout
``T_o``, the recovery ``R``, and the catch-up series over the re-processed data ``E``, the data
that arrived meanwhile and so on, shrinking by the factor ``U = I_avg/I_max`` each round.

References
----------
.. [2] M. K. Geldenhuys, L. Thamsen, O. Kao. Chiron: Optimizing Fault Tolerance in QoS-aware
   Distributed Stream Processing Jobs. §III Eqs. 1–5.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from rollcheck.pyimpl.errors import InvalidInputError
from rollcheck.pyimpl.intervals._validate import _finite, _nonneg

__all__ = ["CASES", "READINGS", "TRTBreakdown", "total_recovery_time", "trt_breakdown", "trt_limit"]

CASES = ("best", "average", "worst")
READINGS = ("eq3", "eq2")


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
        ``n``: the first ``k`` whose term ``a_k`` is below the threshold (that term included);
        computed in closed form, never truncated.
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

    A ratio close to 1 needs many terms; they are counted exactly, not truncated:

    >>> b = trt_breakdown(1000.0, timeout=0.0, recovery=0.0, warmup=0.0, ratio=0.99999)
    >>> b.terms, round(b.trt / 1e7, 3)
    (621459, 4.99)
    """
    _check_trt_inputs(ci, timeout, recovery, warmup, ratio, case, reading, threshold)
    e = {"best": 0.0, "average": ci / 2.0, "worst": float(ci)}[case]
    base = e + timeout + recovery + warmup
    a1 = base * ratio if reading == "eq2" else base
    n = _terms(a1, float(ratio), float(threshold))
    s = _partial_sum(a1, float(ratio), n)
    trt = timeout + recovery + s
    if not math.isfinite(trt):
        raise InvalidInputError(
            f"the total recovery time overflows a float (a_1 = {a1:g}, U = {ratio}): use larger time units",
            location="ratio",
        )
    return TRTBreakdown(case, e, a1, n, s, trt)


def _terms(a1: float, ratio: float, threshold: float) -> int:
    """``n``: the first ``k >= 1`` with ``a_1·U^{k−1} < threshold``, in closed form.

    ``k − 1 > log(threshold/a_1)/log(U)``; the float estimate is corrected by direct evaluation
    of the neighbouring terms, so the count is exact however many terms there are (no iteration
    cap: ``U = 0.99999`` needs about a million terms).
    """
    if a1 < threshold:
        return 1
    if ratio == 0.0:
        return 2

    def below(k: int) -> bool:  # a_k < threshold
        return a1 * ratio ** (k - 1) < threshold

    # log(threshold) − log(a_1), not log(threshold / a_1): the quotient underflows to 0 for a tiny
    # threshold (5e-324 / 2.5), a math domain error
    n = 2 + max(0, math.floor((math.log(threshold) - math.log(a1)) / math.log(ratio)))
    while not below(n):
        n += 1
    while n > 2 and below(n - 1):
        n -= 1
    return n


def _partial_sum(a1: float, ratio: float, n: int) -> float:
    """``S_n = a_1(1 − U^n)/(1 − U)`` with ``1 − U^n = −expm1(n·log U)`` (accurate for U near 1)."""
    if ratio == 0.0:
        return a1
    return a1 * -math.expm1(n * math.log(ratio)) / (1.0 - ratio)


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

    Parameters
    ----------
    ci, timeout, recovery, warmup, ratio, case, reading, threshold
        As for :func:`trt_breakdown`.

    Returns
    -------
    float
        The total recovery time (the unit of ``ci``).

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

    Parameters
    ----------
    ci, timeout, recovery, warmup, ratio, case, reading
        As for :func:`trt_breakdown`.

    Examples
    --------
    >>> trt_limit(10.0, timeout=5.0, recovery=3.0, warmup=2.0, ratio=0.5, case="worst")
    48.0
    """
    b = trt_breakdown(ci, timeout=timeout, recovery=recovery, warmup=warmup, ratio=ratio,
                      case=case, reading=reading, threshold=1.0)
    lim = timeout + recovery + b.first_term / (1.0 - ratio)
    if not math.isfinite(lim):
        raise InvalidInputError(f"the TRT limit overflows a float (a_1 = {b.first_term:g}, U = {ratio})",
                                location="ratio")
    return lim

