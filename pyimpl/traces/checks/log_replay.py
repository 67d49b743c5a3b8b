"""``log-replay``: after a recovery, the replayed deliveries are exactly the in-transit messages.

Each message in transit for the restored line is delivered once with ``replayed``; a message
replayed twice, not replayed by the ``end``, replayed without being in transit, or delivered
without ``replayed`` is named. A recording that stops while messages are still to be replayed
leaves the check *unchecked*. No recovery: not applicable.

References
----------
FERDiS paper §7.2.5–7.2.8 (message logs and replay).
"""

from __future__ import annotations

from typing import Any

from typing_extensions import override

from rollcheck.pyimpl.traces.plugin import Recovery, TraceCheck
from rollcheck.pyimpl.verdict import Check

__all__ = ["LogReplay"]


class LogReplay(TraceCheck):
    """Replayed deliveries against the channel state of each restored line (module docstring)."""

    name = "log-replay"
    needs = ("recovery", "deliver.replayed")
    after = ("recovery-line",)

    def __init__(self) -> None:
        self.bad: tuple[int, str] | None = None
        self.pending: set[str] | None = None
        self.rec_seq: int | None = None
        self.replayed = 0
        self.in_transit = 0  # messages in transit over all restored lines
        self.bad_line: int | None = None  # the recovery whose line the first violation concerns

    def _fail(self, seq: int, detail: str) -> None:
        if self.bad is None:
            self.bad = (seq, detail)
            self.bad_line = self.rec_seq

    @override
    def on_redeliver(self, v: Any, seq: int, i: int, mid: str) -> None:
        self._fail(seq, f"seq {seq}: {mid!r} replayed twice (already delivered after the recovery)")

    @override
    def on_deliver(self, v: Any, seq: int, i: int, src: int, mid: str, replayed: bool) -> None:
        rp = self.pending
        if replayed:
            self.replayed += 1
            if rp is None:
                self._fail(seq, f"seq {seq}: {mid!r} marked replayed, but no recovery happened before it")
            elif mid in rp:
                rp.discard(mid)
            else:
                self._fail(seq, f"seq {seq}: {mid!r} replayed, but it is not in transit for the line restored "
                                f"at seq {self.rec_seq}")
        elif rp and mid in rp:
            rp.discard(mid)
            self._fail(seq, f"seq {seq}: {mid!r} is in transit for the line restored at seq {self.rec_seq} but "
                            "is delivered without \"replayed\" (not from the sender's log)")

    @override
    def on_recovery(self, v: Any, rec: Recovery) -> None:
        # Messages still awaited from an earlier recovery are in transit for this line too (their
        # sends are kept and they are undelivered), so the new set replaces the old one.
        self.pending = set(rec.transit)
        self.in_transit += len(rec.transit)
        self.rec_seq = rec.seq

    @override
    def finish(self, v: Any, results: dict[str, Check]) -> Check:
        if self.bad is None and v.ended and self.pending:
            miss = sorted(self.pending)
            self._fail(v.end_seq, f"{miss} in transit for the line restored at seq {self.rec_seq} "
                                  f"{'was' if len(miss) == 1 else 'were'} never replayed (end at seq {v.end_seq})")
        if self.bad is not None:
            rl = results.get("recovery-line")
            # the in-transit set of a line recovery-line found wrong is derived from that violation
            root = ("recovery-line" if rl is not None and rl.ok is False and self.bad_line is not None
                    and rl.offending_seq == self.bad_line else None)
            return Check.violated(self.name, self.bad[1], offending_seq=self.bad[0], consequence_of=root)
        if not v.recoveries:
            return Check.not_applicable(self.name, "no recovery in the run: nothing to replay")
        if not self.in_transit and not self.replayed:
            return Check.not_applicable(self.name, f"no message in transit at the {v.recoveries} restored line(s) "
                                        "and none replayed: nothing to replay")
        if not v.ended and self.pending:
            return Check.unchecked(self.name, f"{len(self.pending)} message(s) in transit for the line restored "
                                   f"at seq {self.rec_seq} not yet replayed when the recording stopped (after seq "
                                   f"{v.last_seq}); {self.replayed} replayed delivery(ies) checked so far")
        return Check.held(self.name, f"{self.replayed} replayed delivery(ies) after {v.recoveries} recovery(ies): "
                          "exactly the in-transit messages of each restored line, each once",
                          examined=v.recoveries)
