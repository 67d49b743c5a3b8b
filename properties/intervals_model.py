"""Properties of the utilization model and its optimum (``specs/intervals.md``).

Implementations under test are keyword arguments (``optimal``, ``util``) so that mutants can be
substituted. Independent references: the paper's Eq. 10 written literally and evaluated with
mpmath at 50 digits, and its derivative taken symbolically by sympy.
"""

from __future__ import annotations

import functools
import math
from typing import Any

from hypothesis import assume, given
from hypothesis import strategies as st

from rollcheck.properties.registry import prop
from rollcheck.pyimpl.errors import PropertyViolation
from rollcheck.pyimpl.intervals import optimal_interval, utilization

__all__ = ["model_params", "literal_eq10", "literal_dudt", "expect", "run_with"]

SPEC = "specs/intervals.md"


def expect(cond: bool, message: str, example: Any) -> None:
    """Raise :class:`PropertyViolation` with ``message`` and ``example`` unless ``cond`` holds.

    Parameters
    ----------
    cond : bool
        The condition that must hold.
    message : str
        What went wrong.
    example : object
        The counterexample (parameters) attached.
    """
    if not cond:
        raise PropertyViolation(f"{message}; example: {example}", counterexample=example)


def run_with(name: str, profile: str, *, shrink: bool = True, **impls: Any) -> Any:
    """:func:`rollcheck.properties.registry.run_property` under ``profile`` (optionally unshrunk).

    Parameters
    ----------
    name : str
        The property's registered name.
    profile : str
        A profile name (unknown names run ``ci``).
    shrink : bool, optional
        Let Hypothesis shrink a failure.
    **impls : object
        Implementations substituted (``optimal=...``, ``util=...``).

    Returns
    -------
    object
        What ``run_property`` returns.
    """
    from rollcheck.properties.profiles import PROFILES
    from rollcheck.properties.registry import run_property

    return run_property(name, profile=profile if profile in PROFILES else "ci", shrink=shrink, **impls)


def _logu(lo: float, hi: float) -> st.SearchStrategy[float]:
    return st.floats(math.log(lo), math.log(hi)).map(math.exp)


@st.composite
def model_params(draw: Any, max_cl: float = 20.0) -> dict[str, float]:
    """λ, c, R, n, δ over wide ranges, scaled by λ (the model is scale-free).

    Parameters
    ----------
    draw : callable
        Hypothesis's draw function (supplied by ``@composite``).
    max_cl : float, optional
        Upper bound of cλ.

    Returns
    -------
    dict of str to float
        Keyword arguments of ``utilization`` after ``T``.
    """
    lam = draw(_logu(1e-6, 10.0))
    x = draw(_logu(1e-6, max_cl))  # cλ
    rl = draw(st.one_of(st.just(0.0), _logu(1e-4, 5.0)))  # Rλ
    n = draw(st.integers(1, 200))
    dl = draw(st.one_of(st.just(0.0), _logu(1e-6, 0.05)))  # δλ
    return {"failure_rate": lam, "checkpoint_cost": x / lam, "restart_cost": rl / lam, "depth": n,
            "token_delay": dl / lam}


@functools.cache
def _sym() -> tuple[Any, Any]:
    import sympy as sp

    t, lam, c, r, n, d = sp.symbols("T lambda c R n delta", positive=True)
    u = lam * sp.exp(d * lam) * (t - c) / (sp.exp(lam * (r + t + d * n)) - sp.exp(lam * (r + d * n)))
    args = (t, lam, c, r, n, d)
    return sp.lambdify(args, u, "mpmath"), sp.lambdify(args, sp.diff(u, t), "mpmath")


