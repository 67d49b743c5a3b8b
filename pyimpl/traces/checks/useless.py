"""``no-useless-checkpoints``: no checkpoint on a Z-cycle, when the protocol claims ``zcycle_free``.

Checked with :func:`~rollcheck.pyimpl.zpaths.useless_checkpoints` on the execution before each
recovery and on the final effective execution; the offending seq is where the first Z-cycle closes
(found by bisection: a Z-cycle in a prefix stays one when events are appended).

References
----------
FERDiS paper §5 (Z-paths, Z-cycles and useless checkpoints; Netzer and Xu).
"""

from __future__ import annotations

from typing import Any

from typing_extensions import override

from rollcheck.pyimpl.pattern import Pattern
from rollcheck.pyimpl.traces.plugin import Recovery, TraceCheck
from rollcheck.pyimpl.verdict import Check

__all__ = ["NoUselessCheckpoints"]


class NoUselessCheckpoints(TraceCheck):
    """Z-cycle freedom of every execution between failures (module docstring)."""

    name = "no-useless-checkpoints"
    needs = ("protocol.zcycle_free", "send", "deliver", "checkpoint")

    def __init__(self) -> None:
        self.bad: tuple[int, str] | None = None
        self.checked = 0

    def _check(self, p: Pattern, seqs: Any, where: str) -> None:
        from rollcheck.pyimpl.zpaths import useless_checkpoints

        if self.bad is not None or not p.events:  # an empty execution examines nothing
            return
        self.checked += 1
        u = useless_checkpoints(p)
        if not u:
            return
        lo, hi = 1, len(p.events)
        while lo < hi:
            mid = (lo + hi) // 2
            if useless_checkpoints(Pattern(p.processes, p.events[:mid])):
                hi = mid
            else:
                lo = mid + 1
        s = seqs[lo - 1]
        names = ", ".join(p.checkpoint_name(c) for c in u[:5])
        self.bad = (s, f"{len(u)} useless checkpoint(s) {where} ({names}{', …' if len(u) > 5 else ''}): "
                       f"the first Z-cycle closes at seq {s}")

    @override
    def on_recovery(self, v: Any, rec: Recovery) -> None:
        self._check(rec.pattern, rec.seqs, f"before the recovery at seq {rec.seq}")

    @override
    def finish(self, v: Any, results: dict[str, Check]) -> Check:
        if self.bad is None:
            self._check(v.pattern(), v.seqs, "in the final effective execution")
        if self.bad is not None:
            return Check.violated(self.name, self.bad[1], offending_seq=self.bad[0])
        if not self.checked:
            return Check.unchecked(self.name, "no execution with events: nothing to examine")
        return Check.held(self.name, f"no checkpoint on a Z-cycle in {self.checked} execution(s) (before each "
                          "recovery and the final one)", examined=self.checked)
