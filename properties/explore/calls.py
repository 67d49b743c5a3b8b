"""Calling the user's protocol: type-checked, bounded in time, failures named.

Results are type-checked, calls bounded in time by one :class:`Watchdog` thread, and (in a
checking :class:`ProtocolCalls`) in-place mutation and uncopyable states refused, naming the
method. See docs/internals/properties.md#explore-calls.

References
----------
``specs/protocols.md#your-protocol`` (the interface and what is checked about the user's code).
"""

from __future__ import annotations

import ctypes
import io
import pickle
import signal
import sys
import threading
import time
import types
from types import FrameType
from typing import Any

from rollcheck.pyimpl.errors import InvalidInputError
from rollcheck.pyimpl.protocols.base import Protocol, checkpoint_function

__all__ = ["ProtocolCodeError", "CallTimeout", "ProtocolCalls", "Watchdog", "short_repr",
           "DEFAULT_CALL_TIMEOUT", "method_codes", "method_source", "snapshot", "NotCopyable"]

#: Seconds one protocol method call may take (``--call-timeout``).
DEFAULT_CALL_TIMEOUT = 10.0


def short_repr(v: Any, limit: int = 80) -> str:
    """``repr(v)`` cut to ``limit`` characters."""
    try:
        s = repr(v)
    except Exception as e:  # a user's __repr__ that raises
        s = f"<{type(v).__name__}: repr raised {type(e).__name__}>"
    return s if len(s) <= limit else s[: limit - 3] + "..."


class NotCopyable(Exception):
    """A value that :func:`snapshot` cannot copy (the pickling error is ``__cause__``)."""


class _SnapshotPickler(pickle.Pickler):
    """Pickles classes and functions by identity.

    A state whose class lives in a user's file (not importable by name) or a local class can
    still be snapshotted.
    """

    def __init__(self, buf: io.BytesIO, refs: dict[int, Any]):
        super().__init__(buf, protocol=pickle.HIGHEST_PROTOCOL)
        self.refs = refs

    def persistent_id(self, obj: Any) -> Any:
        if isinstance(obj, (type, types.FunctionType, types.BuiltinFunctionType, types.ModuleType)):
            self.refs[id(obj)] = obj
            return id(obj)
        return None


class _SnapshotUnpickler(pickle.Unpickler):
    def __init__(self, data: bytes, refs: dict[int, Any]):
        super().__init__(io.BytesIO(data))
        self.refs = refs

    def persistent_load(self, pid: Any) -> Any:
        return self.refs[pid]


def snapshot(value: Any, refs: dict[int, Any] | None = None) -> bytes:
    """A byte image of ``value``: equal images for equal structures, a new one after a change.

    Classes and functions are recorded by identity (into ``refs`` when given), so a state whose
    class is not importable by name still has an image; a value holding something that cannot be
    copied at all (a lock, a generator, an open file) raises :class:`NotCopyable`.

    Examples
    --------
    >>> snapshot((1, [2])) == snapshot((1, [2])), snapshot((1, [2])) == snapshot((1, [3]))
    (True, False)
    >>> import threading
    >>> try:
    ...     snapshot([threading.Lock()])
    ... except NotCopyable as e:
    ...     print(e)
    TypeError: cannot pickle '_thread.lock' object
    """
    buf = io.BytesIO()
    try:
        _SnapshotPickler(buf, {} if refs is None else refs).dump(value)
    except RecursionError as e:
        raise NotCopyable("RecursionError: the value is nested too deeply") from e
    except Exception as e:
        raise NotCopyable(f"{type(e).__name__}: {e}") from e
    return buf.getvalue()


def _restore(data: bytes, refs: dict[int, Any]) -> Any:
    return _SnapshotUnpickler(data, refs).load()


class ProtocolCodeError(InvalidInputError):
    """The user's protocol misbehaved: bad input, exit code 2.

    It raised, returned a wrong type, mutated its argument, or overran its time limit.

    Attributes
    ----------
    method : str
        The protocol method.
    kind : {"raised", "type", "mutated", "not-copyable", "nondeterministic", "timeout"}
    word : tuple or None
        The schedule (explorer events) on which it happened, when known.
    """

    def __init__(self, reason: str, *, method: str, kind: str, source: str | None = None,
                 location: str | None = None, word: tuple[Any, ...] | None = None):
        super().__init__(reason, source=source, location=location)
        self.method = method
        self.kind = kind
        self.word = word

    def __reduce__(self) -> Any:  # crosses process boundaries (workers, Spark tasks)
        return (_rebuild, (self.reason, self.method, self.kind, self.source, self.location, self.word))


def _rebuild(reason: str, method: str, kind: str, source: str | None, location: str | None,
             word: Any) -> ProtocolCodeError:
    return ProtocolCodeError(reason, method=method, kind=kind, source=source, location=location,
                             word=word)


