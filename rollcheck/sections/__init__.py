"""Sections of ``rollcheck verify``: one ``sec_<name>.py`` module per area (see rollcheck.suite).

:data:`SCHEDULE` tells the scheduler (``rollcheck.scheduler``) what each section needs: its kind
(``engine`` for the Spark and Flink sections, which hold a JVM of a gigabyte; ``timed`` for the
Flink sweeps that mostly wait and measure times; ``cpu`` for the rest, TLC included) and its wall
time in seconds, quick and full. A section split into ``PARTS`` may have an entry per part,
``"<section>.<part>"`` (else its parts share the section's entry). The scheduler starts the
longest jobs first, so the estimates matter relative to each other; a previous report in the same
``--out`` folder replaces them by its measured times. ``make bench-verify`` re-measures them
(``benchmarks/bench_verify.py``). A section module may carry its own ``SCHEDULE`` dict instead.
A section missing here is scheduled as ``cpu``, 60 s.
"""

SCHEDULE: dict[str, dict[str, object]] = {
    # seconds of wall time on 2 cores at load 10-20 (quick) and estimated for the full run from
    # the sequential full run (34 min at load 5-7), shared among the parts by their rows' times
    "elastic": {"kind": "cpu", "quick": 7, "full": 90},
    "flink": {"kind": "engine", "quick": 240, "full": 480},
    "flink.recordings": {"kind": "engine", "quick": 60, "full": 100},
    "flink.user-rescale": {"kind": "engine", "quick": 70, "full": 80},
    "flink.recovery-time": {"kind": "timed", "quick": 160, "full": 240},
    "flink.utilization": {"kind": "timed", "quick": 180, "full": 260},
    "foundation": {"kind": "cpu", "quick": 23, "full": 200},
    "fuzz": {"kind": "cpu", "quick": 8, "full": 240},
    "fuzz.trace": {"kind": "cpu", "quick": 4, "full": 110},
    "fuzz.files": {"kind": "cpu", "quick": 20, "full": 100},
    "fuzz.options": {"kind": "cpu", "quick": 6, "full": 60},
    "intervals": {"kind": "cpu", "quick": 8, "full": 150},
    "mutants": {"kind": "cpu", "quick": 153, "full": 300},
    "mutants.foundation-elastic": {"kind": "cpu", "quick": 76, "full": 120},
    "mutants.intervals-spans": {"kind": "cpu", "quick": 48, "full": 80},
    "mutants.others": {"kind": "cpu", "quick": 69, "full": 100},
    "protocols": {"kind": "cpu", "quick": 15, "full": 150},
    "simulate": {"kind": "cpu", "quick": 20, "full": 120},
    "spans": {"kind": "cpu", "quick": 98, "full": 200},
    "spark": {"kind": "engine", "quick": 312, "full": 900},
    "spark.streaming": {"kind": "engine", "quick": 110, "full": 320},
    "spark.queries": {"kind": "engine", "quick": 60, "full": 250},
    "spark.queries-kill": {"kind": "engine", "quick": 0, "full": 200},
    "spark.matrix": {"kind": "engine", "quick": 0, "full": 300},
    "spark.batch": {"kind": "cpu", "quick": 2, "full": 40},
    "tlc": {"kind": "cpu", "quick": 120, "full": 400},
    "tlc.models-small": {"kind": "cpu", "quick": 100, "full": 100},
    "tlc.models-large": {"kind": "cpu", "quick": 0, "full": 200},
    "tlc.coverage-small": {"kind": "cpu", "quick": 30, "full": 30},
    "tlc.coverage-large": {"kind": "cpu", "quick": 0, "full": 100},
    "tlc.traces": {"kind": "cpu", "quick": 25, "full": 80},
    "yours": {"kind": "cpu", "quick": 9, "full": 40},
}
