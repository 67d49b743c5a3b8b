"""What an engine supplies to the matrix core: :class:`EngineAdapter`.

An adapter turns a cell into a recording and a recording into a replay report (and optionally
shares preparations, names witnesses, retries, minimises findings); the core does the rest.
See docs/internals/infra.md#matrix-adapter.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rollcheck.infra.matrix.cells import MatrixCell
from rollcheck.infra.matrix.runner import ChildRunner
from rollcheck.pyimpl.verdict import Report

__all__ = ["EngineAdapter", "Prepared", "Recording", "Replayed"]


@dataclass
class Prepared:
    """A group's shared preparation: ``context`` for its cells' recordings, or ``error``.

    With ``error`` every cell of the group is inconclusive with this reason.
    """

    context: Any = None
    error: str | None = None


@dataclass
class Recording:
    """One cell's recording: the ``trace`` written, or ``error``.

    ``error`` says why it did not finish (the cell is inconclusive); ``extra`` keys go into the
    cell's entry; ``log`` is the recorder's log.
    """

    trace: Path
    error: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    log: Path | None = None


@dataclass
class Replayed:
    """A recording replayed: the engine's check report, the trace's header and events.

    The header and events are kept for the witness.
    """

    report: Report
    header: dict[str, Any] = field(default_factory=dict)
    events: list[dict[str, Any]] = field(default_factory=list)


class EngineAdapter(ABC):
    """One engine's part of the matrix (see the module docstring).

    Subclasses set the class attributes and implement :meth:`describe`, :meth:`record` and
    :meth:`replay`.
    """

    #: The ``engine`` of every cell entry.
    engine: str = "engine"
    #: The table's title (terminal and HTML).
    title: str = "chaos matrix"
    #: The header of the table's first column (what a row is).
    row_header: str = "configuration"
    #: One paragraph under the HTML table: what the columns mean.
    legend: str = ""
    #: How often an inconclusive cell that :meth:`retry` accepts is recorded again.
    retries: int = 0
    #: Whether a finding is minimised and gets a reproducer (:meth:`finding`).
    minimise: bool = True
    #: The word the tables show for a cell whose group is being prepared.
    preparing_word: str = "preparing"

    @abstractmethod
    def describe(self, cell: Any) -> tuple[Mapping[str, Any], Mapping[str, Any], Mapping[str, Any]]:
        """``(config, failure, extra)`` of ``cell``'s entry."""

    def group(self, cell: Any) -> str | None:
        """The key of the preparation ``cell`` shares with others, or None (none)."""
        return None

    def prepare(self, group: str, cells: Sequence[Any], runner: ChildRunner, out: Path) -> Prepared:
        """Run the shared preparation of ``cells`` (all of one :meth:`group`).

        Parameters
        ----------
        group : str
            The key :meth:`group` gave every cell of ``cells``.
        cells : sequence
            The cells that share it.
        runner : ChildRunner
            Runs the child processes (the matrix stops them all on an interrupt).
        out : Path
            The matrix's output folder.

        Returns
        -------
        Prepared
            The context handed to each cell's :meth:`record`, or an error.
        """
        return Prepared()

    @abstractmethod
    def record(self, cell: Any, context: Any, runner: ChildRunner, out: Path) -> Recording:
        """Record ``cell``'s run with its failure into a trace under ``out``.

        Parameters
        ----------
        cell : object
            The cell to record.
        context : object
            The group's :attr:`Prepared.context`, or None without a group.
        runner : ChildRunner
            Runs the child processes.
        out : Path
            The matrix's output folder.

        Returns
        -------
        Recording
            The trace written, or why none was.
        """

    @abstractmethod
    def replay(self, cell: Any, recording: Recording) -> Replayed:
        """Replay a recording.

        Raises :class:`~rollcheck.pyimpl.errors.InvalidInputError` or
        :class:`~rollcheck.pyimpl.errors.InconclusiveError` when it cannot be replayed.

        Parameters
        ----------
        cell : object
            The cell recorded.
        recording : Recording
            Its recording (without ``error``).

        Returns
        -------
        Replayed
            The check report with the trace's header and events.
        """

    def witness(self, cell: Any, replayed: Replayed) -> dict[str, Any] | None:
        """What a not-conformant cell lost or duplicated (written beside the trace).

        Parameters
        ----------
        cell : object
            The cell.
        replayed : Replayed
            Its replay.

        Returns
        -------
        dict or None
            The witness document, or None (nothing to write).
        """
        return None

    def retry(self, cell: Any, entry: Mapping[str, Any], recording: Recording) -> bool:
        """Whether this inconclusive cell is recorded again (up to :attr:`retries` times).

        Parameters
        ----------
        cell : object
            The cell.
        entry : mapping
            Its inconclusive entry.
        recording : Recording
            The recording that gave it.

        Returns
        -------
        bool
            True to record the cell again.
        """
        return False

    def explain(self, cell: Any, entry: Mapping[str, Any], recording: Recording) -> str | None:
        """A better reason for an inconclusive cell after its last try, or None.

        Parameters
        ----------
        cell : object
            The cell.
        entry : mapping
            Its inconclusive entry.
        recording : Recording
            The last recording.

        Returns
        -------
        str or None
            The reason to show instead of the entry's, or None (keep it).
        """
        return None

    def finding(self, cell: Any, entry: Mapping[str, Any], replayed: Replayed, runner: ChildRunner,
                out: Path) -> dict[str, Any]:
        """Minimise a finding and write its reproducer; the keys to add to the entry.

        ``reproducer`` (the script), ``minimised`` (a
        :class:`~rollcheck.infra.matrix.finding.Minimised`'s ``to_json()``, the same keys for every
        engine) and, when it was run, ``reproducer_run``.

        Parameters
        ----------
        cell : object
            The not-conformant cell.
        entry : mapping
            Its entry so far.
        replayed : Replayed
            Its replay (the report names the root cause).
        runner : ChildRunner
            Runs the child processes (re-runs, the reproducer).
        out : Path
            The matrix's output folder.

        Returns
        -------
        dict
            The keys to add to the entry.
        """
        return {}

    def caption(self) -> str:
        """One line under the HTML table's summary (the matrix's parameters)."""
        return ""

    def meta(self) -> dict[str, Any]:
        """Keys of the matrix's JSON document besides ``cells`` and ``summary``."""
        return {}

    def close(self) -> None:
        """End what the adapter keeps between cells (warm engines).

        Called once when the matrix ends, however it ends.
        """
        return None

    def is_member(self, cell: Any) -> bool:
        """Whether ``cell`` is a cell this adapter can run (the core asks before it starts)."""
        return isinstance(cell, MatrixCell)
