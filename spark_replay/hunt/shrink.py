"""Smaller variants of a hunt program, biggest reductions first (the hunt's minimiser walks them).

:func:`shrink` yields valid programs only (each re-typed by
:func:`~rollcheck.spark_replay.hunt.plan.analyse` and rendered again): one side of a join or union
dropped with its source, an operator replaced by its input, a column dropped from a source or a
projection, the second half of the micro-batches and then single micro-batches dropped, every
batch's rows halved, single rows dropped. The output mode stays the program's when the smaller plan
allows it (else the first it allows); ``KEY`` follows the plan.

Examples
--------
>>> from rollcheck.spark_replay.hunt.grammar import program
>>> p = program(1, 2, {}, "3.5.3")
>>> smaller = next(shrink(p, "3.5.3"))
>>> len(smaller.text) < len(p.text) or len(smaller.spec["steps"]) < len(p.spec["steps"])
True
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

from rollcheck.infra.hunt.adapter import Program
from rollcheck.spark_replay.hunt.grammar import finish, to_program
from rollcheck.spark_replay.hunt.plan import PlanError, analyse

__all__ = ["shrink"]

_REFS = ("left", "right", "in")


def _tree(steps: list[dict[str, Any]], i: int) -> dict[str, Any]:
    node = dict(steps[i])
    for k in _REFS:
        if k in node:
            node[k] = _tree(steps, node[k])
    return node


def _flatten(node: dict[str, Any], out: list[dict[str, Any]]) -> int:
    step = dict(node)
    for k in _REFS:
        if k in step:
            step[k] = _flatten(step[k], out)
    out.append(step)
    return len(out) - 1


def _nodes(node: dict[str, Any], path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], dict[str, Any]]]:
    yield path, node
    for k in _REFS:
        if k in node:
            yield from _nodes(node[k], path + (k,))


def _replace(root: dict[str, Any], path: tuple[str, ...], new: dict[str, Any]) -> dict[str, Any]:
    if not path:
        return new
    root = dict(root)
    root[path[0]] = _replace(root[path[0]], path[1:], new)
    return root


def _with_plan(spec: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    steps: list[dict[str, Any]] = []
    _flatten(root, steps)
    used = {s["source"] for s in steps if s["op"] == "source"}
    sources = {n: c for n, c in spec["sources"].items() if n in used}
    data = [{n: r for n, r in b.items() if n in used} for b in spec["batches"]]
    return dict(spec, steps=steps, sources=sources, batches=data)


def _plans(spec: dict[str, Any]) -> Iterator[dict[str, Any]]:
    root = _tree(spec["steps"], len(spec["steps"]) - 1)
    for path, node in _nodes(root):  # one side of a join or union (its source with it)
        if node["op"] in ("join", "union"):
            for side in ("left", "right"):
                yield _with_plan(spec, _replace(root, path, node[side]))
    for path, node in _nodes(root):  # an operator replaced by its input
        if "in" in node:
            yield _with_plan(spec, _replace(root, path, node["in"]))


def _columns(spec: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for name, cols in spec["sources"].items():
        for c in range(len(cols) - 1, 0, -1):
            s = copy.deepcopy(spec)
            del s["sources"][name][c]
            for b in s["batches"]:
                for row in b.get(name, []):
                    del row[c]
            yield s
    for i, step in enumerate(spec["steps"]):
        if step["op"] == "project" and len(step["cols"]) > 1:
            for c in range(len(step["cols"]) - 1, -1, -1):
                s = copy.deepcopy(spec)
                del s["steps"][i]["cols"][c]
                yield s


def _data(spec: dict[str, Any]) -> Iterator[dict[str, Any]]:
    bs = spec["batches"]
    if len(bs) > 1:
        yield dict(spec, batches=bs[:(len(bs) + 1) // 2])
        for i in range(len(bs) - 1, -1, -1):
            yield dict(spec, batches=bs[:i] + bs[i + 1:])
    halved = [{n: rows[:len(rows) // 2] for n, rows in b.items()} for b in bs]
    if halved != bs:
        yield dict(spec, batches=halved)
    for i, b in enumerate(bs):
        for n, rows in b.items():
            for r in range(len(rows) - 1, -1, -1):
                yield dict(spec, batches=bs[:i] + [dict(b, **{n: rows[:r] + rows[r + 1:]})] + bs[i + 1:])


def _valid(spec: dict[str, Any], mode: str) -> dict[str, Any] | None:
    if not spec["batches"] or not any(rows for b in spec["batches"] for rows in b.values()):
        return None
    try:
        modes = sorted(analyse(spec)[-1].modes)
        return finish(dict(spec, output_mode=mode if mode in modes else modes[0], shrunk=True))
    except (PlanError, KeyError, IndexError):
        return None


def shrink(program: Program, release: str | None = None) -> Iterator[Program]:
    """Smaller valid variants of ``program``, biggest reductions first (each rendered again).

    Parameters
    ----------
    program : Program
        A program of :func:`~rollcheck.spark_replay.hunt.grammar.program` (its ``spec``).
    release : str, optional
        The release whose rules the variants keep (default the spec's).

    Returns
    -------
    Iterator of Program
        Distinct variants, each with the program's ``id``.
    """
    spec = dict(program.spec)
    if release:
        spec["release"] = release
    mode = spec["output_mode"]
    index = int(program.id.lstrip("P") or 0)
    seen = {json.dumps(program.spec, sort_keys=True)}
    for gen in (_plans, _columns, _data):
        for cand in gen(spec):
            ok = _valid(cand, mode)
            if ok is None:
                continue
            text = json.dumps(ok, sort_keys=True)
            if text in seen:
                continue
            seen.add(text)
            yield to_program(ok, index)
