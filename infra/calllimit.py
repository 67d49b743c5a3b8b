"""Calls into the user's code bounded in time: ``--call-timeout``.

:func:`call_limited` runs the call in the calling thread and stops it with
:class:`~rollcheck.pyimpl.errors.UserCodeTimeout` (exit 2, naming the file, the method and the
limit): by ``SIGALRM`` in the main thread, by an asynchronous exception in another thread.
See docs/internals/infra.md#calllimit.

Examples
--------
>>> def spin():
...     while True:
...         pass
>>> call_limited(spin, limit=0.2, file="q.py", method="batches")
Traceback (most recent call last):
...
rollcheck.pyimpl.errors.UserCodeTimeout: q.py: batches: did not return within 0.2 s (--call-timeout)
>>> call_limited(sum, [1, 2], limit=5, file="q.py", method="sum")
3

References
----------
``specs/cli.md`` ("Faults the commands survive": user code that misbehaves).
"""

from __future__ import annotations

import ctypes
import math
import signal
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from rollcheck.pyimpl.errors import InvalidInputError, UserCodeTimeout

__all__ = ["DEFAULT_QUERY_CALL_TIMEOUT", "check_limit", "call_limited"]

#: Seconds a query/job module call may take by default (the contract's default).
DEFAULT_QUERY_CALL_TIMEOUT = 300.0

T = TypeVar("T")


class _Expired(BaseException):
    """Raised inside the user's call when its limit passed (not an Exception: not swallowed)."""


def check_limit(limit: float, location: str = "--call-timeout") -> float:
    """A positive, finite number of seconds, else :class:`InvalidInputError`.

    Parameters
    ----------
    limit : float
        The number to check.
    location : str, optional
        The flag or field named in the error.

    Returns
    -------
    float
        ``limit`` as a float.

    Examples
    --------
    >>> check_limit(2)
    2.0
    """
    try:
        x = float(limit)
    except (TypeError, ValueError):
        raise InvalidInputError(f"must be a number of seconds, got {limit!r}", location=location) from None
    if not math.isfinite(x) or x <= 0:
        raise InvalidInputError(f"must be a positive, finite number of seconds, got {limit!r}",
                                location=location)
    return x


def call_limited(fn: Callable[..., T], *args: Any, limit: float, file: str, method: str,
                 on_expire: Callable[[], Any] | None = None, **kwargs: Any) -> T:
    """``fn(*args, **kwargs)``, stopped with :class:`UserCodeTimeout` after ``limit`` seconds.

    Parameters
    ----------
    fn, args, kwargs
        The user's callable and its arguments.
    limit : float
        Seconds (positive).
    file, method : str
        Named in the error: the user's file and the method called.
    on_expire : callable, optional
        Called (from a timer thread) when the limit passes in a non-main thread, before the
        exception is raised there.
    """
    limit = check_limit(limit)
    if threading.current_thread() is threading.main_thread():
        return _in_main(fn, args, kwargs, limit, file, method)
    return _in_thread(fn, args, kwargs, limit, file, method, on_expire)


def _in_main(fn: Callable[..., T], args: Any, kwargs: Any, limit: float, file: str, method: str) -> T:
    outer_delay, outer_interval = signal.getitimer(signal.ITIMER_REAL)
    if 0 < outer_delay <= limit:  # an outer timer expires first: it stays in charge
        return fn(*args, **kwargs)

    def fire(signum: int, frame: Any) -> None:
        raise _Expired

    t0 = time.monotonic()
    previous = signal.signal(signal.SIGALRM, fire)
    try:
        signal.setitimer(signal.ITIMER_REAL, limit)
        try:
            return fn(*args, **kwargs)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
    except _Expired:
        raise UserCodeTimeout(file, method, limit) from None
    finally:
        signal.signal(signal.SIGALRM, previous)
        if outer_delay > 0:
            left = outer_delay - (time.monotonic() - t0)
            signal.setitimer(signal.ITIMER_REAL, max(left, 1e-3), outer_interval)


_SET_ASYNC_EXC = ctypes.pythonapi.PyThreadState_SetAsyncExc
_SET_ASYNC_EXC.argtypes = [ctypes.c_ulong, ctypes.py_object]
_SET_ASYNC_EXC.restype = ctypes.c_int


def _in_thread(fn: Callable[..., T], args: Any, kwargs: Any, limit: float, file: str, method: str,
               on_expire: Callable[[], Any] | None) -> T:
    ident = threading.get_ident()
    state = {"running": True, "fired": False}
    lock = threading.Lock()

    def expire() -> None:
        if on_expire is not None:
            try:
                on_expire()
            except Exception:  # noqa: BLE001 -- best effort (e.g. Spark already stopped)
                pass
        with lock:
            if state["running"]:
                state["fired"] = True
                _SET_ASYNC_EXC(ident, _Expired)

    timer = threading.Timer(limit, expire)
    timer.daemon = True
    timer.start()
    try:
        try:
            return fn(*args, **kwargs)
        finally:
            with lock:
                state["running"] = False
                fired = state["fired"]
            timer.cancel()
            if fired:  # the exception may still be pending: take it back if it was not raised
                _SET_ASYNC_EXC(ident, None)
    except _Expired:
        raise UserCodeTimeout(file, method, limit) from None
    except BaseException:
        if state["fired"]:  # e.g. a Spark action cancelled by on_expire: the limit is the cause
            raise UserCodeTimeout(file, method, limit) from None
        raise
