"""The Spark hunt's program grammar: Hypothesis strategies of Structured Streaming programs.

A program's *spec* is JSON-able: ``release``, ``form`` (``"dataframe"`` or ``"sql"``), ``sources``
(name -> ``[[column, type], ...]``), ``steps`` (the plan, each step reading earlier ones by
position; typed by :mod:`rollcheck.spark_replay.hunt.plan`), ``output_mode``, ``key`` and
``batches`` (:mod:`rollcheck.spark_replay.hunt.data`); :func:`~rollcheck.spark_replay.hunt.render.render`
makes it a query module. The grammar draws shapes — one source, a union of two (one maybe idle),
a stream-stream join of two branches each with its own stateful operator, an
``applyInPandasWithState`` — and chains stateful operators after them (a window of a window, an
aggregation after a union or a join, a deduplication before a join), each step checked against
Spark's analyser rules so that the drawn plan is one Spark accepts.

Steering: ``coverage`` (operator kind or pair -> count over earlier programs) weighs every choice
by ``1000 // (1 + count)`` of the rarest kind it brings (never zero), so the least covered come
first more often.

Examples
--------
>>> p = program(3, 7, {}, "3.5.3")
>>> p.id, p.text == program(3, 7, {}, "3.5.3").text
('P0007', True)
>>> set(p.operators) <= set(vocabulary("3.5.3"))
True
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any

from hypothesis import strategies as st

from rollcheck.infra.hunt.adapter import Program
from rollcheck.infra.hunt.draw import draw as seeded_draw
from rollcheck.spark_replay.hunt.data import batches as data_batches
from rollcheck.spark_replay.hunt.plan import AGG_FUNCS, PlanError, Rel, analyse, release_tuple
from rollcheck.spark_replay.hunt.render import render

__all__ = ["finish", "program", "programs", "to_program", "vocabulary"]

_JOINS = ("inner", "left_outer", "right_outer", "full_outer", "left_semi")
_SQL_OPS = {"source", "watermark", "filter", "project", "agg", "join", "join_static", "union"}


def vocabulary(release: str = "4.0.0") -> list[str]:
    """Every operator kind the grammar emits for ``release`` (the hunt's coverage keys).

    >>> "dedup-within-watermark" in vocabulary("3.4.1"), "dedup-within-watermark" in vocabulary("3.5.3")
    (False, True)
    """
    kinds = ["source", "watermark", "filter", "filter-false", "project", "literal-key", "group-by",
             "window-tumbling", "window-sliding", "window-session", "window-of-window",
             *(f"agg-{f}" for f in AGG_FUNCS), "dedup", "dedup-within-watermark",
             *(f"join-{h.replace('_', '-')}" for h in _JOINS), "join-static", "union", "pandas-state",
             "sql", "sink-foreachbatch", "output-append", "output-update", "output-complete"]
    if release_tuple(release) < (3, 5):
        kinds.remove("dedup-within-watermark")
    return kinds


class _Draw:
    """The drawing state of one program: the steering weights and the steps so far."""

    def __init__(self, draw: Any, release: str, coverage: Mapping[str, int]) -> None:
        self.draw, self.release, self.cov = draw, release, coverage
        # Hypothesis' own draws lean to their bounds and simplest values: the choices take a
        # Random seeded by one drawn integer, so their weights are what they say
        self.rng = random.Random(draw(st.integers(0, 2**63 - 1)))
        self.sources: dict[str, list[list[str]]] = {}
        self.steps: list[dict[str, Any]] = []
        self.rels: list[Rel] = []

    def weight(self, kinds: Sequence[str], base: int = 1) -> int:
        rarest = min((self.cov.get(k, 0) for k in kinds), default=0)
        return base * (1000 // (1 + rarest)) + 1

    def choose(self, options: Sequence[tuple[Any, Sequence[str], int]]) -> Any:
        """One of ``(value, kinds, base weight)``, weighted by coverage (never zero)."""
        ws = [self.weight(k, b) for _, k, b in options]
        x = self.rng.randrange(sum(ws))
        for (v, _, _), w in zip(options, ws, strict=True):
            if x < w:
                return v
            x -= w
        raise AssertionError("unreachable")

    def flip(self, p_percent: int) -> bool:
        return self.rng.randrange(100) < p_percent

    def pick(self, values: Sequence[Any]) -> Any:
        return values[self.rng.randrange(len(values))]

    def count(self, lo: int, hi: int) -> int:
        return self.rng.randint(lo, hi)

    def add(self, step: dict[str, Any]) -> int | None:
        """Append ``step`` if the plan stays valid; its position, else None (nothing added)."""
        self.steps.append(step)
        try:
            self.rels = analyse({"release": self.release, "sources": self.sources, "steps": self.steps},
                                complete=False)
        except PlanError:
            self.steps.pop()
            return None
        return len(self.steps) - 1

    def undo(self) -> None:
        """Take the last step back."""
        self.steps.pop()
        self.rels = self.rels[:len(self.steps)]

    def rel(self, i: int) -> Rel:
        return self.rels[i]


def _source(d: _Draw, name: str, types: tuple[str, str, str | None]) -> int:
    kt, vt, xt = types
    cols = [[f"{name}_ts", "TIMESTAMP"], [f"{name}_k", kt], [f"{name}_v", vt]]
    if xt:
        cols.append([f"{name}_x", xt])
    d.sources[name] = cols
    i = d.add({"op": "source", "source": name})
    assert i is not None
    return i


def _types(d: _Draw) -> tuple[str, str, str | None]:
    kt = d.pick(["STRING", "STRING", "INT", "BIGINT"])
    vt = d.pick(["INT", "BIGINT", "DOUBLE"])
    return kt, vt, d.pick([None, None, "STRING"])


def _filter(d: _Draw, i: int, *, may_fold: bool = False) -> dict[str, Any]:
    rel = d.rel(i)
    k, v = _plain_cols(rel)
    vt = rel.col_type(v)
    # a filter that folds to false empties its branch for good: only on the second input of a union
    # or join (the plan keeps a side the optimiser may prune), never on the only path to the output
    if may_fold and d.choose([(True, ["filter-false"], 1), (False, ["filter"], 2)]):
        pred = d.pick([
            ["cmp", "=", ["lit", 1, "INT"], ["lit", 2, "INT"]],
            ["and", ["isnotnull", ["col", k]], ["lit", False, "BOOLEAN"]],
            ["not", ["or", ["lit", True, "BOOLEAN"], ["isnull", ["col", v]]]]])
        return {"op": "filter", "in": i, "pred": pred, "folds_false": True}
    lit = ["lit", 0.0 if vt == "DOUBLE" else 0, vt] if vt in ("INT", "BIGINT", "DOUBLE") else ["lit", "", vt]
    pred = d.pick([
        ["cmp", ">=", ["col", v], lit],
        ["isnotnull", ["col", k]],
        ["or", ["isnull", ["col", v]], ["cmp", "!=", ["col", v], lit]],
        ["and", ["cmp", "=", ["lit", 1, "INT"], ["lit", 1, "INT"]], ["isnotnull", ["col", v]]]])
    return {"op": "filter", "in": i, "pred": pred}


def _plain_cols(rel: Rel) -> tuple[str, str]:
    """A key-like and a value-like column of ``rel`` (the same one when it has one)."""
    plain = [c for c, t in rel.cols if t not in ("TIMESTAMP", "WINDOW")] or rel.names
    nums = [c for c in plain if rel.col_type(c) in ("INT", "BIGINT", "DOUBLE")]
    keys = [c for c in plain if c not in nums[-1:]] or plain
    return keys[0], (nums or plain)[-1]


def _project(d: _Draw, i: int, name: str) -> dict[str, Any]:
    rel = d.rel(i)
    keep: list[list[Any]] = [[c, ["col", c]] for c in rel.names]
    if d.choose([(True, ["literal-key"], 1), (False, ["project"], 1)]):
        lit = d.pick([["lit", "L", "STRING"], ["lit", 7, "INT"]])
        return {"op": "project", "in": i, "cols": keep + [[f"{name}_lk", lit]]}
    k, v = _plain_cols(rel)
    kt, vt = rel.col_type(k), rel.col_type(v)
    extra = (["concat", ["col", k], ["lit", "-", "STRING"]] if kt == "STRING"
             else ["coalesce", ["col", k], ["lit", 0.0 if kt == "DOUBLE" else 0, kt]])
    cols = keep + [[f"{name}_kc", extra]]
    if vt == "DOUBLE":
        cols.append([f"{name}_vd", ["add", ["col", v], ["lit", 0.5, "DOUBLE"]]])
    return {"op": "project", "in": i, "cols": cols}


def _stateless(d: _Draw, i: int, name: str, most: int, *, only_filters: bool = False) -> int:
    for _ in range(d.count(0, most)):
        step = d.choose([("filter", ["filter", "filter-false"] if name == "b" else ["filter"], 2),
                         ("project", ["project", "literal-key"], 1),
                         ("static", ["join-static"], 1)][:1 if only_filters else 3])
        if step == "filter":
            j = d.add(_filter(d, i, may_fold=name == "b"))
        elif step == "project":
            j = d.add(_project(d, i, name)) if not any(s["op"] == "project" for s in d.steps) else None
        else:
            j = d.add(_static(d, i))
        i = i if j is None else j
    return i


def _static(d: _Draw, i: int) -> dict[str, Any]:
    from rollcheck.spark_replay.hunt.data import key_pool

    rel = d.rel(i)
    col = next((c for c in rel.names if c.endswith("_lk")), _plain_cols(rel)[0])
    t = rel.col_type(col)
    pool = ["L", "a", "b", None] if t == "STRING" else [7, 0, 1, None]
    pool = pool if col.endswith("_lk") else key_pool(t)[:3] + [None]
    keys = [d.pick(pool) for _ in range(d.count(1, 3))]
    how = d.pick(["inner", "left_outer", "left_semi"])
    return {"op": "join_static", "in": i, "col": col, "how": how,
            "static": {"columns": [["s_k", t], ["s_tag", "STRING"]],
                       "rows": [[k, f"t{n}"] for n, k in enumerate(keys)]}}


def _window(d: _Draw, col: str, of_window: Mapping[str, Any] | None = None) -> dict[str, Any]:
    if of_window is not None:
        size = int(of_window.get("size", of_window.get("gap", 5))) * d.pick([2, 3])
        return {"kind": "tumbling", "col": col, "size": size, "of_window": True}
    kind = d.choose([("tumbling", ["window-tumbling"], 2), ("sliding", ["window-sliding"], 1),
                     ("session", ["window-session"], 1)])
    if kind == "session":
        return {"kind": kind, "col": col, "gap": d.pick([2, 3, 5])}
    size = d.pick([4, 6, 10])
    w: dict[str, Any] = {"kind": kind, "col": col, "size": size}
    if kind == "sliding":
        w["slide"] = size // 2
    return w


def _agg(d: _Draw, i: int) -> dict[str, Any] | None:
    rel = d.rel(i)
    ts = [c for c, t in rel.cols if t == "TIMESTAMP"]
    wins = [c for c, t in rel.cols if t == "WINDOW" and c in rel.wm]
    plain = [c for c, t in rel.cols if t not in ("TIMESTAMP", "WINDOW")]
    opts: list[tuple[Any, Sequence[str], int]] = [("group", ["group-by"], 1)]
    if ts:
        opts.append(("window", ["window-tumbling", "window-sliding", "window-session"], 3))
    if wins:
        opts += [("of_window", ["window-of-window"], 3), ("by_window", ["group-by"], 1)]
    how = d.choose(opts)
    keys: list[str] = []
    window = None
    if how == "window":
        wm_ts = [c for c in ts if c in rel.wm]
        window = _window(d, (wm_ts or ts)[0])
    elif how == "of_window":
        prev = next(s for s in reversed(d.steps) if s["op"] == "agg" and s.get("window"))["window"]
        window = _window(d, wins[0], prev)
    elif how == "by_window":
        keys.append(wins[0])
    elif rel.stateful and ts and ts[0] in rel.wm:
        keys.append(ts[0])  # grouping by the watermarked event time itself keeps append mode
    lk = [c for c in plain if c.endswith("_lk")]
    keys += lk[:1] + [c for c in plain if c not in lk and d.flip(35)][:2 - len(lk[:1])]
    keys = list(dict.fromkeys(keys))
    if ((window and window["kind"] == "session" and not keys) or keys == ["session_window"]) and plain:
        keys.append(plain[0])  # Spark has no global session window (nor a grouping by one alone)
    aggs: list[list[Any]] = []
    for _ in range(d.count(1, 3)):
        fn = d.choose([(f, [f"agg-{f}"], 1) for f in AGG_FUNCS])
        num = [c for c in plain if rel.col_type(c) in ("INT", "BIGINT", "DOUBLE") and c not in keys]
        cands = num if fn in ("sum", "avg") else [c for c in plain if c not in keys]
        if fn == "count" or not cands:
            agg = ["count", None]
        else:
            agg = [fn, d.pick(cands)]
        if agg not in aggs:
            aggs.append(agg)
    return {"op": "agg", "in": i, "window": window, "keys": keys, "aggs": aggs}


def _dedup(d: _Draw, i: int, within: bool) -> dict[str, Any]:
    rel = d.rel(i)
    plain = [c for c, t in rel.cols if t not in ("WINDOW",)]
    ts = [c for c in plain if c in rel.wm]
    base = [c for c in plain if c not in ts][:1]
    cols = base + (ts[:1] if not within and d.flip(70) else [])
    return {"op": "dedup", "in": i, "cols": cols or plain[:1], "within": within}


def _stateful(d: _Draw, i: int, *, allow_pandas: bool = False) -> int:
    """One stateful step after step ``i`` (or none when no drawn option is valid there)."""
    rel = d.rel(i)
    chain = rel.chain

    def kinds(*ks: str) -> list[str]:
        return list(ks) + ([f"{chain}>{k}" for k in ks] if chain else [])

    opts: list[tuple[Any, Sequence[str], int]] = [
        ("agg", kinds("group-by", "window-tumbling", "window-sliding", "window-session", "window-of-window"), 4),
        ("dedup", kinds("dedup"), 1)]
    if release_tuple(d.release) >= (3, 5) and rel.wm:
        opts.append(("within", kinds("dedup-within-watermark"), 1))
    if allow_pandas and not rel.stateful and release_tuple(d.release) >= (3, 4):
        opts.append(("pandas", kinds("pandas-state"), 1))
    what = d.choose(opts)
    if what == "agg":
        step = _agg(d, i)
    elif what == "pandas":
        names = [c for c, t in rel.cols if t in ("STRING", "INT", "BIGINT")]
        nums = [c for c, t in rel.cols if t in ("INT", "BIGINT", "DOUBLE") and c != names[0]]
        if not nums:
            return i
        mode = d.choose([("update", ["output-update"], 1), ("append", ["output-append"], 1)])
        step = {"op": "pandas_state", "in": i, "key": names[0], "value": nums[0], "mode": mode}
    else:
        step = _dedup(d, i, what == "within")
    j = d.add(step) if step else None
    return i if j is None else j


def _branch(d: _Draw, name: str, types: tuple[str, str, str | None], *, wm_percent: int = 85,
            only_filters: bool = False) -> int:
    i = _source(d, name, types)
    if d.flip(wm_percent):
        j = d.add({"op": "watermark", "in": i, "col": f"{name}_ts", "delay": d.pick([0, 2, 5, 10])})
        i = i if j is None else j
    return _stateless(d, i, name, 2, only_filters=only_filters)


def _join(d: _Draw) -> int:
    types = _types(d)
    other = (types[0], d.pick(["INT", "BIGINT", "DOUBLE"]), None)
    left = _branch(d, "a", types, wm_percent=92)
    right = _branch(d, "b", other, wm_percent=92)
    sides = d.choose([(0, ["join-inner"], 3), (1, ["dedup>join-inner", "dedup-within-watermark"], 1),
                      (2, ["window-tumbling>join-inner", "window-sliding>join-inner"], 2)])
    if sides == 2 and "a_ts" in d.rel(left).wm and "b_ts" in d.rel(right).wm:
        win = _window(d, "a_ts")
        fn = d.pick(["sum", "min", "max", "count"])
        lstep = {"op": "agg", "in": left, "window": win, "keys": ["a_k"],
                 "aggs": [[fn, None if fn == "count" else "a_v"]]}
        j = d.add(lstep)
        k = d.add({"op": "agg", "in": right, "window": dict(win, col="b_ts"), "keys": ["b_k"],
                   "aggs": [["count", None]]}) if j is not None else None
        if j is not None and k is None:
            d.undo()  # the left aggregation alone would be left unread
        left, right = (left, right) if j is None or k is None else (j, k)
    elif sides == 1:
        j = d.add(_dedup(d, left, release_tuple(d.release) >= (3, 5) and d.flip(50)))
        left = left if j is None else j
    lrel, rrel = d.rel(left), d.rel(right)
    eq: list[list[str]] = [[c, c] for c in ("window", "session_window") if c in lrel.names and c in rrel.names]
    if "a_k" in lrel.names and "b_k" in rrel.names:
        eq.append(["a_k", "b_k"])
    how = d.choose([(h, [f"join-{h.replace('_', '-')}"], 1) for h in _JOINS])
    step: dict[str, Any] = {"op": "join", "left": left, "right": right, "how": how, "eq": eq}
    if "a_ts" in lrel.names and "b_ts" in rrel.names and (how != "inner" or d.flip(50)):
        step["bound"] = {"l": "a_ts", "r": "b_ts", "lower": d.pick([0, 2, 5]),
                         "upper": d.pick([2, 5, 10])}
    j = d.add(step)
    if j is None:
        j = d.add(dict(step, how="inner"))
    if j is None:
        raise PlanError("no join")
    rel = d.rel(j)
    if len(rel.wm) > 1 and not rel.late and d.flip(80):
        # a stateful operator after the join takes one event-time column: keep the left side's
        drop = sorted(rel.wm - lrel.wm)
        k = d.add({"op": "project", "in": j, "cols": [[c, ["col", c]] for c in rel.names if c not in drop]})
        j = j if k is None else k
    return j


def _shape(d: _Draw) -> int:
    shapes: list[tuple[Any, Sequence[str], int]] = [
        ("single", ["group-by", "window-tumbling"], 3), ("union", ["union"], 2),
        ("join", [f"join-{h.replace('_', '-')}" for h in _JOINS], 3)]
    if release_tuple(d.release) >= (3, 4):
        shapes.append(("pandas", ["pandas-state"], 1))
    shape = d.choose(shapes)
    if shape == "join":
        return _join(d)
    types = _types(d)
    left = _branch(d, "a", types, only_filters=shape == "union")
    if shape == "single":
        return _stateful(d, left) if d.flip(85) else left
    if shape == "union":
        right = _branch(d, "b", types, only_filters=True)
        j = d.add({"op": "union", "left": left, "right": right})
        if j is None:
            raise PlanError("no union")
        return _stateful(d, j, allow_pandas=True) if d.flip(85) else j
    return _stateful(d, left, allow_pandas=True)


@st.composite
def programs(draw: Any, release: str, steer: Mapping[str, int] | None = None) -> dict[str, Any]:
    """A program spec for ``release``, its choices weighted by ``steer`` (coverage counts).

    Parameters
    ----------
    draw : callable
        Hypothesis' draw (given by ``@st.composite``).
    release : str
        The pyspark release the program targets.
    steer : Mapping, optional
        Coverage counts weighting the choices.

    Returns
    -------
    dict
        The program spec.
    """
    d = _Draw(draw, release, steer or {})
    try:
        last = _shape(d)
    except PlanError:  # a shape with no valid completion here: one plain source instead
        d = _Draw(draw, release, steer or {})
        last = _branch(d, "a", _types(d))
    for _ in range(d.count(0, 2)):
        if d.rel(last).closed:
            break
        last = _stateful(d, last) if d.flip(60) else _stateless(d, last, "t", 1)
    try:
        rel = analyse({"release": release, "sources": d.sources, "steps": d.steps})[-1]
    except PlanError:  # never seen; a plain source is always a valid program
        d = _Draw(draw, release, steer or {})
        _branch(d, "a", _types(d))
        rel = analyse({"release": release, "sources": d.sources, "steps": d.steps})[-1]
    sql = (all(s["op"] in _SQL_OPS for s in d.steps) and any(s["op"] not in ("source", "watermark") for s in d.steps)
           and d.choose([(True, ["sql"], 1), (False, [], 2)]))
    mode = d.choose([(m, [f"output-{m}"], 1) for m in sorted(rel.modes)])
    idle = "b" if "b" in d.sources and any(s["op"] == "union" for s in d.steps) and d.flip(40) else None
    # a sum over BIGINT values at the type's limits overflows (an error under ANSI mode, Spark 4's
    # default): with any sum or average, the BIGINT columns stay away from the limits
    sums = any(fn in ("sum", "avg") for s in d.steps if s["op"] == "agg" for fn, _ in s["aggs"])
    summed = [c for cols in d.sources.values() for c, t in cols if sums and t == "BIGINT"]
    delays = [s["delay"] for s in d.steps if s["op"] == "watermark"] or [0]
    data = draw(data_batches(d.sources, d.count(3, 7), idle=idle, late_ms=1000 * max(delays),
                             no_extreme=summed))
    sink = d.choose([("foreachbatch", ["sink-foreachbatch"], 1), ("rollcheck", [], 3)])
    return finish({"release": release, "form": "sql" if sql else "dataframe", "sources": d.sources,
                   "steps": d.steps, "output_mode": mode, "sink": sink, "batches": data})


def finish(spec: dict[str, Any]) -> dict[str, Any]:
    """``spec`` with its ``key`` (from the plan and the mode); PlanError if the plan is invalid."""
    from rollcheck.spark_replay.hunt.plan import key_columns

    rel = analyse(spec)[-1]
    if spec["output_mode"] not in rel.modes:
        raise PlanError(f"output mode {spec['output_mode']} not allowed for the plan")
    return dict(spec, key=key_columns(rel, spec["output_mode"]))


def to_program(spec: dict[str, Any], index: int) -> Program:
    """The :class:`Program` of a finished spec (its text rendered, its operator kinds and pairs).

    Parameters
    ----------
    spec : dict
        The finished spec.
    index : int
        The program's index (its id ``P<index>``).

    Returns
    -------
    Program
        The program.
    """
    rel = analyse(spec)[-1]
    ops = (rel.kinds + (("sql",) if spec.get("form") == "sql" else ())
           + (("sink-foreachbatch",) if spec.get("sink") == "foreachbatch" else ()) + (f"output-{spec['output_mode']}",))
    return Program(id=f"P{index:04d}", text=render(spec), operators=ops, spec=spec,
                   pairs=tuple(dict.fromkeys(rel.pairs)))


def program(seed: int, index: int, coverage: Mapping[str, int], release: str) -> Program:
    """Program ``index`` of the hunt with ``seed``, steered by ``coverage`` (deterministic).

    Parameters
    ----------
    seed : int
        The hunt's seed.
    index : int
        The program's index.
    coverage : Mapping
        Operator kind or pair -> its count over earlier programs.
    release : str
        The pyspark release.

    Returns
    -------
    Program
        The program.
    """
    spec = seeded_draw(programs(release, dict(coverage)), seed, index, salt=f"spark-program/{release}")
    return to_program(dict(spec, seed=seed, index=index), index)
