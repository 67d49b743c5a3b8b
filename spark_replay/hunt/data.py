"""The input data of a hunt program: rows per source per micro-batch, made to reach the corners.

:func:`batches` is a Hypothesis strategy of a program's input (JSON-able: timestamps as ISO
strings, a double's NaN and infinities as strings ``"NaN"``, ``"Infinity"``, ``"-Infinity"``):
event time moves forward a few seconds per micro-batch, with rows out of order within a batch,
rows late by more than the watermark delay (so windows close and late rows are dropped), rows a
few milliseconds apart, duplicates of earlier rows, nulls in keys and values, long and empty keys,
values at the type limits (INT and BIGINT minimum and maximum, 0, negatives, NaN and infinities for
DOUBLE), micro-batches in which nothing moves and sources idle in most micro-batches.

Examples
--------
>>> from rollcheck.infra.hunt.draw import draw
>>> src = {"a": [["a_ts", "TIMESTAMP"], ["a_k", "STRING"], ["a_v", "INT"]]}
>>> data = draw(batches(src, n_batches=4), 1, 0)
>>> len(data), all(set(b) <= {"a"} for b in data)
(4, True)
"""

from __future__ import annotations

import datetime as dt
import random
from collections.abc import Collection
from typing import Any

from hypothesis import strategies as st

__all__ = ["T0", "batches", "key_pool", "value_pool"]

#: The event time of micro-batch 0.
T0 = dt.datetime(2024, 1, 1)
INT_MIN, INT_MAX = -(2**31), 2**31 - 1
BIGINT_MIN, BIGINT_MAX = -(2**63), 2**63 - 1
_LONG_KEY = "k" * 300


def key_pool(t: str, extreme: bool = True) -> list[Any]:
    """Key values: few, so groups and joins meet.

    A null, an empty and a long one are among them, and the type's limits unless ``extreme`` is
    false.

    Parameters
    ----------
    t : str
        The SQL type (``STRING``, ``INT``, ``BIGINT``).
    extreme : bool, optional
        Add the type's limits.

    Returns
    -------
    list
        The values.
    """
    if t == "STRING":
        return ["a", "b", "c", "a", "b", None, "", _LONG_KEY, "ü"]
    if t == "INT":
        return [0, 1, 2, 1, -1, None] + ([INT_MIN, INT_MAX] if extreme else [])
    return [0, 1, 2, 1, -1, None] + ([BIGINT_MIN, BIGINT_MAX] if extreme else [])


def value_pool(t: str, extreme: bool = True) -> list[Any]:
    """Values of a column of type ``t``.

    ``extreme`` adds the type's limits (left out of a column summed where an overflow would fail the
    query under ANSI mode).

    Parameters
    ----------
    t : str
        The SQL type.
    extreme : bool, optional
        Add the type's limits.

    Returns
    -------
    list
        The values.
    """
    if t == "INT":
        return [0, 1, 7, -3, 42, None] + ([INT_MIN, INT_MAX] if extreme else [])
    if t == "BIGINT":
        return [0, 1, 7, -3, 2**40, None] + ([BIGINT_MIN, BIGINT_MAX] if extreme else [])
    if t == "DOUBLE":
        return [0.0, 1.5, -2.25, 1e-9, None, -0.0] + (["NaN", "Infinity", "-Infinity", 1e308] if extreme else [])
    if t == "STRING":
        return ["x", "y", "", None] + ([_LONG_KEY] if extreme else [])
    raise ValueError(f"no values for {t}")


def _stamp(ms: int) -> str:
    return (T0 + dt.timedelta(milliseconds=ms)).isoformat(timespec="microseconds")


def _row(rng: random.Random, cols: list[list[str]], now_ms: int, late_ms: int,
         no_extreme: Collection[str]) -> list[Any]:
    row: list[Any] = []
    kind = rng.choice(["on-time", "on-time", "on-time", "close", "late", "out-of-order"])
    for i, (name, t) in enumerate(cols):
        if t == "TIMESTAMP":
            if kind == "late":
                ms = now_ms - late_ms - rng.randint(1, 4) * 1000
            elif kind == "out-of-order":
                ms = now_ms - rng.randint(0, 3) * 1000
            elif kind == "close":
                ms = now_ms + rng.randint(0, 3)
            else:
                ms = now_ms + rng.randint(0, 2999)
            row.append(_stamp(max(ms, 0)))
        elif i == 1:
            row.append(rng.choice(key_pool(t, name not in no_extreme)))
        else:
            row.append(rng.choice(value_pool(t, name not in no_extreme)))
    return row


@st.composite
def batches(draw: Any, sources: dict[str, list[list[str]]], n_batches: int, idle: str | None = None,
            late_ms: int = 5000, no_extreme: Collection[str] = ()) -> list[dict[str, list[list[Any]]]]:
    """The input of ``sources`` (name -> ``[[column, type], ...]``) over ``n_batches`` micro-batches.

    Parameters
    ----------
    sources : dict
        The program's sources and their columns.
    n_batches : int
        Micro-batches to give (an empty one among them sometimes).
    idle : str or None
        A source given rows in at most one micro-batch (the idle side of a union or join).
    late_ms : int
        How far behind the newest event time a late row is (beyond the watermark delay).
    no_extreme : collection of str
        Columns whose values stay away from the type limits.

    Returns
    -------
    list of dict
        One ``{source: rows}`` per micro-batch; a source idle in a batch has no entry.
    """
    # Hypothesis' own draws lean to their bounds and first elements: the corners take a Random
    # seeded by one drawn integer, so each is drawn as often as its share says
    rng = random.Random(draw(st.integers(0, 2**63 - 1)))
    step_ms = rng.choice([2000, 3000, 5000])
    empty = rng.choice([None, None, *range(1, n_batches)]) if n_batches > 2 else None
    idle_at = rng.choice([None, *range(n_batches)])
    out: list[dict[str, list[list[Any]]]] = []
    seen: dict[str, list[list[Any]]] = {n: [] for n in sources}
    for b in range(n_batches):
        batch: dict[str, list[list[Any]]] = {}
        for name, cols in sources.items():
            if b == empty or (name == idle and b != idle_at):
                continue
            n = rng.randint(0 if b else 1, 4)
            rows = [_row(rng, cols, b * step_ms, late_ms, no_extreme) for _ in range(n)]
            if seen[name] and rng.random() < 0.5:
                rows.append(list(rng.choice(seen[name])))  # a duplicate of an earlier row
            rng.shuffle(rows)
            if rows:
                batch[name] = [list(r) for r in rows]
                seen[name] += rows
        out.append(batch)
    if not any(out):
        first = next(iter(sources))
        out[0][first] = [_row(rng, sources[first], 0, late_ms, no_extreme)]
    return out