def literal_eq10(t: float, p: dict[str, float]) -> float:
    """Eq. 10 exactly as printed in the paper, evaluated with 50 significant digits.

    Parameters
    ----------
    t : float
        The checkpoint interval T.
    p : dict of str to float
        ``failure_rate``, ``checkpoint_cost``, ``restart_cost``, ``depth``, ``token_delay``.

    Returns
    -------
    float
        U(T).
    """
    import mpmath

    f, _ = _sym()
    with mpmath.workdps(50):
        return float(f(mpmath.mpf(t), mpmath.mpf(p["failure_rate"]), mpmath.mpf(p["checkpoint_cost"]),
                       mpmath.mpf(p["restart_cost"]), mpmath.mpf(p["depth"]), mpmath.mpf(p["token_delay"])))


def literal_dudt(t: float, p: dict[str, float]) -> tuple[float, float]:
    """``(T·U'(T)/U(T), U(T))`` from sympy's derivative of the literal Eq. 10 (50 digits).

    Parameters
    ----------
    t : float
        The checkpoint interval T.
    p : dict of str to float
        ``failure_rate``, ``checkpoint_cost``, ``restart_cost``, ``depth``, ``token_delay``.

    Returns
    -------
    tuple of (float, float)
        The relative slope and U(T).
    """
    import mpmath

    f, df = _sym()
    with mpmath.workdps(50):
        a = (mpmath.mpf(t), mpmath.mpf(p["failure_rate"]), mpmath.mpf(p["checkpoint_cost"]),
             mpmath.mpf(p["restart_cost"]), mpmath.mpf(p["depth"]), mpmath.mpf(p["token_delay"]))
        u = f(*a)
        return float(a[0] * df(*a) / u), float(u)


@prop("interval-tstar-maximises", target="interval-model", theorem=f"{SPEC}#tstar-max")
@given(p=model_params(), s=st.floats(-6.0, 6.0))
def tstar_maximises(p: dict[str, float], s: float, optimal: Any = optimal_interval, util: Any = utilization) -> None:
    """U(T*) >= U(T) for every T in (c, ∞): T = c + (T* − c)·e^s.

    Parameters
    ----------
    p : dict of str to float
        Model parameters from :func:`model_params`.
    s : float
        Log-scale offset choosing T.
    optimal : callable, optional
        ``optimal(λ, c) -> T*``, the implementation checked.
    util : callable, optional
        ``util(T, λ, c, R, n, δ) -> U``, the implementation checked.
    """
    t_star = optimal(p["failure_rate"], p["checkpoint_cost"])
    c = p["checkpoint_cost"]
    expect(math.isfinite(t_star) and t_star > c, f"T* = {t_star} is not an interval above c = {c}", p)
    t = c + (t_star - c) * math.exp(s)
    assume(t > c and math.isfinite(t))
    u_star, u = util(t_star, **p), util(t, **p)
    expect(u_star >= u * (1 - 1e-12) - 1e-300, f"U(T*={t_star}) = {u_star} < U(T={t}) = {u}", {**p, "T": t})


@prop("interval-tstar-stationary", target="interval-model", theorem=f"{SPEC}#tstar-stationary")
@given(p=model_params(max_cl=5.0))
def tstar_stationary(p: dict[str, float], optimal: Any = optimal_interval) -> None:
    """dU/dT = 0 at T* (sympy's derivative of the literal Eq. 10, any R, n, δ), > 0 before, < 0 after.

    Parameters
    ----------
    p : dict of str to float
        Model parameters from :func:`model_params`.
    optimal : callable, optional
        ``optimal(λ, c) -> T*``, the implementation checked.
    """
    t_star = optimal(p["failure_rate"], p["checkpoint_cost"])
    expect(t_star > p["checkpoint_cost"], f"T* = {t_star} <= c", p)
    rel, u = literal_dudt(t_star, p)
    assume(u > 1e-250)  # U underflows to 0 for extreme R·λ: nothing to check there
    expect(abs(rel) <= 1e-7, f"T·U'(T)/U = {rel} at T* = {t_star}, not 0", p)
    lo, _ = literal_dudt(t_star * (1 - 1e-3), p)
    hi, _ = literal_dudt(t_star * (1 + 1e-3), p)
    expect(lo > 0 > hi, f"U is not maximal at T* = {t_star}: slopes {lo} before, {hi} after", p)


