"""``tlc-trace``: the executions between failures validated by TLC against the protocol's TLA+ model.

The plug-in keeps the effective execution before each recovery and the final one as
:class:`Segment` objects and hands them to a *validator* given by the caller (``pyimpl`` imports
no model checker: the command line binds :func:`rollcheck.tla.trace.validate_segments`), called
as ``validate(protocol_name, segments) -> (ok, detail, offending seq)`` with ``ok`` None when
TLC could not decide.

Honesty rules: a TLC that could not run (no Java, a timeout) leaves the check *unchecked*, never
held. TLC is not applicable when the protocol has no TLA+ model, or when the trace is larger than
the automatic limit and ``--tlc`` was not given. An execution that follows a recovery the
``recovery-line`` check found wrong is derived from that violation: it is validated separately,
and a rejection there is reported as a *consequence* of ``recovery-line`` (the wrong recovery is
the root cause to fix, not a correct forced checkpoint that looks wrong in the execution the
engine continued with).

References
----------
FERDiS paper §5.3; ``specs/formats.md#trace-checks`` (TLC trace validation).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from typing_extensions import override

from rollcheck.pyimpl.pattern import Pattern
from rollcheck.pyimpl.traces.plugin import Recovery, TraceCheck
from rollcheck.pyimpl.verdict import Check

__all__ = ["Segment", "SegmentKeeper", "TlcTrace"]


@dataclass
class Segment:
    """An execution handed to further validators (TLC): a pattern and the seq of each event.

    ``label`` says which part of the trace it is; ``given`` holds the positions of checkpoints
    that a recovery restored (a restored forced checkpoint is a given one afterwards: the delivery
    it preceded was undone); ``after_recovery`` the seq of the recovery it follows (None: the run
    before the first recovery).
    """

    label: str
    pattern: Pattern
    seqs: list[int]
    given: set[int] = field(default_factory=set)
    after_recovery: int | None = None


class SegmentKeeper(TraceCheck):
    """Keeps the execution before each recovery and the final one (reports nothing itself).

    ``limit``: keep segments only while the trace has at most this many events.
    """

    name = "segments"
    needs = ("send", "deliver", "checkpoint", "recovery")

    def __init__(self, limit: int | None = None):
        self.limit = limit
        self.segments: list[Segment] = []
        self.dropped = False
        self._last_rec: int | None = None

    def _keeping(self, v: Any) -> bool:
        if self.limit is not None and v.events > self.limit:
            self.segments.clear()
            self.dropped = True
        return not self.dropped

    @override
    def on_recovery(self, v: Any, rec: Recovery) -> None:
        if self._keeping(v):
            self.segments.append(Segment(f"before the recovery at seq {rec.seq}", rec.pattern, rec.seqs,
                                         set(rec.given), self._last_rec))
        self._last_rec = rec.seq

    @override
    def finish(self, v: Any, results: dict[str, Check]) -> None:
        if self._keeping(v):
            seqs = v.seqs.tolist()
            given = {k for k, s in enumerate(seqs) if s in v.given_seqs}
            self.segments.append(Segment("final effective execution", v.pattern(), seqs, given, self._last_rec))
        return None


class TlcTrace(TraceCheck):
    """TLC trace validation of the kept segments (module docstring).

    Parameters
    ----------
    keeper : SegmentKeeper
        The plug-in that keeps the segments (listed before this one).
    validate : callable or None
        ``validate(protocol, segments) -> (ok, detail, seq)``; None: no validator available.
    protocol : str or None
        The TLA+ model's protocol name; None when the protocol has no model (not applicable).
    why_not : str, optional
        Why TLC does not apply (no model, a trace above the automatic limit), when ``protocol`` is None.
    requested : bool
        The user asked for TLC (``--tlc``): a missing protocol is then unchecked, not not-applicable.
    """

    name = "tlc-trace"
    needs = ("protocol with a TLA+ model", "send", "deliver", "checkpoint")
    after = ("recovery-line",)

    def __init__(self, keeper: SegmentKeeper, validate: Callable[..., tuple[bool | None, str, int | None]] | None,
                 protocol: str | None, *, why_not: str = "", requested: bool = False):
        self.keeper = keeper
        self.validate = validate
        self.protocol = protocol
        self.why_not = why_not
        self.requested = requested

    @override
    def finish(self, v: Any, results: dict[str, Check]) -> Check:
        if self.protocol is None:
            if self.requested:
                return Check.unchecked(self.name, f"TLC was requested but cannot run: {self.why_not}")
            return Check.not_applicable(self.name, self.why_not or "no TLA+ model")
        if self.keeper.dropped:
            return Check.not_applicable(self.name, f"off above {self.keeper.limit} events ({v.events} here); "
                                        "give --tlc to run it", enabled_by="--tlc")
        if self.validate is None:
            return Check.unchecked(self.name, "no TLC validator available")
        segs = self.keeper.segments
        rl = results.get("recovery-line")
        wrong = rl.offending_seq if rl is not None and rl.ok is False else None
        if wrong is None:
            ok, detail, seq = self.validate(self.protocol, segs)
            return self._result(ok, detail, seq, None)
        # executions the engine continued with after the wrong recovery: validated apart
        own = [s for s in segs if s.after_recovery is None or s.after_recovery < wrong]
        derived = [s for s in segs if s not in own]
        if own:
            ok, detail, seq = self.validate(self.protocol, own)
            if ok is not True:
                return self._result(ok, detail, seq, None)
        if not derived:
            return self._result(True, detail, None, None) if own else Check.not_applicable(
                self.name, "no execution to validate")
        ok2, detail2, seq2 = self.validate(self.protocol, derived)
        if ok2 is False:
            return self._result(False, f"{detail2} — in the execution left by the wrong recovery at seq {wrong}",
                                seq2, "recovery-line")
        if ok2 is None:
            return self._result(None, detail2, None, None)
        return self._result(True, (detail + "; " if own else "") + detail2, None, None)

    def _result(self, ok: bool | None, detail: str, seq: int | None, root: str | None) -> Check:
        if ok is True:
            return Check.held(self.name, detail)
        if ok is False:
            return Check.violated(self.name, detail, offending_seq=seq, consequence_of=root)
        return Check.unchecked(self.name, f"TLC could not decide: {detail}")
