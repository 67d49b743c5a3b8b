"""A small dataflow executor: record a run, fail processors, roll back to the computed spans,
re-execute from logs, and compare with a failure-free run (exactly once).

Processors are deterministic operators; messages carry logical times in the receiver's domain
(§3.1): sequence numbers ``(edge, n)`` assigned by the sender on *seq* edges, epochs, or loop
times ``(epoch, counter)``. Channels are FIFO; a seeded scheduler picks the next channel to
deliver from, so messages of different times interleave (selective rollback, §3.4).

Checkpoints (each joins the processor's chain of restorable spans):

* ``policy="seq", every=k``: after every ``k`` deliveries, the processed prefix of each input edge
  (a :class:`~rollcheck.pyimpl.spans.times.SeqFrontier`);
* ``policy="epoch"``: whenever epoch ``E`` is complete everywhere (no message of an epoch
  ``<= E`` is pending anywhere), the span of epochs ``<= E`` (an
  :class:`~rollcheck.pyimpl.spans.times.EpochFrontier`, or a :class:`~rollcheck.pyimpl.spans.times.LoopFrontier` with
  whole epochs for loop processors). A processor that already processed later epochs takes a
  *selective* checkpoint: its state restricted to the span.

On a time domain where one time is shared by many messages (epochs, loop times), a checkpoint
of ``p`` joins the chain only once every *unlogged* message its events sent has been processed by
the receiver: the "times are complete at the receiver" rule of §3.3 (no transmitted message is
lost). On sequence-number edges every message has its own time and the concrete ⊤ of the
receiver already protects in-flight unlogged messages (C1).

Recovery (§3.3, §4.1): the span system is built from the recording (:func:`build_system`), solved,
and every processor not at ⊤ is restored to the events of its span (a selective replay of its
history); for an edge not kept at ⊤ on both ends, the queue becomes the *logged* messages sent by
kept events that the receiver's restored state has not processed; unlogged such messages are
lost (the executor records them; C1 forbids them). The sources' external producer keeps every
input batch until it is acknowledged (when the low watermark passes it, §4.3).

References
----------
.. [1] I. Gog, M. Isard, M. Abadi. "Falkirk Wheel: Rollback Recovery for Dataflow Systems",
   SoCC 2021, §3.1–3.4, §4.1–4.3.

The end-to-end theorem: ``specs/spans.md#exactly-once``.
"""

from __future__ import annotations

import random
from abc import ABC, abstractmethod
from collections import Counter, deque
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any

from rollcheck.pyimpl.errors import InvalidInputError
from rollcheck.pyimpl.spans import times as T
from rollcheck.pyimpl.spans.fixpoint import solve_levels, solve_literal
from rollcheck.pyimpl.spans.system import EdgeSpec, ProcessorSpec, SpanSystem

__all__ = [
    "Op", "Source", "Map", "Counter_", "SumPerTime", "Sink", "BridgeOp", "LoopEntryOp", "LoopBody",
    "LoopExitOp", "Edge", "Dataflow", "Msg", "Run", "build_system", "recover", "run_to_end",
    "exactly_once", "Outcome", "failure_experiment", "EXAMPLES", "example",
]

Time = Hashable


# ------------------------------------------------------------------------------------------------
# Operators
# ------------------------------------------------------------------------------------------------

class Op(ABC):
    """A deterministic operator: ``process`` updates ``state`` and returns the messages to send
    as ``(edge, time | None, payload)``; ``None`` asks for the next sequence number on a seq edge."""

    domain = "epoch"  # "epoch" | "loop" | "seq": the domain of the times it receives

    @abstractmethod
    def process(self, state: dict, outs: list[str], time: Time, payload: Any) -> list[tuple[str, Any, Any]]:
        """Update ``state`` for one input message and return the messages to send."""


@dataclass
class Source(Op):
    """Reads input batches ``batches[epoch]`` and forwards each record on every out edge."""

    batches: dict[int, list[Any]] = field(default_factory=dict)
    seq_out: bool = False

    def process(self, state, outs, time, payload):
        return [(e, None if self.seq_out else time, payload) for e in outs]


