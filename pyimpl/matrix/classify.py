"""A cell's verdict and its attribution: ``verdict``, ``expected_by_engine``, ``attributed_to``, ``reason``.

The verdict is the replay report's, under the one verdict rule
(:func:`rollcheck.pyimpl.verdict.decide`); nothing here can turn a not-conformant cell into a
pass. For a not-conformant cell the attribution says who is at fault: the engine (a *finding*,
``attributed_to: "engine"``), or the user's module where the engine behaved as its documentation
says (``expected_by_engine: true``, the documentation cited in ``reason``). The attribution comes
from :func:`rollcheck.pyimpl.attribution.classify_cell` (the trace-based rule: which batches or
records the sink was handed, in which attempts) when that module is installed, else from the
engine adapter's own rule (``legacy``).

Examples
--------
>>> from rollcheck.pyimpl.verdict import Check, Report
>>> ok = classify(Report([Check.held("output-exactly-once", "600 rows", examined=600)]))
>>> ok["verdict"], ok["expected_by_engine"], ok["attributed_to"], ok["reason"]
('conformant', False, None, 'conformant: 1 check held')
>>> classify(Report([Check.unchecked("kill-point", "struck late")]))["reason"]
'inconclusive: kill-point: struck late'
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import Any

from rollcheck.pyimpl.verdict import Report, Verdict

__all__ = ["classify", "attribution_module", "finding_reason", "ATTRIBUTIONS"]

#: The values of ``attributed_to``.
ATTRIBUTIONS = ("engine", "module", None)


def attribution_module() -> ModuleType | None:
    """:mod:`rollcheck.pyimpl.attribution` if it is installed (and has ``classify_cell``), else None."""
    try:
        mod = importlib.import_module("rollcheck.pyimpl.attribution")
    except ImportError:
        return None
    return mod if callable(getattr(mod, "classify_cell", None)) else None


def finding_reason(report: Report) -> str:
    """``finding: <root cause>: <detail>`` — the reason of a not-conformant cell nothing explains."""
    rc = report.root_cause
    return f"finding: {rc.name}: {rc.detail}" if rc is not None else "finding: not conformant"


def classify(report: Report, legacy: Callable[[], Mapping[str, Any]] | None = None) -> dict[str, Any]:
    """The cell's ``verdict``, ``expected_by_engine``, ``attributed_to`` and ``reason``.

    Parameters
    ----------
    report
        The cell's replay report.
    legacy
        The engine's own attribution of a not-conformant report (keys ``expected_by_engine``,
        ``reason``, optionally ``attributed_to``), used when the attribution module is absent.

    Returns
    -------
    dict
        ``verdict`` is always :func:`~rollcheck.pyimpl.verdict.decide`'s (in the trace vocabulary);
        ``expected_by_engine`` and ``attributed_to`` are set for a not-conformant cell only.
    """
    v = report.verdict
    verdict = v.word("trace")
    out: dict[str, Any] = {"verdict": verdict, "expected_by_engine": False, "attributed_to": None}
    mod = attribution_module()
    got: Mapping[str, Any] = {}
    if mod is not None:
        got = dict(mod.classify_cell(report))
    elif v is Verdict.VIOLATED and legacy is not None:
        got = dict(legacy())
    if v is Verdict.CONFORMANT:
        out["reason"] = str(got.get("reason") or report.summary("trace"))
    elif v is Verdict.INCONCLUSIVE:
        out["reason"] = str(got.get("reason") or f"inconclusive: {report.why_inconclusive}")
    else:
        expected = bool(got.get("expected_by_engine"))
        who = got.get("attributed_to", "module" if expected else "engine")
        if who not in ATTRIBUTIONS:
            raise ValueError(f"attributed_to must be one of {ATTRIBUTIONS}, not {who!r}")
        out.update(expected_by_engine=expected, attributed_to=who,
                   reason=str(got.get("reason") or finding_reason(report)))
    return out
