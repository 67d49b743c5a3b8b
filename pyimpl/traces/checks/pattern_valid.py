"""``pattern-valid``: the effective execution stays a valid pattern (no orphan delivery survives).

Every other structural defect is bad input, raised by the view; this check names a delivery of a
message whose send a recovery undid. Not substantive: holding it alone checks nothing the user asked.

References
----------
``specs/formats.md#trace-checks``; FERDiS paper §4 (orphan messages).
"""

from __future__ import annotations

from typing import Any

from typing_extensions import override

from rollcheck.pyimpl.traces.plugin import TraceCheck
from rollcheck.pyimpl.verdict import Check

__all__ = ["PatternValid"]


class PatternValid(TraceCheck):
    """No delivery of a message whose send a recovery undid; an empty trace is unchecked."""

    name = "pattern-valid"
    needs = ("send", "deliver", "recovery")
    after = ("recovery-line",)

    def __init__(self) -> None:
        self.bad: tuple[int, str] | None = None
        self.undone_at: int | None = None

    @override
    def on_orphan(self, v: Any, seq: int, i: int, mid: str, undone_at: int) -> None:
        if self.bad is None:
            self.undone_at = undone_at
            self.bad = (seq, f"seq {seq}: {v.names[i]} delivers {mid!r}, whose send was undone by the "
                             f"recovery at seq {undone_at} (an orphan message)")

    @override
    def finish(self, v: Any, results: dict[str, Check]) -> Check:
        if self.bad is not None:
            rl = results.get("recovery-line")
            # the send was undone by a recovery that recovery-line found wrong: its consequence
            root = ("recovery-line" if rl is not None and rl.ok is False and rl.offending_seq == self.undone_at
                    else None)
            return Check.violated(self.name, self.bad[1], offending_seq=self.bad[0], consequence_of=root)
        if v.events == 0:
            return Check.unchecked(self.name, "the trace has no events")
        stopped = ("" if v.ended else f"; the recording stopped after seq {v.last_seq} without an end event")
        return Check.held(self.name, f"{v.events} events ({v.extension} extension); the effective execution "
                          f"has {len(v.evs)} events, {len(v.msgs)} messages, {sum(v.count)} checkpoints; "
                          "no orphan delivery" + stopped, examined=v.events, substantive=False)
