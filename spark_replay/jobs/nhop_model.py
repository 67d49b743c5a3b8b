"""The message-passing model behind ``rollcheck spark record nhop``: processes, rounds, recovery.

Topologies (n-hop paths): ``pipeline`` (P_i -> P_{i+1}), ``scatter`` (P0 -> every P_i -> P0)
and ``cyclic`` (P_i -> P_{(i+1) mod N}).

One logical round of a process (:func:`process_round`): deliver the inbox in (source, sequence
number) order - for each message the protocol first decides whether a *forced* checkpoint
precedes the delivery (``must_force``, before merging), then merges the piggyback; duplicates
(sequence number already delivered) are dropped - then, while the process has logical rounds
left, its sends and at most one *basic* checkpoint at a random position among them, decided by an
RNG seeded with (seed, process, logical round) only. Every send goes to the sender's persistent
message log first; every checkpoint is written atomically (temporary file + rename).

Recovery (:func:`recovery_from_counters`) computes the maximum consistent line by rollback
propagation over the per-channel counters, independently of :mod:`rollcheck.pyimpl.recovery`.
:func:`simulate` is the failure-free run in plain Python (the reference outputs).

The Spark driver that runs the rounds as jobs is :mod:`rollcheck.spark_replay.jobs.nhop`.

References
----------
FERDiS paper §5.3, §7.2.5-7.2.8; ``specs/spark.md#message-passing``.
"""

from __future__ import annotations

import os
import pickle
import random
from dataclasses import dataclass, replace
from typing import Any

from rollcheck.pyimpl.errors import InvalidInputError

__all__ = [
    "NhopConfig",
    "ProcState",
    "Msg",
    "TOPOLOGIES",
    "PROTOCOL_NAMES",
    "MAX_PROCESSES",
    "MAX_ROUNDS",
    "successors",
    "initial_states",
    "process_round",
    "simulate",
    "recovery_from_counters",
    "piggyback_json",
    "read_checkpoint",
    "write_checkpoint",
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
        """Refuse a configuration outside the model's bounds (:class:`InvalidInputError`)."""
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

    Parameters
    ----------
    topology : str
        ``pipeline``, ``scatter`` or ``cyclic``.
    n : int
        The number of processes.
    i : int
        The sending process.

    Returns
    -------
    list of int
        The receiving processes.

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
    """One message: sender, receiver, the sender's send index, payload and piggybacked control data."""

    src: int
    dst: int
    seq: int
    payload: int
    pb: Any
    lr: int
    replayed: bool = False  # re-sent from the sender's log by a recovery

    @property
    def id(self) -> str:
        """The message's identity: sender, receiver and send index."""
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
    """Every process's state before the first round."""
    from rollcheck.pyimpl.protocols import get_protocol

    proto = get_protocol(cfg.protocol)
    n = cfg.processes
    return [ProcState(i, proto.initial(i, n), sent=(0,) * n, delivered=(0,) * n) for i in range(n)]


def _ckpt_path(ckdir: str, i: int, index: int) -> str:
    return os.path.join(ckdir, f"P{i}", f"{index}.ckpt")


def write_checkpoint(ckdir: str | None, st: ProcState) -> str | None:
    """Write ``st`` as a checkpoint under ``ckdir`` and return its path (None without a folder).

    Parameters
    ----------
    ckdir : str or None
        The checkpoint folder; None writes nothing.
    st : ProcState
        The process's state (its ``i`` and ``index`` name the file).

    Returns
    -------
    str or None
        The checkpoint file's path.
    """
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
    """Read process ``i``'s checkpoint ``index`` from ``ckdir``.

    Parameters
    ----------
    ckdir : str
        The checkpoint folder.
    i : int
        The process.
    index : int
        The checkpoint's index.

    Returns
    -------
    ProcState
        The state kept in the checkpoint.
    """
    with open(_ckpt_path(ckdir, i, index), "rb") as f:
        st = pickle.load(f)
    assert isinstance(st, ProcState)
    return st


def process_round(cfg: NhopConfig, st: ProcState, inbox: list[Msg], ckdir: str | None,
                  logdir: str | None) -> tuple[ProcState, list[Msg], list[dict[str, Any]]]:
    """One logical round of one process (module docstring); pure apart from the files it writes.

    Returns the new state, the messages sent and the events (in local order).

    Parameters
    ----------
    cfg : NhopConfig
        The run's parameters.
    st : ProcState
        The process's state before the round.
    inbox : list of Msg
        The messages delivered this round.
    ckdir : str or None
        The checkpoint folder; None keeps no checkpoint files.
    logdir : str or None
        The message log folder; None logs nothing.

    Returns
    -------
    tuple of (ProcState, list of Msg, list of dict)
        The new state, the messages sent, the events.
    """
    from rollcheck.pyimpl.protocols import get_protocol

    proto = get_protocol(cfg.protocol)
    events: list[dict[str, Any]] = []
    i = st.i

    def checkpoint(st: ProcState, forced: bool) -> ProcState:
        st = replace(st, proto=proto.on_checkpoint(st.proto), index=st.index + 1)
        write_checkpoint(ckdir, st)
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

    Parameters
    ----------
    current : list of ProcState
        Each process's volatile state.
    checkpoints : dict
        Process -> its checkpoints by index.
    failed : set of int
        The failed processes.

    Returns
    -------
    tuple of (dict, list of tuple)
        The line (process -> checkpoint index, None for volatile) and the ``(src, dst, seq)`` to replay.

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