@prop("interval-tstar-independent", target="interval-model", theorem=f"{SPEC}#tstar-independent")
@given(p=model_params(max_cl=5.0))
def tstar_independent(p: dict[str, float], optimal: Any = optimal_interval, util: Any = utilization) -> None:
    """The numerical maximiser of U(·; R, n, δ) is the closed-form T*(λ, c) whatever R, n and δ are.

    Parameters
    ----------
    p : dict of str to float
        Model parameters from :func:`model_params`.
    optimal : callable, optional
        ``optimal(λ, c) -> T*``, the implementation checked.
    util : callable, optional
        ``util(T, λ, c, R, n, δ) -> U``, the implementation checked.
    """
    from scipy.optimize import minimize_scalar

    lam, c = p["failure_rate"], p["checkpoint_cost"]
    t_star = optimal(lam, c)
    assume(util(c * 2, **p) > 1e-200)
    # maximise log U over log(T − c), scale-free; a unimodal function (specs: tstar-max)
    t0 = c + max(math.sqrt(2 * c / lam), c)

    def neg(z: float) -> float:
        u = util(c + (t0 - c) * math.exp(z), **p)
        return -math.log(u) if u > 0 else 1e300

    res = minimize_scalar(neg, bounds=(-30.0, 30.0), method="bounded", options={"xatol": 1e-10})
    t_num = c + (t0 - c) * math.exp(res.x)
    expect(abs(t_num - t_star) <= 2e-3 * t_star, f"numerical argmax {t_num} differs from T* = {t_star}", p)


@prop("interval-tstar-young-limit", target="interval-model", theorem=f"{SPEC}#young-limit")
@given(lam=_logu(1e-6, 10.0), x=_logu(1e-14, 1e-2))
def tstar_young_limit(lam: float, x: float, optimal: Any = optimal_interval) -> None:
    """T*/√(2c/λ) → 1 as cλ → 0: |T*/√(2c/λ) − 1| <= 0.3·√(cλ) (the next term is √(cλ)/(3√2)).

    Parameters
    ----------
    lam : float
        Failure rate λ.
    x : float
        cλ.
    optimal : callable, optional
        ``optimal(λ, c) -> T*``, the implementation checked.
    """
    c = x / lam
    t_star = optimal(lam, c)
    ratio = t_star / math.sqrt(2 * c / lam)
    expect(abs(ratio - 1) <= 0.3 * math.sqrt(x) + 1e-12, f"T*/√(2c/λ) = {ratio} at cλ = {x}",
           {"failure_rate": lam, "checkpoint_cost": c})


@prop("interval-utilization-unit-range", target="interval-model", theorem=f"{SPEC}#unit-range")
@given(p=model_params(), s=st.floats(-10.0, 10.0))
def utilization_unit_range(p: dict[str, float], s: float, util: Any = utilization) -> None:
    """0 <= U(T) <= (T − c)/T <= 1 for every T > c (failures only lose time).

    Parameters
    ----------
    p : dict of str to float
        Model parameters from :func:`model_params`.
    s : float
        Log-scale offset choosing T.
    util : callable, optional
        ``util(T, λ, c, R, n, δ) -> U``, the implementation checked.
    """
    c = p["checkpoint_cost"]
    t = c * (1 + math.exp(s))
    assume(t > c)
    u = util(t, **p)
    expect(0 <= u <= (t - c) / t * (1 + 1e-12) <= 1 + 1e-12, f"U({t}) = {u} outside [0, (T−c)/T]", {**p, "T": t})


@prop("interval-utilization-monotone", target="interval-model", theorem=f"{SPEC}#monotone")
@given(p=model_params(), s=st.floats(-5.0, 5.0), which=st.sampled_from(["failure_rate", "restart_cost", "depth", "token_delay"]),
       grow=st.floats(1.01, 10.0))