@dataclass
class Map(Op):
    """Stateless: forwards ``f(payload)`` at the same time (``f`` is ``(a, b)``: ``a*x + b``)."""

    f: tuple[int, int] = (1, 0)
    domain: str = "epoch"

    def process(self, state, outs, time, payload):
        a, b = self.f
        return [(e, time, a * payload + b) for e in outs]


@dataclass
class Counter_(Op):
    """Sequence-number operator with state: numbers each record it sees and forwards
    ``(count, payload)`` on its (seq) out edges."""

    domain: str = "seq"

    def process(self, state, outs, time, payload):
        state["n"] = state.get("n", 0) + 1
        return [(e, None, (state["n"], payload)) for e in outs]


@dataclass
class SumPerTime(Op):
    """Keeps a sum per logical time (state partitioned by time: selective rollback, Fig. 4)."""

    domain: str = "epoch"

    def process(self, state, outs, time, payload):
        v = payload if isinstance(payload, int) else payload[-1]
        state[time] = state.get(time, 0) + v
        return [(e, time, v) for e in outs]


@dataclass
class Sink(Op):
    """Records every received record per time (its state is the output)."""

    domain: str = "epoch"

    def process(self, state, outs, time, payload):
        state.setdefault(time, []).append(payload)
        return []


@dataclass
class BridgeOp(Op):
    """Epochs in, sequence numbers out (§3.2): forwards in epoch order (its input is FIFO)."""

    def process(self, state, outs, time, payload):
        return [(e, None, (time, payload)) for e in outs]


@dataclass
class LoopEntryOp(Op):
    """Epoch ``t`` in, loop time ``(t, 0)`` out."""

    def process(self, state, outs, time, payload):
        return [(e, (time, 0), payload) for e in outs]


