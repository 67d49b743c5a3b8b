"""What a matrix finding carries, the same for every engine: its minimised input.

A not-conformant cell that the engine's documentation does not explain is a *finding*; the
adapter minimises it (:mod:`~rollcheck.infra.matrix.shrink`) and writes a reproducer. The cell's
entry then carries ``minimised`` (:class:`Minimised`): which check the smaller input still
violates, how much input was kept of how much (``input``: rows of a Spark query, records of a
Flink job), the batches kept (an engine of micro-batches) and the sources left out, where the
failure strikes in the kept input, the re-runs spent and each re-run's input, and the trace of the
smallest re-run that showed it. See docs/internals/infra.md#matrix-finding.

A finding that the engine's failure-free run itself gets wrong has its reproducer carry the final
table that run must give (:class:`ExpectedTable`, one shape for every engine).

Examples
--------
>>> m = Minimised(check="output-exactly-once", unit="rows", kept=1, of=20, batches=(1, 5),
...               fail_at={"batch": 0}, runs=5)
>>> sorted(m.to_json()) == sorted(MINIMISED_KEYS)
True
>>> m.to_json()["input"], m.to_json()["batches"]
({'unit': 'rows', 'kept': 1, 'of': 20}, {'kept': 1, 'of': 5})
>>> minimised_words(m.to_json())
'1 of 20 rows, 1 of 5 batches, 5 re-runs'
>>> Minimised.from_json(m.to_json()) == m
True
"""

from __future__ import annotations

import math
import pprint
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Minimised", "MINIMISED_KEYS", "TRY_KEYS", "attempt", "minimised_words", "ExpectedTable",
           "EXPECTED_KEYS"]

#: The keys of a finding's ``minimised``, whatever the engine.
MINIMISED_KEYS = ("check", "input", "batches", "sources_dropped", "fail_at", "runs", "tries", "trace")
#: The keys every re-run of ``minimised["tries"]`` has (an engine may add its own: ``batches``,
#: ``verdict``, ``violated``).
TRY_KEYS = ("input", "sources_dropped", "shows")
#: The keys of a reproducer's expected table (:meth:`ExpectedTable.to_json`), whatever the engine.
EXPECTED_KEYS = ("from", "key", "columns", "rows")


def attempt(kept: int, shows: bool, sources_dropped: Sequence[str] = (), **extra: Any) -> dict[str, Any]:
    """One re-run of a minimisation: its input size, the sources it left out, whether it showed it.

    >>> attempt(50, False, verdict="conformant")
    {'input': 50, 'sources_dropped': [], 'shows': False, 'verdict': 'conformant'}
    """
    return {"input": int(kept), "sources_dropped": list(sources_dropped), "shows": bool(shows), **extra}


