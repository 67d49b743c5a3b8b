"""Message passing on Spark: processes as partitions, a checkpointing protocol inside the tasks.

``rollcheck spark record nhop`` runs N processes P0..P{N-1} for R logical rounds. One global
round is one Spark job: the driver's records (each process's state and the messages addressed to
it) are ``partitionBy(N)``-ed so that partition i holds process i, and
``mapPartitionsWithIndex`` runs :func:`process_round` for every process in its task. Events come
back as data and are recorded in (round, process, local order) - a global order that respects
causality because a message sent in round r is delivered in a later round.

The topologies, one logical round of a process and the recovery line are the model's
(:mod:`rollcheck.spark_replay.jobs.nhop_model`).

Details: ``docs/internals/spark-jobs.md`` (section ``nhop``).

References
----------
FERDiS paper §5.3, §7.2.5-7.2.8 (CIC protocols, message-log replay, deduplication by sequence
number); ``specs/spark.md#message-passing``.
"""

from __future__ import annotations

import json
import pickle
import shutil
import tempfile
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from rollcheck.infra.partialfile import partial_output
from rollcheck.pyimpl.errors import InvalidInputError
from rollcheck.spark_replay.jobs.nhop_model import (
    MAX_PROCESSES,
    MAX_ROUNDS,
    PROTOCOL_NAMES,
    TOPOLOGIES,
    Msg,
    NhopConfig,
    ProcState,
    initial_states,
    piggyback_json,
    process_round,
    read_checkpoint,
    recovery_from_counters,
    simulate,
    successors,
    write_checkpoint,
)
from rollcheck.spark_replay.supervise import environment_guard
from rollcheck.spark_replay.trace import TraceWriter

# the model (the configuration, a process's round, recovery, the plain-Python run) is nhop_model;
# its names stay importable from here
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
    "MAX_PROCESSES",
    "MAX_ROUNDS",
    "PROTOCOL_NAMES",
]


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
    with partial_output(target) as partial, environment_guard(target.parent):
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
        write_checkpoint(str(dirs.ck), st)
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
