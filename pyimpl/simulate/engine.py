"""A seeded, deterministic discrete-event simulator of a dataflow job under a checkpointing protocol.

Model (``specs/simulate.md#engine``):

- Every operator instance of a :class:`~rollcheck.pyimpl.simulate.topology.Topology` is a process. Channels
  are FIFO; a message's network delay is drawn from the run's seeded generator, and FIFO order is
  kept by never letting a message overtake the previous one on its channel.
- A process handles one item at a time: it picks, among the items that have arrived on its
  unblocked inputs, the one that arrived first (ties: lower channel index), and is busy for
  ``cost`` time units afterwards. Sources read a replayable input (offsets are part of their
  state, like Kafka offsets), one record every ``gap`` time units on average.
- Every data message carries a per-channel sequence number; receivers keep, per input channel,
  the last sequence number they applied, and senders keep a log of what they sent. Both are part
  of the checkpointed state (the log is kept apart: persistent, or volatile = lost with its
  process).
- Protocols: ``uc``, ``bcs``, ``hmnr`` (and the mutation catalogue's variants) from
  :mod:`rollcheck.pyimpl.protocols` — basic checkpoints by a per-process timer that restarts after *any*
  checkpoint, forced checkpoints decided before each delivery; ``cl-aligned`` and
  ``cl-unaligned`` — a coordinator starts snapshot s+1 at the sources every ``interval`` units
  once snapshot s completed everywhere, and the operators follow
  :mod:`rollcheck.pyimpl.protocols.chandy_lamport` (aligned operators hold back marked inputs).
- One fail-stop failure of a chosen process at a chosen time; recovery is instantaneous and is
  done by :mod:`rollcheck.pyimpl.simulate.recovery`. The pattern of everything before the failure (the
  whole run without one) is recorded event by event: :attr:`SimResult.pattern`.
- A run in which nothing can happen any more while operators still wait for markers is a
  deadlock (aligned barriers on a cycle): the run stops and reports the stuck operators and their
  blocked inputs; it never hangs.

Index conventions: processes as in the topology; checkpoint k of a process is C[i,k] of the
pattern (k = 0 is the initial state). Properties: ``specs/simulate.md`` (anchors in the
``properties/simulate_*.py`` modules).

References
----------
.. [1] FERDiS paper (``ferdis-…``), §7.2.1–7.2.8 (checkpoints, protocols, coordinator, recovery
   line, channel state, message-log replay) and §8.1 (workloads).
.. [2] ``algorithms.md`` §1–§3 (protocol rules, the timer policy, rollback handling).
"""

from __future__ import annotations

import heapq
import random
import time
from collections import Counter, deque
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple

from rollcheck.pyimpl.errors import InvalidInputError
from rollcheck.pyimpl.pattern import Pattern, PatternBuilder
from rollcheck.pyimpl.protocols import BasicTimer, get_protocol, get_snapshot_protocol
from rollcheck.pyimpl.protocols.chandy_lamport import CHECKPOINT, COMPLETE, FORWARD
from rollcheck.pyimpl.simulate.topology import SHUFFLE, Topology, workload

__all__ = [
    "CL_PROTOCOLS",
    "PROTOCOL_NAMES",
    "Variant",
    "SimConfig",
    "SnapshotRecord",
    "Deadlock",
    "SimResult",
    "simulate",
    "run_engine",
]

CL_PROTOCOLS = ("cl-aligned", "cl-unaligned", "cl-aligned-no-block")
PROTOCOL_NAMES = ("uc", "bcs", "hmnr", "cl-aligned", "cl-unaligned")

VOCABULARY = 12  # wordcount: number of distinct words
VERTICES = 16  # nhop: number of graph vertices
HOPS = 2  # nhop: the n of n-hop


