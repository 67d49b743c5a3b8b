"""Message passing on Spark: processes as partitions, a checkpointing protocol inside the tasks.

``rollcheck spark record nhop`` runs N processes P0..P{N-1} for R logical rounds. One global
round is one Spark job: the driver's records (each process's state and the messages addressed to
it) are ``partitionBy(N)``-ed so that partition i holds process i, and
``mapPartitionsWithIndex`` runs :func:`process_round` for every process in its task. Events come
back as data and are recorded in (round, process, local order) - a global order that respects
causality because a message sent in round r is delivered in a later round.

Topologies (n-hop paths): ``pipeline`` (P_i -> P_{i+1}), ``scatter`` (P0 -> every P_i -> P0)
and ``cyclic`` (P_i -> P_{(i+1) mod N}).

One logical round of a process (:func:`process_round`): deliver the inbox in (source, sequence
number) order - for each message the protocol first decides whether a *forced* checkpoint
precedes the delivery (``must_force``, before merging), then merges the piggyback; duplicates
(sequence number already delivered) are dropped - then, while the process has logical rounds
left, its sends and at most one *basic* checkpoint at a random position among them, decided by an
RNG seeded with (seed, process, logical round) only. Every send goes to the sender's persistent
message log first; its piggyback (the protocol's metadata) travels on the row. Every checkpoint
is written atomically (temporary file + rename) with the protocol state, the application state and
the per-channel sent/delivered counters.

Failure (``--fail-process P --fail-round K``): the task of P raises in global round K, so the
whole round's job fails (``local[N]`` does not retry) and its effects are discarded. Recovery
(:func:`recovery_from_counters`) reads the checkpoint files and computes the maximum consistent
line by rollback propagation over the per-channel counters (a receiver whose delivered count from
a sender exceeds what the sender's restored state has sent rolls back) - independently of
:mod:`rollcheck.pyimpl.recovery`, against which the replay compares it. Rolled-back processes restore their
checkpoint files; the messages in transit with respect to the line are replayed from the senders'
logs; then the rounds continue until every process has run R logical rounds and the network is
empty. The application state (per process: count and sum of delivered payloads) must then equal
the failure-free run's.

The trace (:mod:`rollcheck.spark_replay.trace`) uses the engine-neutral core vocabulary
(``specs/formats.md#trace``): header ``processes`` and ``protocol``; ``send``, ``deliver`` (with
``replayed`` after a recovery), ``checkpoint`` (``index``, ``forced``), ``failure``
(``processes``), ``recovery`` (``line``, ``in_transit``), one ``output`` per process at the end
(key ``count_sum``, value ``[count, sum]``) and ``end``; Spark's own kinds are prefixed with the source, ``spark-nhop.``
and extra fields (``round``, ``chan_seq``, ``payload``, ``piggyback``) are ignored by the generic
checks.

References
----------
FERDiS paper §5.3, §7.2.5-7.2.8 (CIC protocols, message-log replay, deduplication by sequence
number); ``specs/spark.md#message-passing``.
"""

from __future__ import annotations

import json
import os
import pickle
import random
import shutil
import tempfile
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from rollcheck.pyimpl.errors import InvalidInputError
from rollcheck.pyimpl.partialfile import partial_output
from rollcheck.spark_replay.trace import TraceWriter

__all__ = [
    "NhopConfig",
    "ProcState",
    "TOPOLOGIES",
    "successors",
    "initial_states",
    "process_round",
    "simulate",
    "recovery_from_counters",
    "record_nhop",
    "piggyback_json",
]

TOPOLOGIES = ("pipeline", "scatter", "cyclic")
PROTOCOL_NAMES = ("uc", "bcs", "hmnr")


#: Bounds of a run (work grows with processes × rounds × fan-out; checked before any work).
MAX_PROCESSES = 1000
MAX_ROUNDS = 10_000

