"""The plug-in interface of the trace checker: a check is a small object fed by one streamed pass.

A :class:`TraceCheck` overrides the hooks it cares about (:data:`HOOKS`); the checker
(:class:`~rollcheck.pyimpl.traces.view.RunView`) reads the trace once, keeps the *effective
execution* (what the recoveries left standing), calls the hooks in event order, then ``finish``.

Examples
--------
A plug-in counting the outputs of one process, held when it saw any:

>>> from rollcheck.pyimpl.verdict import Check
>>> class SinkSaw(TraceCheck):
...     name = "sink-saw-outputs"
...     needs = ("output",)
...     def __init__(self): self.n = 0
...     def on_output(self, v, seq, i, key, value):
...         self.n += v.names[i] == "sink"
...     def finish(self, v, results):
...         return Check.held(self.name, f"{self.n} output(s)", examined=self.n)
>>> SinkSaw().hooks()
['on_output']

References
----------
``specs/formats.md#trace-checks``; ``specs/verdicts.md`` (the check states and the verdict).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rollcheck.pyimpl.pattern import Pattern
from rollcheck.pyimpl.verdict import Check

__all__ = ["TraceCheck", "Recovery", "HOOKS"]

#: The hook names the checker dispatches (in the order they are documented above).
HOOKS = ("on_event", "on_send", "on_deliver", "on_checkpoint", "on_output", "on_failure", "on_recovery",
         "after_cut", "on_orphan", "on_redeliver", "on_end")


@dataclass
class Recovery:
    """What a ``recovery`` event restored, as the checker derived it from the trace.

    Attributes
    ----------
    pattern : Pattern
        The effective execution just before the recovery.
    cut : list of int
        The restored line as checkpoint indices (volatile index: the process kept its state).
    limit : list of int or None
        Per process, the restored checkpoint index, or None (volatile).
    never : list of str
        The checkpoints the event names that the trace never shows.
    transit : list of str
        The channel state of the restored line (message ids).
    claimed_transit : list of str
        The event's own ``in_transit``.
    """

    seq: int
    failed: list[int]
    pattern: Pattern
    seqs: list[int]
    cut: list[int]
    limit: list[int | None]
    never: list[str]
    transit: list[str]
    claimed_transit: list[str]
    given: set[int] = field(default_factory=set)


class TraceCheck:
    """Base class of a trace check plug-in.

    In every hook ``v`` is the :class:`~rollcheck.pyimpl.traces.view.RunView` and processes are
    indices into ``v.names``; a hook the plug-in does not override is never called.

    Attributes
    ----------
    name : str
        The check's name as users see it.
    needs : tuple of str
        What the check reads from the trace (core kinds, ``protocol``, ``reference``, an engine's
        kinds): documentation for whoever composes checks; the registry
        (:func:`~rollcheck.pyimpl.traces.checks.generic_checks`) leaves a check out when its input
        is not given.
    after : tuple of str
        Names of checks whose results :meth:`finish` reads (they are finished first).
    """

    name: str = ""
    needs: tuple[str, ...] = ()
    after: tuple[str, ...] = ()

    def hooks(self) -> list[str]:
        """The hooks this plug-in overrides (the only ones the checker calls on it)."""
        return [h for h in HOOKS if getattr(type(self), h, None) is not getattr(TraceCheck, h, None)]

    # the hooks: overridden by the plug-ins that need them
    def on_event(self, v: Any, line: int, obj: dict[str, Any]) -> None:
        """Every event as its raw JSON object, before the core hooks (engines read their kinds).

        Parameters
        ----------
        v : RunView
            The checker's view of the run.
        line : int
            The event's line number in the trace file.
        obj : dict
            The event as read, before any check of its fields.
        """

    def on_send(self, v: Any, seq: int, i: int, j: int, mid: str) -> None:
        """A send of message ``mid`` from process ``i`` to ``j``.

        Parameters
        ----------
        v : RunView
            The checker's view of the run.
        seq : int
            The event's ``seq``.
        i, j : int
            The sending and the receiving process.
        mid : str
            The message id.
        """

    def on_deliver(self, v: Any, seq: int, i: int, src: int, mid: str, replayed: bool) -> None:
        """A delivery of ``mid`` from ``src`` at ``i`` (``replayed``: replayed from a log).

        Parameters
        ----------
        v : RunView
            The checker's view of the run.
        seq : int
            The event's ``seq``.
        i : int
            The delivering process.
        src : int
            The process that sent the message.
        mid : str
            The message id.
        replayed : bool
            True when the event says the delivery was replayed from a log.
        """

    def on_checkpoint(self, v: Any, seq: int, i: int, forced: bool, index: Any) -> None:
        """A checkpoint of ``i``; ``v.count[i]`` is already the new checkpoint's number.

        Parameters
        ----------
        v : RunView
            The checker's view of the run.
        seq : int
            The event's ``seq``.
        i : int
            The checkpointing process.
        forced : bool
            The event's ``forced`` flag.
        index : int or None
            The event's own ``index``, or None when it gives none.
        """

    def on_output(self, v: Any, seq: int, i: int, key: Any, value: Any) -> None:
        """An output ``key``/``value`` of process ``i``.

        Parameters
        ----------
        v : RunView
            The checker's view of the run.
        seq : int
            The event's ``seq``.
        i : int
            The process that wrote the output.
        key, value : object
            The event's ``key`` and ``value`` as decoded from JSON.
        """

    def on_failure(self, v: Any, seq: int, procs: list[int]) -> None:
        """A failure of the processes ``procs``.

        Parameters
        ----------
        v : RunView
            The checker's view of the run.
        seq : int
            The event's ``seq``.
        procs : list of int
            The failed processes.
        """

    def on_recovery(self, v: Any, rec: Recovery) -> None:
        """A recovery, before the rolled-back events are removed.

        Parameters
        ----------
        v : RunView
            The checker's view of the run.
        rec : Recovery
            What the recovery restored.
        """

    def after_cut(self, v: Any, rec: Recovery) -> None:
        """A recovery, after the rolled-back events were removed.

        Parameters
        ----------
        v : RunView
            The checker's view of the run, already cut back to the restored line.
        rec : Recovery
            What the recovery restored.
        """

    def on_orphan(self, v: Any, seq: int, i: int, mid: str, undone_at: int) -> None:
        """A delivery whose send a recovery undid at ``undone_at`` (the event is dropped).

        Parameters
        ----------
        v : RunView
            The checker's view of the run.
        seq : int
            The delivery event's ``seq``.
        i : int
            The delivering process.
        mid : str
            The message id.
        undone_at : int
            The ``seq`` of the recovery that undid the send.
        """

    def on_redeliver(self, v: Any, seq: int, i: int, mid: str) -> None:
        """A replayed delivery of a message delivered after the recovery (dropped).

        Parameters
        ----------
        v : RunView
            The checker's view of the run.
        seq : int
            The delivery event's ``seq``.
        i : int
            The delivering process.
        mid : str
            The message id.
        """

    def on_end(self, v: Any, seq: int) -> None:
        """The ``end`` event.

        Parameters
        ----------
        v : RunView
            The checker's view of the run.
        seq : int
            The ``end`` event's ``seq``.
        """

    def finish(self, v: Any, results: dict[str, Check]) -> Check | list[Check] | None:
        """The check's result after the last event (None: nothing to report).

        Parameters
        ----------
        v : RunView
            The checker's view of the run.
        results : dict of str to Check
            The checks of the plug-ins finished before this one (those without ``after``), so a
            check whose input derives from another one's violation can say it follows from it.

        Returns
        -------
        Check, list of Check or None
        """
        raise NotImplementedError(f"{type(self).__name__}.finish")
