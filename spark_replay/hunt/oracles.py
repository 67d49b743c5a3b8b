"""The hunt's two cheap differentials for Spark, over failure-free recordings of one program.

``provider-differential``
    The failure-free final table is the same on every state store provider (``hdfs``,
    ``rocksdb``, ``rocksdb-changelog``): the provider stores the state, it must not change the
    answer.
``partitioning-differential``
    The failure-free final table with ``spark.sql.shuffle.partitions`` = 1 equals the one with the
    recordings' default (2): the number of state partitions must not change the answer either.

Spark promises equality only for deterministic queries. A program that uses an aggregate whose
value depends on the order rows arrive in a partition (``first``, ``last`` without an order,
``collect_list``), random or processing-time values, is *not applicable*. Floating-point sums and
averages may differ in their last bits with the order of their terms: numbers are compared with a
relative tolerance of 1e-9 (:data:`REL_TOL`), everything else exactly (timestamps in one notation).

Examples
--------
>>> tables_differ([{"k": 1, "s": 0.1 + 0.2}], [{"k": 1, "s": 0.3}], ["k"]) is None
True
>>> tables_differ([{"k": 1, "n": 2}], [{"k": 1, "n": 3}], ["k"])
'key [1]: {"k": 1, "n": 2} against {"k": 1, "n": 3}'
>>> not_promised(("source", "agg-first"), "") is not None
True
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rollcheck.pyimpl.verdict import Check
from rollcheck.spark_replay.oracles.checks import canon_row

__all__ = ["REL_TOL", "DIFFERENTIALS", "not_promised", "tables_differ", "final_output", "provider_differential",
           "partitioning_differential"]

#: The relative tolerance of a numeric comparison (floating-point sums in another order).
REL_TOL = 1e-9
#: The differentials' check names.
DIFFERENTIALS = ("provider-differential", "partitioning-differential")
#: Operator kinds (substrings) whose result Spark does not promise to be the same run to run.
_NOT_DETERMINISTIC_KINDS = ("first", "last", "collect", "rand", "uuid", "processing-time", "now", "shuffle")
#: The same in a module's text (a program given as text only).
_NOT_DETERMINISTIC_TEXT = re.compile(r"\b(first|last|first_value|last_value|any_value|collect_list|collect_set|"
                                     r"rand|randn|uuid|shuffle|current_timestamp|now|monotonically_increasing_id)\s*\(",
                                     re.IGNORECASE)


def not_promised(operators: Sequence[str], text: str) -> str | None:
    """Why Spark does not promise the same final table run to run for this program, or None.

    Parameters
    ----------
    operators : sequence of str
        The program's operator kinds.
    text : str
        The module's source (a program without operator kinds is judged by its text).
    """
    for op in operators:
        if any(k in op.lower() for k in _NOT_DETERMINISTIC_KINDS):
            return f"the program uses {op}, whose value depends on the order rows arrive in: no equality promised"
    m = _NOT_DETERMINISTIC_TEXT.search(text or "")
    if m:
        return f"the module calls {m.group(1)}(), whose value is not deterministic: no equality promised"
    return None


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return math.isclose(a, b, rel_tol=REL_TOL, abs_tol=REL_TOL)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def _table(rows: Sequence[Mapping[str, Any]], key: Sequence[str]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for r in rows:
        norm = json.loads(canon_row(dict(r)))
        out[json.dumps([norm.get(k) for k in key], default=str)] = norm
    return out


def _show(row: dict[str, Any] | None) -> str:
    return "no row" if row is None else json.dumps(row, sort_keys=True)


def tables_differ(a: Sequence[Mapping[str, Any]], b: Sequence[Mapping[str, Any]], key: Sequence[str]) -> str | None:
    """Where the final tables of the outputs ``a`` and ``b`` differ.

    Last row per ``key``. One line. Or None when they are equal (numbers within :data:`REL_TOL`).

    Parameters
    ----------
    a, b : Sequence of Mapping
        The two outputs' rows.
    key : Sequence of str
        The ``KEY`` columns.

    Returns
    -------
    str or None
        The first differing key in one line.
    """
    ta, tb = _table(a, key), _table(b, key)
    for k in sorted(set(ta) | set(tb)):
        ra, rb = ta.get(k), tb.get(k)
        if ra is None or rb is None or not _same(ra, rb):
            return f"key {k}: {_show(ra)} against {_show(rb)}"
    return None


def final_output(trace: str | Path) -> tuple[list[str], list[dict[str, Any]]] | None:
    """The KEY and the final output rows of a finished recording (None: it has no final output)."""
    from rollcheck.spark_replay.checkpoint.watcher import base_kind
    from rollcheck.spark_replay.trace import read_trace

    tr = read_trace(trace)
    fin = next((e for e in tr.events if base_kind(e["kind"]) == "output_final"), None)
    end = next((e for e in tr.events if e["kind"] == "end"), None)
    if fin is None or end is None or end.get("status") != "done":
        return None
    key = [str(k) for k in (tr.header.get("config") or {}).get("key") or []]
    return key, list(fin.get("rows") or [])


def _differential(name: str, runs: Mapping[str, str | Path | None], operators: Sequence[str], text: str,
                  what: str) -> Check:
    why = not_promised(operators, text)
    if why is not None:
        return Check.not_applicable(name, why)
    outputs = {label: (final_output(t) if t is not None else None) for label, t in runs.items()}
    missing = [label for label, o in outputs.items() if o is None]
    if missing:
        return Check.unchecked(name, f"no finished failure-free run with {what} {missing[0]} to compare")
    labels = list(outputs)
    if len(labels) < 2:
        return Check.not_applicable(name, f"one {what} only: nothing to compare")
    key0, rows0 = outputs[labels[0]]  # type: ignore[misc]
    for label in labels[1:]:
        _key, rows = outputs[label]  # type: ignore[misc]
        diff = tables_differ(rows0, rows, key0)
        if diff is not None:
            return Check.violated(name, f"the failure-free final table with {what} {labels[0]} differs from the one "
                                        f"with {what} {label}: {diff}")
    return Check.held(name, f"the failure-free final tables with {what} {', '.join(labels)} are equal "
                            f"({len(_table(rows0, key0))} key(s); numbers within {REL_TOL:g})", examined=len(labels))


def provider_differential(runs: Mapping[str, str | Path | None], operators: Sequence[str] = (),
                          text: str = "") -> Check:
    """``provider-differential`` over ``{provider: failure-free trace or None}`` (module docstring).

    Parameters
    ----------
    runs : Mapping
        State store provider -> its failure-free trace, or None when it did not run.
    operators : Sequence of str, optional
        The program's operator kinds (see :func:`not_promised`).
    text : str, optional
        The program's text.

    Returns
    -------
    Check
        The differential's verdict.
    """
    return _differential("provider-differential", runs, operators, text, "state store")


def partitioning_differential(default: str | Path | None, one: str | Path | None, operators: Sequence[str] = (),
                              text: str = "", default_partitions: int = 2) -> Check:
    """``partitioning-differential``.

    The failure-free run with ``default_partitions`` shuffle partitions against the one with a
    single partition (module docstring).

    Parameters
    ----------
    default, one : str or Path or None
        The failure-free traces with ``default_partitions`` and with one partition.
    operators : Sequence of str, optional
        The program's operator kinds.
    text : str, optional
        The program's text.
    default_partitions : int, optional
        The default's shuffle partitions.

    Returns
    -------
    Check
        The differential's verdict.
    """
    return _differential("partitioning-differential", {str(default_partitions): default, "1": one}, operators, text,
                         "shuffle partitions")