@dataclass(frozen=True)
class NhopConfig:
    """Parameters of one message-passing run (recorded in the trace header)."""

    protocol: str = "hmnr"
    processes: int = 3
    rounds: int = 6
    topology: str = "cyclic"
    fail_process: int | None = None
    fail_round: int | None = None
    seed: int = 0
    master: str | None = None
    checkpoint_probability: float = 0.4
    max_fanout: int = 2

    def validate(self) -> None:
        def _int(name: str, lo: int, hi: int, optional: bool = False) -> None:
            v = getattr(self, name)
            if v is None and optional:
                return
            if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
                raise InvalidInputError(f"{name} must be an integer in {lo}..{hi}, got {v!r}"[:200],
                                        location=f"--{name.replace('_', '-')}")

        _int("processes", 2, MAX_PROCESSES)
        _int("rounds", 1, MAX_ROUNDS)
        _int("max_fanout", 1, MAX_PROCESSES)
        _int("seed", 0, 2**63 - 1)
        _int("fail_process", 0, MAX_PROCESSES, optional=True)
        _int("fail_round", 1, MAX_ROUNDS, optional=True)
        p = self.checkpoint_probability
        if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0 <= p <= 1:
            raise InvalidInputError(f"checkpoint_probability must be a number in [0, 1], got {p!r}"[:200],
                                    location="checkpoint_probability")
        if not isinstance(self.protocol, str) or not isinstance(self.topology, str):
            raise InvalidInputError("protocol and topology must be names", location="--protocol")
        if self.protocol not in PROTOCOL_NAMES:
            raise InvalidInputError(f"unknown protocol {self.protocol!r}; use one of {PROTOCOL_NAMES}",
                                    location="--protocol")
        if self.topology not in TOPOLOGIES:
            raise InvalidInputError(f"unknown topology {self.topology!r}; use one of {TOPOLOGIES}",
                                    location="--topology")
        if self.processes < 2:
            raise InvalidInputError("need at least 2 processes", location="--processes")
        if self.rounds < 1:
            raise InvalidInputError("need at least 1 round", location="--rounds")
        if (self.fail_process is None) != (self.fail_round is None):
            raise InvalidInputError("give --fail-process and --fail-round together", location="--fail-process")
        if self.fail_process is not None and not 0 <= self.fail_process < self.processes:
            raise InvalidInputError(f"--fail-process must be in 0..{self.processes - 1}", location="--fail-process")
        if self.fail_round is not None and not 1 <= self.fail_round <= self.rounds:
            raise InvalidInputError(f"--fail-round must be in 1..{self.rounds}", location="--fail-round")


def successors(topology: str, n: int, i: int) -> list[int]:
    """The processes ``i`` sends to.

    Examples
    --------
    >>> [successors("pipeline", 3, i) for i in range(3)]
    [[1], [2], []]
    >>> [successors("scatter", 3, i) for i in range(3)]
    [[1, 2], [0], [0]]
    >>> [successors("cyclic", 3, i) for i in range(3)]
    [[1], [2], [0]]
    """
    if topology == "pipeline":
        return [i + 1] if i + 1 < n else []
    if topology == "scatter":
        return list(range(1, n)) if i == 0 else [0]
    if topology == "cyclic":
        return [(i + 1) % n]
    raise InvalidInputError(f"unknown topology {topology!r}", location="--topology")


@dataclass(frozen=True)
class ProcState:
    """Everything a process is; a checkpoint file stores exactly this."""

    i: int
    proto: Any
    lr: int = 0  # logical rounds done
    index: int = 0  # index of the last checkpoint taken
    sent: tuple[int, ...] = ()  # per destination: messages sent (= last sequence number)
    delivered: tuple[int, ...] = ()  # per source: last sequence number delivered
    count: int = 0  # application state: number and sum of delivered payloads
    total: int = 0
    sends_done: int = 0  # position reached in logical round ``lr``'s send plan
    basic_done: bool = False  # whether round ``lr``'s basic checkpoint was taken


@dataclass(frozen=True)
class Msg:
    src: int
    dst: int
    seq: int
    payload: int
    pb: Any
    lr: int
    replayed: bool = False  # re-sent from the sender's log by a recovery

    @property
    def id(self) -> str:
        return f"P{self.src}>P{self.dst}#{self.seq}"


def piggyback_json(pb: Any) -> Any:
    """A JSON form of a protocol's piggyback (NamedTuples become objects)."""
    if pb is None or isinstance(pb, bool | int | str):
        return pb
    if hasattr(pb, "_asdict"):
        return {k: piggyback_json(v) for k, v in pb._asdict().items()}
    if isinstance(pb, tuple | list):
        return [piggyback_json(x) for x in pb]
    return repr(pb)


