"""The event loop: a seeded, deterministic discrete-event simulation of a dataflow job.

The parameters are :class:`~rollcheck.pyimpl.simulate.config.SimConfig`, the run's state lives in
:mod:`~rollcheck.pyimpl.simulate.state`, what the operators compute in
:mod:`~rollcheck.pyimpl.simulate.workloads`; a failure is handed to
:mod:`~rollcheck.pyimpl.simulate.recovery` and the outcome to
:mod:`~rollcheck.pyimpl.simulate.metrics`. Every operator instance is a process on FIFO channels;
basic checkpoints come from a per-process timer (CIC protocols) or a coordinator (Chandy–Lamport);
the pattern up to the one fail-stop failure is :attr:`SimResult.pattern`; a run stuck waiting for
markers stops as a deadlock and never hangs. The model, rule by rule: ``specs/simulate.md#engine``.

Index conventions: processes as in the topology; checkpoint k of a process is C[i,k] of the
pattern (k = 0 is the initial state).

References
----------
.. [1] FERDiS paper, §7.2.1–7.2.8 (checkpoints, protocols, coordinator, recovery
   line, channel state, message-log replay) and §8.1 (workloads).
.. [2] ``specs/protocols.md`` (protocol rules, the timer policy, rollback handling).
"""

from __future__ import annotations

import heapq
import random
import time
from collections import Counter, deque
from typing import Any

from rollcheck.pyimpl.errors import InternalError, InvalidInputError
from rollcheck.pyimpl.pattern import PatternBuilder
from rollcheck.pyimpl.protocols import BasicTimer, get_snapshot_protocol
from rollcheck.pyimpl.protocols.base import checkpoint_function
from rollcheck.pyimpl.protocols.chandy_lamport import CHECKPOINT, COMPLETE, FORWARD
from rollcheck.pyimpl.simulate.config import (
    CL_PROTOCOLS,
    PROTOCOL_NAMES,
    SimConfig,
    Variant,
    make_protocol,
)
from rollcheck.pyimpl.simulate.metrics import compute_metrics
from rollcheck.pyimpl.simulate.recovery import recover
from rollcheck.pyimpl.simulate.state import (
    FAIL,
    TICK,
    TIMER,
    WAKE,
    Deadlock,
    Msg,
    Proc,
    Saved,
    SimResult,
    SnapshotRecord,
)
from rollcheck.pyimpl.simulate.topology import SHUFFLE, Topology
from rollcheck.pyimpl.simulate.workloads import apply_operator, source_payload, source_record

__all__ = [
    "CL_PROTOCOLS",
    "PROTOCOL_NAMES",
    "Variant",
    "SimConfig",
    "SnapshotRecord",
    "Deadlock",
    "SimResult",
    "Engine",
    "simulate",
    "run_engine",
]