@dataclass(frozen=True)
class Variant:
    """Switches for the mutation catalogue; the defaults are the reference behaviour.

    Attributes
    ----------
    clear_channels : bool
        Flush a channel when both of its ends roll back (FERDiS §7.2.6, case A).
    dedup : bool
        Receivers accept a message only if its sequence number is the next expected one.
    replay_offset : int
        Replay starts at the restored last-applied sequence number plus this (reference: 1).
    record_channels : bool
        Unaligned Chandy–Lamport records in-flight input messages as channel state.
    timer_restart_on_forced : bool
        The basic-checkpoint timer restarts after a forced checkpoint too.
    detect_deadlock : bool
        Report a run stuck on blocked inputs as a deadlock.
    volatile_logs_of_rolled_back : bool
        With volatile logs, every rolled-back process (not only the failed one) loses its log.
    """

    clear_channels: bool = True
    dedup: bool = True
    replay_offset: int = 1
    record_channels: bool = True
    timer_restart_on_forced: bool = True
    detect_deadlock: bool = True
    volatile_logs_of_rolled_back: bool = False


@dataclass(frozen=True)
class SimConfig:
    """One simulation. Times are in arbitrary units (the sweep uses "seconds").

    ``fail`` names the failing operator instance (``"map0"`` = instance 0, or ``"map0.1"``);
    ``fail_at`` is the failure time (both or neither). ``virtual``: virtual checkpoints in the
    recovery line; ``persistent_logs``: message logs survive the failure of their process.
    """

    workload: str = "nexmark"
    protocol: str = "uc"
    interval: float = 10.0
    parallelism: int = 2
    records: int = 60
    gap: float = 1.0
    delay: float = 0.5
    cost: float = 0.05
    fail: str | None = None
    fail_at: float | None = None
    virtual: bool = True
    persistent_logs: bool = True
    seed: int = 0
    variant: Variant = field(default_factory=Variant)

    def validate(self) -> Topology:
        """Check every parameter; return the topology. Raises InvalidInputError naming the flag."""
        topo = workload(self.workload, self.parallelism)
        if not isinstance(self.protocol, str):
            raise InvalidInputError(f"protocol must be a name, got {self.protocol!r}", location="--protocol")
        if self.protocol in CL_PROTOCOLS:
            get_snapshot_protocol(self.protocol)
        else:
            get_protocol(self.protocol)
        for name, v, lo in (("interval", self.interval, 0.0), ("gap", self.gap, 0.0), ("delay", self.delay, 0.0)):
            if not isinstance(v, (int, float)) or not v > lo or v != v or v == float("inf"):
                raise InvalidInputError(f"{name} must be a finite number > {lo}, got {v!r}", location=f"--{name}")
        if not isinstance(self.cost, (int, float)) or not 0 <= self.cost < float("inf"):
            raise InvalidInputError(f"cost must be a finite number >= 0, got {self.cost!r}", location="--cost")
        if type(self.records) is not int or not 1 <= self.records <= 10_000_000:
            raise InvalidInputError(f"records must be an integer in 1..10^7, got {self.records!r}", location="--records")
        if type(self.seed) is not int:
            raise InvalidInputError(f"seed must be an integer, got {self.seed!r}", location="--seed")
        if (self.fail is None) != (self.fail_at is None):
            raise InvalidInputError("--fail and --fail-at go together", location="--fail")
        if self.fail is not None:
            topo.resolve_process(self.fail)
            if not isinstance(self.fail_at, (int, float)) or not 0 < self.fail_at < float("inf"):
                raise InvalidInputError(f"fail-at must be a finite time > 0, got {self.fail_at!r}", location="--fail-at")
        return topo

    def without_failure(self) -> SimConfig:
        return replace(self, fail=None, fail_at=None)


class Msg(NamedTuple):
    """An item on a channel: data (``seq`` >= 1) or a Chandy–Lamport marker (``seq`` == 0)."""

    channel: int
    seq: int
    payload: Any  # data: (key, units, value); marker: snapshot id
    pb: Any  # protocol piggyback (None for markers and replays)
    pid: str | None  # pattern message id (None after the failure)
    inc: int  # sender incarnation at send time
    arrival: float
    replayed: bool = False

    @property
    def is_marker(self) -> bool:
        return self.seq == 0