@dataclass(frozen=True)
class Minimised:
    """A finding's minimised input (module docstring); :meth:`to_json` is the cell's ``minimised``.

    Parameters
    ----------
    check
        The violated check (the root cause) every kept re-run still violated; None if unknown.
    unit
        What the input is counted in: ``"rows"`` (Spark) or ``"records"`` (Flink).
    kept, of
        The input of the smallest run that showed the finding, and the cell's whole input.
    batches
        ``(kept, of)`` micro-batches (an engine of batches), else None.
    sources_dropped
        The input streams left out (a module of several sources).
    fail_at
        Where the failure strikes in the kept input: ``{"batch": k}`` or ``{"record": n}``.
    runs
        Re-runs spent.
    tries
        Each re-run (:func:`attempt`), in the order run.
    trace
        The trace of the smallest re-run that showed it; None: the cell's own trace.
    """

    check: str | None
    unit: str
    kept: int
    of: int
    batches: tuple[int, int] | None = None
    sources_dropped: tuple[str, ...] = ()
    fail_at: Mapping[str, int] = field(default_factory=dict)
    runs: int = 0
    tries: tuple[Mapping[str, Any], ...] = ()
    trace: str | None = None

    def __post_init__(self) -> None:
        if self.unit not in ("rows", "records"):
            raise ValueError(f"a minimised input is counted in rows or records, not {self.unit!r}")
        if not 0 <= self.kept <= self.of:
            raise ValueError(f"a minimised input keeps 0..{self.of} {self.unit}, not {self.kept}")
        for t in self.tries:
            missing = [k for k in TRY_KEYS if k not in t]
            if missing:
                raise ValueError(f"a minimisation's re-run lacks {', '.join(missing)}")
        object.__setattr__(self, "sources_dropped", tuple(self.sources_dropped))
        object.__setattr__(self, "tries", tuple(dict(t) for t in self.tries))
        object.__setattr__(self, "fail_at", dict(self.fail_at))

    @property
    def smaller(self) -> bool:
        """Whether the kept input is smaller than the cell's (fewer units, batches or sources)."""
        fewer_batches = self.batches is not None and self.batches[0] < self.batches[1]
        return self.kept < self.of or fewer_batches or bool(self.sources_dropped)

    def to_json(self) -> dict[str, Any]:
        """The cell's ``minimised`` (keys :data:`MINIMISED_KEYS`)."""
        return {"check": self.check, "input": {"unit": self.unit, "kept": self.kept, "of": self.of},
                "batches": {"kept": self.batches[0], "of": self.batches[1]} if self.batches else None,
                "sources_dropped": list(self.sources_dropped), "fail_at": dict(self.fail_at),
                "runs": self.runs, "tries": [dict(t) for t in self.tries], "trace": self.trace}

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> Minimised:
        """Read a cell's ``minimised`` back; a key missing or unknown is a ``ValueError``."""
        keys = set(doc)
        if keys != set(MINIMISED_KEYS):
            raise ValueError(f"a finding's minimised has the keys {', '.join(MINIMISED_KEYS)}; "
                             f"missing {sorted(set(MINIMISED_KEYS) - keys)}, unknown {sorted(keys - set(MINIMISED_KEYS))}")
        b = doc["batches"]
        return cls(check=doc["check"], unit=doc["input"]["unit"], kept=int(doc["input"]["kept"]),
                   of=int(doc["input"]["of"]), batches=(int(b["kept"]), int(b["of"])) if b else None,
                   sources_dropped=tuple(doc["sources_dropped"]), fail_at=dict(doc["fail_at"]),
                   runs=int(doc["runs"]), tries=tuple(doc["tries"]), trace=doc["trace"])


def minimised_words(m: Mapping[str, Any] | None) -> str:
    """What the tables say of a cell's ``minimised``; ``""`` for none.

    >>> minimised_words({"input": {"unit": "records", "kept": 12, "of": 600}, "batches": None,
    ...                  "sources_dropped": ["withdrawals"], "runs": 1})
    '12 of 600 records without withdrawals, 1 re-run'
    """
    if not m:
        return ""
    i = m.get("input") or {}
    text = f'{i.get("kept")} of {i.get("of")} {i.get("unit")}'
    if m.get("batches"):
        text += f', {m["batches"]["kept"]} of {m["batches"]["of"]} batches'
    if m.get("sources_dropped"):
        text += f' without {", ".join(m["sources_dropped"])}'
    runs = int(m.get("runs") or 0)
    return f'{text}, {runs} re-run{"" if runs == 1 else "s"}'


