"""Smaller variants of a generated Flink program, biggest reductions first.

:func:`shrink_specs` takes a spec of :mod:`rollcheck.flink_replay.hunt.grammar` apart: the
operator on top of the main one, a source (the last first), the chained stages and the final
keyed step, aggregates, the filter and the rekeying map, the SQL settings and the changelog input,
then the data: half of each source's rows, then its corners one at a time (plain keys, small
values, no duplicates, in order, no late records). Every variant is a spec the grammar could have
drawn, so it renders to a valid job module; :func:`shrink` renders them.

Examples
--------
>>> from rollcheck.flink_replay.hunt.grammar import program
>>> p = program(5, 2, {})
>>> smaller = list(shrink(p))
>>> len(smaller) > 0 and all(q.spec != p.spec for q in smaller)
True
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

from rollcheck.infra.hunt.adapter import Program

__all__ = ["shrink", "shrink_specs"]

_PLAIN = (("key_style", "short"), ("values", "small"), ("dups", 0.0), ("disorder", 0), ("late", 0.0), ("changes", 0.0))


def _without_source(spec: dict[str, Any], i: int) -> dict[str, Any] | None:
    """``spec`` without source ``i``, when what remains is still a program of the grammar."""
    srcs = spec["sources"]
    if len(srcs) < 2:
        return None
    pairwise = spec["combine"] in ("connect-coprocess", "connect-interval-join", "sql-join-inner", "sql-join-left",
                                   "sql-join-interval")
    if pairwise or (spec.get("post") == "post-join" and i == len(srcs) - 1):
        return None
    kept = [s for j, s in enumerate(srcs) if j != i]
    if not any(s["rows"] for s in kept):
        return None
    out = dict(spec, sources=kept)
    used = len(kept) - (1 if spec.get("post") == "post-join" else 0)
    if used == 1:
        out["combine"] = "none"
    return out


def _structural(spec: dict[str, Any]) -> Iterator[dict[str, Any]]:
    if spec.get("post"):
        extra = spec["sources"][:-1] if spec["post"] == "post-join" else spec["sources"]
        yield dict(spec, post=None, sources=extra)
    for i in reversed(range(len(spec["sources"]))):
        smaller = _without_source(spec, i)
        if smaller is not None:
            yield smaller
    if spec["form"] == "ds":
        for i in reversed(range(len(spec["stages"]))):
            yield dict(spec, stages=spec["stages"][:i] + spec["stages"][i + 1:])
        if spec.get("terminal"):
            yield dict(spec, terminal=None)
        for name in ("prefilter", "rekey"):
            if spec.get(name) is not None:
                yield dict(spec, **{name: None})
        return
    if len(spec["aggs"]) > 1:
        yield dict(spec, aggs=spec["aggs"][:1])
    if spec.get("where"):
        yield dict(spec, where=None)
    settings = spec.get("settings") or {}
    for name in ("minibatch", "two_phase", "distinct_split"):
        if settings.get(name):
            yield dict(spec, settings=dict(settings, **{name: False}))
    if spec.get("changelog"):
        yield dict(spec, changelog=False, sources=[dict(s, changes=0.0) for s in spec["sources"]])


def _data(spec: dict[str, Any]) -> Iterator[dict[str, Any]]:
    if any(s["rows"] > 2 for s in spec["sources"]):
        yield dict(spec, sources=[dict(s, rows=s["rows"] // 2 if s["rows"] > 2 else s["rows"])
                                  for s in spec["sources"]])
    for name, plain in _PLAIN:
        if any(s.get(name) != plain for s in spec["sources"]):
            yield dict(spec, sources=[dict(s, **{name: plain}) for s in spec["sources"]])


def shrink_specs(spec: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Smaller specs than ``spec``, biggest reductions first (each differs from ``spec``).

    >>> s = {"form": "ds", "combine": "none", "stages": [{"kind": "timers", "size_s": 5}], "terminal": "keyed-sum",
    ...      "prefilter": None, "rekey": None, "sources": [{"name": "s0", "rows": 8, "key_style": "short",
    ...      "values": "small", "dups": 0.0, "disorder": 0, "late": 0.0, "changes": 0.0}]}
    >>> [sorted(k for k in x if x[k] != s[k]) for x in shrink_specs(s)]
    [['stages'], ['terminal'], ['sources']]
    """
    seen = [spec]
    for candidate in (*_structural(spec), *_data(spec)):
        candidate = copy.deepcopy(candidate)
        if candidate not in seen:
            seen.append(candidate)
            yield candidate


def shrink(program: Program) -> Iterator[Program]:
    """The programs of :func:`shrink_specs` (the same id: variants of one program)."""
    from rollcheck.flink_replay.hunt.grammar import make_program

    for spec in shrink_specs(program.spec):
        yield make_program(program.id, spec)
