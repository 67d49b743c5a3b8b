"""Guard the user's protocol on pattern-level runs: its exceptions become :class:`UserCodeError`.

On the random phase, a given schedule and ``rollcheck protocol``, an exception in the user's code
or a malformed result is a one-line error (exit 2) naming the method, its arguments and the
schedule's event. The exhaustive walk guards its own calls
(:mod:`rollcheck.properties.explore.calls`).

References
----------
``specs/protocols.md#your-protocol``.
"""

from __future__ import annotations

from typing import Any

from rollcheck.properties.explore.calls import short_repr
from rollcheck.pyimpl.errors import InvalidInputError
from rollcheck.pyimpl.protocols import Protocol, resolve_protocol
from rollcheck.pyimpl.protocols.base import checkpoint_function

__all__ = ["UserCodeError", "GuardedProtocol", "guarded_protocol"]


class UserCodeError(InvalidInputError):
    """The user's protocol raised (or returned something malformed): bad input, exit code 2."""


class GuardedProtocol(Protocol):
    """A protocol that delegates to the user's and reports its failures as :class:`UserCodeError`.

    Any exception the user's code raises, or a malformed result, names the method, its arguments
    and the schedule's event.

    Parameters
    ----------
    inner : Protocol
        The user's protocol.
    label : str, optional
        The protocol as the user named it, kept as ``label`` (None: the class name).
    """

    def __init__(self, inner: Protocol, label: str | None = None):
        self.inner = inner
        self.label = label or type(inner).__name__
        self._ckpt = checkpoint_function(inner)
        self.name = str(inner.name)
        self.zcycle_free = bool(getattr(inner, "zcycle_free", False))
        self.event = -1
        self._after_force = False

    def _call(self, method: str, *args: Any) -> Any:
        fn = self._ckpt if method == "on_checkpoint" else getattr(self.inner, method)
        try:
            return fn(*args)
        except Exception as e:
            where = f"events[{self.event}]" if self.event >= 0 else "initial state"
            call = f"{method}({', '.join(short_repr(a) for a in args)})"
            raise UserCodeError(f"{call} raised {type(e).__name__}: {e}",
                                source=f"{type(self.inner).__name__}.{method}",
                                location=where) from e

    def reset(self) -> None:
        self.event = -1
        self._after_force = False

    def initial(self, i: int, n: int) -> Any:
        """The user's ``initial(i, n)``, guarded.

        Parameters
        ----------
        i : int
            The process.
        n : int
            The number of processes.

        Returns
        -------
        object
            The initial state.
        """
        return self._call("initial", i, n)

    def on_checkpoint(self, st: Any, forced: bool = False) -> Any:
        """The user's ``on_checkpoint``, guarded; counts the event unless it follows ``must_force``.

        Parameters
        ----------
        st : object
            The process's state, as the user's protocol returned it.
        forced : bool, optional
            Whether the checkpoint is forced.

        Returns
        -------
        object
            The state after the checkpoint.
        """
        if not self._after_force:
            self.event += 1
        self._after_force = False
        return self._call("on_checkpoint", st, forced)

    def on_send(self, st: Any, dst: int) -> tuple[Any, Any]:
        """The user's ``on_send``, guarded, its result checked to be a pair.

        Parameters
        ----------
        st : object
            The process's state, as the user's protocol returned it.
        dst : int
            The receiver.

        Returns
        -------
        tuple of (object, object)
            The state and the piggyback.
        """
        self.event += 1
        self._after_force = False
        r = self._call("on_send", st, dst)
        if not (isinstance(r, tuple) and len(r) == 2):
            raise UserCodeError(f"on_send must return (state, piggyback), returned {short_repr(r)}",
                                source=f"{type(self.inner).__name__}.on_send",
                                location=f"events[{self.event}]")
        return r

    def must_force(self, st: Any, src: int, pb: Any) -> bool:
        """The user's ``must_force``, guarded, its result checked to be a bool.

        Parameters
        ----------
        st : object
            The process's state, as the user's protocol returned it.
        src : int
            The sender.
        pb : object
            The message's piggyback.

        Returns
        -------
        bool
            Whether a forced checkpoint precedes the delivery.
        """
        self.event += 1
        r = self._call("must_force", st, src, pb)
        if r is not True and r is not False:
            raise UserCodeError(f"must_force must return a bool (True or False), returned "
                                f"{short_repr(r)} of type {type(r).__name__}",
                                source=f"{type(self.inner).__name__}.must_force",
                                location=f"events[{self.event}]")
        self._after_force = r
        return r

    def on_deliver(self, st: Any, src: int, pb: Any) -> Any:
        """The user's ``on_deliver``, guarded.

        Parameters
        ----------
        st : object
            The process's state, as the user's protocol returned it.
        src : int
            The sender.
        pb : object
            The message's piggyback.

        Returns
        -------
        object
            The state after the delivery.
        """
        self._after_force = False
        return self._call("on_deliver", st, src, pb)


def guarded_protocol(protocol: Any) -> Protocol:
    """Wrap ``protocol`` so that an exception in its code becomes a one-line :class:`UserCodeError`.

    Parameters
    ----------
    protocol
        Anything :func:`~rollcheck.pyimpl.protocols.resolve_protocol` accepts.

    Returns
    -------
    GuardedProtocol
    """
    return GuardedProtocol(resolve_protocol(protocol), protocol if isinstance(protocol, str) else None)