class Engine:
    """The event loop. Use :func:`simulate` (or :func:`run_engine` for one raw run).

    Parameters
    ----------
    cfg : SimConfig
        The run's configuration (workload, protocol, seed, failure).
    topo : Topology
        The operator graph laid out as processes and channels.
    """

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
        self.proto = None if self.cl else make_protocol(cfg.protocol)
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
        """Schedule an event of ``kind`` at ``t`` for process ``pid`` (ties: insertion order).

        Parameters
        ----------
        t : float
            The simulated time.
        kind : int
            The event kind (``WAKE``, ``TIMER``, ``TICK`` or ``FAIL``).
        pid : int, optional
            The process (-1: none).
        extra : int, optional
            For a ``TIMER``, the timer generation it belongs to.
        """
        self._order += 1
        if kind == WAKE:
            self.n_wake += 1
        heapq.heappush(self.heap, (t, self._order, kind, pid, extra))

    # ------------------------------------------------------------------ checkpoints
    def checkpoint(self, pr: Proc, forced: bool) -> int:
        """Checkpoint process ``pr`` now (``forced`` by the protocol or basic); return its index.

        Parameters
        ----------
        pr : Proc
            The process.
        forced : bool
            The checkpoint is forced by the protocol (False: basic).
        """
        if self.proto is not None:
            pr.proto = checkpoint_function(self.proto)(pr.proto, forced)
        pr.saved.append(self._save(pr, forced))
        if forced:
            self.forced += 1
        else:
            self.regular += 1
        if self.builder is not None:
            self.builder.checkpoint(pr.pid, forced=forced)
        if pr.timer is not None and (not forced or self.cfg.variant.timer_restart_on_forced):
            self.restart_timer(pr)
        return len(pr.saved) - 1

    def restart_timer(self, pr: Proc) -> None:
        """Restart the basic-checkpoint timer of ``pr`` from now and schedule its deadline."""
        if pr.timer is None:
            raise InternalError(f"process {pr.pid} has no basic-checkpoint timer to restart")
        pr.timer = pr.timer.restart(self.now)
        pr.timer_gen += 1
        self.push(pr.timer.deadline, TIMER, pr.pid, pr.timer_gen)

    # ------------------------------------------------------------------ messages
    def send(self, pr: Proc, ch: int, payload: Any) -> None:
        """Send ``payload`` on channel ``ch``: sequence number, piggyback, log, pattern, arrival.

        Parameters
        ----------
        pr : Proc
            The sending process.
        ch : int
            The output channel.
        payload : object
            The record sent.
        """
        pr.out_seq[ch] += 1
        seq = pr.out_seq[ch]
        dst = self.topo.channels[ch].dst
        pb = None
        if self.proto is not None:
            pr.proto, pb = self.proto.on_send(pr.proto, dst)
        mid = self.builder.send(pr.pid, dst) if self.builder is not None else None
        self.logs[ch][seq] = payload
        self.enqueue(Msg(ch, seq, payload, pb, mid, pr.inc, 0.0))

    def enqueue(self, m: Msg) -> None:
        """Put ``m`` on its channel after a random delay, never overtaking the previous message."""
        arrival = max(self.now + self.rng.expovariate(1.0 / self.cfg.delay), self.last_arrival[m.channel])
        self.last_arrival[m.channel] = arrival
        self.chan[m.channel].append(m._replace(arrival=arrival))
        self.push(arrival, WAKE, self.topo.channels[m.channel].dst)

    def _route(self, pr: Proc, outputs: list[tuple[int, Any]]) -> None:
        """Send ``(connection, payload)`` pairs along the right channel (shuffle: key % width)."""
        for conn, payload in outputs:
            chans = self.topo.route[(pr.pid, conn)]
            if self.topo.connections[conn].kind == SHUFFLE:
                self.send(pr, chans[payload[0] % len(chans)], payload)
            else:
                self.send(pr, chans[0], payload)

    # ------------------------------------------------------------------ operators
    def _emit(self, pr: Proc) -> None:
        gid, key = source_record(self.topo.process_instance[pr.pid], self.cfg.records, pr.offset)
        pr.offset += 1
        payload = source_payload(self.cfg.workload, gid, key)
        self._route(pr, [(self._conns[pr.pid][0], payload)])

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
        """Let ``pr`` do what it can now: emit a record (source) or take its next arrived item."""
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
                self.push(max(pr.busy_until, pr.next_emit), WAKE, pr.pid)
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
                self.push(pr.busy_until, WAKE, pr.pid)
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
        self._route(pr, apply_operator(self.topo, pr, self._conns[pr.pid], c, m.payload))
        return True

    # ------------------------------------------------------------------ Chandy–Lamport
    def _cl_actions(self, pr: Proc, acts: Any) -> None:
        if self.cl is None:
            raise InternalError("Chandy-Lamport step in a run without a snapshot protocol")
        for a in acts:
            if a.kind == CHECKPOINT:
                k = self.checkpoint(pr, forced=False)
                self.snap_cut.setdefault(a.snapshot, {})[pr.pid] = k
                pr.recording = {}
            elif a.kind == FORWARD:
                for ch in self.topo.outputs[pr.pid]:
                    self.enqueue(Msg(ch, 0, a.snapshot, None, None, pr.inc, 0.0))
            elif a.kind == COMPLETE:
                if pr.recording:
                    pr.saved[-1].recorded = {c: list(v) for c, v in pr.recording.items()}
                self.snap_pending.discard(pr.pid)
                if not self.snap_pending:
                    self._snapshot_done(a.snapshot)

    def _marker(self, pr: Proc, c: int, snapshot: int) -> None:
        if self.cl is None:
            raise InternalError("Chandy-Lamport step in a run without a snapshot protocol")
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
        self.push(self.now + self.cfg.interval, TICK)

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
        """Run until nothing can happen any more, recovering from the failure if one is set.

        Raises
        ------
        InvalidInputError
            The failure time is after the run ended (``--fail-at``).
        """
        for pr in self.procs:
            if pr.kind == "source":
                pr.next_emit = self.rng.expovariate(1.0 / self.cfg.gap)
                self.push(pr.next_emit, WAKE, pr.pid)
            if self.proto is not None:
                # an uncoordinated phase: each process's first basic checkpoint at a random time
                pr.timer = BasicTimer(self.cfg.interval, -self.rng.uniform(0, self.cfg.interval))
                pr.timer_gen = 1
                self.push(pr.timer.deadline, TIMER, pr.pid, 1)
        if self.cl is not None:
            self.push(self.cfg.interval, TICK)
        if self.cfg.fail_at is not None:
            self.push(float(self.cfg.fail_at), FAIL)
        failed_done = self.cfg.fail_at is None
        last_work = 0.0
        while self.heap:
            t, _, kind, pid, extra = heapq.heappop(self.heap)
            if kind == WAKE:
                self.n_wake -= 1
            elif kind != FAIL and not self._has_work():
                if failed_done or not self.heap:
                    break
                continue
            self.now = t
            if kind == WAKE:
                last_work = t
                self.wake(self.procs[pid])
            elif kind == TIMER:
                pr = self.procs[pid]
                if extra == pr.timer_gen and pr.timer is not None and pr.timer.due(t):
                    self.checkpoint(pr, forced=False)
            elif kind == TICK:
                self._tick()
            elif kind == FAIL:
                if not self._has_work() and not any(self.chan):
                    raise InvalidInputError(
                        f"fail-at {self.cfg.fail_at:g} is after the run ended (last event at {last_work:g})",
                        location="--fail-at",
                    )
                failed_done = True
                self.recovery = recover(self, self.topo.resolve_process(self.cfg.fail))  # type: ignore[arg-type]
            if self.cfg.variant.detect_deadlock and self.cl is not None and not self._has_work():
                dl = self._find_deadlock()
                if dl is not None and dl.stuck:
                    self.deadlock = dl
                    break

    def result(self, seconds: float) -> SimResult:
        """The run's :class:`SimResult`, ``seconds`` being the wall-clock time it took."""
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

    Parameters
    ----------
    cfg : SimConfig
        The run to simulate.
    reference : SimResult, optional
        The failure-free run of the same seed (None: run here when ``cfg`` has a failure).

    Returns
    -------
    SimResult
        The run with its ``metrics``.

    Examples
    --------
    >>> r = simulate(SimConfig("nexmark", "hmnr", interval=5.0, records=20, seed=1))
    >>> r.metrics["verdict"], r.metrics["useless_checkpoints"], r.deadlock is None
    ('exactly-once', 0, True)
    >>> r = simulate(SimConfig("nhop", "cl-aligned", interval=5.0, records=20))
    >>> r.deadlock is not None and "map0.0" in r.deadlock.stuck
    True
    """
    res = run_engine(cfg)
    if cfg.fail is not None and res.deadlock is None and reference is None:
        reference = run_engine(cfg.without_failure())
    res.metrics = compute_metrics(res, reference)
    return res
