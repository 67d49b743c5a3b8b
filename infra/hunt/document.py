"""The hunt's JSON document (``DIR/hunt.json``, ``--json``) and its exit code.

The contract's fields (``engine``, ``engine_version``, ``reference_version``, ``seed``,
``programs``, ``cells``, ``seconds``, ``budget_left``, ``coverage.operators``,
``coverage.checks``, ``findings``) and what a user asks next: operator pairs, cell outcomes,
the share of interesting programs (not rejected, with a stateful operator), unconfirmed
candidates, what the cells and the minimisations cost, what a kill left undone.

Examples
--------
>>> exit_code({"findings": [], "coverage": {"outcomes": {"conformant": 0}}})
3
>>> exit_code({"findings": [], "coverage": {"outcomes": {"conformant": 2}}})
0
>>> exit_code({"findings": [{"id": "F1"}], "coverage": {"outcomes": {"conformant": 0}}})
1
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from rollcheck.infra.hunt.adapter import CHECK_STATES, VERDICTS, HuntAdapter
from rollcheck.infra.hunt.budget import Budget
from rollcheck.infra.hunt.loop import coverage_of
from rollcheck.infra.hunt.store import FORMAT, HuntStore
from rollcheck.pyimpl.patternio import atomic_write_text

__all__ = ["build_document", "exit_code", "write_document"]

_PATH_FIELDS = ("module", "reproducer", "report")


def _findings(store: HuntStore, out: Path) -> list[dict[str, Any]]:
    shown = []
    for f in store.findings():
        if not f.get("status"):
            continue  # stored but not completed (a kill in between): decided again on resume
        d = {"id": f["id"], "signature": f["signature"], "checks": f["checks"],
             "exception": f.get("exception"), "programs": f["programs"]}
        for key in _PATH_FIELDS:
            d[key] = str(out / f[key]) if f.get(key) else None
        d.update({"trace": f.get("trace"), "reproducer_run": f.get("reproducer_run", {}),
                  "status": f["status"], "doubtful": f.get("doubtful"), "attributed_to": f.get("attributed_to"),
                  "cell": f.get("cell"), "program": f.get("program"), "operators": f.get("operators"),
                  "operators_found": f.get("operators_found"), "shrink_runs": f.get("shrink_runs"),
                  "detail": f.get("detail", "")})
        shown.append(d)
    return shown


def build_document(adapter: HuntAdapter, store: HuntStore, out: Path, budget: Budget) -> dict[str, Any]:
    """The hunt's document from its store (everything decided so far, over every resumed run).

    Parameters
    ----------
    adapter : HuntAdapter
        The engine's hunt adapter.
    store : HuntStore
        The hunt's store.
    out : Path
        The hunt's folder.
    budget : Budget
        The hunt's budget.

    Returns
    -------
    dict
        The ``hunt.json`` document.
    """
    meta = store.meta()
    stored = store.programs()
    done = [sp for sp in stored if sp.status == "done"]
    cov = coverage_of(stored)
    vocabulary = list(adapter.vocabulary())
    operators = {k: cov.get(k, 0) for k in vocabulary}
    operators.update({k: v for k, v in sorted(cov.items()) if ">" not in k and k not in operators})
    pairs = {k: v for k, v in sorted(cov.items()) if ">" in k}
    checks: dict[str, dict[str, int]] = {}
    outcomes = dict.fromkeys(VERDICTS, 0)
    cell_seconds = cell_cpu = 0.0
    done_cells = store.done_outcomes()
    for _, _, o in done_cells:
        outcomes[o.verdict] = outcomes.get(o.verdict, 0) + 1
        cell_seconds += o.seconds
        cell_cpu += o.cpu_seconds
        for name, state in o.checks.items():
            checks.setdefault(name, dict.fromkeys(CHECK_STATES, 0))[state] += 1
    stateful = adapter.stateful()
    interesting = sum(1 for sp in done if sp.outcome != "rejected" and stateful & set(sp.program.operators))
    program_outcomes = Counter(sp.outcome or "error" for sp in done)
    groups = store.group_stats()
    left = budget.left()
    return {
        "engine": adapter.engine, "engine_version": adapter.release(),
        "reference_version": adapter.reference_version, "seed": meta.get("seed"),
        "programs": len(done), "cells": len(done_cells),
        "seconds": round(float(meta.get("seconds") or 0.0), 3),
        "budget_left": None if left is None else round(left, 3),
        "coverage": {"operators": operators, "pairs": pairs,
                     "checks": dict(sorted(checks.items())), "outcomes": outcomes,
                     "programs": {v: program_outcomes.get(v, 0) for v in VERDICTS}},
        "interesting": {"programs": interesting, "of": len(done),
                        "share": round(interesting / len(done), 4) if done else None},
        "findings": _findings(store, out),
        "unconfirmed": groups["unconfirmed"], "candidates": groups["candidates"],
        "triage": groups["groups"],
        "cost": {"cell_seconds": round(cell_seconds, 3), "cell_cpu_seconds": round(cell_cpu, 3),
                 "seconds_per_cell": round(cell_seconds / len(done_cells), 3) if done_cells else None,
                 "shrink_runs": groups["shrink_runs"], "shrink_seconds": round(groups["shrink_seconds"], 3)},
        "pending": {"programs": len(stored) - len(done), "groups": groups["groups"].get("pending", 0)},
        "budget": {"seconds": budget.seconds, "programs": budget.programs},
        "store": str(store.path), "format": FORMAT,
    }


def write_document(doc: dict[str, Any], path: Path) -> None:
    """Write ``doc`` to ``path`` atomically (``DIR/hunt.json``).

    Parameters
    ----------
    doc : dict
        The document.
    path : Path
        The file to write.
    """
    atomic_write_text(path, json.dumps(doc, indent=1, sort_keys=False, default=str) + "\n")


def exit_code(doc: dict[str, Any]) -> int:
    """1 a finding; 0 none and at least one cell conformant; 3 nothing decided."""
    if doc.get("findings"):
        return 1
    if doc.get("coverage", {}).get("outcomes", {}).get("conformant", 0) > 0:
        return 0
    return 3