def method_source(label: str, cls: str, method: str) -> str:
    """How an error names the method: ``path/file.py:Class.method``, or ``Class.method``.

    Examples
    --------
    >>> method_source("p.py:Mine", "Mine", "must_force"), method_source("Mine", "Mine", "on_send")
    ('p.py:Mine.must_force', 'Mine.on_send')
    """
    if label == cls or label.endswith(f":{cls}"):
        return f"{label}.{method}"
    return f"{label} ({cls}.{method})"


class CallTimeout(BaseException):
    """Raised inside the calling thread when a protocol call overran its limit.

    A BaseException, so that the user's ``except Exception`` does not swallow it.
    """


class ProtocolCalls:
    """The five protocol methods, guarded.

    Parameters
    ----------
    proto : Protocol
        The user's protocol object.
    label : str
        How the protocol is named in messages (its spec, e.g. ``path/file.py:Class``).
    checking : bool
        Snapshot every call's arguments (:func:`snapshot`) and refuse a method that changed them
        or that returned a state or piggyback that cannot be copied, check the result types and
        name the method in every error. False: the methods are the user's own
        functions (no overhead; the walk checks ``must_force``'s result and replays a failing
        schedule with a checking instance to name the error).

    Examples
    --------
    >>> from rollcheck.pyimpl.protocols import BCS
    >>> c = ProtocolCalls(BCS(), "bcs")
    >>> st = c.initial(0, 2)
    >>> st, pb = c.on_send(c.on_checkpoint(st, False), 1)
    >>> c.must_force(c.initial(1, 2), 0, pb)
    True
    """

    def __init__(self, proto: Protocol, label: str, checking: bool = False):
        self.proto = proto
        self.label = label
        self.cls = type(proto).__name__
        self.checking = checking
        self._ckpt = checkpoint_function(proto)
        self._init = proto.initial
        self._send = proto.on_send
        self._force = proto.must_force
        self._deliver = proto.on_deliver
        if not checking:  # the fast form: the user's functions themselves (the walk checks types)
            self.on_checkpoint = self._ckpt  # type: ignore[method-assign, assignment]
            self.on_send = self._send  # type: ignore[method-assign]
            self.must_force = self._force  # type: ignore[method-assign]
            self.on_deliver = self._deliver  # type: ignore[method-assign]

    def fail(self, method: str, kind: str, reason: str) -> ProtocolCodeError:
        """A :class:`ProtocolCodeError` about ``method``."""
        return ProtocolCodeError(reason, method=method, kind=kind,
                                 source=method_source(self.label, self.cls, method))

    def _call(self, method: str, fn: Any, args: tuple[Any, ...], watched: tuple[int, ...]) -> Any:
        before: bytes | None = None
        refs: dict[int, Any] | None = None
        if self.checking and watched:
            refs = {}
            try:
                before = snapshot(tuple(args[k] for k in watched), refs)
            except NotCopyable:  # an argument comes from a checked result or from rollcheck
                before = None
        try:
            r = fn(*args)
        except CallTimeout:
            raise
        except Exception as e:
            call = f"{method}({', '.join(short_repr(a) for a in args)})"
            raise self.fail(method, "raised", f"{call} raised {type(e).__name__}: {e}") from e
        if before is not None:
            try:
                after = snapshot(tuple(args[k] for k in watched))
            except NotCopyable:
                after = None  # it could be copied before the call: it was changed in place
            if after != before:
                assert refs is not None
                raise self.fail(method, "mutated",
                                f"{method} changed its state argument in place (states must be "
                                f"immutable: return a new value, e.g. a tuple or a NamedTuple); "
                                f"argument was {short_repr(_restore(before, refs)[0])}")
        if self.checking and method in ("initial", "on_checkpoint", "on_deliver"):
            self._copyable(method, r, "state")
        return r

    def _copyable(self, method: str, value: Any, what: str) -> None:
        try:
            snapshot(value)
        except NotCopyable as e:
            raise self.fail(method, "not-copyable",
                            f"{method} returned a {what} that cannot be copied ({e}): the explorer "
                            f"shares states between schedules, so a state must be a plain value "
                            f"(numbers, tuples, NamedTuples, frozensets, ...) returned anew by "
                            f"every method; returned {short_repr(value)}") from None

    def initial(self, i: int, n: int) -> Any:
        """``initial(i, n)``."""
        return self._call("initial", self._init, (i, n), ())

    def on_checkpoint(self, st: Any, forced: bool) -> Any:
        """``on_checkpoint(st, forced)`` (or ``on_checkpoint(st)`` for a one-argument method)."""
        return self._call("on_checkpoint", self._ckpt, (st, forced), (0,))

    def on_send(self, st: Any, dst: int) -> tuple[Any, Any]:
        """``on_send(st, dst)``, checked to return a pair."""
        r = self._call("on_send", self._send, (st, dst), (0,))
        if type(r) is not tuple or len(r) != 2:
            if not (isinstance(r, tuple) and len(r) == 2):
                raise self.fail("on_send", "type",
                                f"on_send must return (state, piggyback), returned {short_repr(r)}")
        if self.checking:
            self._copyable("on_send", r[0], "state")
            self._copyable("on_send", r[1], "piggyback")
        return r

    def must_force(self, st: Any, src: int, pb: Any) -> bool:
        """``must_force(st, src, pb)``, checked to return a real ``bool``."""
        r = self._call("must_force", self._force, (st, src, pb), (0, 2))
        if r is not True and r is not False:
            raise self.fail("must_force", "type",
                            f"must_force must return a bool (True or False), returned {short_repr(r)} "
                            f"of type {type(r).__name__}")
        return r

    def on_deliver(self, st: Any, src: int, pb: Any) -> Any:
        """``on_deliver(st, src, pb)``."""
        return self._call("on_deliver", self._deliver, (st, src, pb), (0, 2))


