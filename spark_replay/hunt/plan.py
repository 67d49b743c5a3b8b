"""The typing of a hunt program's plan: each step's columns and what Spark's analyser allows after it.

A hunt program's plan (``spec["steps"]``, see :mod:`rollcheck.spark_replay.hunt.grammar`) is a
list of steps, each reading earlier steps by position. :func:`analyse` walks it once and gives
every step's :class:`Rel` — its columns and types, the columns carrying an event-time watermark,
the stateful operators upstream, the output modes still allowed — or raises :class:`PlanError`
naming the rule of Spark's ``UnsupportedOperationChecker`` the step would break. The grammar
draws only steps that keep the plan valid; the shrinker keeps only candidates that still are.

Details: ``docs/internals/spark-hunt.md`` (section ``plan``).

Examples
--------
>>> spec = {"sources": {"a": [["a_ts", "TIMESTAMP"], ["a_k", "STRING"]]}, "release": "3.5.3",
...         "steps": [{"op": "source", "source": "a"},
...                   {"op": "watermark", "in": 0, "col": "a_ts", "delay": 5},
...                   {"op": "agg", "in": 1, "window": {"kind": "tumbling", "col": "a_ts", "size": 10},
...                    "keys": ["a_k"], "aggs": [["count", None]]}]}
>>> rel = analyse(spec)[-1]
>>> [c for c, _ in rel.cols], sorted(rel.modes)
(['window', 'a_k', 'cnt'], ['append', 'complete', 'update'])
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

__all__ = ["AGG_FUNCS", "PlanError", "Rel", "agg_name", "analyse", "expr_type", "key_columns",
           "output_columns", "release_tuple", "window_name"]

#: The aggregate functions (coverage kind ``agg-<name>``); count-distinct is Spark's streaming one,
#: ``approx_count_distinct`` (an exact ``count(DISTINCT)`` is refused on streams).
AGG_FUNCS = ("count", "sum", "min", "max", "avg", "first", "last", "count-distinct")
_NUMERIC = ("INT", "BIGINT", "DOUBLE")


class PlanError(ValueError):
    """A plan Spark's analyser would refuse (the message names the rule)."""


@dataclass(frozen=True)
class Rel:
    """What a step gives: columns and the analyser's state after it."""

    cols: tuple[tuple[str, str], ...]
    wm: frozenset[str] = frozenset()
    stateful: tuple[str, ...] = ()
    modes: frozenset[str] = frozenset({"append", "update", "complete"})
    late: bool = False          # a time-interval join upstream: no stateful operator may follow
    closed: bool = False        # applyInPandasWithState upstream: nothing stateful may follow
    has_agg: bool = False
    group: tuple[str, ...] | None = None  # the identifying columns when the last stateful op aggregates
    chain: str | None = None    # the last chained operator kind upstream (for pairs)
    kinds: tuple[str, ...] = ()
    pairs: tuple[str, ...] = ()
    sources: frozenset[str] = field(default_factory=frozenset)

    def col_type(self, name: str) -> str:
        """The Spark type of column ``name``."""
        for c, t in self.cols:
            if c == name:
                return t
        raise PlanError(f"no column {name!r}")

    @property
    def names(self) -> list[str]:
        """The column names, in order."""
        return [c for c, _ in self.cols]


def release_tuple(release: str) -> tuple[int, int]:
    """``"3.5.3"`` -> ``(3, 5)``.

    >>> release_tuple("4.0.0")
    (4, 0)
    """
    parts = (release.split(".") + ["0"])[:2]
    return int(parts[0]), int(parts[1])


def window_name(kind: str) -> str:
    """The column Spark names a window: ``session_window`` for a session window, else ``window``."""
    return "session_window" if kind == "session" else "window"


def agg_name(fn: str, col: str | None) -> str:
    """The output column of one aggregate.

    Parameters
    ----------
    fn : str
        The aggregate function (e.g. ``count``, ``count-distinct``).
    col : str or None
        Its column; None for ``count(*)``.

    Returns
    -------
    str
        The column's name.

    Examples
    --------
    >>> agg_name("count", None), agg_name("count-distinct", "a_k")
    ('cnt', 'count_distinct_a_k')
    """
    return "cnt" if col is None else f"{fn.replace('-', '_')}_{col}"


def expr_type(e: list[Any], rel: Rel) -> str:
    """The type of an expression of the grammar (see :mod:`rollcheck.spark_replay.hunt.render`).

    Parameters
    ----------
    e : list
        The expression (``[head, ...]``).
    rel : Rel
        The relation it reads.

    Returns
    -------
    str
        The SQL type name.
    """
    head = e[0]
    if head == "col":
        return rel.col_type(e[1])
    if head == "lit":
        return str(e[2])
    if head in ("cmp", "and", "or", "not", "isnull", "isnotnull"):
        return "BOOLEAN"
    if head == "concat":
        return "STRING"
    if head in ("coalesce", "add"):
        return expr_type(e[1], rel)
    raise PlanError(f"unknown expression {head!r}")