@dataclass(frozen=True)
class ExpectedTable:
    """The final table a finding's failure-free run must give, from an oracle that does not trust the engine.

    :meth:`to_json` is what a reproducer script carries as ``EXPECTED`` (keys :data:`EXPECTED_KEYS`,
    ``source`` as ``"from"``); the script keeps per KEY the last of its rows and compares its own
    failure-free run's final table with it.

    Parameters
    ----------
    source
        Where the table comes from, in words (``"the same job in Flink's BATCH mode"``).
    key
        The positions in a row of the fields that identify it (the KEY), in KEY order; none: a
        table of one row (a global aggregate).
    columns
        The name of each position (a Spark row's columns), or None: unnamed (a Flink output tuple).
    rows
        The rows, each a list of values, in the order emitted (the last one of a KEY counts).

    Examples
    --------
    >>> e = ExpectedTable.named("the batch job", ["user"], [{"user": "ann", "total": 7}])
    >>> e.to_json()
    {'from': 'the batch job', 'key': [0], 'columns': ['user', 'total'], 'rows': [['ann', 7]]}
    >>> ExpectedTable.from_json(e.to_json()) == e
    True
    >>> ExpectedTable("BATCH mode", (0,), None, (["a", 3], ["b", 4])).to_json()["rows"]
    [['a', 3], ['b', 4]]
    >>> ExpectedTable("x", (2,), ("a", "b"), ())
    Traceback (most recent call last):
    ...
    ValueError: an expected table's key is positions 0..1 of its columns, not (2,)
    """

    source: str
    key: tuple[int, ...]
    columns: tuple[str, ...] | None
    rows: tuple[tuple[Any, ...], ...]

    def __post_init__(self) -> None:
        key = tuple(self.key)
        if not all(isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in key):
            raise ValueError(f"an expected table's key is positions in a row (int >= 0), not {self.key!r}")
        cols = None if self.columns is None else tuple(str(c) for c in self.columns)
        if cols is not None and key and max(key) >= len(cols):
            raise ValueError(f"an expected table's key is positions 0..{len(cols) - 1} of its columns, not {key!r}")
        rows = tuple(tuple(r) for r in self.rows)
        width = len(cols) if cols is not None else max(key, default=-1) + 1
        short = next((r for r in rows if len(r) < width or (cols is not None and len(r) != width)), None)
        if short is not None:
            raise ValueError(f"an expected table's row has {width} value(s), not {len(short)}: {list(short)!r:.80}")
        object.__setattr__(self, "key", key)
        object.__setattr__(self, "columns", cols)
        object.__setattr__(self, "rows", rows)

    @classmethod
    def named(cls, source: str, key: Sequence[str], rows: Sequence[Mapping[str, Any]],
              columns: Sequence[str] | None = None) -> ExpectedTable:
        """The table of rows of named values (a Spark row's ``asDict``); ``key`` names its columns.

        ``columns`` the compared columns (default: every one in the rows, first seen first); a key
        column among none of them is added. A value a row lacks is None.
        """
        names = list(dict.fromkeys(columns if columns is not None else (c for r in rows for c in r)))
        names += [k for k in key if k not in names]
        return cls(source, tuple(names.index(k) for k in key), tuple(names),
                   tuple(tuple(r.get(c) for c in names) for r in rows))

    def to_json(self) -> dict[str, Any]:
        """The reproducer's ``EXPECTED`` (keys :data:`EXPECTED_KEYS`)."""
        return {"from": self.source, "key": list(self.key),
                "columns": None if self.columns is None else list(self.columns), "rows": [list(r) for r in self.rows]}

    def to_python(self) -> str:
        """:meth:`to_json` as Python source for a script (a double that is not finite as ``float("nan")``).

        >>> print(ExpectedTable("x", (0,), None, (["a", float("-inf")],)).to_python())
        {"from": 'x', "key": [0], "columns": None, "rows": [['a', float("-inf")]]}
        """
        doc = self.to_json()
        if all(math.isfinite(v) for r in self.rows for v in r if isinstance(v, float)):
            return pprint.pformat(doc, width=100, sort_dicts=False)
        return "{" + ", ".join(f'"{k}": {_literal(v)}' for k, v in doc.items()) + "}"

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> ExpectedTable:
        """Read an ``EXPECTED`` back; a key missing or unknown, or a row of the wrong shape, is a ``ValueError``."""
        keys = set(doc) if isinstance(doc, Mapping) else set()
        if keys != set(EXPECTED_KEYS):
            raise ValueError(f"an expected table has the keys {', '.join(EXPECTED_KEYS)}; "
                             f"missing {sorted(set(EXPECTED_KEYS) - keys)}, unknown {sorted(keys - set(EXPECTED_KEYS))}")
        if not isinstance(doc["rows"], list) or not all(isinstance(r, list) for r in doc["rows"]):
            raise ValueError("an expected table's rows are lists of values")
        if not isinstance(doc["key"], list) or not (doc["columns"] is None or isinstance(doc["columns"], list)):
            raise ValueError("an expected table's key is a list of positions, its columns a list of names or null")
        return cls(str(doc["from"]), tuple(doc["key"]), None if doc["columns"] is None else tuple(doc["columns"]),
                   tuple(tuple(r) for r in doc["rows"]))


def _literal(v: Any) -> str:
    """Python source of a JSON value; a double that is not finite as ``float("...")``."""
    if isinstance(v, float) and not math.isfinite(v):
        return f'float("{v}")'
    if isinstance(v, dict):
        return "{" + ", ".join(f"{_literal(k)}: {_literal(x)}" for k, x in v.items()) + "}"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_literal(x) for x in v) + "]"
    return repr(v)
