"""Spark benchmarks: recording overhead, end-to-end record+failure+restart+replay, sweep speed-up.

All ratios are measured side by side in one run: the streaming job and a user query (the example
of ``docs/your-query.md``) with and without the recorder (alternating, same seed, same session),
and every sweep on Spark and in one process on the same seeds. The user query's end-to-end time
(reference run + run with the failure + restart + replay, 6 batches) is compared with its 60 s
target. Run with ``python -m benchmarks --only spark [--quick]``.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from pathlib import Path


def _load() -> str:
    try:
        return " ".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:
        return "?"


def overhead(reps: int, batches: int) -> None:
    from rollcheck.spark_replay.jobs.wordcount import WordcountConfig, record_wordcount

    cfg = WordcountConfig(batches=batches, seed=11, crosscheck=False)
    with_q: list[float] = []
    without_q: list[float] = []
    with_t: list[float] = []
    without_t: list[float] = []
    with tempfile.TemporaryDirectory(prefix="rollcheck-bench-") as d:
        record_wordcount(cfg, Path(d) / "warm.jsonl", enabled=False)  # JVM start and JIT warm-up
        for r in range(reps):
            for enabled in ((True, False) if r % 2 == 0 else (False, True)):
                res = record_wordcount(cfg, Path(d) / "t.jsonl", enabled=enabled)
                (with_q if enabled else without_q).append(sum(res["query_seconds"]))
                (with_t if enabled else without_t).append(res["seconds"])
    mq, mq0 = statistics.median(with_q), statistics.median(without_q)
    mt, mt0 = statistics.median(with_t), statistics.median(without_t)
    print(f"recording overhead, wordcount {batches} batches, {reps} alternating pairs (load {_load()}):")
    print(f"  query time   with recorder {mq:.2f} s, without {mq0:.2f} s  -> overhead {100 * (mq / mq0 - 1):+.1f}%")
    print(f"  end to end   with recorder {mt:.2f} s, without {mt0:.2f} s  -> overhead {100 * (mt / mt0 - 1):+.1f}%")


def end_to_end(batches: int, modes: list[str]) -> None:
    from rollcheck.spark_replay.jobs.wordcount import WordcountConfig, record_wordcount
    from rollcheck.spark_replay.replay.conformance import replay_file

    with tempfile.TemporaryDirectory(prefix="rollcheck-bench-") as d:
        for mode in modes:
            out = Path(d) / f"{mode}.jsonl"
            t0 = time.perf_counter()
            res = record_wordcount(WordcountConfig(batches=batches, fail_at_batch=2, failure=mode, seed=3), out)
            t1 = time.perf_counter()
            r = replay_file(out)
            t2 = time.perf_counter()
            print(f"wordcount {batches} batches, {mode} failure at batch 2: record+restart {t1 - t0:.1f} s "
                  f"({res['status']}), replay {t2 - t1:.2f} s, total {t2 - t0:.1f} s, "
                  f"conformant={r.conformant} (load {_load()})")


EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "queries" / "clicks_per_window.py"


def query_overhead(reps: int) -> None:
    """The example query with and without the recorder, alternating, in one Spark session."""
    from rollcheck.spark_replay.query.record import QueryConfig, record_query, session_conf
    from rollcheck.spark_replay.session import spark_session

    cfg = QueryConfig(str(EXAMPLE), seed=5, reference=False)
    times: dict[bool, list[float]] = {True: [], False: []}
    with tempfile.TemporaryDirectory(prefix="rollcheck-bench-") as d, \
            spark_session(conf=session_conf()) as spark:
        record_query(cfg, Path(d) / "warm.jsonl", enabled=False, spark=spark)  # JIT warm-up
        for r in range(reps):
            for enabled in ((True, False) if r % 2 == 0 else (False, True)):
                res = record_query(cfg, Path(d) / "t.jsonl", enabled=enabled, spark=spark)
                times[enabled].append(sum(res["attempt_seconds"]))
    m1, m0 = statistics.median(times[True]), statistics.median(times[False])
    print(f"recording overhead, user query (6 batches), {reps} alternating pairs (load {_load()}): "
          f"with recorder {m1:.2f} s, without {m0:.2f} s -> overhead {100 * (m1 / m0 - 1):+.1f}% (target <= 10%)")


def query_end_to_end(modes: list[str]) -> None:
    """Record (reference + failure + restart) and replay the 6-batch example query."""
    from rollcheck.spark_replay.query.record import QueryConfig, record_query
    from rollcheck.spark_replay.replay.conformance import replay_file

    with tempfile.TemporaryDirectory(prefix="rollcheck-bench-") as d:
        for mode in modes:
            out = Path(d) / f"q-{mode}.jsonl"
            t0 = time.perf_counter()
            res = record_query(QueryConfig(str(EXAMPLE), failure=mode, fail_at_batch=2, seed=3), out)
            t1 = time.perf_counter()
            r = replay_file(out)
            t2 = time.perf_counter()
            print(f"user query 6 batches, {mode} failure at batch 2: record {t1 - t0:.1f} s (reference run "
                  f"{res['reference_seconds']} s, attempts {res['attempt_seconds']} s, drivers "
                  f"{res['children'] or 1}), replay {t2 - t1:.2f} s, total {t2 - t0:.1f} s (target <= 60 s), "
                  f"conformant={r.conformant} (load {_load()})")


def nhop(rounds: int) -> None:
    from rollcheck.spark_replay.jobs.nhop import NhopConfig, record_nhop
    from rollcheck.spark_replay.replay.tlc import replay_with_tlc

    with tempfile.TemporaryDirectory(prefix="rollcheck-bench-") as d:
        for engine in ("spark", "local"):
            out = Path(d) / f"{engine}.jsonl"
            cfg = NhopConfig(protocol="hmnr", processes=3, rounds=rounds, topology="cyclic", fail_process=1,
                             fail_round=3, seed=2)
            t0 = time.perf_counter()
            res = record_nhop(cfg, out, engine=engine)
            t1 = time.perf_counter()
            r = replay_with_tlc(str(out))
            t2 = time.perf_counter()
            print(f"nhop hmnr 3 processes {rounds} rounds ({res['rounds']} global), engine {engine}: record "
                  f"{t1 - t0:.1f} s, replay incl. TLC {t2 - t1:.1f} s, conformant={r.conformant}")


def sweeps(seeds: int, size: int) -> None:
    from rollcheck.spark_replay.jobs.sweep import run_sweep

    for kind in ("protocols", "properties"):
        res = run_sweep(kind, 0, seeds, size=size)
        print(f"sweep {kind}: {seeds} seeds x size {size}: one process {res['local_seconds']} s, Spark "
              f"{res['spark_seconds']} s on {res['master']} ({res['partitions']} tasks; session start "
              f"{res['spark_startup_seconds']} s) -> speed-up {res['speedup']}x, identical={res['identical']} "
              f"(load {_load()})")


def main(quick: bool) -> None:
    overhead(reps=1 if quick else 3, batches=4 if quick else 8)
    end_to_end(batches=4 if quick else 6, modes=["sink"] if quick else ["task", "sink", "kill"])
    query_overhead(reps=1 if quick else 3)
    query_end_to_end(["sink"] if quick else ["task", "sink", "kill"])
    nhop(rounds=3 if quick else 6)
    sweeps(seeds=8 if quick else 32, size=1 if quick else 16)


if __name__ == "__main__":  # pragma: no cover
    main(quick=False)
