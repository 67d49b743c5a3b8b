"""Sensor readings routed to a fixed pool of two enrichment workers by a custom partitioner
(``partition_custom``: a reading goes to the worker of its site), each reading tagged with the
worker's calibration. The enrichment stage keeps its own parallelism of 2 while the rest of the
job runs at the job's parallelism. Zoo entry FLINK-35351."""

import random
import time

from pyflink.common import Types
from pyflink.datastream.functions import MapFunction, Partitioner

KEY = ["reading"]
FIELDS = ["reading", "site", "value", "calibrated"]


def records(seed):
    """800 readings (reading id, site, raw value): a pure function of the seed."""
    rng = random.Random(seed)
    return [(i, f"site-{rng.randrange(6)}", rng.randrange(1000)) for i in range(800)]


class BySite(Partitioner):
    def partition(self, key, num_partitions):
        return int(key.split("-")[1]) % num_partitions


class Calibrate(MapFunction):
    def map(self, r):
        time.sleep(0.02)  # the calibration lookup takes a moment
        return r[0], r[1], r[2], r[2] * 2 + 1


def job(env, source):
    routed = source.partition_custom(BySite(), lambda r: r[1])
    return (routed.map(Calibrate(), output_type=Types.TUPLE([Types.INT(), Types.STRING(), Types.INT(),
                                                               Types.INT()]))
            .set_parallelism(2))
