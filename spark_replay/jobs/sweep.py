"""Seeded sweeps spread over Spark tasks (``rollcheck spark sweep``), identical to one process.

Every unit of work is a pure function of its seed (and a size), so the sweep's result does not
depend on the master, the number of partitions or the order in which tasks run. Each sweep is run
on Spark (``sc.parallelize(seeds).map(work)``) and, side by side, in this process; the two result
lists must be equal and the speed-up is measured on the same seeds (``docs/spark.md``).

Kinds:

- ``protocols``: the protocol comparison table - for each seed, every protocol (uc, bcs, hmnr) on
  every topology (:func:`rollcheck.spark_replay.jobs.nhop.simulate`, failure-free): basic and forced checkpoints,
  deliveries, useless checkpoints;
- ``properties``: property runs - for each seed, random patterns (:func:`random_pattern`) run
  through BCS and HMNR must leave no useless checkpoint (any counterexample is returned);
- ``interval``: the checkpoint-interval Monte Carlo (:mod:`rollcheck.spark_replay.jobs.interval_sweep`, owned by the
  interval module) against :func:`rollcheck.pyimpl.intervals.sim.sweep`.
"""

from __future__ import annotations

import time
from typing import Any

from rollcheck.pyimpl import generate
from rollcheck.pyimpl.errors import InvalidInputError
from rollcheck.pyimpl.pattern import Pattern

__all__ = ["random_pattern", "protocols_work", "properties_work", "run_sweep", "KINDS"]

KINDS = ("protocols", "properties", "interval")


def random_pattern(seed: int, n: int, events: int) -> Pattern:
    """A random basic schedule for sweep ``seed`` (:func:`rollcheck.pyimpl.generate.random_pattern`).

    Parameters
    ----------
    seed : int
        The sweep's seed.
    n : int
        The number of processes.
    events : int
        The number of events.

    Returns
    -------
    Pattern
        The schedule (the same for the same arguments).

    Examples
    --------
    >>> random_pattern(1, 3, 30) == random_pattern(1, 3, 30)
    True
    """
    return generate.random_pattern(n, events, f"sweep-pattern:{seed}:{n}:{events}", p_deliver=0.8)


def _pattern_of_events(events: list[dict[str, Any]], n: int) -> Pattern:
    from rollcheck.pyimpl.pattern import CHECKPOINT, DELIVER, SEND, Event

    evs = []
    for e in events:
        i = int(e["process"][1:])
        if e["kind"] == SEND:
            evs.append(Event(i, SEND, e["message"], int(e["to"][1:])))
        elif e["kind"] == DELIVER:
            evs.append(Event(i, DELIVER, e["message"]))
        elif e["kind"] == CHECKPOINT:
            evs.append(Event(i, CHECKPOINT, None, None, bool(e["forced"])))
    return Pattern(tuple(f"P{i}" for i in range(n)), tuple(evs))


def protocols_work(seed: int, size: int = 1) -> list[dict[str, Any]]:
    """One seed of the protocol comparison: a row per (protocol, topology).

    Parameters
    ----------
    seed : int
        The seed.
    size : int, optional
        Scales the rounds.

    Returns
    -------
    list of dict
        Basic, forced, deliveries and useless checkpoints per (protocol, topology).
    """
    from rollcheck.pyimpl.zpaths import useless_checkpoints
    from rollcheck.spark_replay.jobs.nhop import TOPOLOGIES, NhopConfig, simulate

    rows = []
    for topo in TOPOLOGIES:
        for proto in ("uc", "bcs", "hmnr"):
            cfg = NhopConfig(protocol=proto, processes=5, rounds=12 * size, topology=topo, seed=seed)
            evs = simulate(cfg)["events"]
            p = _pattern_of_events(evs, cfg.processes)
            forced = sum(1 for e in evs if e["kind"] == "checkpoint" and e["forced"])
            rows.append({"seed": seed, "protocol": proto, "topology": topo,
                         "basic": sum(1 for e in evs if e["kind"] == "checkpoint" and not e["forced"]),
                         "forced": forced, "deliveries": sum(1 for e in evs if e["kind"] == "deliver"),
                         "useless": len(useless_checkpoints(p))})
    return rows


def properties_work(seed: int, size: int = 1) -> dict[str, Any]:
    """One seed of property runs: BCS and HMNR leave no useless checkpoint on random patterns.

    Parameters
    ----------
    seed : int
        The seed.
    size : int, optional
        Scales the number of patterns.

    Returns
    -------
    dict
        ``seed``, ``checked`` and ``violations``.
    """
    from rollcheck.pyimpl.protocols import run_protocol
    from rollcheck.pyimpl.zpaths import useless_checkpoints

    checked = 0
    bad = []
    for k in range(4 * size):
        n = 2 + (seed + k) % 4
        p = random_pattern(seed * 1000 + k, n, 60)
        for proto in ("bcs", "hmnr"):
            run = run_protocol(proto, p)
            u = useless_checkpoints(run.pattern)
            checked += 1
            if u:
                bad.append({"seed": seed, "k": k, "protocol": proto,
                            "useless": [run.pattern.checkpoint_name(c) for c in u]})
    return {"seed": seed, "checked": checked, "violations": bad}


def _work(kind: str, seed: int, size: int) -> Any:
    if kind == "protocols":
        return protocols_work(seed, size)
    return properties_work(seed, size)


def _timed(kind: str, seed: int, size: int) -> tuple[int, Any, float]:
    c0 = time.process_time()
    r = _work(kind, seed, size)
    return seed, r, time.process_time() - c0


