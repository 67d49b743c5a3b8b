"""The toy stream engine of the hunt's tests (no rollcheck import: reproducers run it alone).

A program (sources -> union -> filter / map / dedup / count) runs in micro-batches; each stateful
operator's state is checkpointed after every batch; a failure at batch ``b`` restores the
checkpoint of batch ``b - 1`` and runs ``b`` again. Planted in the restore:

- bug A (releases before 2.0): a ``dedup`` preceded by a ``filter`` forgets its keys when restored
  after a failure at batch >= 1;
- bug B (every release): a ``count`` behind a ``union`` starts from zero when restored after a
  failure at batch >= 2.

A ``dedup`` after a ``count`` is refused at analysis (:func:`rejected`).

Examples
--------
>>> spec = {"sources": 1, "ops": [{"op": "filter", "min": 0}, {"op": "dedup"}],
...         "batches": [[[1, 5]], [[1, 6]]]}
>>> run_engine(spec, None), run_engine(spec, 1, "1.0"), run_engine(spec, 1, "2.0")
([[[1, 5]], []], [[[1, 5]], [[1, 6]]], [[[1, 5]], []])
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

__all__ = ["RELEASES", "evaluate", "rejected", "run_engine"]

RELEASES = ("1.0", "1.1", "2.0")


def rejected(spec: Mapping[str, Any]) -> str | None:
    """Why the engine refuses ``spec`` at analysis (None: it runs it)."""
    kinds = [o["op"] for o in spec["ops"]]
    for i, k in enumerate(kinds):
        if k == "dedup" and "count" in kinds[:i]:
            return "dedup after count is not supported"
    return None


def _batch_rows(spec: Mapping[str, Any], b: int) -> list[list[int]]:
    rows = [list(r) for r in spec["batches"][b]]
    if spec.get("sources", 1) == 2:
        rows += [list(r) for r in spec["batches2"][b]]
    return rows


def _step(ops: list[dict[str, Any]], rows: list[list[int]], state: list[Any]) -> list[list[int]]:
    for i, op in enumerate(ops):
        out: list[list[int]] = []
        for k, v in rows:
            if op["op"] == "filter" and v >= op["min"]:
                out.append([k, v])
            elif op["op"] == "map":
                out.append([k, v + op["add"]])
            elif op["op"] == "dedup" and k not in state[i]:
                state[i].add(k)
                out.append([k, v])
            elif op["op"] == "count":
                state[i][k] = state[i].get(k, 0) + 1
                out.append([k, state[i][k]])
        rows = out
    return rows


def _restore(spec: Mapping[str, Any], checkpoint: list[Any], b: int, release: str) -> list[Any]:
    state = copy.deepcopy(checkpoint)
    kinds = [o["op"] for o in spec["ops"]]
    for i, k in enumerate(kinds):
        if k == "dedup" and "filter" in kinds[:i] and b >= 1 and release < "2.0":
            state[i] = set()  # bug A
        if k == "count" and spec.get("sources", 1) == 2 and b >= 2:
            state[i] = {}  # bug B
    return state


def _fresh(spec: Mapping[str, Any]) -> list[Any]:
    return [set() if o["op"] == "dedup" else {} for o in spec["ops"]]


def run_engine(spec: Mapping[str, Any], fail_at: int | None, release: str = "1.0") -> list[list[list[int]]]:
    """The committed output of every batch of ``spec``, with a failure at batch ``fail_at``."""
    ops = list(spec["ops"])
    state = _fresh(spec)
    checkpoint = copy.deepcopy(state)
    committed = []
    for b in range(len(spec["batches"])):
        work = copy.deepcopy(state)
        out = _step(ops, _batch_rows(spec, b), work)
        if fail_at == b:  # the task dies before the commit: restore, run the batch again
            work = _restore(spec, checkpoint, b, release)
            out = _step(ops, _batch_rows(spec, b), work)
        state, checkpoint = work, copy.deepcopy(work)
        committed.append(out)
    return committed


def evaluate(spec: Mapping[str, Any]) -> list[list[int]]:
    """The whole input in arrival order as one batch (the batch evaluation)."""
    rows = [r for b in range(len(spec["batches"])) for r in _batch_rows(spec, b)]
    return _step(list(spec["ops"]), rows, _fresh(spec))
