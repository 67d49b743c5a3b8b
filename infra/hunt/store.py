r"""The hunt's store ``DIR/hunt.sqlite``: programs, cells, candidates and findings that survive a kill.

Every write is one SQLite transaction (WAL journal), so a hunt killed at any moment leaves the
store as it was after its last finished write. Invariants: docs/internals/infra.md#hunt-store.

Examples
--------
>>> import tempfile
>>> from rollcheck.infra.hunt.adapter import CellOutcome, HuntCell, Program
>>> d = Path(tempfile.mkdtemp())
>>> s = HuntStore.open(d / "hunt.sqlite")
>>> p = Program(id="P0000", text="x = 1\n", operators=("source",), spec={})
>>> s.add_program(0, p, "programs/P0000.py", [HuntCell("none", {})])
>>> s.record_outcome("P0000", "none", CellOutcome("conformant", {"c": "held"}))
True
>>> s.record_outcome("P0000", "none", CellOutcome("violated", {"c": "violated"}))
False
>>> s.close()
>>> import shutil; shutil.rmtree(d)
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rollcheck.infra.hunt.adapter import CellOutcome, HuntCell, Program
from rollcheck.pyimpl.errors import InvalidInputError

__all__ = ["FORMAT", "HuntStore", "StoreClosed", "StoredProgram", "outcome_from_json"]

#: The store's format; a store of another format is refused.
FORMAT = "rollcheck.hunt/1"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS programs (
    idx INTEGER PRIMARY KEY, id TEXT UNIQUE NOT NULL, module TEXT NOT NULL, text TEXT NOT NULL,
    operators TEXT NOT NULL, pairs TEXT NOT NULL, spec TEXT NOT NULL,
    status TEXT NOT NULL DEFAULT 'pending', outcome TEXT);
CREATE TABLE IF NOT EXISTS cells (
    program TEXT NOT NULL, key TEXT NOT NULL, position INTEGER NOT NULL, params TEXT NOT NULL,
    status TEXT NOT NULL DEFAULT 'todo', outcome TEXT, verdict TEXT,
    seconds REAL NOT NULL DEFAULT 0, cpu REAL NOT NULL DEFAULT 0,
    UNIQUE(program, key));
CREATE TABLE IF NOT EXISTS candidates (
    program TEXT NOT NULL, cell TEXT NOT NULL, presig TEXT NOT NULL, PRIMARY KEY(program, cell));
CREATE TABLE IF NOT EXISTS groups (
    presig TEXT PRIMARY KEY, program TEXT NOT NULL, cell TEXT NOT NULL,
    state TEXT NOT NULL DEFAULT 'pending', signature TEXT, finding TEXT,
    shrink_runs INTEGER NOT NULL DEFAULT 0, shrink_seconds REAL NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS findings (
    id TEXT PRIMARY KEY, seq INTEGER UNIQUE NOT NULL, signature TEXT UNIQUE NOT NULL,
    doc TEXT NOT NULL);
"""


class StoreClosed(Exception):
    """The store was closed (the hunt stopped): a late write from a worker is dropped."""


def outcome_from_json(text: str) -> CellOutcome:
    """A :class:`CellOutcome` from its stored JSON."""
    d = json.loads(text)
    names = {f.name for f in dataclasses.fields(CellOutcome)}
    return CellOutcome(**{k: v for k, v in d.items() if k in names})


def _outcome_json(outcome: CellOutcome) -> str:
    return json.dumps(dataclasses.asdict(outcome), sort_keys=True, default=str)


@dataclasses.dataclass
class StoredProgram:
    """A stored program, its module's path (relative to the hunt's folder) and its status."""

    index: int
    program: Program
    module: str
    status: str
    outcome: str | None


