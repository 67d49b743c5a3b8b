"""Generated hunt programs on the pinned Spark: the hard shapes start, run every batch and stop.

One local session runs a few programs chosen deterministically by shape (several stateful
operators chained, the SQL form, a stream-stream outer join, a shrunk variant): each must be
accepted by Spark's analyser and run its micro-batches without an exception."""

from __future__ import annotations

import pytest

from rollcheck.spark_replay.hunt.accept import try_program
from rollcheck.spark_replay.hunt.grammar import program
from rollcheck.spark_replay.hunt.shrink import shrink

STATEFUL = ("window-", "join-", "dedup", "pandas", "group-by")


def _stateful(p) -> int:
    return sum(1 for k in p.operators if k.startswith(STATEFUL) and k != "join-static")


def _pick():
    """The first programs (seed 1, 4.0.0 rules) of three hard shapes."""
    wanted = {
        "chained-sql": lambda p: _stateful(p) >= 2 and "sql" in p.operators,
        "chained-window": lambda p: _stateful(p) >= 2 and any(k.startswith("window-") for k in p.operators)
        and "sql" not in p.operators,
        "outer-join": lambda p: any(k in p.operators for k in ("join-full-outer", "join-left-semi")),
    }
    found = {}
    for i in range(300):
        p = program(1, i, {}, "4.0.0")
        for name, ok in wanted.items():
            if name not in found and ok(p) and len(p.spec["batches"]) <= 4:
                found[name] = p
        if len(found) == len(wanted):
            return [found[n] for n in wanted]
    raise AssertionError(f"no program of the shapes {set(wanted) - set(found)} in 300")


@pytest.mark.spark
@pytest.mark.engines  # three generated programs and a shrunk one in real Spark: 2-6 minutes (make test-engines)
def test_hard_shapes_run_on_spark(tmp_path):
    from rollcheck.spark_replay.session import spark_session

    progs = _pick()
    progs.append(next(shrink(progs[0], "4.0.0")))
    with spark_session(conf={"spark.sql.session.timeZone": "UTC"}) as spark:
        results = [try_program(spark, p, tmp_path / str(n)) for n, p in enumerate(progs)]
    for p, r in zip(progs, results, strict=True):
        assert r["outcome"] == "accepted", (p.id, p.operators, r)
    assert results[0]["stateful"] >= 2 and results[1]["stateful"] >= 2
