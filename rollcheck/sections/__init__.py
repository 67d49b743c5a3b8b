"""Sections of ``rollcheck verify``: one ``sec_<name>.py`` module per area (see rollcheck.suite).

:data:`SCHEDULE` tells the scheduler (``rollcheck.scheduler``) what each section needs: its kind
(``engine`` for the Spark and Flink sections, which hold a JVM of a gigabyte and run timed
recordings; two at a time by default; ``cpu`` for the rest, TLC included) and its wall time in seconds,
quick and full, as measured on a 2-core machine under load (``make bench`` re-measures them;
``benchmarks/bench_verify.py``). A section module may carry its own ``SCHEDULE`` dict instead.
A section missing here is scheduled as ``cpu``, 60 s.
"""

SCHEDULE: dict[str, dict[str, object]] = {
    # quick: seconds of one sequential ``verify --quick`` at load 10-20 on 2 cores (the slowest we met);
    # full: estimated from the sequential full run (34 min at load 5-7)
    "elastic": {"kind": "cpu", "quick": 7, "full": 90},
    "flink": {"kind": "engine", "quick": 240, "full": 480},
    "foundation": {"kind": "cpu", "quick": 23, "full": 200},
    "fuzz": {"kind": "cpu", "quick": 8, "full": 240},
    "intervals": {"kind": "cpu", "quick": 8, "full": 150},
    "mutants": {"kind": "cpu", "quick": 153, "full": 300},
    "protocols": {"kind": "cpu", "quick": 15, "full": 150},
    "simulate": {"kind": "cpu", "quick": 20, "full": 120},
    "spans": {"kind": "cpu", "quick": 98, "full": 200},
    "spark": {"kind": "engine", "quick": 312, "full": 900},
    "tlc": {"kind": "cpu", "quick": 120, "full": 400},
    "yours": {"kind": "cpu", "quick": 9, "full": 40},
}