@dataclass
class Saved:
    """A checkpoint of one process (all containers are private copies)."""

    time: float
    app: Any  # operator state (a sink saves the length of its append-only unit list)
    out_seq: dict[int, int]
    in_seq: dict[int, int]
    applied: dict[int, int]  # length of each append-only applied-sequence list (a prefix)
    proto: Any
    offset: int
    forced: bool
    recorded: dict[int, list[tuple[int, Any, Any]]] = field(default_factory=dict)


@dataclass
class Proc:
    pid: int
    kind: str
    app: Any
    out_seq: dict[int, int]
    in_seq: dict[int, int]
    applied: dict[int, list[int]]
    proto: Any
    offset: int = 0
    busy_until: float = 0.0
    next_emit: float = 0.0
    timer: BasicTimer | None = None
    timer_gen: int = 0
    cl: Any = None
    recording: dict[int, list[tuple[int, Any, Any]]] = field(default_factory=dict)
    saved: list[Saved] = field(default_factory=list)
    inc: int = 0
    skip: dict[int, set[int]] = field(default_factory=dict)


class SnapshotRecord(NamedTuple):
    """A completed Chandy–Lamport snapshot: the checkpoint index per process and, per channel, the
    recorded channel state (pattern message ids)."""

    snapshot: int
    cut: tuple[int, ...]
    recorded: dict[int, tuple[str, ...]]


class Deadlock(NamedTuple):
    """No progress possible: items wait on blocked inputs. ``stuck``: operator instances waiting
    for markers, with their blocked input channels."""

    time: float
    stuck: tuple[str, ...]
    waiting: dict[str, tuple[str, ...]]


@dataclass
class SimResult:
    """The outcome of one run (metrics are filled in by :mod:`rollcheck.pyimpl.simulate.metrics`)."""

    config: SimConfig
    topology: Topology
    pattern: Pattern
    checkpoints: dict[str, int]  # regular / forced over the whole run
    events: int
    end_time: float
    outputs: Counter
    snapshots: list[SnapshotRecord]
    deadlock: Deadlock | None
    recovery: Any = None  # rollcheck.pyimpl.simulate.recovery.Recovery
    orphans: int = 0  # deliveries of messages whose send the sender undid by rolling back
    duplicates: int = 0  # (channel, seq) applied more than once in a final state
    dropped: int = 0  # messages the receivers' deduplication discarded
    seconds: float = 0.0
    metrics: dict[str, Any] = field(default_factory=dict)


_WAKE, _TIMER, _TICK, _FAIL = 0, 1, 2, 3


