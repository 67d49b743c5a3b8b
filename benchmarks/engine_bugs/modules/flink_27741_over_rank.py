"""Sensor readings numbered per sensor in event-time order by Flink SQL: ``RANK() OVER
(PARTITION BY sensor ORDER BY ts)``, an event-time OVER aggregation over a DataStream turned into
a table whose rowtime is computed from the reading's epoch milliseconds. Every reading comes out
once, with its rank among its sensor's readings. Zoo entry FLINK-27741.

Each source subtask reads its readings in event-time order and the watermark is generated per
subtask behind its own readings (5 s of slack), so no reading is ever late: the output is a pure
function of the input, and the same query in BATCH runtime mode gives the same ranks. The OVER
operator emits a reading once the watermark has passed it, so ranked readings flow (and reach
the checkpointed output) while the input is read, not only at its end.
"""

import random

from pyflink.common import Row, Types
from pyflink.table import Schema, StreamTableEnvironment

KEY = ["reading"]
FIELDS = ["reading", "sensor", "rank"]

QUERY = """
SELECT reading, sensor, RANK() OVER (PARTITION BY sensor ORDER BY ts) AS nth
FROM readings
"""


def records(seed):
    """150 readings (reading id, sensor, epoch ms), one per second: a pure function of the seed."""
    rng = random.Random(seed)
    return [(i, f"s{rng.randrange(5)}", 1_700_000_000_000 + 1000 * i) for i in range(150)]


def job(env, source):
    typed = source.map(lambda r: Row(reading=r[0], sensor=r[1], ms=r[2]),
                       output_type=Types.ROW_NAMED(["reading", "sensor", "ms"],
                                                   [Types.INT(), Types.STRING(), Types.LONG()]))
    schema = (Schema.new_builder()
              .column("reading", "INT").column("sensor", "STRING").column("ms", "BIGINT")
              .column_by_expression("ts", "CAST(TO_TIMESTAMP_LTZ(ms, 3) AS TIMESTAMP(3))")
              .watermark("ts", "ts - INTERVAL '5' SECOND")
              .build())
    tables = StreamTableEnvironment.create(env)
    tables.create_temporary_view("readings", tables.from_data_stream(typed, schema))
    ranked = tables.to_data_stream(tables.sql_query(QUERY))
    return ranked.map(lambda r: (r[0], r[1], r[2]),
                      output_type=Types.TUPLE([Types.INT(), Types.STRING(), Types.LONG()]))
