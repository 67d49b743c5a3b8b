"""A Spark session after the JVM of an earlier session of the same process was killed starts a new
JVM instead of talking to the dead one (``Answer from Java side is empty``)."""

from __future__ import annotations

import os
import signal

import pytest

pytestmark = pytest.mark.spark


def test_a_session_after_its_jvm_was_killed_starts_a_new_jvm():
    from pyspark import SparkContext

    from rollcheck.spark_replay.session import spark_session

    with spark_session() as spark:
        assert spark.range(3).count() == 3
    gw = SparkContext._gateway
    assert gw is not None and gw.proc is not None  # stop() keeps the gateway for the next session
    os.kill(gw.proc.pid, signal.SIGKILL)
    gw.proc.wait(timeout=30)
    with spark_session() as spark:
        assert spark.range(4).count() == 4
    assert SparkContext._gateway is not gw
