"""A cell's verdict and its attribution: ``verdict``, ``expected_by_engine``, ``attributed_to``, ``reason``.

The verdict is the replay report's (:func:`rollcheck.pyimpl.verdict.decide`); a not-conformant
cell is attributed to the engine, the user's module or nobody by
:func:`rollcheck.pyimpl.attribution.classify_cell`. See docs/internals/infra.md#matrix-classify.

Examples
--------
>>> from rollcheck.pyimpl.verdict import Check, Report
>>> ok = classify(Report([Check.held("output-exactly-once", "600 rows", examined=600)]))
>>> ok["verdict"], ok["expected_by_engine"], ok["attributed_to"], ok["reason"]
('conformant', False, None, 'conformant: 1 check held')
>>> classify(Report([Check.unchecked("kill-point", "struck late")]))["reason"]
'inconclusive: kill-point: struck late'
>>> bad = classify(Report([Check.violated("output-exactly-once", "row 3 committed 2 times")]))
>>> bad["verdict"], bad["attributed_to"], bad["reason"]
('not-conformant', 'engine', 'finding: output-exactly-once: row 3 committed 2 times')
"""

from __future__ import annotations

from typing import Any

from rollcheck.pyimpl.attribution import classify_cell
from rollcheck.pyimpl.verdict import Report

__all__ = ["classify", "ATTRIBUTIONS"]

#: The values of ``attributed_to``.
ATTRIBUTIONS = ("engine", "module", None)


def classify(report: Report) -> dict[str, Any]:
    """The cell's ``verdict``, ``expected_by_engine``, ``attributed_to`` and ``reason``.

    The verdict is always :func:`~rollcheck.pyimpl.verdict.decide`'s, in the trace vocabulary.
    """
    got = dict(classify_cell(report))
    verdict = report.verdict.word("trace")
    if got.get("verdict") != verdict:  # the attribution explains; it never decides
        raise AssertionError(f"classify_cell said {got.get('verdict')!r}, the verdict rule {verdict!r}")
    if got.get("attributed_to") not in ATTRIBUTIONS:
        raise ValueError(f"attributed_to must be one of {ATTRIBUTIONS}, not {got.get('attributed_to')!r}")
    expected = bool(got.get("expected_by_engine")) and verdict == "not-conformant"
    return {"verdict": verdict, "expected_by_engine": expected, "attributed_to": got.get("attributed_to"),
            "reason": str(got.get("reason") or report.summary("trace"))}