class HuntStore:
    """The hunt's SQLite store; every method is one transaction, safe to call from any thread.

    Parameters
    ----------
    conn : sqlite3.Connection
        The open connection (:meth:`open` makes it and the schema).
    path : Path
        The store's file.
    """

    def __init__(self, conn: sqlite3.Connection, path: Path):
        self._conn = conn
        self.path = path
        self._lock = threading.RLock()
        self._closed = False

    @classmethod
    def open(cls, path: Path) -> HuntStore:
        """Open (or create) the store at ``path``; a file that is not a hunt's store is exit 2."""
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            conn = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None,
                                   timeout=30)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.executescript(_SCHEMA)
        except sqlite3.DatabaseError as e:
            raise InvalidInputError(f"not a hunt's store: {e}", source=str(path)) from None
        store = cls(conn, path)
        fmt = store.meta().get("format")
        if fmt is not None and fmt != FORMAT:
            store.close()
            raise InvalidInputError(f"a store of format {fmt!r}, not {FORMAT!r}", source=str(path))
        return store

    @staticmethod
    def read_meta(path: Path) -> dict[str, Any] | None:
        """The meta of the store at ``path`` read without changing it (None: no store there)."""
        if not path.exists():
            return None
        try:
            conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)
            try:
                rows = conn.execute("SELECT key, value FROM meta").fetchall()
            finally:
                conn.close()
        except sqlite3.DatabaseError as e:
            raise InvalidInputError(f"not a hunt's store: {e}", source=str(path)) from None
        return {k: json.loads(v) for k, v in rows}

    @contextlib.contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            if self._closed:
                raise StoreClosed
            try:
                self._conn.execute("BEGIN IMMEDIATE")
                yield self._conn
                self._conn.execute("COMMIT")
            except BaseException:
                if self._conn.in_transaction:
                    self._conn.execute("ROLLBACK")
                raise

    def _query(self, sql: str, args: tuple[Any, ...] = ()) -> list[Any]:
        with self._lock:
            if self._closed:
                raise StoreClosed
            return self._conn.execute(sql, args).fetchall()

    def close(self) -> None:
        """Close the store; later writes from other threads are dropped (their cells stay undone)."""
        with self._lock:
            if not self._closed:
                self._closed = True
                self._conn.close()

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed

    # meta ----------------------------------------------------------------------------------------
    def meta(self) -> dict[str, Any]:
        """Every meta value (JSON-decoded)."""
        return {k: json.loads(v) for k, v in self._query("SELECT key, value FROM meta")}

    def set_meta(self, **values: Any) -> None:
        """Set meta values (one transaction)."""
        with self._tx() as c:
            for k, v in values.items():
                c.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)",
                          (k, json.dumps(v, sort_keys=True)))

    # programs and cells --------------------------------------------------------------------------
    def add_program(self, index: int, program: Program, module: str, cells: list[HuntCell]) -> None:
        """Store ``program`` (its module already written) and its cells, all ``todo``.

        Parameters
        ----------
        index : int
            The program's position in the hunt (0 first).
        program : Program
            The program drawn.
        module : str
            Its module's path, relative to the hunt's folder.
        cells : list of HuntCell
            Its cells, in the order they run.
        """
        with self._tx() as c:
            c.execute("INSERT INTO programs(idx, id, module, text, operators, pairs, spec) "
                      "VALUES (?, ?, ?, ?, ?, ?, ?)",
                      (index, program.id, module, program.text, json.dumps(list(program.operators)),
                       json.dumps(list(program.pairs)), json.dumps(program.spec, sort_keys=True)))
            for pos, cell in enumerate(cells):
                c.execute("INSERT INTO cells(program, key, position, params) VALUES (?, ?, ?, ?)",
                          (program.id, cell.key, pos, json.dumps(cell.params, sort_keys=True)))

    def programs(self) -> list[StoredProgram]:
        """Every stored program in index order."""
        rows = self._query("SELECT idx, id, module, text, operators, pairs, spec, status, outcome "
                           "FROM programs ORDER BY idx")
        return [StoredProgram(idx, Program(id=pid, text=text, operators=tuple(json.loads(ops)),
                                           spec=json.loads(spec), pairs=tuple(json.loads(pairs))),
                              module, status, outcome)
                for idx, pid, module, text, ops, pairs, spec, status, outcome in rows]

    def next_index(self) -> int:
        """The index of the next program to generate."""
        (n,), = self._query("SELECT COALESCE(MAX(idx) + 1, 0) FROM programs")
        return int(n)

    def open_cells(self, program_id: str) -> list[HuntCell]:
        """The cells of ``program_id`` not done (``todo`` or left ``running``), in order."""
        rows = self._query("SELECT key, params FROM cells WHERE program = ? AND status != 'done' "
                           "ORDER BY position", (program_id,))
        return [HuntCell(key, json.loads(params)) for key, params in rows]

    def cell(self, program_id: str, key: str) -> tuple[HuntCell, CellOutcome | None]:
        """The cell ``key`` of ``program_id`` and its outcome (None when not done).

        Parameters
        ----------
        program_id : str
            The program's id.
        key : str
            The cell's key.

        Returns
        -------
        tuple of (HuntCell, CellOutcome or None)
            The cell and its outcome.
        """
        (params, outcome), = self._query("SELECT params, outcome FROM cells WHERE program = ? AND key = ?",
                                         (program_id, key))
        return HuntCell(key, json.loads(params)), (outcome_from_json(outcome) if outcome else None)

    def mark_running(self, program_id: str, keys: list[str]) -> None:
        """Mark the cells ``keys`` of ``program_id`` running (those not done).

        Parameters
        ----------
        program_id : str
            The program's id.
        keys : list of str
            The keys of its cells to mark.
        """
        with self._tx() as c:
            c.executemany("UPDATE cells SET status = 'running' WHERE program = ? AND key = ? "
                          "AND status != 'done'", [(program_id, k) for k in keys])

    def record_outcome(self, program_id: str, key: str, outcome: CellOutcome,
                       presig: str | None = None) -> bool:
        """Record a cell's outcome (and, with ``presig``, it as a candidate); False if it was done.

        Parameters
        ----------
        program_id : str
            The program's id.
        key : str
            The cell's key.
        outcome : CellOutcome
            What the cell gave.
        presig : str, optional
            The key of the candidate group the cell opens or joins; None: not a candidate.

        Returns
        -------
        bool
            True when the cell was recorded now (it counts), False when it was already done or
            is not a cell of the program (nothing written).
        """
        with self._tx() as c:
            cur = c.execute("UPDATE cells SET status = 'done', outcome = ?, verdict = ?, seconds = ?, "
                            "cpu = ? WHERE program = ? AND key = ? AND status != 'done'",
                            (_outcome_json(outcome), outcome.verdict, float(outcome.seconds),
                             float(outcome.cpu_seconds), program_id, key))
            if cur.rowcount != 1:
                return False
            if presig is not None:
                c.execute("INSERT OR IGNORE INTO candidates(program, cell, presig) VALUES (?, ?, ?)",
                          (program_id, key, presig))
                c.execute("INSERT OR IGNORE INTO groups(presig, program, cell) VALUES (?, ?, ?)",
                          (presig, program_id, key))
        return True

    def finish_program(self, program_id: str) -> bool:
        """Mark ``program_id`` done with its outcome when all its cells are done; whether it is."""
        with self._tx() as c:
            rows = c.execute("SELECT status, verdict FROM cells WHERE program = ?", (program_id,)).fetchall()
            if any(status != "done" for status, _ in rows):
                return False
            verdicts = {v for _, v in rows}
            outcome = next((v for v in ("rejected", "violated", "conformant", "inconclusive", "error")
                            if v in verdicts), "error")
            c.execute("UPDATE programs SET status = 'done', outcome = ? WHERE id = ?", (outcome, program_id))
        return True

    def done_outcomes(self) -> list[tuple[str, str, CellOutcome]]:
        """(program, cell key, outcome) of every done cell."""
        rows = self._query("SELECT program, key, outcome FROM cells WHERE status = 'done' "
                           "ORDER BY program, position")
        return [(p, k, outcome_from_json(o)) for p, k, o in rows]

    def counts(self) -> dict[str, int]:
        """Programs done and pending, cells done."""
        (done,), = self._query("SELECT COUNT(*) FROM programs WHERE status = 'done'")
        (pending,), = self._query("SELECT COUNT(*) FROM programs WHERE status != 'done'")
        (cells,), = self._query("SELECT COUNT(*) FROM cells WHERE status = 'done'")
        return {"programs": int(done), "pending": int(pending), "cells": int(cells)}

    # candidates, groups, findings ----------------------------------------------------------------
    def pending_groups(self) -> list[tuple[str, str, str]]:
        """(pre-signature, program, cell key) of every group not processed yet, oldest first."""
        return [tuple(r) for r in self._query(
            "SELECT presig, program, cell FROM groups WHERE state = 'pending' ORDER BY rowid")]

    def close_group(self, presig: str, state: str, signature: str | None, finding: str | None,
                    shrink_runs: int, shrink_seconds: float) -> None:
        """Record what processing the group ``presig`` decided (``finding``, ``duplicate``, ``unconfirmed``).

        Parameters
        ----------
        presig : str
            The group's key.
        state : str
            ``finding``, ``duplicate`` or ``unconfirmed``.
        signature : str or None
            The minimised candidate's signature.
        finding : str or None
            The id of the finding it shows (``F<n>``), None when unconfirmed.
        shrink_runs : int
            Re-runs spent minimising it.
        shrink_seconds : float
            Seconds spent minimising it.
        """
        with self._tx() as c:
            c.execute("UPDATE groups SET state = ?, signature = ?, finding = ?, shrink_runs = ?, "
                      "shrink_seconds = ? WHERE presig = ?",
                      (state, signature, finding, shrink_runs, shrink_seconds, presig))

    def group_of_signature(self, signature: str) -> tuple[str, str | None] | None:
        """(state, finding) of a processed group whose minimised signature is ``signature``."""
        rows = self._query("SELECT state, finding FROM groups WHERE signature = ? AND state != 'pending' "
                           "ORDER BY rowid LIMIT 1", (signature,))
        return (rows[0][0], rows[0][1]) if rows else None

    def add_finding(self, signature: str, doc: dict[str, Any]) -> str:
        """Store a confirmed finding; its id ``F<n>`` in the order findings are added.

        Parameters
        ----------
        signature : str
            The finding's signature.
        doc : dict
            Its document (stored as JSON).

        Returns
        -------
        str
            The new id, ``F1`` first.
        """
        with self._tx() as c:
            (seq,), = c.execute("SELECT COALESCE(MAX(seq), 0) + 1 FROM findings").fetchall()
            fid = f"F{seq}"
            c.execute("INSERT INTO findings(id, seq, signature, doc) VALUES (?, ?, ?, ?)",
                      (fid, seq, signature, json.dumps(doc, sort_keys=True)))
        return fid

    def update_finding(self, fid: str, doc: dict[str, Any]) -> None:
        """Replace the stored document of finding ``fid``.

        Parameters
        ----------
        fid : str
            The finding's id (``F<n>``).
        doc : dict
            Its new document.
        """
        with self._tx() as c:
            c.execute("UPDATE findings SET doc = ? WHERE id = ?", (json.dumps(doc, sort_keys=True), fid))

    def findings(self) -> list[dict[str, Any]]:
        """Every finding's document with its id and the number of programs that showed it."""
        out = []
        for fid, doc in self._query("SELECT id, doc FROM findings ORDER BY seq"):
            (n,), = self._query("SELECT COUNT(DISTINCT c.program) FROM candidates c JOIN groups g "
                                "ON c.presig = g.presig WHERE g.finding = ?", (fid,))
            d = json.loads(doc)
            d["id"] = fid
            d["programs"] = int(n)
            out.append(d)
        return out

    def group_stats(self) -> dict[str, Any]:
        """Candidates, groups by state, distinct unconfirmed signatures, shrink runs and seconds."""
        states = dict(self._query("SELECT state, COUNT(*) FROM groups GROUP BY state"))
        (unconfirmed,), = self._query("SELECT COUNT(DISTINCT signature) FROM groups WHERE state = 'unconfirmed'")
        (cands,), = self._query("SELECT COUNT(*) FROM candidates")
        (runs, secs), = self._query("SELECT COALESCE(SUM(shrink_runs), 0), COALESCE(SUM(shrink_seconds), 0) "
                                    "FROM groups")
        return {"candidates": int(cands), "groups": {str(k): int(v) for k, v in states.items()},
                "unconfirmed": int(unconfirmed), "shrink_runs": int(runs), "shrink_seconds": float(secs)}

