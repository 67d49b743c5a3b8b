"""Engine adapters: an engine's trace mapped onto the core vocabulary, checked by the one checker.

An engine whose recorder writes its own event kinds (prefixed ``<source>.``) plugs into the
checker with an :class:`Adapter` (what its header and events *mean* in the core vocabulary: its
:meth:`Adapter.events` yields the engine's events unchanged plus the core events they imply, each
carrying the ``seq`` of its origin and ``"derived": true``) and its own
:class:`~rollcheck.pyimpl.traces.plugin.TraceCheck` plug-ins, which read the engine's kinds in
``on_event``. ``docs/your-engine.md`` walks through a small one.

Examples
--------
An engine that logs ``toy.snap`` for its checkpoints, mapped onto core checkpoints:

>>> class Toy(Adapter):
...     sources = ("toy",)
...     def map_event(self, header, obj):
...         if obj["kind"] == "toy.snap":
...             return [derived(obj, "checkpoint", process=obj["node"], forced=False)]
...         return []
>>> evs = [(2, {"seq": 1, "kind": "toy.snap", "node": "a"})]
>>> [o["kind"] for _l, o in Toy().events({}, iter(evs))]
['toy.snap', 'checkpoint']
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

__all__ = ["Adapter", "derived"]


def derived(origin: dict[str, Any], kind: str, **fields: Any) -> dict[str, Any]:
    """A core event implied by the engine event ``origin`` (same ``seq``, marked ``derived``).

    Parameters
    ----------
    origin : dict
        The engine event.
    kind : str
        The core kind (``send``, ``deliver``, ...).
    **fields
        The core event's other fields.
    """
    return {"seq": origin["seq"], "kind": kind, "derived": True, **fields}


class Adapter:
    """Base class of an engine adapter.

    Subclasses set :attr:`sources` and override :meth:`header` (normalize the header: it must end
    up with ``processes``) and :meth:`map_event` (the core events one engine event implies), or
    :meth:`events` for mappings that need to hold events back.
    """

    #: The header ``source`` values this adapter serves.
    sources: tuple[str, ...] = ()

    def header(self, header: dict[str, Any]) -> dict[str, Any]:
        """The header as the core checker reads it (default: unchanged)."""
        return header

    def map_event(self, header: dict[str, Any], obj: dict[str, Any]) -> list[dict[str, Any]]:
        """Core events implied by one engine event, emitted right after it (default: none).

        Parameters
        ----------
        header : dict
            The trace's header.
        obj : dict
            The engine event.
        """
        return []

    def events(self, header: dict[str, Any], pairs: Iterable[tuple[int, dict[str, Any]]]
               ) -> Iterator[tuple[int, dict[str, Any]]]:
        """The events the checker reads: each engine event, then the core events it implies.

        Parameters
        ----------
        header : dict
            The trace's header.
        pairs : iterable of tuple
            ``(line, event)`` as read.

        Yields
        ------
        tuple
            ``(line, event)``, the implied core events after their origin.
        """
        for line, obj in pairs:
            yield line, obj
            for extra in self.map_event(header, obj):
                yield line, extra