class Engine:
    """The event loop. Use :func:`simulate` (or :func:`run_engine` for one raw run)."""

    def __init__(self, cfg: SimConfig, topo: Topology):
        self.cfg = cfg
        self.topo = topo
        self.rng = random.Random(cfg.seed)
        self.now = 0.0
        self.heap: list[tuple[float, int, int, int, int]] = []
        self._order = 0
        self.n_wake = 0
        self.events = 0
        self.cl = get_snapshot_protocol(cfg.protocol) if cfg.protocol in CL_PROTOCOLS else None
        self.proto = None if self.cl else get_protocol(cfg.protocol)
        self.builder: PatternBuilder | None = PatternBuilder(list(topo.process_names))
        self.chan: list[deque[Msg]] = [deque() for _ in topo.channels]
        self.last_arrival = [0.0] * len(topo.channels)
        self.logs: list[dict[int, Any]] = [dict() for _ in topo.channels]
        self.undone: dict[int, tuple[int, int]] = {}  # channel -> (sender incarnation, restored out_seq)
        self.regular = 0
        self.forced = 0
        self.orphans = 0
        self.dropped = 0
        self.snapshot_id = 0
        self.snap_pending: set[int] = set()
        self.snap_cut: dict[int, dict[int, int]] = {}
        self.snapshots: list[SnapshotRecord] = []
        self.deadlock: Deadlock | None = None
        self.recovery: Any = None
        self._conns = [topo.out_connections(topo.process_operator[i]) for i in range(topo.n)]
        self.procs = [self._new_proc(i) for i in range(topo.n)]

    # ------------------------------------------------------------------ setup
    def _new_proc(self, i: int) -> Proc:
        topo = self.topo
        kind = topo.operators[topo.process_operator[i]].kind
        app: Any = [] if kind == "sink" else {}
        proto = self.proto.initial(i, topo.n) if self.proto else None
        pr = Proc(
            i, kind, app,
            out_seq={c: 0 for c in topo.outputs[i]},
            in_seq={c: 0 for c in topo.inputs[i]},
            applied={c: [] for c in topo.inputs[i]},
            proto=proto,
        )
        if self.cl is not None:
            pr.cl = self.cl.initial(i, topo.inputs[i], topo.outputs[i])
        pr.saved.append(self._save(pr, forced=False))
        return pr

    def _save(self, pr: Proc, forced: bool) -> Saved:
        # append-only histories are saved as prefix lengths: a checkpoint is always a prefix of
        # the live history (only a rollback truncates it, and it drops later checkpoints)
        app = len(pr.app) if isinstance(pr.app, list) else dict(pr.app)
        return Saved(self.now, app, dict(pr.out_seq), dict(pr.in_seq),
                     {c: len(v) for c, v in pr.applied.items()}, pr.proto, pr.offset, forced)

    def push(self, t: float, kind: int, pid: int = -1, extra: int = 0) -> None:
        self._order += 1
        if kind == _WAKE:
            self.n_wake += 1
        heapq.heappush(self.heap, (t, self._order, kind, pid, extra))

    # ------------------------------------------------------------------ checkpoints
    def checkpoint(self, pr: Proc, forced: bool) -> int:
        if self.proto is not None:
            pr.proto = self.proto.on_checkpoint(pr.proto)
        pr.saved.append(self._save(pr, forced))
        if forced:
            self.forced += 1
        else:
            self.regular += 1
        if self.builder is not None:
            self.builder.checkpoint(pr.pid, forced=forced)
        if pr.timer is not None and (not forced or self.cfg.variant.timer_restart_on_forced):
            self._restart_timer(pr)
        return len(pr.saved) - 1

    def _restart_timer(self, pr: Proc) -> None:
        assert pr.timer is not None
        pr.timer = pr.timer.restart(self.now)
        pr.timer_gen += 1
        self.push(pr.timer.deadline, _TIMER, pr.pid, pr.timer_gen)

    # ------------------------------------------------------------------ messages
    def send(self, pr: Proc, ch: int, payload: Any) -> None:
        pr.out_seq[ch] += 1
        seq = pr.out_seq[ch]
        dst = self.topo.channels[ch].dst
        pb = None
        if self.proto is not None:
            pr.proto, pb = self.proto.on_send(pr.proto, dst)
        mid = self.builder.send(pr.pid, dst) if self.builder is not None else None
        self.logs[ch][seq] = payload
        self._enqueue(Msg(ch, seq, payload, pb, mid, pr.inc, 0.0))

    def _enqueue(self, m: Msg) -> None:
        arrival = max(self.now + self.rng.expovariate(1.0 / self.cfg.delay), self.last_arrival[m.channel])
        self.last_arrival[m.channel] = arrival
        self.chan[m.channel].append(m._replace(arrival=arrival))
        self.push(arrival, _WAKE, self.topo.channels[m.channel].dst)

    def _route(self, pr: Proc, outputs: list[tuple[int, Any]]) -> None:
        """Send ``(connection, payload)`` pairs along the right channel (shuffle: key % width)."""
        for conn, payload in outputs:
            chans = self.topo.route[(pr.pid, conn)]
            if self.topo.connections[conn].kind == SHUFFLE:
                self.send(pr, chans[payload[0] % len(chans)], payload)
            else:
                self.send(pr, chans[0], payload)

    # ------------------------------------------------------------------ operators
    def _source_record(self, pr: Proc) -> tuple[int, Any]:
        """Record number ``offset`` of this source instance: (key, payload)."""
        inst = self.topo.process_instance[pr.pid]
        gid = inst * self.cfg.records + pr.offset
        return gid, (gid * 2654435761) % 1000

    def _apply(self, pr: Proc, ch: int, payload: Any) -> list[tuple[int, Any]]:
        """The operator function: update ``pr.app``, return ``(connection, payload)`` outputs.
        Payloads are ``(key, units, value)``; ``units`` are the source-record lineage a sink
        accumulates (the output the processing-semantics verdict compares)."""
        kind = pr.kind
        key, units, value = payload
        conns = self._conns[pr.pid]
        if kind == "filter":
            return [(conns[0], payload)] if key % 2 == 0 else []
        if kind == "split":
            words = value
            return [(conns[0], (w, (u,), 1)) for w, u in zip(words, units, strict=True)]
        if kind == "count":
            pr.app[key] = pr.app.get(key, 0) + 1
            return [(conns[0], (key, units, pr.app[key]))]
        if kind == "sink":
            pr.app.extend(units)
            return []
        if kind == "hop-match":
            if self._is_back(ch):  # remember a (hop-bounded) neighbour; no output (FERDiS §8.1)
                src, hop = value
                known = pr.app.get(key, ())
                pr.app[key] = tuple(sorted(set(known) | {(src, hop)}))[:8]
                return []
            frm, to = value
            matches = len(pr.app.get(frm, ()))
            return [(conns[0], (key, units, (frm, to, 1, matches)))]
        if kind == "hop-expand":
            frm, to, hop, _ = value
            pr.app[to] = pr.app.get(to, 0) + 1
            out = [(c, payload) for c in conns if self.topo.connections[c].dst == "sink"]
            if hop < HOPS:
                back = [c for c in conns if self.topo.connections[c].dst != "sink"]
                out += [(c, (to, (), (frm, hop + 1))) for c in back]
            return out
        raise InvalidInputError(f"operator kind {kind!r} has no processing")  # pragma: no cover

    def _is_back(self, ch: int) -> bool:
        conn = self.topo.connections[self.topo.channels[ch].connection]
        return conn.kind == SHUFFLE

    def _emit(self, pr: Proc) -> None:
        gid, key = self._source_record(pr)
        pr.offset += 1
        conns = self._conns[pr.pid]
        wl = self.cfg.workload
        payload: Any
        if wl == "wordcount":
            nw = 1 + gid % 3
            words = tuple((gid * 31 + j * 17) % VOCABULARY for j in range(nw))
            payload = (key, tuple((gid, j) for j in range(nw)), words)
        elif wl == "nhop":
            frm, to = (gid * 7) % VERTICES, (gid * 11 + 3) % VERTICES
            payload = (frm, (gid,), (frm, to))
        else:
            payload = (key, (gid,), gid)
        self._route(pr, [(conns[0], payload)])

    # ------------------------------------------------------------------ processing
    def _pick(self, pr: Proc) -> int | None:
        best, best_t = None, None
        for c in self.topo.inputs[pr.pid]:
            q = self.chan[c]
            if not q or q[0].arrival > self.now:
                continue
            if self.cl is not None and self.cl.is_blocked(pr.cl, c):
                continue
            if best_t is None or q[0].arrival < best_t:
                best, best_t = c, q[0].arrival
        return best

    def wake(self, pr: Proc) -> None:
        while True:
            if pr.busy_until > self.now:
                return
            if pr.kind == "source":
                if pr.offset >= self.cfg.records:
                    return
                if pr.next_emit > self.now:
                    return
                self._emit(pr)
                self.events += 1
                pr.next_emit = self.now + self.rng.expovariate(1.0 / self.cfg.gap)
                pr.busy_until = self.now + self.cfg.cost
                self.push(max(pr.busy_until, pr.next_emit), _WAKE, pr.pid)
                return
            c = self._pick(pr)
            if c is None:
                return
            m = self.chan[c].popleft()
            self.events += 1
            if m.is_marker:
                self._marker(pr, c, m.payload)
                continue  # markers take no processing time
            if not self._deliver(pr, c, m):
                continue  # dropped by deduplication
            if self.cfg.cost > 0:
                pr.busy_until = self.now + self.cfg.cost
                self.push(pr.busy_until, _WAKE, pr.pid)
                return

    def _deliver(self, pr: Proc, c: int, m: Msg) -> bool:
        expected = pr.in_seq[c] + 1
        skip = pr.skip.get(c)
        while skip and expected in skip:
            skip.discard(expected)
            pr.in_seq[c] = expected
            expected += 1
        if self.cfg.variant.dedup and m.seq != expected:
            self.dropped += 1
            return False
        u = self.topo.channels[c].src
        und = self.undone.get(c)
        if und is not None and m.inc < und[0] and m.seq > und[1]:
            self.orphans += 1
        if self.cl is not None and self.cl.records(pr.cl, c) and self.cfg.variant.record_channels:
            pr.recording.setdefault(c, []).append((m.seq, m.pid, m.payload))
        if self.proto is not None and not m.replayed:
            if self.proto.must_force(pr.proto, u, m.pb):
                self.checkpoint(pr, forced=True)
            pr.proto = self.proto.on_deliver(pr.proto, u, m.pb)
        if self.builder is not None and m.pid is not None:
            self.builder.deliver(pr.pid, m.pid)
        pr.in_seq[c] = max(pr.in_seq[c], m.seq)
        pr.applied[c].append(m.seq)
        self._route(pr, self._apply(pr, c, m.payload))
        return True

    # ------------------------------------------------------------------ Chandy–Lamport
    def _cl_actions(self, pr: Proc, acts: Any) -> None:
        assert self.cl is not None
        for a in acts:
            if a.kind == CHECKPOINT:
                k = self.checkpoint(pr, forced=False)
                self.snap_cut.setdefault(a.snapshot, {})[pr.pid] = k
                pr.recording = {}
            elif a.kind == FORWARD:
                for ch in self.topo.outputs[pr.pid]:
                    self._enqueue(Msg(ch, 0, a.snapshot, None, None, pr.inc, 0.0))
            elif a.kind == COMPLETE:
                if pr.recording:
                    pr.saved[-1].recorded = {c: list(v) for c, v in pr.recording.items()}
                self.snap_pending.discard(pr.pid)
                if not self.snap_pending:
                    self._snapshot_done(a.snapshot)

    def _marker(self, pr: Proc, c: int, snapshot: int) -> None:
        assert self.cl is not None
        pr.cl, acts = self.cl.on_marker(pr.cl, c, snapshot)
        self._cl_actions(pr, acts)

    def _snapshot_done(self, s: int) -> None:
        if self.builder is None:
            return
        cut = self.snap_cut.get(s, {})
        if len(cut) != self.topo.n:
            return
        recorded: dict[int, tuple[str, ...]] = {}
        for pr in self.procs:
            sv = pr.saved[cut[pr.pid]]
            for c, items in sv.recorded.items():
                recorded[c] = tuple(mid for _, mid, _ in items if mid is not None)
        self.snapshots.append(SnapshotRecord(s, tuple(cut[i] for i in range(self.topo.n)), recorded))

    def _tick(self) -> None:
        if not self.snap_pending:
            self.snapshot_id += 1
            self.snap_pending = set(range(self.topo.n))
            for pr in self.procs:
                if pr.kind == "source":
                    pr.cl, acts = self.cl.start(pr.cl, self.snapshot_id)  # type: ignore[union-attr]
                    self._cl_actions(pr, acts)
        self.push(self.now + self.cfg.interval, _TICK)

    # ------------------------------------------------------------------ main loop
    def _has_work(self) -> bool:
        if self.n_wake:
            return True
        return any(pr.kind == "source" and pr.offset < self.cfg.records for pr in self.procs)

    def _find_deadlock(self) -> Deadlock | None:
        """Called when nothing can happen any more: operators still waiting for markers are stuck."""
        waiting: dict[str, tuple[str, ...]] = {}
        stuck = []
        names = self.topo.process_names
        for pr in self.procs:
            if self.cl is not None and pr.cl is not None and pr.cl.active:
                stuck.append(names[pr.pid])
                blocked = sorted(self.cl.blocked_inputs(pr.cl))
                waiting[names[pr.pid]] = tuple(
                    f"{names[self.topo.channels[c].src]}->{names[pr.pid]}" for c in blocked
                )
        return Deadlock(self.now, tuple(stuck), waiting)

    def run(self) -> None:
        for pr in self.procs:
            if pr.kind == "source":
                pr.next_emit = self.rng.expovariate(1.0 / self.cfg.gap)
                self.push(pr.next_emit, _WAKE, pr.pid)
            if self.proto is not None:
                # an uncoordinated phase: each process's first basic checkpoint at a random time
                pr.timer = BasicTimer(self.cfg.interval, -self.rng.uniform(0, self.cfg.interval))
                pr.timer_gen = 1
                self.push(pr.timer.deadline, _TIMER, pr.pid, 1)
        if self.cl is not None:
            self.push(self.cfg.interval, _TICK)
        if self.cfg.fail_at is not None:
            self.push(float(self.cfg.fail_at), _FAIL)
        failed_done = self.cfg.fail_at is None
        last_work = 0.0
        while self.heap:
            t, _, kind, pid, extra = heapq.heappop(self.heap)
            if kind == _WAKE:
                self.n_wake -= 1
            elif kind != _FAIL and not self._has_work():
                if failed_done or not self.heap:
                    break
                continue
            self.now = t
            if kind == _WAKE:
                last_work = t
                self.wake(self.procs[pid])
            elif kind == _TIMER:
                pr = self.procs[pid]
                if extra == pr.timer_gen and pr.timer is not None and pr.timer.due(t):
                    self.checkpoint(pr, forced=False)
            elif kind == _TICK:
                self._tick()
            elif kind == _FAIL:
                if not self._has_work() and not any(self.chan):
                    raise InvalidInputError(
                        f"fail-at {self.cfg.fail_at:g} is after the run ended (last event at {last_work:g})",
                        location="--fail-at",
                    )
                from rollcheck.pyimpl.simulate.recovery import recover

                failed_done = True
                self.recovery = recover(self, self.topo.resolve_process(self.cfg.fail))  # type: ignore[arg-type]
            if self.cfg.variant.detect_deadlock and self.cl is not None and not self._has_work():
                dl = self._find_deadlock()
                if dl is not None and dl.stuck:
                    self.deadlock = dl
                    break

    def result(self, seconds: float) -> SimResult:
        if self.builder is not None:
            pattern = self.builder.build()
        else:
            pattern = self.recovery.pattern
        out: Counter = Counter()
        dup = 0
        for pr in self.procs:
            if pr.kind == "sink":
                out.update(pr.app)  # the sink's unit list
            for seqs in pr.applied.values():
                dup += len(seqs) - len(set(seqs))
        return SimResult(
            config=self.cfg, topology=self.topo, pattern=pattern,
            checkpoints={"regular": self.regular, "forced": self.forced},
            events=self.events, end_time=self.now, outputs=out, snapshots=self.snapshots,
            deadlock=self.deadlock, recovery=self.recovery, orphans=self.orphans, duplicates=dup,
            dropped=self.dropped, seconds=seconds,
        )