def _table(results: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    agg: dict[tuple[str, str], dict[str, Any]] = {}
    for rows in results:
        for r in rows:
            a = agg.setdefault((r["topology"], r["protocol"]), {"topology": r["topology"], "protocol": r["protocol"],
                                                                 "basic": 0, "forced": 0, "deliveries": 0,
                                                                 "useless": 0})
            for k in ("basic", "forced", "deliveries", "useless"):
                a[k] += r[k]
    out = []
    for a in agg.values():
        a["forced_per_delivery"] = round(a["forced"] / a["deliveries"], 4) if a["deliveries"] else 0.0
        out.append(a)
    return out


def run_sweep(kind: str, first_seed: int, seeds: int, *, size: int = 1, master: str | None = None,
              partitions: int | None = None, compare: bool = True, blocks: int = 4) -> dict[str, Any]:
    """Run a sweep on Spark and (unless ``compare`` is false) in this process; compare and time.

    For a fair speed-up on a machine whose load changes, the seeds are cut into ``blocks``
    consecutive blocks and each block runs on Spark and then in this process, alternately; the
    times are summed. Task placement never changes a result: each seed's work is a pure function.

    Parameters
    ----------
    kind : str
        One of :data:`KINDS`.
    first_seed : int
        The first seed.
    seeds : int
        How many seeds.
    size : int, optional
        Scales each seed's work.
    master : str, optional
        The Spark master; None for local.
    partitions : int, optional
        Spark partitions of the seeds; None for Spark's default.
    compare : bool, optional
        Also run in this process and compare.
    blocks : int, optional
        Alternating blocks of seeds, for a fair timing.

    Returns
    -------
    dict
        The results, the comparison and the times.
    """
    if kind not in KINDS:
        raise InvalidInputError(f"unknown sweep kind {kind!r}; use one of {KINDS}", location="--kind")
    if seeds < 1:
        raise InvalidInputError("need at least one seed", location="--seeds")
    if size < 1:
        raise InvalidInputError("size must be at least 1", location="--size")
    if kind == "interval":
        return _interval_sweep(first_seed, seeds, size, master, partitions, compare)
    from rollcheck.spark_replay.session import spark_session

    seed_list = list(range(first_seed, first_seed + seeds))
    nblocks = max(1, min(blocks if compare else 1, len(seed_list)))
    cut = [seed_list[k * len(seed_list) // nblocks:(k + 1) * len(seed_list) // nblocks] for k in range(nblocks)]
    got: list[tuple[int, Any, float]] = []
    local: list[Any] = []
    spark_s = local_s = local_cpu = 0.0
    t0 = time.perf_counter()
    with spark_session(master, app_name=f"rollcheck-sweep-{kind}") as spark:
        startup = time.perf_counter() - t0
        sc = spark.sparkContext
        parts = partitions or min(len(seed_list), 2 * sc.defaultParallelism)
        used_master = sc.master
        for block in cut:
            t1 = time.perf_counter()
            got += sc.parallelize(block, min(parts, len(block))).map(lambda s: _timed(kind, s, size)).collect()
            spark_s += time.perf_counter() - t1
            if compare:
                t2 = time.perf_counter()
                c2 = time.process_time()
                local += [_work(kind, s, size) for s in block]
                local_s += time.perf_counter() - t2
                local_cpu += time.process_time() - c2
    got.sort(key=lambda x: x[0])
    got_sorted = [r for _, r, _ in got]
    res: dict[str, Any] = {"kind": kind, "seeds": seeds, "first_seed": first_seed, "size": size,
                           "master": used_master, "partitions": parts, "blocks": nblocks,
                           "spark_startup_seconds": round(startup, 2), "spark_seconds": round(spark_s, 2),
                           "spark_task_cpu_seconds": round(sum(c for _, _, c in got), 2)}
    if compare:
        res.update(local_seconds=round(local_s, 2), local_cpu_seconds=round(local_cpu, 2),
                   speedup=round(local_s / spark_s, 2) if spark_s else None,
                   identical=local == got_sorted)
    if kind == "protocols":
        res["table"] = _table(got_sorted)
    else:
        res["checked"] = sum(r["checked"] for r in got_sorted)
        res["violations"] = [v for r in got_sorted for v in r["violations"]]
    return res


def _interval_sweep(first_seed: int, seeds: int, size: int, master: str | None, partitions: int | None,
                    compare: bool) -> dict[str, Any]:
    from rollcheck.pyimpl.intervals.sim import SimConfig, sweep
    from rollcheck.spark_replay.jobs.interval_sweep import spark_sweep

    configs = [SimConfig(interval=t, failure_rate=0.005, checkpoint_cost=5.0, restart_cost=10.0)
               for t in (20.0, 35.0, 46.45, 60.0, 90.0)]
    runs = 10 * seeds * size
    out, timing = spark_sweep(configs, runs=runs, horizon_failures=200.0, seed=first_seed, master=master,
                              partitions=partitions)
    res: dict[str, Any] = {"kind": "interval", "seeds": seeds, "first_seed": first_seed, "size": size,
                           "runs_per_point": runs, "master": timing.master, "partitions": timing.partitions,
                           "spark_startup_seconds": round(timing.startup, 2),
                           "spark_seconds": round(timing.job, 2),
                           "table": [{"interval": s.config.interval, "mean": round(s.mean, 5),
                                      "model": round(s.model, 5)} for s in out]}
    if compare:
        t0 = time.perf_counter()
        local = sweep(configs, runs=runs, horizon_failures=200.0, seed=first_seed)
        local_s = time.perf_counter() - t0
        res.update(local_seconds=round(local_s, 2),
                   speedup=round(local_s / timing.job, 2) if timing.job else None,
                   identical=[s.to_dict() for s in local] == [s.to_dict() for s in out])
    return res
