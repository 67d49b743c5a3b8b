"""A recorded execution of the example executor.

FIFO channels, a seeded scheduler, per-processor histories, checkpoints that join the chain once
their shared-time messages are processed, and the low watermark tracked as checkpoints are
published.

References
----------
.. [1] I. Gog, M. Isard, M. Abadi. "Falkirk Wheel: Rollback Recovery for Dataflow Systems",
   SoCC 2021, §3.1, §3.3 (when a checkpoint joins the chain), §3.4 (selective checkpoints), §4.3
   (acknowledging inputs, releasing outputs).
"""

from __future__ import annotations

import random
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Any

from rollcheck.pyimpl.errors import InternalError
from rollcheck.pyimpl.spans import times as T
from rollcheck.pyimpl.spans.executor.graph import Dataflow
from rollcheck.pyimpl.spans.executor.operators import Op, Sink, Source

__all__ = ['Msg', 'Event', 'Run', 'run_to_end']

@dataclass
class Msg:
    """A message on an edge: time, payload, and ``cause`` (the uid of the delivery that sent it)."""

    uid: int
    edge: str
    time: Any
    payload: Any
    cause: int  # uid of the event (delivery) that sent it


@dataclass
class Event:
    """A delivery to a processor: the in edge (``in:<source>`` for an input), the message's uid."""

    uid: int
    edge: str  # in edge, or "in:<source>"
    time: Any
    payload: Any
    msg: int  # uid of the delivered message


