"""The Flink hunt's cells: fault schedules drawn from a grammar, run through the matrix, judged.

A program's cells (:func:`hunt_cells`):

- ``plan``: the program planned by Flink without running it (:mod:`rollcheck.flink_replay.hunt.plan`);
  a refusal makes every cell of the program ``rejected``;
- fault cells, drawn from a Hypothesis strategy seeded by the hunt's seed and the program's number
  (:func:`fault_strategy`): the failure kind (``task``, ``taskmanager``, ``during-restore``,
  ``twice``), the state backend, the checkpoint mode, where the failure strikes (a fraction of the
  input, a subtask ``--fail-subtask``, after a checkpoint ``--fail-after-checkpoint``); one cell
  per backend asked for, so that the backends can be compared, and one that fails at parallelism 1
  and is restored at 2 (``rescale 1:2``), whose failure-free run is the parallelism-1 one;
- ``diff:providers``: the failure-free runs' final tables of the backends compared
  (``provider-differential``), and ``diff:partitioning``: parallelism 1 against 2
  (``partitioning-differential``). The grammar's programs owe the same final table everywhere (their
  data is never late and their results do not depend on the order of records), so a difference is
  the engine's.

Each fault cell is an ordinary :class:`rollcheck.flink_replay.matrix.Cell` plus its placement
(:class:`PlacedCell`), recorded and replayed by the matrix's adapter with the placement added to the
recorder's configuration (:class:`PlacedAdapter`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from rollcheck.flink_replay.matrix import Cell, FlinkAdapter
from rollcheck.infra.hunt.adapter import CellOutcome, HuntCell
from rollcheck.infra.hunt.draw import draw

__all__ = ["PlacedCell", "PlacedAdapter", "fault_strategy", "hunt_cells", "matrix_cell", "outcome_of_entry",
           "reference_table", "differential", "FAILURE_KINDS", "PROVIDERS", "PARTITIONING"]

FAILURE_KINDS = ("task", "taskmanager", "during-restore", "twice")
PROVIDERS = "provider-differential"
PARTITIONING = "partitioning-differential"
_JAVA = re.compile(r"\b((?:[a-z_][\w$]*\.)+[A-Z][\w$]*(?:Exception|Error))\b")


@dataclass(frozen=True)
class PlacedCell(Cell):
    """A matrix cell whose failure strikes at a drawn place."""

    fail_at_fraction: float = 0.5
    fail_subtask: int | None = None
    fail_after_checkpoint: int | None = None

    @property
    def ident(self) -> str:
        """The matrix cell's ident with the failure's place: ``-atNN``, ``-subS``, ``-ckC``."""
        at = f"at{int(self.fail_at_fraction * 100)}"
        sub = "" if self.fail_subtask is None else f"-sub{self.fail_subtask}"
        ck = "" if self.fail_after_checkpoint is None else f"-ck{self.fail_after_checkpoint}"
        return f"{super().ident}-{at}{sub}{ck}"


class PlacedAdapter(FlinkAdapter):
    """The matrix's Flink adapter, with a :class:`PlacedCell`'s placement in the recorder's config."""

    def _config(self, cell: Cell) -> dict[str, Any]:
        cfg = super()._config(cell)
        if isinstance(cell, PlacedCell):
            cfg["fail_at_fraction"] = cell.fail_at_fraction
            if cell.fail_subtask is not None or cell.fail_after_checkpoint is not None:
                cfg.update(fail_subtask=cell.fail_subtask, fail_after_checkpoint=cell.fail_after_checkpoint)
        return cfg


def fault_strategy(failures: Sequence[str], checkpoints: Sequence[str]) -> st.SearchStrategy[dict[str, Any]]:
    """One fault schedule: which failure, in which checkpoint mode, where it strikes.

    Parameters
    ----------
    failures : sequence of str
        The failure kinds to draw from.
    checkpoints : sequence of str
        The checkpoint modes to draw from.

    Returns
    -------
    SearchStrategy
        Draws a schedule's ``failure``, ``checkpoints``, ``fraction``, ``subtask``, ...

    Examples
    --------
    >>> s = draw(fault_strategy(["task"], ["aligned"]), 1, 0)
    >>> s["failure"], s["checkpoints"], 0.2 <= s["fraction"] <= 0.8
    ('task', 'aligned', True)
    """
    return st.fixed_dictionaries({
        "failure": st.sampled_from(list(failures)),
        "checkpoints": st.sampled_from(list(checkpoints)),
        "fraction": st.sampled_from([0.2, 0.35, 0.5, 0.65, 0.8]),
        "subtask": st.sampled_from([None, None, 0, 1]),
        "after_checkpoint": st.sampled_from([None, None, 1, 2, 3]),
    })


