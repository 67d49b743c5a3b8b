"""A matrix's JSON document: one set of keys for every engine, the summary and the verdict.

Every cell's entry carries the contract's keys (:data:`CELL_KEYS`; ``spark matrix --json`` and
``flink matrix --json`` both), the summary the contract's counts and the attribution counts
(:data:`SUMMARY_KEYS`). The matrix's verdict, and so its exit code, comes from
:func:`rollcheck.pyimpl.verdict.decide` alone (:func:`matrix_verdict`): each cell is one check
(conformant: held; not conformant: violated, whatever explains it; inconclusive: unchecked), so
exit 0 needs every cell conformant, a not-conformant cell is exit 1, an undecided one exit 3, and
an empty matrix — nothing examined — is exit 3.

Examples
--------
>>> cells = [{"verdict": "conformant"}, {"verdict": "not-conformant", "expected_by_engine": True}]
>>> summarize(cells)
{'conformant': 1, 'not_conformant': 1, 'inconclusive': 0, 'expected_by_engine': 1, 'findings': 0}
>>> matrix_verdict(cells).exit_code, matrix_verdict([]).exit_code, matrix_verdict(cells[:1]).exit_code
(1, 3, 0)
>>> matrix_verdict([{"verdict": "conformant"}, {"verdict": "inconclusive", "reason": "timed out"}]).exit_code
3
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from rollcheck.infra.matrix.cells import MatrixCell
from rollcheck.pyimpl.patternio import atomic_write_text
from rollcheck.pyimpl.verdict import Check, Verdict, decide

__all__ = ["CELL_KEYS", "SUMMARY_KEYS", "VERDICTS", "base_entry", "summarize", "cell_check", "matrix_verdict",
           "write_document"]

#: The keys of every cell's entry, whatever the engine: the contract's, then the table's place and
#: the files (``checks``: the replay's report, a JSON file) and what the run cost: ``seconds`` (the
#: last try), ``wall_seconds`` and ``cpu_seconds`` (all tries; the CPU of every process the cell ran
#: and of its replay), ``shared`` (what the cell did not pay for alone: ``{"reference": "reused" |
#: "recorded" | None, "engine": "warm" | "fresh" | None}``; ``engine`` itself names the engine).
CELL_KEYS = ("engine", "module", "config", "failure", "verdict", "expected_by_engine", "attributed_to", "reason",
             "trace", "witness", "reproducer", "checks", "check_statuses", "row", "column", "id", "seconds",
             "tries", "wall_seconds", "cpu_seconds", "shared")
#: The keys of ``summary``: the contract's three counts, then how the not-conformant cells split.
SUMMARY_KEYS = ("conformant", "not_conformant", "inconclusive", "expected_by_engine", "findings")
VERDICTS = ("conformant", "not-conformant", "inconclusive")


def base_entry(engine: str, cell: MatrixCell, config: Mapping[str, Any], failure: Mapping[str, Any],
               **extra: Any) -> dict[str, Any]:
    """A cell's entry before it is decided.

    Every key of :data:`CELL_KEYS` (undecided ones ``None``; ``verdict`` inconclusive until a
    replay decides it) and the engine's ``extra`` keys.

    Parameters
    ----------
    engine : str
        The entry's ``engine``.
    cell : MatrixCell
        The cell.
    config, failure : mapping
        The entry's ``config`` and ``failure``.
    **extra
        The engine's own keys.

    Returns
    -------
    dict
        The entry.
    """
    entry: dict[str, Any] = {k: None for k in CELL_KEYS}
    entry.update(engine=engine, module=cell.module, config=dict(config), failure=dict(failure),
                 verdict="inconclusive", expected_by_engine=False, reason="not run", row=cell.row,
                 column=cell.column, id=cell.ident, shared={"reference": None, "engine": None})
    entry.update(extra)
    return entry


def summarize(cells: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """The ``summary``: cells per verdict, expected ones and findings.

    Of the not-conformant cells, how many the engine's documentation explains
    (``expected_by_engine``) and how many are ``findings`` against the engine.

    >>> summarize([{"verdict": "not-conformant"}, {"verdict": "inconclusive"}])["findings"]
    1
    """
    cells = list(cells)
    n = Counter(c["verdict"] for c in cells)
    bad = [v for v in n if v not in VERDICTS]
    if bad:
        raise ValueError(f"a cell's verdict must be one of {', '.join(VERDICTS)}, not {bad[0]!r}")
    exp = sum(1 for c in cells if c["verdict"] == "not-conformant" and c.get("expected_by_engine"))
    return {"conformant": n["conformant"], "not_conformant": n["not-conformant"], "inconclusive": n["inconclusive"],
            "expected_by_engine": exp, "findings": n["not-conformant"] - exp}


def cell_check(entry: Mapping[str, Any]) -> Check:
    """One cell as a check of the one verdict model: held, violated or unchecked.

    The cell's reason is the detail. An explanation of a violation (``expected_by_engine``) does
    not change it.

    >>> cell_check({"verdict": "not-conformant", "expected_by_engine": True, "id": "a/sink"}).status.value
    'violated'
    """
    name = str(entry.get("id") or entry.get("column") or "cell")
    why = str(entry.get("reason") or "")
    v = entry["verdict"]
    if v == "conformant":
        return Check.held(name, why, examined=1)
    if v == "not-conformant":
        return Check.violated(name, why)
    if v == "inconclusive":
        return Check.unchecked(name, why or "the cell could not be decided")
    raise ValueError(f"a cell's verdict must be one of {', '.join(VERDICTS)}, not {v!r}")


def matrix_verdict(cells: Iterable[Mapping[str, Any]]) -> Verdict:
    """The verdict of a whole matrix: :func:`~rollcheck.pyimpl.verdict.decide` over its cells."""
    return decide(cell_check(c) for c in cells)


def write_document(out: Path, doc: Mapping[str, Any]) -> Path:
    """Write ``out/matrix.json`` atomically (a reader never sees half a document).

    Parameters
    ----------
    out : Path
        The matrix's output folder.
    doc : mapping
        The document.

    Returns
    -------
    Path
        The file written.
    """
    path = Path(out) / "matrix.json"
    atomic_write_text(path, json.dumps(doc, indent=1, default=str) + "\n")
    return path
