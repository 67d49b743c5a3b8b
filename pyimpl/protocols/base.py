"""The interface every communication-induced / uncoordinated checkpointing protocol implements.

A protocol is a set of *pure* transition functions over an immutable per-process state. A driver
(:func:`rollcheck.pyimpl.protocols.run.run_protocol`, or the dataflow simulator) owns the states and calls:

- ``st = proto.initial(i, n)`` once per process (for HMNR this runs the initial-checkpoint
  procedure: the state then describes C[i,0]);
- ``st = proto.on_checkpoint(st)`` for every checkpoint, basic or forced;
- ``st, pb = proto.on_send(st, dst)`` for every send; ``pb`` is the piggyback, an immutable
  value captured at send time (later transitions of the sender never change it);
- at every delivery of a message from ``src`` carrying ``pb``: first
  ``proto.must_force(st, src, pb)`` (decided *before* anything is merged); if true, the driver takes
  a forced checkpoint with ``st = proto.on_checkpoint(st)``; then ``st = proto.on_deliver(st, src, pb)``
  merges the piggyback and delivers.

Index conventions: processes are 0..n-1 (``specs/conventions.md``); the k-th checkpoint a process
takes after its initial one is C[i,k] of the resulting pattern.

References
----------
FERDiS paper §5.3 and §7.2.2; ``specs/protocols.md``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

__all__ = ["Protocol"]


class Protocol(ABC):
    """A checkpointing protocol as pure transition functions.

    Subclasses set ``name`` (the CLI name) and ``safe`` (whether the protocol is meant to guarantee
    that no checkpoint is useless; UC is not, the CIC protocols are).
    """

    name: str = "?"
    #: True when the protocol guarantees that no checkpoint is useless (no Z-cycle).
    zcycle_free: bool = False
    #: One-line description (shown by the CLI and the mutation catalogue).
    description: str = ""

    @abstractmethod
    def initial(self, i: int, n: int) -> Any:
        """State of process ``i`` of ``n`` right after its initial checkpoint C[i,0]."""

    @abstractmethod
    def on_checkpoint(self, st: Any) -> Any:
        """State after a checkpoint (basic or forced)."""

    @abstractmethod
    def on_send(self, st: Any, dst: int) -> tuple[Any, Any]:
        """``(state, piggyback)`` after sending a message to ``dst``."""

    @abstractmethod
    def must_force(self, st: Any, src: int, pb: Any) -> bool:
        """Whether a forced checkpoint must precede the delivery of a message from ``src``."""

    @abstractmethod
    def on_deliver(self, st: Any, src: int, pb: Any) -> Any:
        """State after merging ``pb`` and delivering the message from ``src``."""

    def __repr__(self) -> str:
        return f"<protocol {self.name}>"