def _agg_type(fn: str, t: str) -> str:
    if fn in ("count", "count-distinct"):
        return "BIGINT"
    if fn == "avg":
        return "DOUBLE"
    if fn == "sum":
        return "DOUBLE" if t == "DOUBLE" else "BIGINT"
    return t


def _chain_rules(rel: Rel, kind: str, release: str, modes: frozenset[str]) -> frozenset[str]:
    """The modes left when a stateful operator ``kind`` follows ``rel``; PlanError if none may."""
    if rel.closed:
        raise PlanError(f"{kind} after applyInPandasWithState")
    if len(rel.wm) > 1:
        raise PlanError(f"{kind} over more than one event-time column ({', '.join(sorted(rel.wm))})")
    if not rel.stateful:
        return rel.modes & modes
    if release_tuple(release) < (3, 4):
        raise PlanError("several stateful operators need Spark 3.4")
    if rel.late:
        raise PlanError(f"{kind} after a time-interval join (it may emit rows behind the watermark)")
    left = rel.modes & modes & {"append"}
    if not left:
        raise PlanError(f"{kind} after a stateful operator needs append mode")
    return frozenset(left)


def _pair(rel: Rel, kind: str) -> tuple[str, ...]:
    return rel.pairs + ((f"{rel.chain}>{kind}",) if rel.chain else ())


def _agg(step: dict[str, Any], rel: Rel, release: str) -> Rel:
    win = step.get("window")
    cols: list[tuple[str, str]] = []
    wm: set[str] = set()
    appendable = False
    kinds = []
    if win:
        src_t = rel.col_type(win["col"])
        if win.get("of_window"):
            if src_t != "WINDOW" or release_tuple(release) < (3, 4):
                raise PlanError("a window of a window needs a window column and Spark 3.4 (window_time)")
            kind = "window-of-window"
        else:
            if src_t != "TIMESTAMP":
                raise PlanError("a window over a non-timestamp column")
            kind = f"window-{win['kind']}"
        kinds.append(kind)
        cols.append((window_name(win["kind"]), "WINDOW"))
        if win["col"] in rel.wm:
            wm.add(window_name(win["kind"]))
            appendable = True
    else:
        kind = "group-by"
        kinds.append(kind)
    for k in step["keys"]:
        t = rel.col_type(k)
        cols.append((k, t))
        if k in rel.wm:
            wm.add(k)
            appendable = True
    if (win and win["kind"] == "session" and not step["keys"]) or (not win and step["keys"] == ["session_window"]):
        raise PlanError("a session window needs a grouping key besides it (no global session window)")
    group = tuple(c for c, _ in cols)
    for fn, col in step["aggs"]:
        if fn not in AGG_FUNCS:
            raise PlanError(f"unknown aggregate {fn!r}")
        t = "BIGINT" if col is None else rel.col_type(col)
        if fn in ("sum", "avg") and t not in _NUMERIC:
            raise PlanError(f"{fn} of a {t} column")
        if t == "WINDOW" and fn not in ("count", "count-distinct"):
            raise PlanError(f"{fn} of a window")
        cols.append((agg_name(fn, col), _agg_type(fn, t)))
        kinds.append(f"agg-{fn}")
    if len({c for c, _ in cols}) != len(cols) or not step["aggs"]:
        raise PlanError("duplicate output columns or no aggregate")
    modes = {"update", "complete"} | ({"append"} if appendable else set())
    if win and win["kind"] == "session":
        modes.discard("update")
    left = _chain_rules(rel, kind, release, frozenset(modes))
    if rel.stateful:
        left -= {"complete"}
    if not left:
        raise PlanError("no output mode allows this aggregation")
    return replace(rel, cols=tuple(cols), wm=frozenset(wm), stateful=rel.stateful + (kind,), modes=left,
                   has_agg=True, group=group, chain=kind, kinds=rel.kinds + tuple(kinds),
                   pairs=_pair(rel, kind))


