"""How the Spark streaming checks plug into the shared trace checker.

:mod:`rollcheck.pyimpl.traces.plugin`.

:class:`SparkStream` feeds a :class:`~rollcheck.spark_replay.stream.view.StreamView` from the trace
(a collector, reporting nothing itself); :class:`StreamCheck` is one check ``fn(view)`` run after
the last event; :class:`EventListCheck` one check ``fn(header, events)`` over the trace's own
events. A field of an engine event that is not what the recorder writes (:data:`MALFORMED`) is bad
input naming the check, never a crash.
"""

from __future__ import annotations

from typing import Any

from rollcheck.pyimpl.errors import InvalidInputError
from rollcheck.pyimpl.traces.plugin import TraceCheck
from rollcheck.pyimpl.verdict import Check
from rollcheck.spark_replay.stream.view import StreamView

__all__ = ["MALFORMED", "SparkStream", "StreamCheck", "EventListCheck"]


#: What a malformed field of an engine event raises inside a check (bad input, exit 2).
MALFORMED = (TypeError, ValueError, KeyError, AttributeError, IndexError)


class SparkStream(TraceCheck):
    """Feeds a :class:`StreamView` from the trace (a collector: reports nothing itself)."""

    name = "spark-stream"
    needs = ("spark.*", "failure", "end")

    def __init__(self, view: StreamView):
        self.view = view

    def on_event(self, v: Any, line: int, obj: dict[str, Any]) -> None:
        """Feed one event to the view.

        Parameters
        ----------
        v : RunView
            The checker's view of the run (unused).
        line : int
            The event's line number in the trace file.
        obj : dict
            The event as read.
        """
        try:
            self.view.feed(obj)
        except MALFORMED as e:  # a field of the engine's event that is not what the recorder writes
            raise InvalidInputError(f"{obj['kind']}: malformed event ({type(e).__name__}: {e})",
                                    source=self.view.source,
                                    location=f"line {line} (seq {obj['seq']})") from None

    def finish(self, v: Any, results: dict[str, Check]) -> None:
        """Finish the view; no verdict of its own.

        Parameters
        ----------
        v : RunView
            The checker's view of the run (unused).
        results : dict
            The finished checks' results by name (unused).
        """
        self.view.close()
        return None


class StreamCheck(TraceCheck):
    """One Spark streaming check as a plug-in: ``fn(view) -> Check | None`` after the last event.

    ``at_end``: the check reads the run's end records; a recording that stopped before them
    leaves it out (``end-of-run`` says so, unchecked).

    Parameters
    ----------
    name : str
        The check's name.
    stream : SparkStream
        The collector whose view the check reads.
    fn : callable
        ``fn(view) -> Check | None``.
    at_end : bool, optional
        The check reads the run's end records (left out when the recording stopped before them).
    """

    after = ("spark-stream",)

    def __init__(self, name: str, stream: SparkStream, fn: Any, *, at_end: bool = False):
        self.name = name
        self.stream = stream
        self.fn = fn
        self.at_end = at_end

    def finish(self, v: Any, results: dict[str, Check]) -> Check | None:
        """Run the check over the finished view.

        Parameters
        ----------
        v : RunView
            The checker's view of the run (unused).
        results : dict
            The finished checks' results by name (unused).

        Returns
        -------
        Check or None
            The check's result; None when it does not apply to this recording.
        """
        sv = self.stream.view
        if self.at_end and not sv.ended:
            return None
        try:
            out: Check | None = self.fn(sv)
        except MALFORMED as e:
            raise InvalidInputError(f"{self.name}: the trace's records this check reads are malformed "
                                    f"({type(e).__name__}: {e})", source=sv.source) from None
        return out


class EventListCheck(TraceCheck):
    """A check written as ``fn(header, events) -> Check`` over the trace's own events.

    Not the core events the adapter derived. Collected during the pass: the way to plug in a check
    that needs the whole list, e.g. ``EventListCheck("kill-point", header, kill_point_struck)``.

    Parameters
    ----------
    name : str
        The check's name.
    header : dict
        The trace's header.
    fn : callable
        ``fn(header, events) -> Check | None``.
    source : str, optional
        The trace file, named by a malformed-record error.
    """

    def __init__(self, name: str, header: dict[str, Any], fn: Any, source: str | None = None):
        self.name = name
        self.header = header
        self.fn = fn
        self.source = source
        self.events: list[dict[str, Any]] = []

    def on_event(self, v: Any, line: int, obj: dict[str, Any]) -> None:
        """Keep every recorded (not derived) event.

        Parameters
        ----------
        v : RunView
            The checker's view of the run (unused).
        line : int
            The event's line number (unused).
        obj : dict
            The event as read.
        """
        if not obj.get("derived"):
            self.events.append(obj)

    def finish(self, v: Any, results: dict[str, Check]) -> Check | None:
        """Run the check over the kept events.

        Parameters
        ----------
        v : RunView
            The checker's view of the run (unused).
        results : dict
            The finished checks' results by name (unused).

        Returns
        -------
        Check or None
            The check's result; None when it does not apply to this recording.
        """
        try:
            out: Check | None = self.fn(self.header, self.events)
        except MALFORMED as e:
            raise InvalidInputError(f"{self.name}: the trace's records this check reads are malformed "
                                    f"({type(e).__name__}: {e})", source=self.source) from None
        return out