def utilization_monotone(p: dict[str, float], s: float, which: str, grow: float, util: Any = utilization) -> None:
    """U does not increase when λ, R, n or δ increases (T and c fixed).

    Parameters
    ----------
    p : dict of str to float
        Model parameters from :func:`model_params`.
    s : float
        Log-scale offset choosing T.
    which : str
        The parameter grown.
    grow : float
        Its growth factor (for ``depth``: added steps).
    util : callable, optional
        ``util(T, λ, c, R, n, δ) -> U``, the implementation checked.
    """
    c = p["checkpoint_cost"]
    t = c * (1 + math.exp(s))
    q = dict(p)
    if which == "depth":
        q["depth"] = int(p["depth"]) + max(1, int(grow))
    else:
        q[which] = p[which] * grow if p[which] > 0 else 0.1 / p["failure_rate"] * (grow - 1)
    u0, u1 = util(t, **p), util(t, **q)
    expect(u1 <= u0 * (1 + 1e-12) + 1e-300, f"U rose from {u0} to {u1} when {which} grew", {**p, "T": t, "grown": which})


@prop("interval-eq10-literal", target="interval-model", theorem=f"{SPEC}#eq10")
@given(p=model_params(max_cl=5.0), s=st.floats(-4.0, 4.0))
def eq10_literal(p: dict[str, float], s: float, util: Any = utilization) -> None:
    """The implementation equals Eq. 10 as printed (mpmath, 50 digits) to a relative 1e-9.

    Parameters
    ----------
    p : dict of str to float
        Model parameters from :func:`model_params`.
    s : float
        Log-scale offset choosing T.
    util : callable, optional
        ``util(T, λ, c, R, n, δ) -> U``, the implementation checked.
    """
    c = p["checkpoint_cost"]
    t = c * (1 + math.exp(s))
    ref = literal_eq10(t, p)
    assume(ref > 1e-250)
    got = util(t, **p)
    expect(abs(got - ref) <= 1e-9 * ref, f"U({t}) = {got}, Eq. 10 gives {ref}", {**p, "T": t})


@prop("interval-dag-as-single", target="interval-model", theorem=f"{SPEC}#dag-as-single")
@given(p=model_params(), s=st.floats(-4.0, 4.0))
def dag_as_single(p: dict[str, float], s: float, util: Any = utilization) -> None:
    """Eq. 10 with (n, δ, R) equals Eq. 4 with restart cost R + (n − 1)δ (and n = 1 is Eq. 4).

    Parameters
    ----------
    p : dict of str to float
        Model parameters from :func:`model_params`.
    s : float
        Log-scale offset choosing T.
    util : callable, optional
        ``util(T, λ, c, R, n, δ) -> U``, the implementation checked.
    """
    c = p["checkpoint_cost"]
    t = c * (1 + math.exp(s))
    a = util(t, **p)
    b = util(t, p["failure_rate"], c, p["restart_cost"] + (p["depth"] - 1) * p["token_delay"], 1, 0.0)
    expect(abs(a - b) <= 1e-12 * max(a, b) + 1e-300, f"DAG U = {a} but single-process U with R' = {b}", {**p, "T": t})


def _register_measures() -> None:
    from rollcheck.properties.registry import measure

    far = "cλ ≥ 0.01 (beyond Young's first-order regime)"
    for name in ("interval-tstar-maximises", "interval-tstar-stationary", "interval-tstar-independent",
                 "interval-utilization-unit-range", "interval-utilization-monotone", "interval-eq10-literal",
                 "interval-dag-as-single"):
        measure(name, far, lambda p, **_: p["checkpoint_cost"] * p["failure_rate"] >= 0.01)
    measure("interval-tstar-young-limit", "cλ ≥ 1e-6 (Newton polish matters less)", lambda lam, x, **_: x >= 1e-6)


_register_measures()