def initial_states(cfg: NhopConfig) -> list[ProcState]:
    from rollcheck.pyimpl.protocols import get_protocol

    proto = get_protocol(cfg.protocol)
    n = cfg.processes
    return [ProcState(i, proto.initial(i, n), sent=(0,) * n, delivered=(0,) * n) for i in range(n)]


def _ckpt_path(ckdir: str, i: int, index: int) -> str:
    return os.path.join(ckdir, f"P{i}", f"{index}.ckpt")


def _write_checkpoint(ckdir: str | None, st: ProcState) -> str | None:
    if ckdir is None:
        return None
    path = _ckpt_path(ckdir, st.i, st.index)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + f".tmp{os.getpid()}"
    with open(tmp, "wb") as f:
        pickle.dump(st, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    return path


def read_checkpoint(ckdir: str, i: int, index: int) -> ProcState:
    with open(_ckpt_path(ckdir, i, index), "rb") as f:
        st = pickle.load(f)
    assert isinstance(st, ProcState)
    return st


def process_round(cfg: NhopConfig, st: ProcState, inbox: list[Msg], ckdir: str | None,
                  logdir: str | None) -> tuple[ProcState, list[Msg], list[dict[str, Any]]]:
    """One logical round of one process (module docstring); pure apart from the files it writes.

    Returns the new state, the messages sent and the events (in local order).
    """
    from rollcheck.pyimpl.protocols import get_protocol

    proto = get_protocol(cfg.protocol)
    events: list[dict[str, Any]] = []
    i = st.i

    def checkpoint(st: ProcState, forced: bool) -> ProcState:
        st = replace(st, proto=proto.on_checkpoint(st.proto), index=st.index + 1)
        _write_checkpoint(ckdir, st)
        events.append({"kind": "checkpoint", "process": f"P{i}", "index": st.index, "forced": forced,
                       "lr": st.lr})
        return st

    for m in sorted(inbox, key=lambda m: (m.src, m.seq)):
        if m.seq <= st.delivered[m.src]:
            events.append({"kind": "spark-nhop.duplicate_dropped", "process": f"P{i}", "message": m.id})
            continue
        if proto.must_force(st.proto, m.src, m.pb):
            st = checkpoint(st, True)
        delivered = list(st.delivered)
        delivered[m.src] = m.seq
        st = replace(st, proto=proto.on_deliver(st.proto, m.src, m.pb), delivered=tuple(delivered),
                     count=st.count + 1, total=st.total + m.payload)
        ev = {"kind": "deliver", "process": f"P{i}", "message": m.id, "from": f"P{m.src}", "chan_seq": m.seq}
        if m.replayed:
            ev["replayed"] = True
        events.append(ev)
    out: list[Msg] = []
    if st.lr < cfg.rounds:
        rng = random.Random(f"nhop:{cfg.seed}:{i}:{st.lr}")
        plan = [dst for dst in successors(cfg.topology, cfg.processes, i)
                for _ in range(rng.randint(0, cfg.max_fanout))]
        ck_at = rng.randint(0, len(plan)) if rng.random() < cfg.checkpoint_probability else -1
        payloads = [rng.randrange(1, 1000) for _ in plan]
        log_lines = []
        for pos in range(st.sends_done, len(plan) + 1):
            if pos == ck_at and not st.basic_done:
                st = checkpoint(replace(st, sends_done=pos, basic_done=True), False)
            if pos == len(plan):
                break
            dst = plan[pos]
            new_proto, pb = proto.on_send(st.proto, dst)
            sent = list(st.sent)
            sent[dst] += 1
            st = replace(st, proto=new_proto, sent=tuple(sent), sends_done=pos + 1)
            m = Msg(i, dst, sent[dst], payloads[pos], pb, st.lr)
            out.append(m)
            log_lines.append(pickle.dumps(m).hex())
            events.append({"kind": "send", "process": f"P{i}", "message": m.id, "to": f"P{dst}",
                           "chan_seq": m.seq, "payload": m.payload, "piggyback": piggyback_json(pb)})
        if logdir is not None and log_lines:  # the sender's persistent message log
            with open(os.path.join(logdir, f"P{i}.log"), "a", encoding="ascii") as f:
                f.write("".join(x + "\n" for x in log_lines))
                f.flush()
                os.fsync(f.fileno())
        st = replace(st, lr=st.lr + 1, sends_done=0, basic_done=False)
    return st, out, events


def simulate(cfg: NhopConfig) -> dict[str, Any]:
    """The failure-free run in plain Python (no Spark, no files): the reference outputs.

    Examples
    --------
    >>> r = simulate(NhopConfig(protocol="bcs", processes=3, rounds=4, seed=1))
    >>> sorted(r["outputs"]) == ["P0", "P1", "P2"], r["rounds"] >= 4
    (True, True)
    """
    states = initial_states(cfg)
    inbox: dict[int, list[Msg]] = {i: [] for i in range(cfg.processes)}
    events: list[dict[str, Any]] = []
    rnd = 0
    while True:
        if all(s.lr >= cfg.rounds for s in states) and not any(inbox.values()):
            break
        rnd += 1
        new_inbox: dict[int, list[Msg]] = {i: [] for i in range(cfg.processes)}
        for i in range(cfg.processes):
            states[i], out, evs = process_round(cfg, states[i], inbox[i], None, None)
            events += [{**e, "round": rnd} for e in evs]
            for m in out:
                new_inbox[m.dst].append(m)
        inbox = new_inbox
    return {"outputs": {f"P{s.i}": [s.count, s.total] for s in states}, "rounds": rnd, "events": events}


def recovery_from_counters(current: list[ProcState], checkpoints: dict[int, list[ProcState]],
                           failed: set[int]) -> tuple[dict[int, int | None], list[tuple[int, int, int]]]:
    """The maximum consistent recovery line from the per-channel counters of checkpoint files.

    ``current[i]`` is P_i's volatile state, ``checkpoints[i][x]`` its checkpoint x. Failed processes
    start at their last checkpoint, the others at their volatile state (None). While some receiver
    has delivered more messages from a sender than the sender's chosen state has sent (an orphan;
    channels deliver in sequence order), the receiver moves to its latest checkpoint that has not.
    Returns the line (checkpoint index or None = volatile) and the channel ranges to replay:
    ``(src, dst, first_seq)..`` as ``(src, dst, seq)`` triples.

    Examples
    --------
    >>> a = ProcState(0, None, index=1, sent=(0, 2), delivered=(0, 0))
    >>> b = ProcState(1, None, index=0, sent=(0, 0), delivered=(2, 0))
    >>> a0 = ProcState(0, None, index=0, sent=(0, 0), delivered=(0, 0))
    >>> a1 = ProcState(0, None, index=1, sent=(0, 1), delivered=(0, 0))
    >>> b0 = ProcState(1, None, index=0, sent=(0, 0), delivered=(0, 0))
    >>> line, replay = recovery_from_counters([a, b], {0: [a0, a1], 1: [b0]}, {0})
    >>> line, replay   # P1 delivered m2 that P0's restored C[0,1] never sent: P1 rolls back
    ({0: 1, 1: 0}, [(0, 1, 1)])
    """
    n = len(current)
    chosen: dict[int, int | None] = {i: (current[i].index if i in failed else None) for i in range(n)}

    def state(i: int) -> ProcState:
        x = chosen[i]
        return current[i] if x is None else checkpoints[i][x]

    changed = True
    while changed:
        changed = False
        for r in range(n):
            for s in range(n):
                if s == r:
                    continue
                if state(r).delivered[s] > state(s).sent[r]:
                    start = current[r].index if chosen[r] is None else chosen[r] - 1  # type: ignore[operator]
                    x = start
                    while x > 0 and checkpoints[r][x].delivered[s] > state(s).sent[r]:
                        x -= 1
                    chosen[r] = x
                    changed = True
    replay = [(s, r, q) for r in range(n) for s in range(n) if s != r
              for q in range(state(r).delivered[s] + 1, state(s).sent[r] + 1)]
    return chosen, replay


# ----------------------------------------------------------------------------- Spark driver
@dataclass
class _RunDirs:
    root: Path
    ck: Path = field(init=False)
    logs: Path = field(init=False)

    def __post_init__(self) -> None:
        self.ck = self.root / "checkpoints"
        self.logs = self.root / "logs"
        self.ck.mkdir(parents=True)
        self.logs.mkdir()


def _task(cfg: NhopConfig, rnd: int, ckdir: str, logdir: str, fail: tuple[int, int] | None):
    def run(idx: int, rows: Any) -> Any:
        st = None
        inbox = []
        for _key, (tag, obj) in rows:
            if tag == "state":
                st = obj
            else:
                inbox.append(obj)
        if st is None:
            return iter([])
        if fail is not None and fail == (idx, rnd):
            raise RuntimeError(f"rollcheck: injected failure of P{idx} in round {rnd}")
        new, out, evs = process_round(cfg, st, inbox, ckdir, logdir)
        res: list[Any] = [("state", idx, new)]
        res += [("msg", m.dst, m) for m in out]
        res.append(("events", idx, evs))
        return iter(res)
    return run


def _load_log(logdir: Path, i: int) -> dict[tuple[int, int], Msg]:
    f = logdir / f"P{i}.log"
    out: dict[tuple[int, int], Msg] = {}
    if f.exists():
        for line in f.read_text(encoding="ascii").splitlines():
            if line:
                m = pickle.loads(bytes.fromhex(line))
                out[(m.dst, m.seq)] = m
    return out


class _InjectedFailure(RuntimeError):
    pass


def _local_round(cfg: NhopConfig, rnd: int, dirs: _RunDirs, fail: tuple[int, int] | None,
                 recs: list[tuple[int, Any]]) -> list[Any]:
    """The same round as the Spark job, executed in this process (``engine="local"``)."""
    run = _task(cfg, rnd, str(dirs.ck), str(dirs.logs), fail)
    res: list[Any] = []
    for idx in range(cfg.processes):
        rows = [r for r in recs if r[0] == idx]
        try:
            res += list(run(idx, rows))
        except RuntimeError as e:
            raise _InjectedFailure(str(e)) from None
    return res


def record_nhop(cfg: NhopConfig, out: str | Path, *, enabled: bool = True,
                engine: str = "spark") -> dict[str, Any]:
    """Run the message-passing job and record every event; return a summary.

    ``engine="spark"`` runs every round as a Spark job (the recording); ``engine="local"`` runs
    the identical rounds in this process (used by fast tests and as the sweep baseline).
    """
    cfg.validate()
    target = Path(out)
    names = [f"P{i}" for i in range(cfg.processes)]
    # the engine-neutral header (processes, protocol) plus Spark's own configuration
    header = {"source": "spark-nhop", "processes": names, "protocol": cfg.protocol, "seed": cfg.seed,
              "config": {**asdict(cfg), "processes_names": [f"P{i}" for i in range(cfg.processes)],
                         "engine": engine}}
    t0 = time.perf_counter()
    # recorded as OUT.partial, renamed when the run ends (pyimpl.partialfile)
    with partial_output(target) as partial:
        rounds = _record(cfg, partial, header, enabled, engine)
    return {"seconds": round(time.perf_counter() - t0, 2), "rounds": rounds, "trace": str(target)}


def _record(cfg: NhopConfig, out: Path, header: dict[str, Any], enabled: bool, engine: str) -> int:
    w = TraceWriter(out, header, enabled=enabled)
    dirs = _RunDirs(Path(tempfile.mkdtemp(prefix="rollcheck-nhop-")))
    try:
        if engine == "local":
            rounds = _drive(cfg, w, dirs, lambda rnd, fail, recs: _local_round(cfg, rnd, dirs, fail, recs),
                            (_InjectedFailure,))
        elif engine == "spark":
            from py4j.protocol import Py4JJavaError
            from pyspark.errors import PySparkException

            from rollcheck.spark_replay.session import spark_session

            with spark_session(cfg.master, app_name="rollcheck-nhop", shuffle_partitions=cfg.processes) as spark:
                import logging

                logging.getLogger("py4j").setLevel(logging.CRITICAL)
                spark.sparkContext.setLogLevel("OFF")
                sc = spark.sparkContext
                n = cfg.processes

                def spark_round(rnd: int, fail: tuple[int, int] | None, recs: list[Any]) -> list[Any]:
                    rdd = sc.parallelize(recs, n).partitionBy(n, lambda k: k)
                    return rdd.mapPartitionsWithIndex(
                        _task(cfg, rnd, str(dirs.ck), str(dirs.logs), fail)).collect()

                rounds = _drive(cfg, w, dirs, spark_round, (Py4JJavaError, PySparkException))
        else:
            raise InvalidInputError(f"unknown engine {engine!r}", location="engine")
    finally:
        w.close()
        shutil.rmtree(dirs.root, ignore_errors=True)
    return rounds


def _drive(cfg: NhopConfig, w: TraceWriter, dirs: _RunDirs, run_round: Any, failure_types: tuple[type[BaseException], ...]) -> int:
    """The driver loop: rounds until done, recovery after the injected failure."""
    n = cfg.processes
    states = initial_states(cfg)
    for st in states:
        _write_checkpoint(str(dirs.ck), st)
    inbox: dict[int, list[Msg]] = {i: [] for i in range(n)}
    fail = (cfg.fail_process, cfg.fail_round) if cfg.fail_process is not None else None
    rnd = 0
    while True:
        if all(s.lr >= cfg.rounds for s in states) and not any(inbox.values()):
            break
        rnd += 1
        if rnd > 20 * (cfg.rounds + n) + 50:
            raise RuntimeError("nhop: the run does not terminate")
        recs: list[tuple[int, Any]] = [(i, ("state", states[i])) for i in range(n)]
        recs += [(m.dst, ("msg", m)) for i in range(n) for m in inbox[i]]
        try:
            res = run_round(rnd, fail, recs)
        except failure_types:
            if fail is None or rnd != fail[1]:
                raise
            f_proc = fail[0]
            fail = None
            w.emit("failure", processes=[f"P{f_proc}"], round=rnd)
            states, inbox = _recover(cfg, states, {f_proc}, dirs, w, rnd)
            continue
        new_inbox: dict[int, list[Msg]] = {i: [] for i in range(n)}
        evs: dict[int, list[dict[str, Any]]] = {}
        for tag, i, obj in res:
            if tag == "state":
                states[i] = obj
            elif tag == "msg":
                new_inbox[i].append(obj)
            else:
                evs[i] = obj
        for i in sorted(evs):
            for e in evs[i]:
                kind = e.pop("kind")
                w.emit(kind, round=rnd, **e)
        inbox = new_inbox
    for s in states:  # the application's externally visible result, one output per process
        w.emit("output", process=f"P{s.i}", key="count_sum", value=[s.count, s.total], round=rnd)
    w.emit("end", rounds=rnd, outputs={f"P{s.i}": [s.count, s.total] for s in states},
           checkpoints={f"P{s.i}": s.index for s in states})
    return rnd


def _recover(cfg: NhopConfig, states: list[ProcState], failed: set[int], dirs: _RunDirs,
             w: TraceWriter, rnd: int) -> tuple[list[ProcState], dict[int, list[Msg]]]:
    """Restore the recovery line from the checkpoint files and replay the senders' logs."""
    n = cfg.processes
    ckpts = {i: [read_checkpoint(str(dirs.ck), i, x) for x in range(states[i].index + 1)] for i in range(n)}
    line, replay = recovery_from_counters(states, ckpts, failed)
    new_states = [states[i] if line[i] is None else ckpts[i][line[i]] for i in range(n)]  # type: ignore[index]
    logs = {i: _load_log(dirs.logs, i) for i in range(n)}
    inbox: dict[int, list[Msg]] = {i: [] for i in range(n)}
    for s, r, q in replay:
        m = logs[s].get((r, q))
        if m is None:
            raise RuntimeError(f"message P{s}>P{r}#{q} is missing from P{s}'s log")
        inbox[r].append(replace(m, replayed=True))
    w.emit("recovery", round=rnd, failed=[f"P{i}" for i in sorted(failed)],
           line={f"P{i}": ("volatile" if line[i] is None else line[i]) for i in range(n)},
           rolled_back=[f"P{i}" for i in range(n) if line[i] is not None],
           in_transit=sorted(f"P{s}>P{r}#{q}" for s, r, q in replay),
           restored_rounds={f"P{i}": new_states[i].lr for i in range(n)})
    return new_states, inbox


def summary_json(result: dict[str, Any]) -> str:
    return json.dumps(result)
