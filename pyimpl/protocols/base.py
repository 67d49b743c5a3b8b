"""The interface every communication-induced / uncoordinated checkpointing protocol implements.

A protocol is a set of *pure* transition functions over an immutable per-process state. A driver
(:func:`rollcheck.pyimpl.protocols.run.run_protocol`, or the dataflow simulator) owns the states and calls:

- ``st = proto.initial(i, n)`` once per process (for HMNR this runs the initial-checkpoint
  procedure: the state then describes C[i,0]);
- ``st = proto.on_checkpoint(st, forced)`` for every checkpoint, ``forced`` telling a forced one
  from a basic one (a protocol may define the one-argument ``on_checkpoint(st)`` instead when it
  treats both alike; :func:`checkpoint_function` calls either form);
- ``st, pb = proto.on_send(st, dst)`` for every send; ``pb`` is the piggyback, an immutable
  value captured at send time (later transitions of the sender never change it);
- at every delivery of a message from ``src`` carrying ``pb``: first
  ``proto.must_force(st, src, pb)`` (decided *before* anything is merged); if true, the driver takes
  a forced checkpoint with ``st = proto.on_checkpoint(st, True)``; then ``st = proto.on_deliver(st, src, pb)``
  merges the piggyback and delivers.

Index conventions: processes are 0..n-1 (``specs/conventions.md``); the k-th checkpoint a process
takes after its initial one is C[i,k] of the resulting pattern.

References
----------
FERDiS paper §5.3 and §7.2.2; ``specs/protocols.md``.
"""

from __future__ import annotations

import functools
import inspect
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any

__all__ = ["Protocol", "checkpoint_function"]


class Protocol(ABC):
    """A checkpointing protocol as pure transition functions.

    Subclasses set ``name`` (the CLI name) and may claim properties that rollcheck checks:
    ``zcycle_free`` (no checkpoint is ever useless; UC does not claim it, the CIC protocols do),
    ``rollback_bound`` (a single failure never makes a process discard more than that many
    checkpoints) and ``symmetric`` (renaming the processes renames the protocol's decisions, so
    the explorer may check one schedule per renaming class; rollcheck verifies the claim on a
    sample before it relies on it).
    """

    name: str = "?"
    #: True when the protocol guarantees that no checkpoint is useless (no Z-cycle).
    zcycle_free: bool = False
    #: One-line description (shown by the CLI and the mutation catalogue).
    description: str = ""
    #: When an integer k: a single failure never rolls a process back over more than k checkpoints.
    rollback_bound: int | None = None
    #: True when the protocol treats all processes alike (decisions commute with renaming them).
    symmetric: bool = False

    @abstractmethod
    def initial(self, i: int, n: int) -> Any:
        """State of process ``i`` of ``n`` right after its initial checkpoint C[i,0].

        Parameters
        ----------
        i : int
            The process.
        n : int
            The number of processes.

        Returns
        -------
        object
            The protocol's state of the process (opaque to rollcheck).
        """

    @abstractmethod
    def on_checkpoint(self, st: Any, forced: bool = False) -> Any:
        """State after a checkpoint; ``forced`` is True for a forced one.

        A subclass may define ``on_checkpoint(self, st)`` without it (:func:`checkpoint_function`).

        Parameters
        ----------
        st : object
            The process's state.
        forced : bool, optional
            The checkpoint is forced, not basic.
        """

    @abstractmethod
    def on_send(self, st: Any, dst: int) -> tuple[Any, Any]:
        """``(state, piggyback)`` after sending a message to ``dst``.

        Parameters
        ----------
        st : object
            The sender's state.
        dst : int
            The receiving process.
        """

    @abstractmethod
    def must_force(self, st: Any, src: int, pb: Any) -> bool:
        """Whether a forced checkpoint must precede the delivery of a message from ``src``.

        Parameters
        ----------
        st : object
            The receiver's state.
        src : int
            The sending process.
        pb : object
            The message's piggyback (from :meth:`on_send`).
        """

    @abstractmethod
    def on_deliver(self, st: Any, src: int, pb: Any) -> Any:
        """State after merging ``pb`` and delivering the message from ``src``.

        Parameters
        ----------
        st : object
            The receiver's state (after the forced checkpoint, if any).
        src : int
            The sending process.
        pb : object
            The message's piggyback.
        """

    def __repr__(self) -> str:
        return f"<protocol {self.name}>"


def checkpoint_function(proto: Any) -> Callable[[Any, bool], Any]:
    """``f(st, forced)`` calling ``proto.on_checkpoint`` in the form it is written in.

    A method that takes two positional arguments (or ``*args``) receives ``forced``; a
    one-argument ``on_checkpoint(st)`` is called without it.

    Examples
    --------
    >>> class One:
    ...     def on_checkpoint(self, st): return st + 1
    >>> class Two:
    ...     def on_checkpoint(self, st, forced): return st + (10 if forced else 1)
    >>> checkpoint_function(One())(0, True), checkpoint_function(Two())(0, True)
    (1, 10)
    """
    fn = proto.on_checkpoint
    inner = getattr(fn, "__func__", None)
    if _takes_forced(inner if inner is not None else fn, inner is not None):
        return fn  # type: ignore[no-any-return]
    return lambda st, forced: fn(st)


@functools.lru_cache(maxsize=256)
def _takes_forced(fn: Any, bound: bool) -> bool:
    """Whether ``fn`` accepts a second positional argument after ``st``.

    ``bound``: ``fn`` is the function of a bound method, whose first parameter is the instance.
    """
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return False
    params = list(sig.parameters.values())
    if bound and params and params[0].kind in (params[0].POSITIONAL_ONLY,
                                               params[0].POSITIONAL_OR_KEYWORD):
        params = params[1:]
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) >= 2 or any(p.kind == p.VAR_POSITIONAL for p in params)
