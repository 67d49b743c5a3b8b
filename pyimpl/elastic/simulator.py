"""A deterministic, seeded simulator of SPATE's elastic upstream backup on a keyed pipeline.

``source → op_1 → … → op_n → sink``: levels 0 and ``n+1`` are the reliable source and sink,
levels ``1..n`` the operators of ``Config.ops``, each with a key partition that scaling events
change at the start of a round; one task may fail once, before step ``Failure.step``. Rounds and
steps count from 1 (a slice formed in round ``r`` has ``k = r``), keys are ``0..K-1``, per-key
sequence numbers start at 1 and are preserved along the pipeline. Rules and theorems:
``specs/elastic.md`` (``#model``, ``#qtp``, ``#scaling``, ``#recovery``, ``#theorems``).

Examples
--------
>>> cfg = Config(keys=4, ops=("affine", "sum"), parallelism=(1, 2), rounds=6, seed=3,
...              scaling=(ScaleEvent(3, 2, 1),))
>>> clean = simulate(cfg)
>>> clean.output_by_key() == reference_output(cfg)
True
>>> hit = simulate(cfg, failure=Failure(step=clean.steps // 2, op=2, key=1))
>>> hit.output_by_key() == clean.output_by_key(), len(hit.recoveries)
(True, 1)

References
----------
Wei et al., *Reliable stream data processing for elastic distributed stream processing systems*
(SPATE), Cluster Computing 2019: §4.1 elastic data slices, §4.2 dynamic checkpoint adjustment,
§5.1.1 QTP (two-level ACK), §5.1.2 OAP, §5.2 Algorithm 1 (recovery), §5.2.2 deduplication.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rollcheck.pyimpl.elastic.config import Config, Failure, ScaleEvent
from rollcheck.pyimpl.elastic.operators import KINDS
from rollcheck.pyimpl.elastic.partition import Partition, contiguous_ranges, repartition_keyed
from rollcheck.pyimpl.elastic.reference import reference_output, reference_streams, source_events
from rollcheck.pyimpl.elastic.rules import REFERENCE_RULES, Checkpoint, Rules
from rollcheck.pyimpl.elastic.runtime import Message, RunResult, Task
from rollcheck.pyimpl.elastic.slices import (
    Event,
    Slice,
    SliceRecord,
    last_seq,
    merge_records,
    merge_slices,
    split_records,
    split_slice,
)
from rollcheck.pyimpl.elastic.trim_safety import trim_violations
from rollcheck.pyimpl.errors import InternalError, InvalidInputError

__all__ = ["Task", "Message", "RunResult", "Simulator", "simulate", "Config", "Failure", "ScaleEvent",
           "reference_output"]


# --------------------------------------------------------------------------------------------
# The simulator
# --------------------------------------------------------------------------------------------


class Simulator:
    """Runs one configuration step by step.

    A round ``r`` is, in order: the scaling events of round r (atomic, not a step); for level n+1
    (sink) down to 1, the delivery of every data message to the level and the processing of each
    task's inbox as slice ``k = r`` (so a slice advances one level per round); the source's slice of
    round r; every ``C`` rounds the checkpoints of the stateful tasks; every ``A`` rounds the L0- and
    L1-ACKs sent and delivered (L1 trims the upstream queues). Each per-task or per-message item is
    one *step*; after the last input round the run goes on until no message is in flight. The round
    structure, item by item: ``specs/elastic.md#model``.

    Parameters
    ----------
    cfg : Config
        The configuration.
    failure : Failure, optional
        The one failure to inject (None: none).
    rules : Rules, optional
        The protocol's replaceable rules.
    check_trim : bool, optional
        After each step, check that the queues still hold what a recovery needs.
    """

    def __init__(self, cfg: Config, *, failure: Failure | None = None,
                 rules: Rules = REFERENCE_RULES, check_trim: bool = False):
        cfg.validate()
        if failure is not None:
            if not 1 <= failure.op <= len(cfg.ops):
                raise InvalidInputError(f"operator level must be in 1..{len(cfg.ops)}, got {failure.op}",
                                        location="failure.op")
            if not 0 <= failure.key < cfg.keys:
                raise InvalidInputError(f"key must be in 0..{cfg.keys - 1}, got {failure.key}",
                                        location="failure.key")
            if failure.parallel < 1:
                raise InvalidInputError(f"must be at least 1, got {failure.parallel}", location="failure.parallel")
        self.cfg = cfg
        self.rules = rules
        self.failure = failure
        self.check_trim = check_trim
        self.n = len(cfg.ops)
        self.step = 0
        self.round = 0
        self.network: list[Message] = []
        self.tasks: dict[str, Task] = {}
        self.partitions: dict[int, Partition] = {}
        self._ids = 0
        self.sink_out: list[Event] = []
        self.dups = 0
        self.max_queue: dict[int, int] = {lv: 0 for lv in range(self.n + 1)}
        self.recoveries: list[dict[str, Any]] = []
        self.scalings: list[dict[str, Any]] = []
        self.violations: list[str] = []
        self.ckpt_events = 0
        self.emitted: list[dict[int, int]] = [{} for _ in range(self.n + 1)]  # per level, per key
        self.batches = source_events(cfg)
        self.src_counter: dict[int, int] = {}
        self._ref = reference_streams(cfg) if check_trim else None
        self._make_level(0, ["source"], "source", stateful=False)
        for lv, (op, g) in enumerate(zip(cfg.ops, cfg.parallelism, strict=True), start=1):
            self._make_level(lv, self._fresh_ids(op, g), op, stateful=KINDS[op].stateful)
        self._make_level(self.n + 1, ["sink"], "sink", stateful=False)

    # ---------------------------------------------------------------- set-up helpers
    def _fresh_ids(self, op: str, g: int) -> list[str]:
        out = []
        for _ in range(g):
            self._ids += 1
            out.append(f"{op}@{self._ids}")
        return out

    def _owner_tuple(self, ids: Sequence[str]) -> tuple[str, ...]:
        owner = [""] * self.cfg.keys
        for tid, rng in zip(ids, contiguous_ranges(self.cfg.keys, len(ids)), strict=True):
            for k in rng:
                owner[k] = tid
        return tuple(owner)

    def _make_level(self, lv: int, ids: Sequence[str], op: str, stateful: bool) -> None:
        part = Partition(self._owner_tuple(ids))
        self.partitions[lv] = part
        for tid in ids:
            t = Task(tid, lv, part.keys_of(tid), stateful)
            if stateful:
                t.checkpoint = Checkpoint(0, {}, {}, ())  # the initial state is checkpoint 0
            self.tasks[tid] = t

    def level_tasks(self, lv: int) -> list[Task]:
        """The tasks of level ``lv``, in partition order."""
        return [self.tasks[t] for t in self.partitions[lv].tasks]

    def owner(self, lv: int, key: int) -> Task:
        """The task of level ``lv`` that owns ``key``.

        Parameters
        ----------
        lv : int
            The operator level (0: source).
        key : int
            The key.
        """
        return self.tasks[self.partitions[lv][key]]

    # ---------------------------------------------------------------- stepping and failure
    def _tick(self) -> None:
        self.step += 1
        f = self.failure
        if f is not None and self.step == f.step:
            self._fail_and_recover(self.owner(f.op, f.key))
        if self.check_trim:
            self._check_trim()

    def _send(self, kind: str, src: Task, dst_level: int, payload: Any) -> None:
        """Route ``payload`` to the owners of its keys at ``dst_level`` (splitting data slices)."""
        part = self.partitions[dst_level]
        if kind == "data":
            for dst, piece in split_slice(payload, part.as_dict()).items():
                self.network.append(Message("data", src.id, dst, piece))
        else:
            by_dst: dict[str, dict[int, int]] = {}
            for k, v in payload.items():
                by_dst.setdefault(part[k], {})[k] = v
            for dst, wm in by_dst.items():
                self.network.append(Message(kind, src.id, dst, wm))

    # ---------------------------------------------------------------- the round
    def run(self) -> RunResult:
        """Run rounds until the pipeline is quiescent; the outcome."""
        limit = self.cfg.rounds + 4 * (self.n + 2) + 8
        while True:
            self.round += 1
            r = self.round
            if r > limit:
                raise InternalError(f"no quiescence after {limit} rounds (bug in the simulator)")
            for ev in self.cfg.scaling:
                if ev.round == r:
                    self._scale(ev)
            for lv in range(self.n + 1, 0, -1):
                self._deliver_data(lv)
                for t in list(self.partitions[lv].tasks):
                    self._tick()
                    if t in self.tasks:  # a parallel recovery may have replaced it
                        self._process(self.tasks[t])
            if r <= self.cfg.rounds:
                self._tick()
                self._emit()
            if r % self.cfg.checkpoint_interval == 0:
                for lv in range(1, self.n + 1):
                    for t in list(self.partitions[lv].tasks):
                        if t in self.tasks and self.tasks[t].stateful:
                            self._tick()
                            if t in self.tasks:
                                self._checkpoint(self.tasks[t])
            if r % self.cfg.ack_interval == 0:
                self._ack_phase()
            if r > self.cfg.rounds + self.n + 1 and not self.network:
                break
        return RunResult(self.cfg, self.step, self.round, list(self.sink_out), self.dups,
                         dict(self.max_queue), self.recoveries, self.scalings, self.violations, self.ckpt_events)

    def _deliver_data(self, lv: int) -> None:
        while True:
            ids = set(self.partitions[lv].tasks)
            pending = [m for m in self.network if m.kind == "data" and m.dst in ids]
            if not pending:
                return
            self._tick()
            ids = set(self.partitions[lv].tasks)
            pending = [m for m in self.network if m.kind == "data" and m.dst in ids]
            if not pending:
                return
            m = pending[0]
            self.network.remove(m)
            t = self.tasks[m.dst]
            t.inbox.extend(m.payload.events)
            for e in m.payload.events:
                if e.seq > t.received.get(e.key, 0):
                    t.received[e.key] = e.seq

    def _process(self, t: Task) -> None:
        if not t.inbox:
            return
        events, t.inbox = t.inbox, []
        accepted = []
        for e in events:
            if self.rules.is_duplicate(e, t.in_wm):
                self.dups += 1
                continue
            accepted.append(e)
            if e.seq > t.in_wm.get(e.key, 0):
                t.in_wm[e.key] = e.seq
        if not accepted:
            return
        if t.level == self.n + 1:  # the sink
            self.sink_out.extend(accepted)
            t.records.append(SliceRecord(self.round, last_seq(accepted), {}))
            return
        kind = KINDS[self.cfg.ops[t.level - 1]]
        outs = []
        for e in accepted:
            st, o = kind.step(t.state.get(e.key) if kind.stateful else None, e.value)
            if kind.stateful:
                assert st is not None
                t.state[e.key] = st
            if o is not None:
                outs.append(Event(e.key, e.seq, o))
        t.records.append(SliceRecord(self.round, last_seq(accepted), last_seq(outs)))
        out = Slice(self.round, tuple(outs))
        t.queue.append(out)
        self._note_queue(t)
        emitted = self.emitted[t.level]
        for e in outs:
            if e.seq > emitted.get(e.key, 0):
                emitted[e.key] = e.seq
        if outs:
            self._send("data", t, t.level + 1, out)

    def _note_queue(self, t: Task) -> None:
        n = len(t.queue)
        if n > self.max_queue[t.level]:
            self.max_queue[t.level] = n

    def _emit(self) -> None:
        src = self.tasks["source"]
        evs = []
        for key, value in self.batches[self.round - 1]:
            self.src_counter[key] = self.src_counter.get(key, 0) + 1
            evs.append(Event(key, self.src_counter[key], value))
            self.emitted[0][key] = self.src_counter[key]
        if not evs:
            return
        s = Slice(self.round, tuple(evs))
        src.queue.append(s)
        self._note_queue(src)
        self._send("data", src, 1, s)

    def _checkpoint(self, t: Task) -> None:
        t.checkpoint = Checkpoint(self.round, dict(t.state), dict(t.in_wm),
                                  self.rules.checkpoint_buffer(t.queue, t.succ_l0))
        self.ckpt_events += sum(len(s) for s in t.checkpoint.buffer)
        t.records = [SliceRecord(r.k, r.su, r.sd, True) for r in t.records]

    def _ack_phase(self) -> None:
        # L0: every receiver tells its upstream what it has received.
        for lv in range(self.n + 1, 0, -1):
            for tid in list(self.partitions[lv].tasks):
                self._tick()
                if tid not in self.tasks:
                    continue
                t = self.tasks[tid]
                if t.received:
                    self._send("l0", t, lv - 1, dict(t.received))
        self._deliver_acks("l0")
        # L1: every receiver releases the input of its ready slices.
        for lv in range(self.n + 1, 0, -1):
            for tid in list(self.partitions[lv].tasks):
                self._tick()
                if tid in self.tasks:
                    self._send_l1(self.tasks[tid])
        self._deliver_acks("l1")

    def _send_l1(self, t: Task) -> None:
        wm: dict[int, int] = {}
        i = 0
        for rec in t.records:
            if not self.rules.l1_ready(rec, t.stateful, t.succ_l0):
                break
            for k, q in rec.su.items():
                if q > wm.get(k, 0):
                    wm[k] = q
            i += 1
        del t.records[:i]
        t.pending_l1.append(wm)
        if len(t.pending_l1) <= self.rules.l1_delay:
            return
        wm = t.pending_l1.pop(0)
        if wm:
            for k, q in wm.items():
                if q > t.l1_sent.get(k, 0):
                    t.l1_sent[k] = q
            self._send("l1", t, t.level - 1, wm)

    def _deliver_acks(self, kind: str) -> None:
        while True:
            pending = [m for m in self.network if m.kind == kind]
            if not pending:
                return
            self._tick()
            pending = [m for m in self.network if m.kind == kind]
            if not pending:
                return
            m = pending[0]
            self.network.remove(m)
            t = self.tasks[m.dst]
            if kind == "l0":
                for k, q in m.payload.items():
                    if q > t.succ_l0.get(k, 0):
                        t.succ_l0[k] = q
            else:
                t.queue.trim(m.payload)

    # ---------------------------------------------------------------- recovery (Algorithm 1)
    def _fail_and_recover(self, victim: Task) -> None:
        lv = victim.level
        lost_msgs = [m for m in self.network if m.dst == victim.id or m.src == victim.id]
        self.network = [m for m in self.network if m.dst != victim.id and m.src != victim.id]
        # line 1: a new task v' with the same keys.
        t = Task(victim.id, lv, victim.keys, victim.stateful, victim.incarnation + 1)
        # lines 3-7: processing state from the last checkpoint (stateful) or empty.
        ck = victim.checkpoint
        if victim.stateful and ck is not None:
            t.checkpoint = ck
            t.state = dict(ck.state)
            t.in_wm = dict(ck.in_wm)
            t.received = dict(ck.in_wm)
            for s in ck.buffer:
                t.queue.append(s)
        # line 2: Q(v)' from the recovery information of each successor d.
        succ_l1: dict[int, int] = {}
        for k in sorted(t.keys):
            d = self.owner(lv + 1, k)
            if d.received.get(k, 0):
                t.succ_l0[k] = d.received[k]
            if d.l1_sent.get(k, 0):
                succ_l1[k] = d.l1_sent[k]
        t.queue.trim(succ_l1)
        self.tasks[t.id] = t
        targets = [t]
        f = self.failure
        if f is not None and f.parallel > 1 and len(t.keys) > 1:
            # lines 12-14: parallel recovery re-partitions v's keys over several new tasks.
            keys = sorted(t.keys)
            ranges = contiguous_ranges(len(keys), min(f.parallel, len(keys)))
            ids = self._fresh_ids(self.cfg.ops[lv - 1], len(ranges))
            owner = {keys[i]: tid for tid, r in zip(ids, ranges, strict=True) for i in r}
            self._repartition(lv, [t], owner)
            targets = [self.tasks[tid] for tid in ids]
        replayed = reprocess = restored = 0
        for nt in targets:
            # Resend the restored buffer; the successors drop what they already hold (§5.2.2).
            restored += len(nt.queue)
            for s in nt.queue.slices:
                self._send("data", nt, lv + 1, s)
            # lines 10-18: every upstream task replays its buffered slices for the task's keys.
            ups = {self.owner(lv - 1, k).id for k in nt.keys}
            for uid in sorted(ups):
                u = self.tasks[uid]
                for s in u.queue.slices:
                    piece = s.restrict(nt.keys)
                    if piece.events:
                        replayed += len(piece.events)
                        reprocess += sum(1 for e in piece.events if e.seq > nt.in_wm.get(e.key, 0))
                        self.network.append(Message("data", u.id, nt.id, piece))
        self.recoveries.append({
            "step": self.step, "round": self.round, "task": victim.id, "level": lv,
            "sink_events": len(self.sink_out),  # arrivals at the sink before the failure
            "recovered_by": [nt.id for nt in targets],
            "checkpoint_round": ck.round if (victim.stateful and ck is not None) else None,
            "lost_messages": len(lost_msgs), "replayed_events": replayed, "reprocessed_events": reprocess,
            "restored_buffer_events": restored,
        })

    # ---------------------------------------------------------------- scaling (OAP)
    def _scale(self, ev: ScaleEvent) -> None:
        lv = ev.op
        old = self.level_tasks(lv)
        ranges = contiguous_ranges(self.cfg.keys, ev.parallelism)
        if [sorted(t.keys) for t in old] == [list(r) for r in ranges]:
            return
        ids = self._fresh_ids(self.cfg.ops[lv - 1], ev.parallelism)
        owner = {k: tid for tid, r in zip(ids, ranges, strict=True) for k in r}
        moved = self._repartition(lv, old, owner)
        self.scalings.append({"round": self.round, "level": lv, "from": [t.id for t in old], "to": ids,
                              "resplit_in_flight": moved})

    def _repartition(self, lv: int, old: list[Task], owner: Mapping[int, str]) -> int:
        """Replace the tasks ``old`` of level ``lv`` by the owners in ``owner`` (their keys only).

        The OAP adjustment: every per-key item of the old tasks' running status, their output
        queues, IST/OST records and checkpoints are split/merged by key; in-flight data to the old
        tasks is split by the new mapping. Returns the number of re-split in-flight messages.
        """
        assert {k for t in old for k in t.keys} == set(owner), "the new owners cover the old keys"
        stateful = old[0].stateful
        assert all(not t.inbox for t in old), "inboxes are empty when a task is repartitioned"
        states = self.rules.repartition([t.state for t in old], owner)
        in_wm = repartition_keyed([t.in_wm for t in old], owner)
        received = repartition_keyed([t.received for t in old], owner)
        succ_l0 = repartition_keyed([t.succ_l0 for t in old], owner)
        l1_sent = repartition_keyed([t.l1_sent for t in old], owner)
        slices = merge_slices(s for t in old for s in t.queue.slices)
        records = merge_records(r for t in old for r in t.records)
        ckpts = (self.rules.split_checkpoint([t.checkpoint for t in old if t.checkpoint is not None],
                                             owner, self.rules.repartition) if stateful else {})
        for t in old:
            del self.tasks[t.id]
        full = list(self.partitions[lv].owner)
        for k, tid in owner.items():
            full[k] = tid
        part = Partition(tuple(full))
        for tid in dict.fromkeys(owner.values()):
            keys = part.keys_of(tid)
            nt = Task(tid, lv, keys, stateful,
                      state=states.get(tid, {}), in_wm=in_wm.get(tid, {}),
                      received=received.get(tid, {}), succ_l0=succ_l0.get(tid, {}),
                      l1_sent=l1_sent.get(tid, {}), records=split_records(records, keys),
                      checkpoint=ckpts.get(tid))
            for s in slices:
                nt.queue.append(s.restrict(keys))
            self.tasks[tid] = nt
        self.partitions[lv] = part
        # OAP part 2: in-flight slices to the old tasks are split by the new mapping state.
        old_ids = {t.id for t in old}
        moved = [m for m in self.network if m.kind == "data" and m.dst in old_ids]
        self.network = [m for m in self.network if not (m.kind == "data" and m.dst in old_ids)]
        for m in moved:
            for dst, piece in split_slice(m.payload, owner).items():
                self.network.append(Message("data", m.src, dst, piece))
        return len(moved)

    # ---------------------------------------------------------------- trim safety (invariant)
    def _check_trim(self) -> None:
        """Every event a recovery of any operator task would need is still in its upstream queue."""
        self.violations.extend(trim_violations(self))


def simulate(cfg: Config, *, failure: Failure | None = None, rules: Rules = REFERENCE_RULES,
             check_trim: bool = False) -> RunResult:
    """Run ``cfg`` (optionally with one failure) and return its :class:`RunResult`.

    Parameters
    ----------
    cfg, failure, rules, check_trim
        As for :class:`Simulator`.
    """
    return Simulator(cfg, failure=failure, rules=rules, check_trim=check_trim).run()
