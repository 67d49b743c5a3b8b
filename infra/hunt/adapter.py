"""What an engine gives the hunt: its programs, its cells, how to run, shrink and reproduce them.

The hunt's core (:mod:`rollcheck.infra.hunt`) knows no engine. An engine (Spark, Flink, the tests'
toy) implements :class:`HuntAdapter`; the core draws programs through it in order, runs their
cells, keeps the store and turns violated outcomes into findings.

Examples
--------
>>> p = Program(id="P0007", text="", operators=("source", "filter"), spec={})
>>> p.pairs
()
>>> CellOutcome(verdict="conformant", checks={"exactly-once": "held"}).exception is None
True
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "CHECK_STATES",
    "STATEFUL_WORDS",
    "VERDICTS",
    "CellOutcome",
    "HuntAdapter",
    "HuntCell",
    "Program",
]

#: A cell outcome's verdicts. ``rejected``: the engine refused the program at analysis (counted,
#: never a finding).
VERDICTS = ("conformant", "violated", "inconclusive", "rejected", "error")

#: Words that mark an operator kind as stateful in :meth:`HuntAdapter.stateful`'s default.
STATEFUL_WORDS = ("agg", "window", "dedup", "distinct", "join", "state", "top", "over", "reduce",
                  "count", "session", "timer", "process")

#: A check's states in a cell outcome.
CHECK_STATES = ("held", "violated", "not_applicable", "unchecked")


@dataclass(frozen=True)
class Program:
    """One generated program: an ordinary query / job module of the engine.

    Parameters
    ----------
    id : str
        ``"P0007"``: the draw index, zero-padded to 4.
    text : str
        The module's source.
    operators : tuple of str
        Operator kinds it uses, in plan order.
    spec : dict
        The engine's structured form (JSON-able); :meth:`HuntAdapter.shrink` works on it.
    pairs : tuple of str
        Chained operator pairs ``"parent>child"`` (coverage).
    """

    id: str
    text: str
    operators: tuple[str, ...]
    spec: dict[str, Any]
    pairs: tuple[str, ...] = ()


@dataclass(frozen=True)
class HuntCell:
    """One configuration a program runs in (a fault schedule, a provider, a release).

    Parameters
    ----------
    key : str
        Stable and unique within a program, e.g. ``"hdfs/none"``, ``"rocksdb/task@b2"``.
    params : dict
        JSON-able; what the adapter needs to run it.
    """

    key: str
    params: dict[str, Any]


@dataclass
class CellOutcome:
    """What one cell decided.

    Parameters
    ----------
    verdict : str
        One of :data:`VERDICTS`.
    checks : dict
        Check name -> one of :data:`CHECK_STATES`.
    exception : str or None
        The engine's exception class, if one was raised.
    attributed_to : str or None
        ``"engine"``, ``"user"``, ``"environment"`` or None.
    trace : str or None
        The cell's trace file.
    detail : str
        One line: what was seen.
    seconds, cpu_seconds : float
        The cell's wall-clock and CPU cost.
    shared : dict
        What was reused (reference, engine).
    """

    verdict: str
    checks: dict[str, str]
    exception: str | None = None
    attributed_to: str | None = None
    trace: str | None = None
    detail: str = ""
    seconds: float = 0.0
    cpu_seconds: float = 0.0
    shared: dict[str, Any] = field(default_factory=dict)


class HuntAdapter(ABC):
    """An engine's side of the hunt (see the module docstring).

    Attributes
    ----------
    engine : str
        ``"spark"``, ``"flink"`` or ``"toy"``.
    engine_version : str or None
        The release hunted (None: the pinned one).
    reference_version : str or None
        The release-differential's other release.
    """

    engine: str
    engine_version: str | None = None
    reference_version: str | None = None

    @abstractmethod
    def vocabulary(self) -> list[str]:
        """Every operator kind the grammar can emit (the coverage keys)."""

    @abstractmethod
    def generate(self, seed: int, index: int, coverage: Mapping[str, int]) -> Program:
        """Program number ``index`` for ``seed``: deterministic in (seed, index, coverage).

        ``coverage`` maps operator kind / pair to its count over the programs generated before
        this one; steer towards the least covered.

        Parameters
        ----------
        seed : int
            The hunt's seed.
        index : int
            The program's number in the hunt (0 first).
        coverage : mapping of str to int
            Operator kind or pair -> programs generated so far that hold it.

        Returns
        -------
        Program
            The program, with its module's text.
        """

    @abstractmethod
    def cells(self, program: Program, seed: int) -> list[HuntCell]:
        """The cells to run: a failure-free cell first, fault schedules, differential cells.

        Parameters
        ----------
        program : Program
            The program.
        seed : int
            The hunt's seed (the fault schedules drawn from it).

        Returns
        -------
        list of HuntCell
            The cells, in the order they run.
        """

    @abstractmethod
    def run(self, program: Program, module: Path, cells: Sequence[HuntCell], workdir: Path,
            jobs: int = 1) -> Iterator[tuple[HuntCell, CellOutcome]]:
        """Run ``cells`` of ``program`` (written at ``module``), yielding each outcome when decided.

        Never raises for the program's or the engine's failures: they are outcomes.

        Parameters
        ----------
        program : Program
            The program.
        module : Path
            Its module's file.
        cells : sequence of HuntCell
            The cells to run.
        workdir : Path
            A folder for the runs' files.
        jobs : int, optional
            How many cells may run at once.

        Yields
        ------
        tuple of (HuntCell, CellOutcome)
            Each cell with its outcome, in the order decided.
        """

    @abstractmethod
    def shrink(self, program: Program) -> Iterator[Program]:
        """Smaller variants of ``program``, biggest reductions first, each a valid module."""

    @abstractmethod
    def reproducer(self, program: Program, cell: HuntCell, outcome: CellOutcome,
                   dest: Path) -> Path:
        """Write a standalone script (the engine only, no rollcheck import) showing the finding.

        Parameters
        ----------
        program : Program
            The (minimised) program.
        cell : HuntCell
            The cell that shows the finding.
        outcome : CellOutcome
            The cell's outcome (what the script must show).
        dest : Path
            Where the script goes.

        Returns
        -------
        Path
            The script written.
        """

    @abstractmethod
    def run_reproducer(self, script: Path, release: str | None) -> str:
        """Run ``script`` on ``release``: ``"reproduced"``, ``"not reproduced"`` or ``"could not run: <why>"``.

        Parameters
        ----------
        script : Path
            The reproducer.
        release : str or None
            The engine release to run it on (None: the pinned one).

        Returns
        -------
        str
            The result, in the words above.
        """

    @abstractmethod
    def newer_releases(self) -> list[str]:
        """[newest patch of engine_version's line, newest release], deduplicated; may be empty."""

    @abstractmethod
    def confirm(self, module: Path, cell: HuntCell, workdir: Path) -> CellOutcome:
        """Run ``module`` through the ordinary matrix for ``cell``'s configuration.

        Parameters
        ----------
        module : Path
            The minimised program's module.
        cell : HuntCell
            The cell whose configuration it runs in.
        workdir : Path
            A folder for the run's files.

        Returns
        -------
        CellOutcome
            The outcome of that matrix cell.
        """

    def release(self) -> str:
        """The hunted release by its number, as ``reproducer_run`` and the JSON name it.

        ``engine_version``, else the engine's pinned release when the adapter knows it, else
        ``"pinned"``.
        """
        return self.engine_version or "pinned"

    def stateful(self) -> set[str]:
        """The operator kinds that keep state across batches (the ``interesting`` share).

        By default the kinds of :meth:`vocabulary` whose name contains one of
        :data:`STATEFUL_WORDS`; an engine may say it exactly.
        """
        return {k for k in self.vocabulary() if any(w in k.lower() for w in STATEFUL_WORDS)}

    def close(self) -> None:  # noqa: B027 - optional hook, nothing to release by default
        """Release what the adapter holds (engines, sessions); nothing by default."""
