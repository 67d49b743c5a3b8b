"""The plug-in interface of the trace checker: a check is a small object fed by one streamed pass.

A :class:`TraceCheck` has a ``name``, says what it ``needs`` from the trace (documentation: the
registry, :func:`~rollcheck.pyimpl.traces.checks.generic_checks`, leaves a check out when its input
is not given), and overrides the hooks it cares about. The
checker (:class:`~rollcheck.pyimpl.traces.view.RunView`) reads the trace once, validates the core
vocabulary, keeps the *effective execution* (what the recoveries so far left standing) and calls
each plug-in's hooks in event order; at the end it asks every plug-in for its result, a
:class:`~rollcheck.pyimpl.verdict.Check` (or several, or None when it has nothing to say).

Hooks (all optional; ``v`` is the :class:`~rollcheck.pyimpl.traces.view.RunView`, processes are
indices into ``v.names``):

``on_send(v, seq, i, j, mid)``, ``on_deliver(v, seq, i, src, mid, replayed)``,
``on_checkpoint(v, seq, i, forced, index)`` (``v.count[i]`` is already the new checkpoint's number),
``on_output(v, seq, i, key, value)``, ``on_failure(v, seq, procs)``,
``on_recovery(v, rec)`` (before the rolled-back events are removed), ``after_cut(v, rec)``,
``on_orphan(v, seq, i, mid, undone_at)`` (a delivery whose send a recovery undid; the event is
dropped), ``on_redeliver(v, seq, i, mid)`` (a ``replayed`` delivery of a message already delivered
after the recovery; dropped), ``on_end(v, seq)``, ``on_event(v, line, obj)`` (every event, the raw
JSON object, before the core hooks: engine plug-ins read their own kinds here).

``finish(v, results)`` returns the check(s); ``results`` maps the names of the plug-ins finished
before it (those without ``after``) to their checks, so a check whose input derives from another
one's violation can say it is a consequence of it.

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

    ``pattern`` is the effective execution just before the recovery, ``cut`` the restored line
    as checkpoint indices (the volatile index of a process that kept its state), ``limit`` per
    process the restored checkpoint index or None (volatile), ``never`` the checkpoints the event
    names that the trace never shows, ``transit`` the channel state of the restored line (message
    ids), ``claimed_transit`` the event's own ``in_transit``.
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
    """Base class of a trace check plug-in (module docstring).

    Attributes
    ----------
    name : str
        The check's name as users see it.
    needs : tuple of str
        What the check reads from the trace (core kinds, ``protocol``, ``reference``, an engine's
        kinds): documentation for whoever composes checks.
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
    def on_event(self, v: Any, line: int, obj: dict[str, Any]) -> None: ...
    def on_send(self, v: Any, seq: int, i: int, j: int, mid: str) -> None: ...
    def on_deliver(self, v: Any, seq: int, i: int, src: int, mid: str, replayed: bool) -> None: ...
    def on_checkpoint(self, v: Any, seq: int, i: int, forced: bool, index: Any) -> None: ...
    def on_output(self, v: Any, seq: int, i: int, key: Any, value: Any) -> None: ...
    def on_failure(self, v: Any, seq: int, procs: list[int]) -> None: ...
    def on_recovery(self, v: Any, rec: Recovery) -> None: ...
    def after_cut(self, v: Any, rec: Recovery) -> None: ...
    def on_orphan(self, v: Any, seq: int, i: int, mid: str, undone_at: int) -> None: ...
    def on_redeliver(self, v: Any, seq: int, i: int, mid: str) -> None: ...
    def on_end(self, v: Any, seq: int) -> None: ...

    def finish(self, v: Any, results: dict[str, Check]) -> Check | list[Check] | None:
        """The check's result after the last event (None: nothing to report)."""
        raise NotImplementedError(f"{type(self).__name__}.finish")
