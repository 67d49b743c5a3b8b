"""Greedy minimisation of a finding's program: the smallest variant that still shows the symptom.

:func:`minimise` takes the adapter's shrink candidates of the current program in order (biggest
reductions first), runs the finding's cell on each and accepts the first whose outcome has the
same symptom (a violated outcome attributed to the engine with the same violated checks and the
same exception class); it restarts from the accepted one and stops when no candidate keeps the
symptom, when ``max_runs`` cell runs are spent, or when asked to stop.

Examples
--------
>>> a = CellOutcome("violated", {"x": "violated", "y": "held"}, attributed_to="engine")
>>> b = CellOutcome("violated", {"x": "violated", "y": "not_applicable"}, attributed_to="engine")
>>> same_symptom(a, b), same_symptom(a, CellOutcome("conformant", {"x": "held"}))
(True, False)
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rollcheck.infra.hunt.adapter import CellOutcome, HuntAdapter, HuntCell, Program
from rollcheck.infra.hunt.signature import is_candidate, violated_checks
from rollcheck.pyimpl.errors import InternalError
from rollcheck.pyimpl.patternio import atomic_write_text

__all__ = ["Minimised", "minimise", "run_one", "same_symptom"]


def same_symptom(want: CellOutcome, got: CellOutcome) -> bool:
    """Whether ``got`` is a candidate with ``want``'s violated checks and exception class.

    Parameters
    ----------
    want : CellOutcome
        The candidate's outcome.
    got : CellOutcome
        A re-run's outcome.

    Returns
    -------
    bool
        True when ``got`` shows the same symptom.
    """
    return (is_candidate(got) and violated_checks(got) == violated_checks(want)
            and got.exception == want.exception)


@dataclass
class Minimised:
    """The smallest program found, its outcome, and what minimising it cost."""

    program: Program
    outcome: CellOutcome
    runs: int
    seconds: float


def run_one(adapter: HuntAdapter, program: Program, module: Path, cell: HuntCell,
            workdir: Path) -> CellOutcome | None:
    """Run the one ``cell`` of ``program`` (written at ``module``); its outcome, None if none came.

    Parameters
    ----------
    adapter : HuntAdapter
        The engine's hunt adapter.
    program : Program
        The program.
    module : Path
        Its module's file.
    cell : HuntCell
        The cell to run.
    workdir : Path
        A folder for the run's files.

    Returns
    -------
    CellOutcome or None
        The cell's outcome.
    """
    found: CellOutcome | None = None
    for got_cell, outcome in adapter.run(program, module, [cell], workdir, jobs=1):
        if not isinstance(outcome, CellOutcome):
            raise InternalError(f"the {adapter.engine} hunt adapter's run yielded "
                                f"{type(outcome).__name__}, not a CellOutcome")
        if got_cell.key == cell.key:
            found = outcome
    return found


def minimise(adapter: HuntAdapter, program: Program, cell: HuntCell, outcome: CellOutcome,
             workdir: Path, max_runs: int, stop: Callable[[], bool]) -> Minimised:
    """Shrink ``program`` greedily while ``cell`` keeps ``outcome``'s symptom.

    Parameters
    ----------
    adapter : HuntAdapter
        Gives the shrink candidates and runs the cell.
    program, cell, outcome : Program, HuntCell, CellOutcome
        The candidate finding as the hunt saw it.
    workdir : Path
        Where the candidates' modules and runs go.
    max_runs : int
        At most this many cell runs.
    stop : callable
        Checked before each run: True ends the minimisation with what was reached.

    Returns
    -------
    Minimised
        The smallest program that kept the symptom (``program`` itself if none did).
    """
    start = time.monotonic()
    current, current_outcome, runs = program, outcome, 0
    workdir.mkdir(parents=True, exist_ok=True)
    improved = True
    while improved and runs < max_runs and not stop():
        improved = False
        for candidate in adapter.shrink(current):
            if runs >= max_runs or stop():
                break
            if not isinstance(candidate, Program):
                raise InternalError(f"the {adapter.engine} hunt adapter's shrink yielded "
                                    f"{type(candidate).__name__}, not a Program")
            module = workdir / f"shrink{runs:03d}" / f"{candidate.id}.py"
            module.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_text(module, candidate.text)
            runs += 1
            got = run_one(adapter, candidate, module, cell, module.parent)
            if got is not None and same_symptom(outcome, got):
                current, current_outcome, improved = candidate, got, True
                break
    return Minimised(current, current_outcome, runs, time.monotonic() - start)
