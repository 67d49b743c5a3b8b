"""Utilization of a checkpointing stream processor (Jayasekara et al., Eqs. 1, 3, 4, 5, 10).

The long-run fraction of time spent on useful work when a system checkpoints every ``T`` time
units at cost ``c``, fails as a Poisson process of rate ``λ`` (also while checkpointing and while
restarting), needs ``R`` to detect a failure and restart, and (for a DAG of operators) passes the
checkpoint token along a critical path of ``n`` operators with delay ``δ`` per hop.

Index conventions: all times are in one user-chosen unit and ``λ`` is per that unit. A *period*
``T`` includes its checkpoint cost ``c`` (the checkpoint completes at the end of the period), so
``T > c`` is required. ``n`` counts operators on the critical path including source and sink, so
the system-wide checkpoint completes ``(n − 1)·δ`` after the source took it. The theorems checked
by the properties are in ``specs/intervals.md``.

References
----------
.. [1] S. Jayasekara, A. Harwood, S. Karunasekera. A Utilization Model for Optimization of
   Checkpoint Intervals in Distributed Stream Processing Systems. Eqs. 1, 3, 4, 5, 10; §3, §4.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rollcheck.pyimpl.intervals._validate import (
    _check_common,
    _check_cost,
    _check_dag,
    _scalar_or_array,
)

__all__ = [
    "utilization_no_failure",
    "utilization_no_restart",
    "utilization_single",
    "utilization_dag_no_failure",
    "utilization_dag",
    "utilization",
]


def utilization_no_failure(interval: Any, checkpoint_cost: float) -> Any:
    """Utilization without failures, Eq. 1 of [1]: ``U = (T − c)/T``.

    Parameters
    ----------
    interval : float or array_like
        The checkpoint interval ``T``.
    checkpoint_cost : float
        The checkpoint cost ``c`` (below ``T``).

    Returns
    -------
    float or numpy.ndarray
        ``U``, shaped like ``interval``.

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

    Parameters
    ----------
    interval : float or array_like
        The checkpoint interval ``T``.
    failure_rate : float
        The failure rate ``λ`` (per time unit).
    checkpoint_cost : float
        The checkpoint cost ``c``.

    Returns
    -------
    float or numpy.ndarray
        ``U``, shaped like ``interval``.

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

    Parameters
    ----------
    interval : float or array_like
        The checkpoint interval ``T``.
    failure_rate : float
        The failure rate ``λ`` (per time unit, >= 0).
    checkpoint_cost : float
        The checkpoint cost ``c``.
    restart_cost : float, optional
        The restart cost ``R``.

    Returns
    -------
    float or numpy.ndarray
        ``U``, shaped like ``interval``.

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

    Parameters
    ----------
    interval : float or array_like
        The checkpoint interval ``T``.
    checkpoint_cost : float
        The checkpoint cost ``c``.
    depth : int
        ``n``, the operators on the critical path.
    token_delay : float
        ``δ``, the token's delay per edge.

    Returns
    -------
    float or numpy.ndarray
        ``U``, shaped like ``interval``.

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
    >>> from rollcheck.pyimpl.intervals.optimal import optimal_interval
    >>> t = optimal_interval(0.005, 5.0)
    >>> round(utilization_dag(t, 0.005, 5.0, 10.0, depth=50, token_delay=0.5), 3)
    0.667
    """
    t = _check_common(interval, failure_rate, checkpoint_cost, restart_cost, depth, token_delay)
    lam = float(failure_rate)
    if lam == 0.0:
        return _scalar_or_array((t - checkpoint_cost) / t)
    lost = lam * (restart_cost + (depth - 1) * token_delay)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        em = np.expm1(lam * t)
        u = lam * (t - checkpoint_cost) * np.exp(-lost) / em
    # λT so small that e^(λT) − 1 is 0 in floating point: the limit of λ(T − c)/(e^(λT) − 1) is (T − c)/T
    u = np.where(em == 0.0, (t - checkpoint_cost) / t * np.exp(-lost), u)
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

    Parameters
    ----------
    interval : float or array_like
        The checkpoint interval ``T``.
    failure_rate : float
        The failure rate ``λ`` (per time unit, >= 0).
    checkpoint_cost : float
        The checkpoint cost ``c``.
    restart_cost : float, optional
        The restart cost ``R``.
    depth : int, optional
        ``n``, the operators on the critical path (1: one process).
    token_delay : float, optional
        ``δ``, the token's delay per edge.

    Returns
    -------
    float or numpy.ndarray
        ``U``, shaped like ``interval``.

    Examples
    --------
    >>> round(utilization(30.0, 0.005, 5.0, 10.0), 4)
    0.7347
    """
    return utilization_dag(interval, failure_rate, checkpoint_cost, restart_cost, depth, token_delay)

