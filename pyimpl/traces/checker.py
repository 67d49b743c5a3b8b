"""The trace checker: the streamed view of a run plus the registered check plug-ins.

:class:`TraceChecker` assembles the generic plug-ins (:func:`~rollcheck.pyimpl.traces.checks.generic_checks`)
and any engine's own (``extra``) around one :class:`~rollcheck.pyimpl.traces.view.RunView`, which
reads the events once. The checks and what each means are in :mod:`rollcheck.pyimpl.traces.checks`;
the verdict is :class:`~rollcheck.pyimpl.verdict.Report` (one rule for every command).

References
----------
``specs/formats.md#trace-checks``; FERDiS paper §4, §5.3, §6.1, §7.2.5–7.2.8.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from rollcheck.pyimpl.pattern import Pattern
from rollcheck.pyimpl.traces.checks import (
    Segment,
    SegmentKeeper,
    generic_checks,
    load_reference,
    reference_from_list,
)
from rollcheck.pyimpl.traces.plugin import TraceCheck
from rollcheck.pyimpl.traces.view import CORE_KINDS, RunView, check_header
from rollcheck.pyimpl.verdict import Report

__all__ = ["CORE_KINDS", "Segment", "TraceChecker", "load_reference", "reference_from_list"]


class TraceChecker:
    """Check the events of one trace in a single pass with the generic checks plus ``extra`` ones.

    Parameters
    ----------
    header : dict
        The header line (``processes`` required; ``source`` names the engine's extension prefix).
    source : str, optional
        The file name, for error messages.
    protocol : Protocol, optional
        The protocol to check forced checkpoints against (already resolved).
    reference : Counter, optional
        Reference outputs (:func:`reference_from_list`).
    virtual : bool
        Survivors may keep their volatile state (virtual checkpoints).
    keep_segments : bool
        Keep the pattern before each recovery and the final one (:attr:`segments`).
    keep_first : bool
        Keep the pattern of the run before the first failure (``rollcheck trace to-pattern``).
    segment_limit : int, optional
        Keep segments only while the trace has at most this many events (TLC's automatic mode).
    tlc : tuple, optional
        ``(validate, model protocol or None, why not, requested)`` adds the ``tlc-trace`` check.
    extra : list of TraceCheck, optional
        An engine adapter's own plug-ins, reported after the generic ones.

    Examples
    --------
    >>> hdr = {"format": "rollcheck.trace/1", "source": "toy", "processes": ["a", "b"]}
    >>> evs = [{"seq": 1, "kind": "send", "process": "a", "message": "m", "to": "b"},
    ...        {"seq": 2, "kind": "deliver", "process": "b", "message": "m"},
    ...        {"seq": 3, "kind": "output", "process": "b", "key": "k", "value": 1},
    ...        {"seq": 4, "kind": "end"}]
    >>> ref = reference_from_list([{"process": "b", "key": "k", "value": 1}])
    >>> r = TraceChecker(hdr, reference=ref).run((k + 2, e) for k, e in enumerate(evs)).finish()
    >>> r.conformant, [(c.name, c.ok) for c in r.checks]   # doctest: +NORMALIZE_WHITESPACE
    (True, [('pattern-valid', True), ('recovery-line', None), ('log-replay', None),
            ('outputs-exactly-once', True)])
    """

    def __init__(self, header: dict[str, Any], source: str | None = None, *, protocol: Any = None,
                 reference: Counter[str] | None = None, virtual: bool = True,
                 keep_segments: bool = False, keep_first: bool = False,
                 segment_limit: int | None = None,
                 tlc: tuple[Callable[..., Any] | None, str | None, str, bool] | None = None,
                 extra: Sequence[TraceCheck] = ()):
        names, _engine = check_header(header, source)
        self.protocol = protocol
        self.keeper = SegmentKeeper(segment_limit) if keep_segments or tlc is not None else None
        checks = generic_checks(protocol=protocol, n=len(names), reference=reference, virtual=virtual,
                                keeper=self.keeper, tlc=tlc)
        self.view = RunView(header, [*checks, *extra], source, protocol=protocol, keep_first=keep_first)

    def run(self, pairs: Iterable[tuple[int, dict[str, Any]]]) -> TraceChecker:
        """Consume ``(line number, event object)`` pairs (events in ``seq`` order)."""
        self.view.run(pairs)
        return self

    def finish(self, truncated: bool = False, truncated_after_seq: int | None = None) -> Report:
        """Every check's result after the last event (``truncated``: the file ended mid-line).

        Parameters
        ----------
        truncated : bool, optional
            The file ended in an incomplete line.
        truncated_after_seq : int, optional
            The last ``seq`` before the incomplete line.
        """
        return self.view.finish(truncated, truncated_after_seq)

    @property
    def segments(self) -> list[Segment]:
        """The executions kept for further validators (after :meth:`finish`)."""
        return self.keeper.segments if self.keeper is not None else []

    @property
    def first_pattern(self) -> tuple[Pattern, list[int]] | None:
        """The effective execution at the first failure and its event seqs (None unless kept)."""
        return self.view.first_pattern

    @property
    def events(self) -> int:
        """Number of events read so far."""
        return self.view.events

    def final_pattern(self) -> Pattern:
        """The effective execution at this point, as a pattern."""
        return self.view.pattern()
