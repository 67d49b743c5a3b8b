"""``forced-checkpoints``: forced exactly where the protocol forces, replayed deliveries included.

The protocol (any :class:`~rollcheck.pyimpl.protocols.Protocol`) is driven through its transition
functions alongside the trace; before every delivery — a first one or one *replayed* from a log
after a recovery — it decides whether a checkpoint is forced, and the trace must show a ``forced``
checkpoint immediately before exactly those deliveries. A rolled-back process resumes in the
protocol state of its restored checkpoint (recomputed at each recovery by re-running the transition
functions over the effective execution). The first difference is the offending ``seq``.

References
----------
FERDiS paper §5.3 (communication-induced checkpointing).
"""

from __future__ import annotations

from typing import Any

from typing_extensions import override

from rollcheck.pyimpl.pattern import DELIVER, SEND
from rollcheck.pyimpl.protocols.base import checkpoint_function
from rollcheck.pyimpl.traces.plugin import Recovery, TraceCheck
from rollcheck.pyimpl.verdict import Check

__all__ = ["ForcedCheckpoints"]


class ForcedCheckpoints(TraceCheck):
    """Forced checkpoints against the protocol's decisions (module docstring).

    Parameters
    ----------
    protocol : Protocol
        The protocol whose decisions are checked.
    n : int
        The number of processes.
    """

    name = "forced-checkpoints"
    needs = ("protocol", "send", "deliver", "checkpoint.forced")
    after = ("recovery-line",)

    def __init__(self, protocol: Any, n: int):
        self.protocol = protocol
        self.st = [protocol.initial(i, n) for i in range(n)]
        self.pre: list[Any] = [None] * n
        self.pend = [0] * n  # seq of a forced checkpoint not yet followed by its delivery
        self.pbs: dict[str, Any] = {}
        self.bad: tuple[int, str] | None = None
        self.recorded = 0
        self.decided = 0
        self.deliveries = 0

    def _fail(self, seq: int, detail: str) -> None:
        if self.bad is None:
            self.bad = (seq, detail)

    def _not_followed(self, v: Any, i: int) -> None:
        s = self.pend[i]
        self._fail(s, f"seq {s}: a forced checkpoint of {v.names[i]} that is not immediately followed by a "
                      "delivery of that process")
        self.pend[i] = 0

    @override
    def on_send(self, v: Any, seq: int, i: int, j: int, mid: str) -> None:
        if self.pend[i]:
            self._not_followed(v, i)
        self.st[i], self.pbs[mid] = self.protocol.on_send(self.st[i], j)

    @override
    def on_output(self, v: Any, seq: int, i: int, key: Any, value: Any) -> None:
        if self.pend[i]:
            self._not_followed(v, i)

    @override
    def on_checkpoint(self, v: Any, seq: int, i: int, forced: bool, index: Any) -> None:
        if self.pend[i]:
            self._not_followed(v, i)
        if forced:
            self.recorded += 1
            self.pend[i] = seq
            self.pre[i] = self.st[i]
        self.st[i] = checkpoint_function(self.protocol)(self.st[i], forced)

    @override
    def on_deliver(self, v: Any, seq: int, i: int, src: int, mid: str, replayed: bool) -> None:
        proto = self.protocol
        pb = self.pbs.pop(mid)  # only messages in flight keep their piggyback
        got = self.pend[i] != 0
        # decided before the forced checkpoint, on the state the process had then
        want = proto.must_force(self.pre[i] if got else self.st[i], src, pb)
        self.deliveries += 1
        if want:
            self.decided += 1
        if want != got:
            if want:
                self._fail(seq, f"seq {seq}: {proto.name} forces a checkpoint of {v.names[i]} before it "
                                f"delivers {mid!r}{' (a replayed delivery)' if replayed else ''}; the trace "
                                "has none")
            else:
                self._fail(self.pend[i], f"seq {self.pend[i]}: a forced checkpoint of {v.names[i]} before the "
                                         f"delivery of {mid!r} (seq {seq}), which {proto.name} does not force")
        self.st[i] = proto.on_deliver(self.st[i], src, pb)
        self.pend[i] = 0

    @override
    def on_failure(self, v: Any, seq: int, procs: list[int]) -> None:
        for i in procs:
            self.pend[i] = 0

    def after_cut(self, v: Any, rec: Recovery) -> None:
        """Protocol states and in-flight piggybacks of the effective execution, from the start.

        Re-running the transition functions over the events that stand (in their global order,
        checkpoints as recorded) gives each rolled-back process the state of its restored
        checkpoint and each message in transit its piggyback again: one linear pass per recovery.

        Parameters
        ----------
        v : RunView
            The checker's view of the run, already cut back.
        rec : Recovery
            What the recovery restored.
        """
        for i, x in enumerate(rec.limit):
            if x is not None:
                self.pend[i] = 0
        proto = self.protocol
        n = v.n
        st = [proto.initial(i, n) for i in range(n)]
        pbs: dict[str, Any] = {}
        for ev in v.evs:
            i = ev.process
            if ev.kind == SEND:
                st[i], pbs[ev.message] = proto.on_send(st[i], ev.to)
            elif ev.kind == DELIVER:
                st[i] = proto.on_deliver(st[i], v.sender_of(ev.message), pbs.pop(ev.message))
            else:
                st[i] = checkpoint_function(proto)(st[i], bool(ev.forced))
        self.st[:] = st
        self.pbs = pbs

    @override
    def finish(self, v: Any, results: dict[str, Check]) -> Check:
        name = getattr(self.protocol, "name", "?")
        if self.bad is not None:
            seq, detail = self.bad
            rl = results.get("recovery-line")
            root = None
            if rl is not None and rl.offending_seq is not None and rl.ok is False and seq > rl.offending_seq:
                # decided on protocol states recomputed over the execution a wrong recovery left
                root = "recovery-line"
            return Check.violated(self.name, detail, offending_seq=seq, consequence_of=root)
        if not self.deliveries and not self.recorded:
            return Check.not_applicable(self.name, "no delivery in the trace: nothing to force")
        return Check.held(self.name, f"{name}: forced exactly where the protocol forces ({self.recorded} "
                          f"forced checkpoint(s) recorded, {self.decided} decided, {self.deliveries} "
                          "deliveries checked)", examined=max(self.deliveries, self.recorded))
