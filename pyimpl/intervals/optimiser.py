"""Chiron's checkpoint-interval optimiser: quadratic fits of latency and TRT, minimum under a bound.

Fits second-order polynomials of latency ``P(CI)`` and TRT ``A(CI)`` over profiling points and
picks the checkpoint interval (CI) with the lowest predicted latency whose predicted TRT meets a
bound.

References
----------
.. [2] M. K. Geldenhuys, L. Thamsen, O. Kao. Chiron: Optimizing Fault Tolerance in QoS-aware
   Distributed Stream Processing Jobs. §IV-B/C, §V-A.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rollcheck.pyimpl.errors import InternalError, InvalidInputError
from rollcheck.pyimpl.intervals._validate import _finite

__all__ = ["QuadraticFit", "fit_quadratic", "ProfilingPoint", "CIChoice", "optimise_ci"]


@dataclass(frozen=True)
class QuadraticFit:
    """A least-squares polynomial ``y ≈ c0 + c1·x + c2·x²`` with its coefficient of determination."""

    coefficients: tuple[float, float, float]
    r_squared: float
    domain: tuple[float, float]
    _poly: Any = field(repr=False, compare=False, default=None)

    def __call__(self, x: Any) -> Any:
        """The fit's value at ``x`` (a float for a scalar, an array for an array)."""
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
        """Real ``x`` where the fit's derivative is zero."""
        r = self._poly.deriv().roots()
        return [float(z.real) for z in np.atleast_1d(r) if abs(z.imag) <= 1e-12]


def fit_quadratic(x: Sequence[float], y: Sequence[float], *, what: str = "y") -> QuadraticFit:
    """Fit a second-order polynomial (k = 2 regression, as in [2] §V-A) to ``(x, y)``.

    Needs at least 3 distinct ``x`` values.

    Parameters
    ----------
    x, y : sequence of float
        The points (same length, finite).
    what : str, optional
        What ``y`` is, for error messages.

    Returns
    -------
    QuadraticFit
        The coefficients (lowest order first) and ``R²``.

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

    Parameters
    ----------
    points : sequence of ProfilingPoint
        The profiled CIs with their latency and TRT.
    bound : float
        The TRT bound.
    ci_range : tuple of float, optional
        The CIs to search (None: the profiled range).

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
    if best_ci is None:
        raise InternalError("no candidate CI although the feasible set is not empty")
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