def _key(backend: str, f: Mapping[str, Any], rescale: tuple[int, int] | None = None) -> str:
    place = f"@{f['fraction']}" + (f":s{f['subtask']}" if f.get("subtask") is not None else "") + \
        (f":c{f['after_checkpoint']}" if f.get("after_checkpoint") else "")
    scale = f"/rescale={rescale[0]}:{rescale[1]}" if rescale else ""
    return f"{backend}/{f['checkpoints']}/{f['failure']}{place}{scale}"


def hunt_cells(program_id: str, seed: int, failures: Sequence[str], backends: Sequence[str],
               checkpoints: Sequence[str]) -> list[HuntCell]:
    """The cells of a program (module docstring), deterministic in ``(program_id, seed)``.

    Parameters
    ----------
    program_id : str
        The program's id (``P<n>``).
    seed : int
        The hunt's seed.
    failures : sequence of str
        The failure kinds to draw from.
    backends : sequence of str
        The state backends, a fault cell each (the first also gets the rescaled one).
    checkpoints : sequence of str
        The checkpoint modes to draw from.

    Returns
    -------
    list of HuntCell
        The cells in the order they run.

    Examples
    --------
    >>> [c.key.split("/")[0] for c in hunt_cells("P0003", 7, ["task"], ["hashmap", "rocksdb"], ["aligned"])]
    ['plan', 'hashmap', 'rocksdb', 'hashmap', 'diff:providers', 'diff:partitioning']
    """
    index = int(program_id.lstrip("P") or 0)
    strategy = fault_strategy(failures, checkpoints)
    cells = [HuntCell("plan", {"kind": "plan"})]
    for i, backend in enumerate(backends):
        f = draw(strategy, seed, index, salt=f"flink-faults/{i}")
        cells.append(HuntCell(_key(backend, f), {"kind": "fault", "backend": backend, **f, "rescale": None}))
    rescalable = [x for x in failures if x not in ("during-restore", "twice")]
    if rescalable:  # parallelism 1 -> 2: a rescaled restore, and the parallelism-1 failure-free table
        f = dict(draw(strategy, seed, index, salt="flink-faults/rescale"), subtask=None)
        if f["failure"] not in rescalable:
            f["failure"] = rescalable[0]
        cells.append(HuntCell(_key(backends[0], f, (1, 2)), {"kind": "fault", "backend": backends[0], **f,
                                                             "rescale": [1, 2]}))
    faults = cells[1:]

    def part(c: HuntCell) -> dict[str, Any]:
        return {"key": c.key, "params": c.params}

    if len(backends) > 1:  # the first cell of each backend (none rescaled)
        compare = {c.params["backend"]: part(c) for c in faults[: len(backends)]}
        cells.append(HuntCell("diff:providers", {"kind": "diff", "check": PROVIDERS, "compare": compare}))
    if rescalable:
        scaled, same = faults[-1], faults[0]
        cells.append(HuntCell("diff:partitioning", {"kind": "diff", "check": PARTITIONING,
                                                    "compare": {"parallelism 1": part(scaled),
                                                                "parallelism 2": part(same)}}))
    return cells


