"""Spark's traces mapped onto the core vocabulary of ``rollcheck.trace/1`` (the Spark adapter).

Details: ``docs/internals/spark-replay.md`` (section ``adapter``).

References
----------
``specs/formats.md#trace`` (core vocabulary, prefix rule); ``specs/spark.md#streaming-trace``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from rollcheck.pyimpl.traces.adapter import Adapter, derived
from rollcheck.pyimpl.traces.view import CORE_KINDS

__all__ = ["SparkAdapter", "LEGACY_SOURCES", "spark_job"]

#: Header sources of Spark traces recorded before the prefix rule, and the job each names.
LEGACY_SOURCES = {"spark-wordcount": "wordcount", "spark-query": "query"}


def spark_job(header: dict[str, Any]) -> str | None:
    """The Spark job a header describes (``wordcount``, ``query``, ``nhop``) or None.

    >>> spark_job({"source": "spark", "job": "query"}), spark_job({"source": "spark-wordcount"})
    ('query', 'wordcount')
    """
    src = header.get("source")
    if src == "spark":
        job = header.get("job")
        return job if isinstance(job, str) else None
    if src == "spark-nhop":
        return "nhop"
    return LEGACY_SOURCES.get(src) if isinstance(src, str) else None


class SparkAdapter(Adapter):
    """Spark streaming traces onto the core vocabulary (module docstring).

    Examples
    --------
    >>> a = SparkAdapter()
    >>> h = a.header({"format": "rollcheck.trace/1", "source": "spark-wordcount"})
    >>> h["source"], h["job"], h["processes"]
    ('spark', 'wordcount', ['driver'])
    >>> evs = [(2, {"seq": 1, "kind": "batch_committed", "batch": 0}),
    ...        (3, {"seq": 2, "kind": "failure", "mode": "kill"}),
    ...        (4, {"seq": 3, "kind": "attempt_start"}),
    ...        (5, {"seq": 4, "kind": "restart", "resume_batch": 1})]
    >>> [(o["seq"], o["kind"]) for _l, o in a.events(h, evs)]   # doctest: +NORMALIZE_WHITESPACE
    [(1, 'spark.batch_committed'), (1, 'checkpoint'), (2, 'failure'), (3, 'spark.attempt_start'),
     (4, 'spark.restart'), (4, 'recovery')]
    """

    sources = ("spark", *LEGACY_SOURCES)

    def header(self, header: dict[str, Any]) -> dict[str, Any]:
        """The header in the current vocabulary (legacy sources mapped, ``processes`` added)."""
        src = header.get("source")
        if src in LEGACY_SOURCES:
            return {**header, "source": "spark", "job": LEGACY_SOURCES[src],
                    "processes": header.get("processes") or ["driver"], "legacy_source": src}
        return header

    def events(self, header: dict[str, Any], pairs: Iterable[tuple[int, dict[str, Any]]]
               ) -> Iterator[tuple[int, dict[str, Any]]]:
        """The events in the core vocabulary (Spark's kinds prefixed with ``spark.``)."""
        legacy = "legacy_source" in header
        driver = (header.get("processes") or ["driver"])[0]
        committed = 0
        held: tuple[int, dict[str, Any]] | None = None   # the failure, until its attempt is over
        failed = False
        late: list[tuple[int, dict[str, Any]]] = []    # commits while the driver is down
        for line, obj in pairs:
            kind = obj["kind"]
            if legacy:
                obj = dict(obj)
                if kind not in CORE_KINDS and not kind.startswith(("spark.", "x-")):
                    obj["kind"] = kind = "spark." + kind
                if kind == "failure" and "processes" not in obj:
                    obj["processes"] = [driver]
            if kind == "failure" and held is None and not failed:
                held = (line, obj)
                continue
            if held is not None and kind in ("spark.attempt_start", "spark.restart", "end", "failure"):
                yield held
                held, failed = None, True
            yield line, obj
            if kind == "spark.batch_committed":
                ck = (line, derived(obj, "checkpoint", process=driver, forced=False))
                if failed:
                    late.append(ck)
                else:
                    committed += 1
                    yield ck
            elif kind == "spark.restart" and failed:
                rb = obj.get("resume_batch")
                k = rb if type(rb) is int else committed
                yield line, derived(obj, "recovery", line={driver: k}, in_transit=[])
                failed = False
                for ck in late:
                    committed += 1
                    yield ck
                late.clear()
        if held is not None:
            yield held
