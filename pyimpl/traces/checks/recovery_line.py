"""``recovery-line``: each recovery restored the recovery line of the failed processes.

At each recovery: no failed process keeps its volatile state; the restored line has no orphan
(otherwise *too little rollback*, the orphan named); it equals
:func:`~rollcheck.pyimpl.recovery.recovery_line` for the failed processes (otherwise *too much
rollback*, the process named); the event's ``in_transit`` equals the channel state of the restored
line. A failure with no recovery after it is a violation when the run ended, and *unchecked* when
the recording stopped first (the one thing to check was never recorded). No failure: not applicable.

References
----------
FERDiS paper §4 (consistent global states), §6.1 (recovery lines).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from typing_extensions import override

from rollcheck.pyimpl.traces.plugin import Recovery, TraceCheck
from rollcheck.pyimpl.verdict import Check

__all__ = ["RecoveryLine"]


class RecoveryLine(TraceCheck):
    """The restored line against the maximum consistent line (module docstring)."""

    name = "recovery-line"
    needs = ("failure", "recovery", "checkpoint", "send", "deliver")

    def __init__(self, virtual: bool = True):
        self.virtual = virtual
        self.bad: tuple[int, str] | None = None
        self.details: list[str] = []

    @override
    def on_recovery(self, v: Any, rec: Recovery) -> None:
        from rollcheck.pyimpl.consistency import orphans
        from rollcheck.pyimpl.recovery import recovery_line

        p, cut, names = rec.pattern, rec.cut, v.names
        ref = recovery_line(p, rec.failed, virtual=self.virtual)

        def show(c: Sequence[int]) -> str:
            return "{" + ", ".join(f"{names[i]}: {'V' if c[i] == p.volatile_index(i) else c[i]}"
                                   for i in range(v.n)) + "}"

        problem = None
        vol = [names[f] for f in rec.failed if cut[f] == p.volatile_index(f)]
        orph = orphans(p, cut)
        if rec.never:
            problem = f"restored {'; '.join(rec.never)}; the recovery line is {show(ref.line)}"
        elif vol:
            problem = f"the failed process(es) {', '.join(vol)} cannot keep their volatile state"
        elif orph:
            m = orph[0]
            problem = (f"too little rollback: {m.id!r} is an orphan (sent by {names[m.sender]} after its "
                       f"restored {p.checkpoint_name((m.sender, cut[m.sender]))}, delivered by "
                       f"{names[m.receiver]} before its restored {p.checkpoint_name((m.receiver, cut[m.receiver]))})"
                       f"; the recovery line is {show(ref.line)}")
        elif tuple(cut) != ref.line:
            over = [i for i in range(v.n) if cut[i] < ref.line[i]]
            under = [i for i in range(v.n) if cut[i] > ref.line[i]]
            if over and not under:
                i = over[0]
                problem = (f"too much rollback: {names[i]} restored {p.checkpoint_name((i, cut[i]))}, but the "
                           f"maximum consistent line keeps {p.checkpoint_name((i, ref.line[i]))}; the recovery "
                           f"line is {show(ref.line)}")
            else:
                problem = f"restored {show(cut)}; the recovery line is {show(ref.line)}"
        got_it = rec.claimed_transit
        if problem is None and sorted(rec.transit) != got_it:
            missing = sorted(set(rec.transit) - set(got_it))
            extra = sorted(set(got_it) - set(rec.transit))
            problem = (f"in_transit lists {got_it}; the channel state of the restored line is "
                       f"{sorted(rec.transit)} (missing {missing}, extra {extra})")
        if problem is not None:
            if self.bad is None:
                self.bad = (rec.seq, f"recovery at seq {rec.seq} after the failure of "
                                     f"{', '.join(names[f] for f in rec.failed)}: {problem}")
        else:
            self.details.append(f"seq {rec.seq}: {show(cut)}, {len(rec.transit)} in transit")

    @override
    def finish(self, v: Any, results: dict[str, Check]) -> Check:
        if self.bad is not None:
            return Check.violated(self.name, self.bad[1], offending_seq=self.bad[0])
        if v.failed:
            if v.ended:
                return Check.violated(self.name, f"the failure at seq {v.failure_seq} has no recovery",
                                      offending_seq=v.failure_seq)
            done = (f"{v.recoveries} earlier recovery(ies) restored the recovery line "
                    f"({'; '.join(self.details)}); " if v.recoveries else "")
            return Check.unchecked(self.name, done + f"the failure at seq {v.failure_seq} has no recovery "
                                   f"before the recording stops (after seq {v.last_seq}): the recovery was "
                                   "never recorded")
        if not v.failures:
            return Check.not_applicable(self.name, "no failure in the run: no recovery to check")
        return Check.held(self.name, f"{v.recoveries} recovery(ies), each restored the maximum consistent line "
                          f"for the failed processes with its channel state: {'; '.join(self.details)}",
                          examined=v.recoveries)