def _join(step: dict[str, Any], lrel: Rel, rrel: Rel, release: str) -> Rel:
    how = step["how"]
    kind = "join-" + how.replace("_", "-")
    if not step["eq"]:
        raise PlanError("a stream-stream join needs an equality")
    wm_key = False
    for lc, rc in step["eq"]:
        if lrel.col_type(lc) != rrel.col_type(rc):
            raise PlanError(f"join key types differ: {lc} {rc}")
        wm_key = wm_key or (lc in lrel.wm and rc in rrel.wm)
    bound = step.get("bound")
    if bound:
        if lrel.col_type(bound["l"]) != "TIMESTAMP" or rrel.col_type(bound["r"]) != "TIMESTAMP":
            raise PlanError("an event-time bound on non-timestamp columns")
    bounded = bound is not None and bound["l"] in lrel.wm and bound["r"] in rrel.wm
    if how != "inner" and not (wm_key or bounded):
        raise PlanError(f"a {how} stream-stream join needs watermarks on both sides and an event-time "
                        "bound or a watermarked key")
    if how == "left_semi" and release_tuple(release) < (3, 1):
        raise PlanError("left semi stream-stream join needs Spark 3.1")
    for r in (lrel, rrel):
        if r.closed:
            raise PlanError("a join after applyInPandasWithState")
    both = replace(lrel, stateful=lrel.stateful + rrel.stateful, late=lrel.late or rrel.late,
                   modes=lrel.modes & rrel.modes)
    modes = _chain_rules(both, kind, release, frozenset({"append"}))
    lnames = set(lrel.names)
    cols = list(lrel.cols)
    wm = set(lrel.wm)
    if how != "left_semi":
        for c, t in rrel.cols:
            name = f"r_{c}" if c in lnames else c
            cols.append((name, t))
            if c in rrel.wm:
                wm.add(name)
    pairs = _pair(lrel, kind) + tuple(p for p in _pair(rrel, kind) if p not in lrel.pairs)
    return Rel(cols=tuple(cols), wm=frozenset(wm), stateful=both.stateful + (kind,), modes=modes,
               late=both.late or bool(bound), has_agg=lrel.has_agg or rrel.has_agg, group=None,
               chain=kind, kinds=lrel.kinds + rrel.kinds + (kind,), pairs=pairs,
               sources=lrel.sources | rrel.sources)


def _union(lrel: Rel, rrel: Rel) -> Rel:
    if [t for _, t in lrel.cols] != [t for _, t in rrel.cols]:
        raise PlanError("a union of inputs whose column types differ")
    if lrel.stateful or rrel.stateful or lrel.closed or rrel.closed:
        raise PlanError("the grammar unions only stateless inputs")
    return replace(lrel, wm=frozenset(c for c in lrel.wm if c in rrel.wm) or lrel.wm, chain="union",
                   modes=lrel.modes & rrel.modes, kinds=lrel.kinds + rrel.kinds + ("union",),
                   pairs=lrel.pairs + rrel.pairs, sources=lrel.sources | rrel.sources)


def _unary(step: dict[str, Any], rel: Rel, spec: dict[str, Any]) -> Rel:
    op = step["op"]
    release = spec["release"]
    if op == "watermark":
        if rel.col_type(step["col"]) != "TIMESTAMP" or rel.stateful or rel.wm:
            raise PlanError("a watermark goes on a source's timestamp column")
        return replace(rel, wm=rel.wm | {step["col"]}, kinds=rel.kinds + ("watermark",))
    if op == "filter":
        if expr_type(step["pred"], rel) != "BOOLEAN":
            raise PlanError("a filter needs a boolean")
        return replace(rel, kinds=rel.kinds + ("filter-false" if step.get("folds_false") else "filter",))
    if op == "project":
        cols = tuple((n, expr_type(e, rel)) for n, e in step["cols"])
        if not cols or len({n for n, _ in cols}) != len(cols):
            raise PlanError("a projection needs distinct columns")
        kept = {n for n, e in step["cols"] if e[0] == "col" and e[1] == n}
        group = rel.group if rel.group and set(rel.group) <= kept else None
        lit = any(e[0] == "lit" for _, e in step["cols"])
        return replace(rel, cols=cols, wm=frozenset(c for c in rel.wm if c in kept), group=group,
                       kinds=rel.kinds + ("literal-key" if lit else "project",))
    if op == "agg":
        return _agg(step, rel, release)
    if op == "dedup":
        within = bool(step.get("within"))
        kind = "dedup-within-watermark" if within else "dedup"
        if within and (release_tuple(release) < (3, 5) or not rel.wm):
            raise PlanError("dropDuplicatesWithinWatermark needs Spark 3.5 and a watermark")
        for c in step["cols"]:
            rel.col_type(c)
        modes = _chain_rules(rel, kind, release, frozenset({"append", "update"}))
        return replace(rel, stateful=rel.stateful + (kind,), modes=modes, group=None, chain=kind,
                       kinds=rel.kinds + (kind,), pairs=_pair(rel, kind))
    if op == "join_static":
        if step["how"] not in ("inner", "left_outer", "left_semi"):
            raise PlanError("a stream-static join keeps the stream on its outer side")
        static = dict(step["static"])
        if rel.col_type(step["col"]) != static["columns"][0][1]:
            raise PlanError("stream-static join key types differ")
        if "s_tag" in rel.names and step["how"] != "left_semi":
            raise PlanError("a second stream-static join would repeat the column s_tag")
        cols = rel.cols + ((("s_tag", "STRING"),) if step["how"] != "left_semi" else ())
        return replace(rel, cols=cols, kinds=rel.kinds + ("join-static",),
                       pairs=_pair(rel, "join-static"), chain=rel.chain)
    if op == "pandas_state":
        if release_tuple(release) < (3, 4) or rel.stateful or rel.closed:
            raise PlanError("applyInPandasWithState needs Spark 3.4 and no other stateful operator")
        kt, vt = rel.col_type(step["key"]), rel.col_type(step["value"])
        if vt not in _NUMERIC or kt in ("WINDOW", "TIMESTAMP"):
            raise PlanError("applyInPandasWithState: a numeric value and a plain key")
        mode = step["mode"]
        return replace(rel, cols=((step["key"], kt), ("cnt", "BIGINT"), ("total", "DOUBLE")), wm=frozenset(),
                       stateful=("pandas-state",), modes=rel.modes & {mode}, closed=True,
                       group=(step["key"],) if mode == "update" else None, chain="pandas-state",
                       kinds=rel.kinds + ("pandas-state",), pairs=_pair(rel, "pandas-state"))
    raise PlanError(f"unknown step {op!r}")


