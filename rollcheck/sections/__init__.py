"""Sections of ``rollcheck verify``: one ``sec_<name>.py`` module per area (see rollcheck.suite).

:data:`SCHEDULE` tells the scheduler (``rollcheck.scheduler``) what each section needs: its kind
(``engine`` for the Spark and Flink sections, which hold a JVM of a gigabyte and run timed
recordings, one at a time; ``cpu`` for the rest, TLC included) and its wall time in seconds,
quick and full, as measured on a 2-core machine under load (``make bench`` re-measures them;
``benchmarks/bench_verify.py``). A section module may carry its own ``SCHEDULE`` dict instead.
A section missing here is scheduled as ``cpu``, 60 s.
"""

SCHEDULE: dict[str, dict[str, object]] = {
    "elastic": {"kind": "cpu", "quick": 10, "full": 60},
    "flink": {"kind": "engine", "quick": 150, "full": 420},
    "foundation": {"kind": "cpu", "quick": 40, "full": 200},
    "fuzz": {"kind": "cpu", "quick": 20, "full": 240},
    "intervals": {"kind": "cpu", "quick": 30, "full": 200},
    "mutants": {"kind": "cpu", "quick": 90, "full": 120},
    "protocols": {"kind": "cpu", "quick": 30, "full": 150},
    "simulate": {"kind": "cpu", "quick": 20, "full": 120},
    "spans": {"kind": "cpu", "quick": 20, "full": 120},
    "spark": {"kind": "engine", "quick": 150, "full": 700},
    "tlc": {"kind": "cpu", "quick": 60, "full": 300},
    "yours": {"kind": "cpu", "quick": 20, "full": 60},
}