@dataclass
class LoopBody(Op):
    """Halves a value each iteration: ``v > 1`` goes round the feedback edge at ``(t, c+1)``,
    otherwise leaves on the exit edge. ``outs[0]`` is the feedback edge, ``outs[1]`` the exit."""

    domain: str = "loop"

    def process(self, state, outs, time, payload):
        t, c = time
        state[time] = state.get(time, 0) + 1
        if payload > 1:
            return [(outs[0], (t, c + 1), payload // 2)]
        return [(outs[1], time, (c, payload))]


@dataclass
class LoopExitOp(Op):
    """Loop time ``(t, c)`` in, epoch ``t`` out."""

    domain: str = "loop"

    def process(self, state, outs, time, payload):
        return [(e, time[0], payload) for e in outs]


# ------------------------------------------------------------------------------------------------
# Dataflow, messages, recorded run
# ------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Edge:
    """An edge; ``seq`` edges number their messages, ``logged`` edges keep L_e, ``phi`` names the
    transformer: identity, entry, feedback, exit, bridge, bridge-per-epoch, recorded, conservative."""

    name: str
    src: str
    dst: str
    logged: bool = False
    seq: bool = False
    phi: str = "identity"


@dataclass
class Dataflow:
    ops: dict[str, Op]
    edges: list[Edge]
    policy: dict[str, tuple[str, int]] = field(default_factory=dict)  # name -> ("seq"|"epoch"|"none", k)

    def __post_init__(self) -> None:
        for e in self.edges:
            for end in (e.src, e.dst):
                if end not in self.ops:
                    raise InvalidInputError(f"edge {e.name}: unknown processor {end!r}")
        self.outs = {p: [e.name for e in self.edges if e.src == p] for p in self.ops}
        self.ins = {p: [e.name for e in self.edges if e.dst == p] for p in self.ops}
        self.edge = {e.name: e for e in self.edges}


@dataclass
class Msg:
    uid: int
    edge: str
    time: Any
    payload: Any
    cause: int  # uid of the event (delivery) that sent it


@dataclass
class Event:
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

    @classmethod
    def start(cls, df: Dataflow, seed: int) -> Run:
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
        cnt: Counter = Counter(ev.edge for ev in self.history[p])
        return {e: cnt[e] for e in self.df.ins[p]}

    def maybe_checkpoint(self, p: str) -> None:
        kind, k = self.df.policy.get(p, ("none", 0))
        if kind == "seq" and k > 0 and len(self.history[p]) % k == 0:
            self._offer(p, T.SeqFrontier(self.processed_prefix(p)))
        if kind == "epoch":
            self.epoch_checkpoints()
        self._publish()

    def epoch_checkpoints(self) -> None:
        pending = [m.time for c in self.chan.values() for m in c]
        low = min((_epoch_of(t) for t in pending), default=None)
        for p, (kind, _k) in self.df.policy.items():
            if kind != "epoch":
                continue
            seen = [_epoch_of(ev.time) for ev in self.history[p]]
            if not seen:
                continue
            done = max(seen) if low is None else min(max(seen), low - 1)
            last = self._last_epoch(p)
            if done > last:
                self._offer(p, _epoch_span(self.df.ops[p], done))

    def _last_epoch(self, p: str) -> int:
        spans = self.pending_ckpt[p] + self.chain[p]
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
        """Move pending checkpoints into chains once their unlogged shared-time messages are
        processed by their receivers (seq edges need no wait)."""
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
        """Recompute the low watermark; acknowledge source batches and release sink outputs whose
        times it passes (§4.3)."""
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
    if isinstance(t, int):
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
    while r.step():
        if r.steps > limit:
            raise RuntimeError("the dataflow did not quiesce")
    return r


# ------------------------------------------------------------------------------------------------
# From a recording to a span system
# ------------------------------------------------------------------------------------------------

def _universe(r: Run, p: str) -> set:
    u = set()
    for ch in [*r.df.ins[p], *( [f"in:{p}"] if f"in:{p}" in r.chan else [])]:
        if ch.startswith("in:"):
            u |= {m.time for m in r.chan[ch]}
        else:
            u |= {m.time for m in r.sent[ch]}
    u |= {ev.time for ev in r.history[p]}
    return u


def _transformer(r: Run, e: Edge) -> T.Transformer | None:
    if e.phi == "identity":
        return T.Identity()
    if e.phi == "conservative":
        return T.Conservative()
    if e.phi == "entry":
        return T.LoopEntry()
    if e.phi == "feedback":
        return T.LoopFeedback()
    if e.phi == "exit":
        return T.LoopExit()
    if e.phi in ("bridge", "bridge-per-epoch"):
        cnt: Counter = Counter(r.cause_time[m.cause][1] for m in r.sent[e.name])
        top = max(cnt, default=-1)
        counts = tuple(cnt[t] for t in range(top + 1))
        return (T.Bridge if e.phi == "bridge" else T.BridgePerEpoch)(e.name, counts)
    if e.phi == "recorded":
        return None
    raise InvalidInputError(f"edge {e.name}: unknown transformer {e.phi!r}")


@dataclass
class Built:
    system: SpanSystem
    spans: dict[str, list[T.Span]]  # per processor: chain spans (+ ⊤ last when live)


def build_system(r: Run, failed: set[str], top_all: bool = False, phi: str = "reject") -> Built:
    """Derive the span system of the recording ``r`` when ``failed`` processors fail now.

    ``top_all=True`` builds the WRONG variant in which ⊤ is "all times" instead of the concrete
    ⊤ (kept to show that it loses an in-flight unlogged message).
    """
    df = r.df
    procs: list[ProcessorSpec] = []
    spans: dict[str, list[T.Span]] = {}
    for p in df.ops:
        u = _universe(r, p)
        chain_sets: list[frozenset] = []
        chain_spans: list[T.Span] = []
        for s in r.chain[p]:
            fs = s.restrict(u)
            if chain_sets and fs == chain_sets[-1]:
                chain_spans[-1] = s
                continue
            chain_sets.append(fs)
            chain_spans.append(s)
        top = None
        if p not in failed:
            tspan: T.Span = T.concrete_top(chain_spans[-1], [ev.time for ev in r.history[p]])
            if top_all:
                tspan = T.TimeSet(frozenset(u))
            top = tspan.restrict(u)
            chain_spans.append(tspan)
        procs.append(ProcessorSpec(p, tuple(chain_sets), top))
        spans[p] = chain_spans
    edges: list[EdgeSpec] = []
    live_top = {p.name: p.top is not None for p in procs}
    for e in df.edges:
        universe = {m.time for m in r.sent[e.name]}
        sp = spans[e.src]
        k = len(sp) - (1 if live_top[e.src] else 0)
        tr = _transformer(r, e)

        def disc(s: T.Span, e: Edge = e) -> frozenset:
            if e.logged:
                return frozenset()
            return frozenset(m.time for m in r.sent[e.name] if r.cause_time[m.cause][1] in s)

        def fixed(s: T.Span, e: Edge = e, tr: T.Transformer | None = tr, universe: set = universe) -> frozenset:
            if tr is not None:
                return tr(s, universe)
            outside = {m.time for m in r.sent[e.name] if r.cause_time[m.cause][1] not in s}
            return frozenset(universe - outside)

        processed = frozenset(ev.time for ev in r.history[e.dst] if ev.edge == e.name)
        edges.append(EdgeSpec(e.name, e.src, e.dst, tuple(disc(sp[i]) for i in range(k)),
                              disc(sp[k]) if live_top[e.src] else None, processed,
                              tuple(fixed(sp[i]) for i in range(k))))
    from rollcheck.pyimpl.spans.system import system_from_dict, system_to_dict

    raw = SpanSystem(tuple(procs), tuple(edges))
    return Built(system_from_dict(system_to_dict(raw), phi=phi), spans)


# ------------------------------------------------------------------------------------------------
# Recovery and the exactly-once check
# ------------------------------------------------------------------------------------------------

@dataclass
class Outcome:
    levels: dict[str, int | str]
    lost: list[tuple[str, Any]]
    ok: bool
    detail: str
    system: SpanSystem | None = None


def recover(r: Run, failed: set[str], solver: Callable[[SpanSystem], Mapping[str, int]] | None = None,
            top_all: bool = False) -> tuple[Mapping[str, int], list[tuple[str, Any]], SpanSystem]:
    """Fail ``failed`` now, compute spans, restore every processor, reset queues. Returns the
    levels, the lost messages ``(edge, time)``, and the span system."""
    built = build_system(r, failed, top_all=top_all, phi="keep" if top_all else "normalise")
    s = built.system
    if solver is None:
        if s.phi_monotone:
            res = solve_levels(s)
            levels = {p.name: res.levels[i] for i, p in enumerate(s.processors)}
        else:
            levels = solve_literal(s)
    else:
        levels = dict(solver(s))
    df = r.df
    at_top = {p.name: p.is_top(levels[p.name]) for p in s.processors}
    keep_span = {p: built.spans[p][levels[p]] for p in df.ops}
    for p in df.ops:
        gone = sorted((t for t in r.released[p] if t not in keep_span[p]), key=repr)
        if gone:
            raise RuntimeError(f"{p}: released output(s) at {gone[:3]} would be rolled back")
    kept_events: set[int] = set()
    for p in df.ops:
        if at_top[p]:
            kept_events |= {ev.uid for ev in r.history[p]}
            continue
        span = keep_span[p]
        hist = [ev for ev in r.history[p] if ev.time in span]
        r.history[p] = hist
        st: dict = {}
        for ev in hist:
            df.ops[p].process(st, df.outs[p], ev.time, ev.payload)
        r.state[p] = st
        kept_events |= {ev.uid for ev in hist}
        for e in df.outs[p]:
            kept = [m for m in r.sent[e] if m.cause in kept_events]
            if df.edge[e].seq:
                nums = sorted(m.time[1] for m in kept)
                if nums != list(range(1, len(nums) + 1)):
                    raise RuntimeError(f"{p}: kept sends on {e} are not a prefix; cannot renumber")
                r.seqno[e] = len(nums)
        if f"in:{p}" in r.chan:
            op = df.ops[p]
            assert isinstance(op, Source)
            done = {ev.msg for ev in hist}
            redo: deque[Any] = deque()
            for t in sorted(op.batches):
                if t in span:
                    continue
                if t in r.acked[p]:
                    raise RuntimeError(f"source {p}: batch {t} was acknowledged but must be re-read")
                for m in _input_msgs(r, p, t):
                    if m.uid not in done:
                        redo.append(m)
            r.chan[f"in:{p}"] = redo
        r.pending_ckpt[p] = []
        r.chain[p] = list(built.spans[p][: levels[p] + 1])  # spans above the restored one are gone
    lost: list[tuple[str, Any]] = []
    for ed in df.edges:
        if at_top[ed.src] and at_top[ed.dst]:
            continue
        got = {ev.msg for ev in r.history[ed.dst] if ev.edge == ed.name}
        q: deque = deque()
        for m in r.sent[ed.name]:
            if m.cause not in kept_events or m.uid in got:
                continue
            if ed.logged:
                q.append(m)
            else:
                lost.append((ed.name, m.time))
        r.chan[ed.name] = q
        r.sent[ed.name] = [m for m in r.sent[ed.name] if m.cause in kept_events]
    for p in df.ops:
        r.state.setdefault(p, {})
    return levels, lost, s


def _input_msgs(r: Run, p: str, t: int) -> list[Msg]:
    if not hasattr(r, "_inputs"):
        r._inputs = {}  # type: ignore[attr-defined]
    key = (p, t)
    if key not in r._inputs:  # type: ignore[attr-defined]
        op = r.df.ops[p]
        assert isinstance(op, Source)
        r._inputs[key] = [Msg(-(1 + i) - 1000 * t, f"in:{p}", t, x, 0)  # type: ignore[attr-defined]
                          for i, x in enumerate(op.batches[t])]
    return r._inputs[key]  # type: ignore[attr-defined]


def _canon(x: Any) -> Any:
    if isinstance(x, dict):
        return sorted((repr(k), _canon(v)) for k, v in x.items())
    if isinstance(x, list):
        return sorted(map(repr, x))
    return x


def exactly_once(a: Run, b: Run) -> str | None:
    """None when ``a`` and ``b`` end in the same processor states and every edge delivered the
    same multiset of (time, payload); else the first difference."""
    for p in a.df.ops:
        if _canon(a.state[p]) != _canon(b.state[p]):
            return f"processor {p}: final state differs"
        for ch in sorted({ev.edge for ev in a.history[p]} | {ev.edge for ev in b.history[p]}):
            ca = Counter((repr(ev.time), repr(ev.payload)) for ev in a.history[p] if ev.edge == ch)
            cb = Counter((repr(ev.time), repr(ev.payload)) for ev in b.history[p] if ev.edge == ch)
            if ca != cb:
                extra, missing = ca - cb, cb - ca
                return (f"edge {ch} into {p}: duplicated {sorted(extra)[:3]} missing {sorted(missing)[:3]}")
    return None


def failure_experiment(df_factory: Callable[[], Dataflow], seed: int, fail_at: int, failed: set[str],
                       solver: Callable[[SpanSystem], Mapping[str, int]] | None = None,
                       top_all: bool = False, track_watermark: bool = False) -> Outcome:
    """Run ``df`` with ``seed``; after ``fail_at`` deliveries fail ``failed``, recover, finish, and
    compare with the failure-free run of the same dataflow and seed."""
    ref = run_to_end(Run.start(df_factory(), seed))
    r = Run.start(df_factory(), seed)
    r.track_watermark = track_watermark
    while r.steps < fail_at and r.step():
        pass
    r.checkpointing = False
    for p in failed:
        if p not in r.df.ops:
            raise InvalidInputError(f"unknown processor {p!r}", location="failed")
    levels, lost, s = recover(r, failed, solver=solver, top_all=top_all)
    run_to_end(r)
    diff = exactly_once(r, ref)
    labels = s.labels(levels)
    if lost:
        return Outcome(labels, lost, False, f"lost in-flight unlogged message(s) {lost[:3]}", s)
    return Outcome(labels, lost, diff is None, diff or "exactly once", s)


# ------------------------------------------------------------------------------------------------
# The example dataflows
# ------------------------------------------------------------------------------------------------

def _batches(seed: int, epochs: int = 3, per: int = 3) -> dict[int, list[int]]:
    rng = random.Random(seed)
    return {t: [rng.randrange(1, 20) for _ in range(per)] for t in range(epochs)}


def _seq_example(seed: int, logged: bool = False) -> Dataflow:
    ops: dict[str, Op] = {"src": Source(_batches(seed), seq_out=True), "a": Counter_(),
                          "b": Counter_(), "sink": Sink(domain="seq")}
    edges = [Edge("e0", "src", "a", logged=True, seq=True, phi="recorded"),
             Edge("e1", "a", "b", logged=logged, seq=True, phi="recorded"),
             Edge("e2", "b", "sink", logged=False, seq=True, phi="recorded")]
    return Dataflow(ops, edges, {"src": ("epoch", 1), "a": ("seq", 2), "b": ("seq", 3), "sink": ("seq", 2)})


def _epoch_example(seed: int) -> Dataflow:
    rng = random.Random(seed)
    ops: dict[str, Op] = {"s1": Source(_batches(seed)), "s2": Source(_batches(seed + 1)),
                          "m1": Map((2, 1)), "m2": Map((1, rng.randrange(5))), "sum": SumPerTime(),
                          "out": Sink()}
    edges = [Edge("a1", "s1", "m1"), Edge("a2", "s2", "m2"), Edge("b1", "m1", "sum"),
             Edge("b2", "m2", "sum", logged=True), Edge("c", "sum", "out")]
    pol = {p: ("epoch", 1) for p in ops}
    return Dataflow(ops, edges, pol)


def _loop_example(seed: int) -> Dataflow:
    ops: dict[str, Op] = {"src": Source(_batches(seed, per=2)), "entry": LoopEntryOp(),
                          "body": LoopBody(), "exit": LoopExitOp(), "out": Sink()}
    edges = [Edge("in", "src", "entry"), Edge("enter", "entry", "body", phi="entry"),
             Edge("fb", "body", "body", phi="feedback"), Edge("leave", "body", "exit"),
             Edge("out", "exit", "out", phi="exit")]
    return Dataflow(ops, edges, {p: ("epoch", 1) for p in ops})


def _bridge_example(seed: int, per_epoch: bool = False) -> Dataflow:
    ops: dict[str, Op] = {"src": Source(_batches(seed)), "map": Map((3, 0)), "bridge": BridgeOp(),
                          "count": Counter_(), "out": Sink(domain="seq")}
    edges = [Edge("a", "src", "map"), Edge("b", "map", "bridge"),
             Edge("c", "bridge", "count", seq=True, phi="bridge-per-epoch" if per_epoch else "bridge"),
             Edge("d", "count", "out", seq=True, phi="recorded")]
    return Dataflow(ops, edges, {"src": ("epoch", 1), "map": ("epoch", 1), "bridge": ("epoch", 1),
                                 "count": ("seq", 2), "out": ("seq", 3)})


def _selective_example(seed: int) -> Dataflow:
    """Fig. 4: Select -> Sum -> Buffer over interleaved epochs."""
    ops: dict[str, Op] = {"src": Source(_batches(seed, epochs=2, per=4)), "select": Map((1, 0)),
                          "sum": SumPerTime(), "buffer": Sink()}
    edges = [Edge("a", "src", "select"), Edge("b", "select", "sum"), Edge("c", "sum", "buffer")]
    return Dataflow(ops, edges, {p: ("epoch", 1) for p in ops})


EXAMPLES: dict[str, Callable[[int], Dataflow]] = {
    "sequence-number": _seq_example,
    "epoch": _epoch_example,
    "loop": _loop_example,
    "bridge": _bridge_example,
    "selective": _selective_example,
}


def example(name: str, seed: int = 0) -> Dataflow:
    """One of the example dataflows (see :data:`EXAMPLES`)."""
    if name not in EXAMPLES:
        raise InvalidInputError(f"unknown example {name!r}; known: {sorted(EXAMPLES)}")
    return EXAMPLES[name](seed)