def analyse(spec: dict[str, Any], complete: bool = True) -> list[Rel]:
    """Every step's :class:`Rel`, in order.

    :class:`PlanError` for a plan Spark would refuse (``complete=False``: a plan being drawn, whose
    steps need not all be read yet).

    Parameters
    ----------
    spec : dict
        The plan (``release``, ``sources``, ``steps``).
    complete : bool, optional
        The plan is whole (False: a plan being drawn).

    Returns
    -------
    list of Rel
        One per step.
    """
    rels: list[Rel] = []
    release = spec["release"]
    for i, step in enumerate(spec["steps"]):
        op = step["op"]

        def inp(key: str, i: int = i, step: dict[str, Any] = step) -> Rel:
            j = step[key]
            if not isinstance(j, int) or not 0 <= j < i:
                raise PlanError(f"step {i} reads step {j!r}")
            return rels[j]

        if op == "source":
            cols = tuple((c, t) for c, t in spec["sources"][step["source"]])
            rels.append(Rel(cols=cols, kinds=("source",), sources=frozenset({step["source"]})))
        elif op == "join":
            rels.append(_join(step, inp("left"), inp("right"), release))
        elif op == "union":
            rels.append(_union(inp("left"), inp("right")))
        else:
            rels.append(_unary(step, inp("in"), spec))
    if not rels:
        raise PlanError("no step")
    if not complete:
        return rels
    used = {step[k] for step in spec["steps"] for k in ("in", "left", "right") if k in step}
    if used != set(range(len(rels) - 1)):
        raise PlanError("every step but the last must be read exactly by a later one")
    final = rels[-1]
    if final.sources != set(spec["sources"]):
        raise PlanError("a source the plan does not read")
    modes = set(final.modes)
    if not final.has_agg or len(final.stateful) != 1 or final.stateful[0] in ("pandas-state",):
        modes.discard("complete")
    if not modes:
        raise PlanError("no output mode allows the plan")
    rels[-1] = replace(final, modes=frozenset(modes))
    return rels


def output_columns(rel: Rel) -> list[str]:
    """The module's output columns: windows flattened to ``<name>_start`` and ``<name>_end``."""
    out: list[str] = []
    for c, t in rel.cols:
        out += [f"{c}_start", f"{c}_end"] if t == "WINDOW" else [c]
    return out


def key_columns(rel: Rel, mode: str) -> list[str]:
    """``KEY``: the group keys, or every output column.

    The group keys (windows flattened) when the last stateful operator aggregates or keys its
    state and the mode updates rows; every output column otherwise.

    Parameters
    ----------
    rel : Rel
        The last step's relation.
    mode : str
        The output mode.

    Returns
    -------
    list of str
        The ``KEY`` columns.
    """
    if rel.group is not None:
        out: list[str] = []
        for c in rel.group:
            out += [f"{c}_start", f"{c}_end"] if rel.col_type(c) == "WINDOW" else [c]
        return out
    return output_columns(rel)
