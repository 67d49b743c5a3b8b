"""Plans of the analysed streaming queries printed by pyspark 4.3.0 (``queryExecution().analyzed()``),
for the fast tests of Spark's lateness rule (tests/test_spark_lateness.py)."""

PLANS = {
    'tumble': (
        '~Project [window#9-T10000ms.start AS ws#10, page#1, count#4L]\n'
        '+- ~Aggregate [window#9-T10000ms, page#1], [window#9-T10000ms, page#1, count(1) AS count#4L]\n'
        '   +- ~Project [named_struct(start, knownnullable(precisetimestampconversion(((precisetimestampconversion(ts#0-T10000ms, TimestampType, LongType) - CASE WHEN (((precisetimestampconversion(ts#0-T10000ms, TimestampType, LongType) - 0) % 10000000) < cast(0 as bigint)) THEN (((precisetimestampconversion(ts#0-T10000ms, TimestampType, LongType) - 0) % 10000000) + 10000000) ELSE ((precisetimestampconversion(ts#0-T10000ms, TimestampType, LongType) - 0) % 10000000) END) - 0), LongType, TimestampType)), end, knownnullable(precisetimestampconversion((((precisetimestampconversion(ts#0-T10000ms, TimestampType, LongType) - CASE WHEN (((precisetimestampconversion(ts#0-T10000ms, TimestampType, LongType) - 0) % 10000000) < cast(0 as bigint)) THEN (((precisetimestampconversion(ts#0-T10000ms, TimestampType, LongType) - 0) % 10000000) + 10000000) ELSE ((precisetimestampconversion(ts#0-T10000ms, TimestampType, LongType) - 0) % 10000000) END) - 0) + 10000000), LongType, TimestampType))) AS window#9-T10000ms, ts#0-T10000ms, page#1, user#2]\n'
        '      +- ~Filter isnotnull(ts#0-T10000ms)\n'
        '         +- ~EventTimeWatermark 346315b0-42f2-42a3-91eb-eb36f7032b74, ts#0: timestamp, 10 seconds\n'
        '            +- StreamingRelation FileSource[/w/in], [ts#0, page#1, user#2], name=<Unassigned>\n'
    ),
    'slide': (
        '~Aggregate [window#17-T10000ms, page#1], [window#17-T10000ms, page#1, count(1) AS count#12L]\n'
        '+- ~Filter isnotnull(ts#0-T10000ms)\n'
        '   +- ~Expand [[named_struct(start, knownnullable(precisetimestampconversion(((precisetimestampconversion(ts#0-T10000ms, TimestampType, LongType) - CASE WHEN (((precisetimestampconversion(ts#0-T10000ms, TimestampType, LongType) - 0) % 5000000) < cast(0 as bigint)) THEN (((precisetimestampconversion(ts#0-T10000ms, TimestampType, LongType) - 0) % 5000000) + 5000000) ELSE ((precisetimestampconversion(ts#0-T10000ms, TimestampType, LongType) - 0) % 5000000) END) - 0), LongType, TimestampType)), end, knownnullable(precisetimestampconversion((((precisetimestampconversion(ts#0-T10000ms, TimestampType, LongType) - CASE WHEN (((precisetimestampconversion(ts#0-T10000ms, TimestampType, LongType) - 0) % 5000000) < cast(0 as bigint)) THEN (((precisetimestampconversion(ts#0-T10000ms, TimestampType, LongType) - 0) % 5000000) + 5000000) ELSE ((precisetimestampconversion(ts#0-T10000ms, TimestampType, LongType) - 0) % 5000000) END) - 0) + 10000000), LongType, TimestampType))), ts#0-T10000ms, page#1, user#2], [named_struct(start, knownnullable(precisetimestampconversion(((precisetimestampconversion(ts#0-T10000ms, TimestampType, LongType) - CASE WHEN (((precisetimestampconversion(ts#0-T10000ms, TimestampType, LongType) - 0) % 5000000) < cast(0 as bigint)) THEN (((precisetimestampconversion(ts#0-T10000ms, TimestampType, LongType) - 0) % 5000000) + 5000000) ELSE ((precisetimestampconversion(ts#0-T10000ms, TimestampType, LongType) - 0) % 5000000) END) - 5000000), LongType, TimestampType)), end, knownnullable(precisetimestampconversion((((precisetimestampconversion(ts#0-T10000ms, TimestampType, LongType) - CASE WHEN (((precisetimestampconversion(ts#0-T10000ms, TimestampType, LongType) - 0) % 5000000) < cast(0 as bigint)) THEN (((precisetimestampconversion(ts#0-T10000ms, TimestampType, LongType) - 0) % 5000000) + 5000000) ELSE ((precisetimestampconversion(ts#0-T10000ms, TimestampType, LongType) - 0) % 5000000) END) - 5000000) + 10000000), LongType, TimestampType))), ts#0-T10000ms, page#1, user#2]], [window#17-T10000ms, ts#0-T10000ms, page#1, user#2]\n'
        '      +- ~EventTimeWatermark 346315b0-42f2-42a3-91eb-eb36f7032b74, ts#0: timestamp, 10 seconds\n'
        '         +- StreamingRelation FileSource[/w/in], [ts#0, page#1, user#2], name=<Unassigned>\n'
    ),
    'tumble_offset': (
        '~Aggregate [window#23-T10000ms, page#1], [window#23-T10000ms, page#1, count(1) AS count#18L]\n'
        '+- ~Project [named_struct(start, knownnullable(precisetimestampconversion(((precisetimestampconversion(ts#0-T10000ms, TimestampType, LongType) - CASE WHEN (((precisetimestampconversion(ts#0-T10000ms, TimestampType, LongType) - 3000000) % 10000000) < cast(0 as bigint)) THEN (((precisetimestampconversion(ts#0-T10000ms, TimestampType, LongType) - 3000000) % 10000000) + 10000000) ELSE ((precisetimestampconversion(ts#0-T10000ms, TimestampType, LongType) - 3000000) % 10000000) END) - 0), LongType, TimestampType)), end, knownnullable(precisetimestampconversion((((precisetimestampconversion(ts#0-T10000ms, TimestampType, LongType) - CASE WHEN (((precisetimestampconversion(ts#0-T10000ms, TimestampType, LongType) - 3000000) % 10000000) < cast(0 as bigint)) THEN (((precisetimestampconversion(ts#0-T10000ms, TimestampType, LongType) - 3000000) % 10000000) + 10000000) ELSE ((precisetimestampconversion(ts#0-T10000ms, TimestampType, LongType) - 3000000) % 10000000) END) - 0) + 10000000), LongType, TimestampType))) AS window#23-T10000ms, ts#0-T10000ms, page#1, user#2]\n'
        '   +- ~Filter isnotnull(ts#0-T10000ms)\n'
        '      +- ~EventTimeWatermark 346315b0-42f2-42a3-91eb-eb36f7032b74, ts#0: timestamp, 10 seconds\n'
        '         +- StreamingRelation FileSource[/w/in], [ts#0, page#1, user#2], name=<Unassigned>\n'
    ),
    'session': (
        '~Aggregate [session_window#29-T10000ms, page#1], [session_window#29-T10000ms, page#1, count(1) AS count#24L]\n'
        '+- ~Filter isnotnull(ts#0-T10000ms)\n'
        '   +- ~Project [named_struct(start, precisetimestampconversion(precisetimestampconversion(ts#0-T10000ms, TimestampType, LongType), LongType, TimestampType), end, knownnullable(precisetimestampconversion(precisetimestampconversion(cast(ts#0-T10000ms + cast(5 seconds as interval) as timestamp), TimestampType, LongType), LongType, TimestampType))) AS session_window#29-T10000ms, ts#0-T10000ms, page#1, user#2]\n'
        '      +- ~EventTimeWatermark 346315b0-42f2-42a3-91eb-eb36f7032b74, ts#0: timestamp, 10 seconds\n'
        '         +- StreamingRelation FileSource[/w/in], [ts#0, page#1, user#2], name=<Unassigned>\n'
    ),
    'dedup': (
        '~Deduplicate [user#2, ts#0-T10000ms]\n'
        '+- ~EventTimeWatermark 346315b0-42f2-42a3-91eb-eb36f7032b74, ts#0: timestamp, 10 seconds\n'
        '   +- StreamingRelation FileSource[/w/in], [ts#0, page#1, user#2], name=<Unassigned>\n'
    ),
    'dedupww': (
        '~DeduplicateWithinWatermark [user#2]\n'
        '+- ~EventTimeWatermark 346315b0-42f2-42a3-91eb-eb36f7032b74, ts#0: timestamp, 10 seconds\n'
        '   +- StreamingRelation FileSource[/w/in], [ts#0, page#1, user#2], name=<Unassigned>\n'
    ),
    'join': (
        "~Join Inner, ((k#31 = k2#34) AND between(bts#33-T20000ms, cast(ats#30-T10000ms - INTERVAL '05' SECOND as timestamp), cast(ats#30-T10000ms + INTERVAL '05' SECOND as timestamp)))\n"
        ':- ~EventTimeWatermark fb5c949d-daba-495f-a0ba-232e0a2cc94e, ats#30: timestamp, 10 seconds\n'
        ':  +- StreamingRelation FileSource[/w/in/a], [ats#30, k#31], name=<Unassigned>\n'
        '+- ~EventTimeWatermark 44e7924e-5cb6-43d8-a099-cd126f27d281, bts#33: timestamp, 20 seconds\n'
        '   +- StreamingRelation FileSource[/w/in/b], [bts#33, k2#34], name=<Unassigned>\n'
    ),
    'join_left': (
        "~Join LeftOuter, ((k#31 = k2#34) AND between(bts#33-T20000ms, cast(ats#30-T10000ms - INTERVAL '05' SECOND as timestamp), cast(ats#30-T10000ms + INTERVAL '05' SECOND as timestamp)))\n"
        ':- ~EventTimeWatermark fb5c949d-daba-495f-a0ba-232e0a2cc94e, ats#30: timestamp, 10 seconds\n'
        ':  +- StreamingRelation FileSource[/w/in/a], [ats#30, k#31], name=<Unassigned>\n'
        '+- ~EventTimeWatermark 44e7924e-5cb6-43d8-a099-cd126f27d281, bts#33: timestamp, 20 seconds\n'
        '   +- StreamingRelation FileSource[/w/in/b], [bts#33, k2#34], name=<Unassigned>\n'
    ),
    'chain': (
        '~Aggregate [page#1], [page#1, count(1) AS count#42L]\n'
        '+- ~Aggregate [window#41-T10000ms, page#1], [window#41-T10000ms, page#1, count(1) AS count#36L]\n'
        '   +- ~Project [named_struct(start, knownnullable(precisetimestampconversion(((precisetimestampconversion(ts#0-T10000ms, TimestampType, LongType) - CASE WHEN (((precisetimestampconversion(ts#0-T10000ms, TimestampType, LongType) - 0) % 10000000) < cast(0 as bigint)) THEN (((precisetimestampconversion(ts#0-T10000ms, TimestampType, LongType) - 0) % 10000000) + 10000000) ELSE ((precisetimestampconversion(ts#0-T10000ms, TimestampType, LongType) - 0) % 10000000) END) - 0), LongType, TimestampType)), end, knownnullable(precisetimestampconversion((((precisetimestampconversion(ts#0-T10000ms, TimestampType, LongType) - CASE WHEN (((precisetimestampconversion(ts#0-T10000ms, TimestampType, LongType) - 0) % 10000000) < cast(0 as bigint)) THEN (((precisetimestampconversion(ts#0-T10000ms, TimestampType, LongType) - 0) % 10000000) + 10000000) ELSE ((precisetimestampconversion(ts#0-T10000ms, TimestampType, LongType) - 0) % 10000000) END) - 0) + 10000000), LongType, TimestampType))) AS window#41-T10000ms, ts#0-T10000ms, page#1, user#2]\n'
        '      +- ~Filter isnotnull(ts#0-T10000ms)\n'
        '         +- ~EventTimeWatermark 346315b0-42f2-42a3-91eb-eb36f7032b74, ts#0: timestamp, 10 seconds\n'
        '            +- StreamingRelation FileSource[/w/in], [ts#0, page#1, user#2], name=<Unassigned>\n'
    ),
    'groupts': (
        '~Aggregate [ts#0-T10000ms, page#1], [ts#0-T10000ms, page#1, count(1) AS count#47L]\n'
        '+- ~EventTimeWatermark 346315b0-42f2-42a3-91eb-eb36f7032b74, ts#0: timestamp, 10 seconds\n'
        '   +- StreamingRelation FileSource[/w/in], [ts#0, page#1, user#2], name=<Unassigned>\n'
    ),
}