def matrix_cell(module: str, params: Mapping[str, Any], engine_version: str | None) -> PlacedCell:
    """The matrix cell of a fault cell's ``params``.

    Parameters
    ----------
    module : str
        The program's module.
    params : mapping
        The fault cell's ``params`` (``backend``, ``checkpoints``, ``failure``, ``fraction``, ...).
    engine_version : str or None
        The release to run on (None: the pinned one).

    Returns
    -------
    PlacedCell
        The matrix cell (a ``subtask`` beyond the parallelism is dropped).
    """
    rescale = tuple(params["rescale"]) if params.get("rescale") else None
    subtask = params.get("subtask")
    if subtask is not None and subtask >= (rescale[0] if rescale else 2):
        subtask = None
    return PlacedCell(module, params["backend"], params["checkpoints"], params["failure"],
                      (int(rescale[0]), int(rescale[1])) if rescale else None, engine_version,
                      fail_at_fraction=float(params.get("fraction", 0.5)), fail_subtask=subtask,
                      fail_after_checkpoint=params.get("after_checkpoint") or None)


def _checks(entry: Mapping[str, Any]) -> dict[str, str]:
    return {str(c["name"]): str(c["status"]).replace("-", "_") for c in entry.get("check_statuses") or []}


def outcome_of_entry(entry: Mapping[str, Any]) -> CellOutcome:
    """A matrix cell's entry as the hunt's :class:`CellOutcome`."""
    verdict = {"conformant": "conformant", "not-conformant": "violated"}.get(str(entry.get("verdict")), "inconclusive")
    checks = _checks(entry)
    reason = str(entry.get("reason") or "")
    attributed = entry.get("attributed_to")
    who = {"engine": "engine", "module": "user"}.get(str(attributed)) if attributed else None
    if verdict == "violated" and entry.get("expected_by_engine"):
        who = "user"  # documented behaviour of Flink (a sink outside checkpointing): not the engine's bug
    java = _JAVA.search(reason)
    return CellOutcome(verdict=verdict, checks=checks, exception=java.group(1) if java else None,
                       attributed_to=who, trace=entry.get("trace"), detail=reason.splitlines()[0][:300] if reason else "",
                       seconds=float(entry.get("seconds") or 0.0), cpu_seconds=float(entry.get("cpu_seconds") or 0.0),
                       shared=dict(entry.get("shared") or {}))


def reference_table(trace: str | Path | None) -> dict[str, Any] | None:
    """The failure-free run's final table in a recorded trace (KEY -> row), None when it has none."""
    from rollcheck.flink_replay.checks.oracles import final_table

    if trace is None or not Path(trace).is_file():
        return None
    with open(trace) as f:
        for line in f:
            if '"flink.sink_output"' not in line:
                continue
            event = json.loads(line)
            if event.get("kind") == "flink.sink_output" and event.get("sink") == "reference":
                return {k: json.loads(v) for k, v in final_table(list(event.get("lines") or [])).items()}
    return None


def differential(check: str, tables: Mapping[str, dict[str, Any] | None]) -> CellOutcome:
    """Compare the failure-free final tables of ``tables`` (configuration -> table or None).

    Parameters
    ----------
    check : str
        The check's name.
    tables : mapping
        Configuration -> its failure-free final table, or None when it has none.

    Returns
    -------
    CellOutcome
        Violated when two tables differ, inconclusive when one is missing.

    Examples
    --------
    >>> differential("provider-differential", {"hashmap": {"a": [1]}, "rocksdb": {"a": [2]}}).verdict
    'violated'
    >>> differential("provider-differential", {"hashmap": {"a": [1]}, "rocksdb": None}).verdict
    'inconclusive'
    """
    missing = sorted(name for name, t in tables.items() if t is None)
    if missing or len(tables) < 2:
        return CellOutcome("inconclusive", {check: "unchecked"},
                           detail=f"{check}: no failure-free table from {', '.join(missing) or 'a second configuration'}")
    names = sorted(tables)
    first = tables[names[0]] or {}
    for other in names[1:]:
        table = tables[other] or {}
        for key in sorted(set(first) | set(table)):
            if first.get(key) != table.get(key):
                return CellOutcome("violated", {check: "violated"}, attributed_to="engine",
                                   detail=f"{check}: KEY {key}: {names[0]} ends with {first.get(key)}, {other} with "
                                          f"{table.get(key)} (failure-free runs)")
    if not first:
        return CellOutcome("inconclusive", {check: "unchecked"}, detail=f"{check}: every failure-free table is empty")
    return CellOutcome("conformant", {check: "held"},
                       detail=f"{check}: {len(first)} KEY(s), the same final table in {', '.join(names)}")