@dataclass
class Run:
    """The state of an execution (also its recording)."""

    df: Dataflow
    rng: random.Random
    state: dict[str, dict] = field(default_factory=dict)
    history: dict[str, list[Event]] = field(default_factory=dict)
    chan: dict[str, deque] = field(default_factory=dict)
    sent: dict[str, list[Msg]] = field(default_factory=dict)
    seqno: dict[str, int] = field(default_factory=dict)
    chain: dict[str, list[T.Span]] = field(default_factory=dict)
    pending_ckpt: dict[str, list[T.Span]] = field(default_factory=dict)
    cause_time: dict[int, tuple[str, Any]] = field(default_factory=dict)
    acked: dict[str, set] = field(default_factory=dict)
    released: dict[str, set] = field(default_factory=dict)
    wm_history: list[dict[str, int]] = field(default_factory=list)
    track_watermark: bool = False
    steps: int = 0
    next_uid: int = 1
    checkpointing: bool = True
    # per processor: (the history list, its length, its largest epoch), see _max_epoch_seen
    _epoch_seen: dict[str, tuple[list[Event], int, int | None]] = field(default_factory=dict, repr=False,
                                                                         compare=False)
    # per processor: (pending list, its length, chain list, its length, last epoch), see _last_epoch
    _last_seen: dict[str, tuple[list[T.Span], int, list[T.Span], int, int]] = field(
        default_factory=dict, repr=False, compare=False)

    @classmethod
    def start(cls, df: Dataflow, seed: int) -> Run:
        """A fresh run of ``df`` (input batches queued), its scheduler seeded with ``seed``.

        Parameters
        ----------
        df : Dataflow
            The dataflow to run.
        seed : int
            The scheduler's seed.
        """
        r = cls(df, random.Random(seed))
        for p, op in df.ops.items():
            r.state[p] = {}
            r.history[p] = []
            r.chain[p] = [_empty_span(df, p)]
            r.pending_ckpt[p] = []
            r.acked[p] = set()
            r.released[p] = set()
            if isinstance(op, Source):
                q: deque = deque()
                for t in sorted(op.batches):
                    for x in op.batches[t]:
                        q.append(Msg(r._uid(), f"in:{p}", t, x, 0))
                r.chan[f"in:{p}"] = q
        for e in df.edges:
            r.chan[e.name] = deque()
            r.sent[e.name] = []
            r.seqno[e.name] = 0
        return r

    def _uid(self) -> int:
        self.next_uid += 1
        return self.next_uid

    def dst_of(self, ch: str) -> str:
        """The processor that channel ``ch`` delivers to."""
        return ch[3:] if ch.startswith("in:") else self.df.edge[ch].dst

    def step(self) -> bool:
        """Deliver one message from a random non-empty channel; False when quiescent."""
        live = [c for c in sorted(self.chan) if self.chan[c]]
        if not live:
            return False
        ch = self.rng.choice(live)
        m = self.chan[ch].popleft()
        self.deliver(ch, m)
        self.steps += 1
        if self.checkpointing:
            self.maybe_checkpoint(self.dst_of(ch))
        return True

    def deliver(self, ch: str, m: Msg) -> None:
        """Deliver ``m`` from channel ``ch``: record the event, process it, send its output.

        Parameters
        ----------
        ch : str
            The channel (an edge, or ``in:<source>``).
        m : Msg
            The message taken from it.
        """
        p = self.dst_of(ch)
        ev = Event(self._uid(), ch, m.time, m.payload, m.uid)
        self.history[p].append(ev)
        self.cause_time[ev.uid] = (p, m.time)
        for e, t, x in self.df.ops[p].process(self.state[p], self.df.outs[p], m.time, m.payload):
            if t is None:
                self.seqno[e] += 1
                t = (e, self.seqno[e])
            out = Msg(self._uid(), e, t, x, ev.uid)
            self.sent[e].append(out)
            self.chan[e].append(out)

    # -- checkpoints ---------------------------------------------------------------------------
    def processed_prefix(self, p: str) -> dict[str, int]:
        """Per input edge of ``p``, how many of its messages ``p`` has processed."""
        cnt: Counter = Counter(ev.edge for ev in self.history[p])
        return {e: cnt[e] for e in self.df.ins[p]}

    def maybe_checkpoint(self, p: str) -> None:
        """Take the checkpoints the policy of ``p`` calls for now, and publish the ready ones."""
        kind, k = self.df.policy.get(p, ("none", 0))
        if kind == "seq" and k > 0 and len(self.history[p]) % k == 0:
            self._offer(p, T.SeqFrontier(self.processed_prefix(p)))
        if kind == "epoch":
            self.epoch_checkpoints()
        self._publish()

    def epoch_checkpoints(self) -> None:
        """Offer each ``epoch`` processor a checkpoint of the epochs complete everywhere."""
        low: int | None = None
        low_known = False
        for p, (kind, _k) in self.df.policy.items():
            if kind != "epoch":
                continue
            seen = self._max_epoch_seen(p)
            if seen is None:
                continue
            last = self._last_epoch(p)
            if seen <= last:  # done <= seen: nothing new to offer, whatever is pending
                continue
            if not low_known:  # the lowest pending epoch, read once (offers do not change channels)
                low = min(map(_epoch_of, [m.time for c in self.chan.values() for m in c]), default=None)
                low_known = True
            done = seen if low is None else min(seen, low - 1)
            if done > last:
                self._offer(p, _epoch_span(self.df.ops[p], done))

    def _max_epoch_seen(self, p: str) -> int | None:
        """The largest epoch of the events in ``p``'s history (None when it is empty).

        Kept per processor with the history list it was computed from and its length: a history
        only grows by appending (a recovery replaces the list), so only the new events are read.
        """
        h = self.history[p]
        got = self._epoch_seen.get(p)
        if got is not None and got[0] is h and got[1] <= len(h):
            n, best = got[1], got[2]
        else:
            n, best = 0, None
        if n < len(h):
            new = max(_epoch_of(h[i].time) for i in range(n, len(h)))
            best = new if best is None else max(best, new)
            self._epoch_seen[p] = (h, len(h), best)
        return best

    def _last_epoch(self, p: str) -> int:
        pend, chain = self.pending_ckpt[p], self.chain[p]
        # kept with both lists and their lengths: here they only grow at the end (an offer appends
        # to pend, a publication moves pend's head to chain's end, so chain grows), and a recovery
        # replaces them; the same lists at the same lengths therefore hold the same spans
        got = self._last_seen.get(p)
        if got is not None and got[0] is pend and got[1] == len(pend) and got[2] is chain and got[3] == len(chain):
            return got[4]
        best = self._last_epoch_of(pend + chain)
        self._last_seen[p] = (pend, len(pend), chain, len(chain), best)
        return best

    @staticmethod
    def _last_epoch_of(spans: list[T.Span]) -> int:
        best = -1
        for s in spans:
            if isinstance(s, T.EpochFrontier):
                best = max(best, s.epoch)
            elif isinstance(s, T.LoopFrontier):
                best = max([best, *s.counter])
        return best

    def _offer(self, p: str, s: T.Span) -> None:
        self.pending_ckpt[p].append(s)

    def _publish(self) -> None:
        """Move pending checkpoints into the chains once they are safe.

        A checkpoint is safe once its unlogged shared-time messages are processed by their receivers
        (seq edges need no wait).
        """
        changed = False
        for p, pend in self.pending_ckpt.items():
            while pend:
                s = pend[0]
                ok = True
                for e in self.df.outs[p]:
                    ed = self.df.edge[e]
                    if ed.logged or ed.seq:
                        continue
                    if any(self.cause_time[m.cause][1] in s for m in self.chan[e]):
                        ok = False
                        break
                if not ok:
                    break
                self.chain[p].append(pend.pop(0))
                changed = True
        if changed and self.track_watermark:
            self.advance_watermark()

    def advance_watermark(self) -> None:
        """Recompute the low watermark (§4.3).

        Source batches and sink outputs whose times it passes are acknowledged and released.
        """
        from rollcheck.pyimpl.spans.executor.recording import build_system
        from rollcheck.pyimpl.spans.watermark import low_watermark

        built = build_system(self, set(self.df.ops), phi="normalise")
        wm = low_watermark(built.system)
        self.wm_history.append(wm)
        for p, k in wm.items():
            span = built.spans[p][k]
            op = self.df.ops[p]
            if isinstance(op, Source):
                self.acked[p] |= {t for t in op.batches if t in span}
            if isinstance(op, Sink):
                self.released[p] |= {t for t in self.state[p] if t in span}


def _epoch_of(t: Any) -> int:
    if type(t) is int or isinstance(t, int):
        return t
    if isinstance(t, tuple) and isinstance(t[0], int):
        return t[0]
    return 1 << 30  # sequence numbers: not an epoch


def _epoch_span(op: Op, e: int) -> T.Span:
    if op.domain == "loop":
        return T.LoopFrontier({t: T.ALL for t in range(e + 1)})
    return T.EpochFrontier(e)


def _empty_span(df: Dataflow, p: str) -> T.Span:
    return T.TimeSet(frozenset())


def run_to_end(r: Run, limit: int = 1_000_000) -> Run:
    """Step ``r`` until it is quiescent and return it (``InternalError`` after ``limit`` steps).

    Parameters
    ----------
    r : Run
        The run, advanced in place.
    limit : int, optional
        The most steps before giving up.
    """
    while r.step():
        if r.steps > limit:
            raise InternalError("the dataflow did not quiesce")
    return r