class Watchdog:
    """Interrupts a protocol call that overran ``limit`` seconds (one thread, not one per call).

    The thread wakes a few times per limit and looks at the watched thread's stack: if the same
    call of a protocol method (the same frame) is still running after ``limit`` seconds, it
    interrupts that thread — with a signal when it is the main thread (so that a blocking
    ``sleep`` is interrupted too), with an asynchronous exception otherwise — which raises
    :class:`CallTimeout` there. Nothing is added to the calls themselves, and nothing is left
    running after ``__exit__``.

    Parameters
    ----------
    methods : dict
        Code object -> method name, for the protocol's methods.
    limit : float or None
        Seconds per call; None or <= 0 disables the watchdog.

    Examples
    --------
    >>> from rollcheck.pyimpl.protocols import BCS
    >>> with Watchdog(method_codes(BCS()), 5.0) as w:
    ...     _ = BCS().initial(0, 2)
    >>> w.fired
    False
    """

    def __init__(self, methods: dict[Any, str], limit: float | None):
        self.methods = methods
        self.limit = limit
        self.fired = False
        self.method = ""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._target = threading.get_ident()
        self._old_handler: Any = None
        self._main = threading.current_thread() is threading.main_thread()

    def __enter__(self) -> Watchdog:
        if not self.limit or self.limit <= 0 or not self.methods:
            return self
        self._target = threading.get_ident()
        if self._main:
            try:
                self._old_handler = signal.signal(signal.SIGALRM, self._on_signal)
            except (ValueError, OSError):
                self._main = False
        self._thread = threading.Thread(target=self._watch, name="rollcheck-call-watchdog",
                                        daemon=True)
        self._thread.start()
        return self

    def _on_signal(self, signum: int, frame: Any) -> None:
        if self.fired:
            raise CallTimeout(self.method)

    def _user_frame(self) -> Any:
        frame = sys._current_frames().get(self._target)
        found = None
        while frame is not None:
            if frame.f_code in self.methods:
                found = frame  # keep the outermost: the call rollcheck made
            frame = frame.f_back
        return found

    def _watch(self) -> None:
        assert self.limit is not None
        step = min(0.25, self.limit / 4)
        held: FrameType | None = None
        since = time.monotonic()
        while not self._stop.wait(step):
            now = time.monotonic()
            frame = self._user_frame()
            if frame is None or frame is not held:
                held, since = frame, now  # holding the frame: a new call is a new object
                continue
            if now - since >= self.limit:
                assert frame is not None  # narrowed above: frame is the held one
                self.fired = True
                self.method = self.methods[frame.f_code]
                if self._main:
                    # a real signal (not interrupt_main's simulated one): a blocking sleep or read
                    # in the user's code returns with EINTR and the handler raises there
                    signal.pthread_kill(self._target, signal.SIGALRM)
                else:
                    ctypes.pythonapi.PyThreadState_SetAsyncExc(
                        ctypes.c_ulong(self._target), ctypes.py_object(CallTimeout))
                since = now  # again after another limit if the call swallowed it
        held = None

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self._main and self._old_handler is not None:
            signal.signal(signal.SIGALRM, self._old_handler)
            self._old_handler = None


def method_codes(proto: Any) -> dict[Any, str]:
    """Code object -> name of each of the protocol's five methods (those written in Python)."""
    out: dict[Any, str] = {}
    for name in ("initial", "on_checkpoint", "on_send", "must_force", "on_deliver"):
        fn = getattr(type(proto), name, None)
        code = getattr(fn, "__code__", None)
        if code is not None:
            out[code] = name
    return out