def run_engine(cfg: SimConfig) -> SimResult:
    """One raw run of ``cfg`` (no failure-free comparison, no metrics)."""
    topo = cfg.validate()
    t0 = time.perf_counter()
    eng = Engine(cfg, topo)
    eng.run()
    return eng.result(time.perf_counter() - t0)


def simulate(cfg: SimConfig, reference: SimResult | None = None) -> SimResult:
    """Run ``cfg`` and compute its FERDiS metrics (:func:`rollcheck.pyimpl.simulate.metrics.compute_metrics`).

    With a failure, the outputs are compared with the failure-free run of the same seed
    (``reference``, computed when not given) to establish the processing-semantics verdict.

    Examples
    --------
    >>> r = simulate(SimConfig("nexmark", "hmnr", interval=5.0, records=20, seed=1))
    >>> r.metrics["verdict"], r.metrics["useless_checkpoints"], r.deadlock is None
    ('exactly-once', 0, True)
    >>> r = simulate(SimConfig("nhop", "cl-aligned", interval=5.0, records=20))
    >>> r.deadlock is not None and "map0.0" in r.deadlock.stuck
    True
    """
    from rollcheck.pyimpl.simulate.metrics import compute_metrics

    res = run_engine(cfg)
    if cfg.fail is not None and res.deadlock is None and reference is None:
        reference = run_engine(cfg.without_failure())
    res.metrics = compute_metrics(res, reference)
    return res
