"""The Spark sweep gives exactly the numpy sweep's numbers for the same seed (one short session)."""

from __future__ import annotations

import pytest

from rollcheck.pyimpl.intervals.sim import SimConfig, sweep


@pytest.mark.spark
def test_spark_sweep_identical_to_numpy() -> None:
    from rollcheck.spark_replay.jobs.interval_sweep import spark_sweep

    cfgs = [SimConfig(20.0, 0.05, 2.0, 3.0), SimConfig(40.0, 0.01, 5.0, 10.0, 10, 0.2)]
    local = sweep(cfgs, runs=12, horizon_failures=200, seed=9)
    dist, timing = spark_sweep(cfgs, runs=12, horizon_failures=200, seed=9, block_size=5, partitions=3)
    assert [s.values for s in dist] == [s.values for s in local]
    assert [s.failures for s in dist] == [s.failures for s in local]
    assert timing.partitions == 3 and timing.master.startswith("local")
