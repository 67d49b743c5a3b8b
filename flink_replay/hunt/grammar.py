"""The Flink hunt's grammar: job modules drawn from Hypothesis strategies, as JSON-able specs.

A *spec* says what a generated PyFlink job does (:func:`rollcheck.flink_replay.hunt.render.render`
writes it as an ordinary job module): its input streams and their data, and either a DataStream
pipeline (``form = "ds"``) or a Table/SQL query (``form = "sql"``). Every program is made so that
the engine owes the same final table with or without a failure: a difference is then the engine's
(docs/internals/flink-hunt.md#grammar says what the forms hold and how that is ensured).

:func:`program` draws a few candidates for ``(seed, index)`` and keeps the one whose operators and
operator pairs the hunt has covered least (``coverage``).

Examples
--------
>>> p = program(3, 0, {})
>>> p.id, p.operators[0] in ("source", "sql-source", "sql-changelog-source")
('P0000', True)
>>> program(3, 0, {}) == p
True
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hypothesis import strategies as st

from rollcheck.flink_replay.hunt.ops import operators, pairs
from rollcheck.infra.hunt.adapter import Program
from rollcheck.infra.hunt.draw import draw

__all__ = ["program", "vocabulary", "operators", "pairs", "spec_strategy", "EVENT_TIME_OPS", "CANDIDATES"]

#: Candidates drawn per program; the least covered one is kept.
CANDIDATES = 6

_DS_COMBINE = ("union", "connect-coprocess", "connect-interval-join")
_DS_TERMINAL = ("keyed-reduce", "keyed-sum", "process-value-state", "process-list-state", "process-map-state")
_WINDOWS = ("window-tumbling", "window-sliding", "window-session")
_WIN_FN = ("win-reduce", "win-aggregate", "win-process")
_AGGS = ("agg-count", "agg-sum", "agg-min", "agg-max", "agg-avg", "agg-count-distinct", "agg-filtered")
_SQL_COMBINE = ("sql-union-all", "sql-join-inner", "sql-join-left", "sql-join-interval")
_SQL_MAIN = ("sql-select", "sql-group-by", "sql-global-agg", "tvf-tumble", "tvf-hop", "tvf-cumulate",
             "over-sum-rows", "over-sum-range", "over-row-number", "over-rank", "top-n", "dedup-first",
             "dedup-last")
_SQL_POST = ("post-group-by", "post-top-n", "post-tvf", "post-join")
_SETTINGS = ("sql-minibatch", "sql-two-phase", "sql-distinct-split")

#: Operators whose result depends on the watermark: records must never be late for them.
EVENT_TIME_OPS = frozenset({*_WINDOWS, "process-timers", "connect-interval-join", "tvf-tumble", "tvf-hop",
                            "tvf-cumulate", "over-sum-rows", "over-sum-range", "over-row-number", "over-rank",
                            "dedup-first", "dedup-last", "sql-join-interval", "post-tvf"})


def vocabulary() -> list[str]:
    """Every operator kind the grammar emits (the hunt's coverage keys).

    >>> "tvf-cumulate" in vocabulary() and "process-map-state" in vocabulary()
    True
    """
    return ["source", "watermark", "filter", "map-literal-key", *_DS_COMBINE, *_WINDOWS, *_WIN_FN,
            "process-timers", *_DS_TERMINAL, "sql-source", "sql-changelog-source", "sql-where", *_SQL_COMBINE,
            *_SQL_MAIN, *_AGGS, *_SQL_POST, *_SETTINGS, "final-table"]


# -- data -----------------------------------------------------------------------------------------

def _source(name: str, *, few: bool, changes: bool, late: bool) -> st.SearchStrategy[dict[str, Any]]:
    rows = st.integers(4, 40) if few else st.integers(20, 160)
    return st.fixed_dictionaries({
        "name": st.just(name),
        "rows": rows,
        "keys": st.sampled_from([1, 2, 3, 5, 8, 12]),
        "key_style": st.sampled_from(["short", "short", "long", "null", "unicode", "empty"]),
        "values": st.sampled_from(["small", "small", "limits", "nulls", "negative"]),
        "dups": st.sampled_from([0.0, 0.0, 0.2, 0.5]),
        "disorder": st.integers(0, 4),
        "changes": st.sampled_from([0.0, 0.2, 0.4]) if changes else st.just(0.0),
        "late": st.sampled_from([0.0, 0.1]) if late else st.just(0.0),
    })


def _sources(n: int, *, few: bool, changes: bool, late: bool) -> st.SearchStrategy[list[dict[str, Any]]]:
    names = [f"s{i}" for i in range(n)]

    @st.composite
    def build(dr: st.DrawFn) -> list[dict[str, Any]]:
        out = [dr(_source(x, few=few, changes=changes, late=late)) for x in names]
        if n > 1 and dr(st.integers(0, 4)) == 0:  # an idle stream: no records at all (never every one)
            out[dr(st.integers(0, n - 1))]["rows"] = 0
        return out

    return build()


# -- DataStream programs ----------------------------------------------------------------------------

_WINDOW = st.fixed_dictionaries({
    "kind": st.just("window"),
    "assigner": st.sampled_from(["tumbling", "sliding", "session"]),
    "size_s": st.sampled_from([5, 10, 30]),
    "slide_s": st.sampled_from([1, 5]),
    "gap_s": st.sampled_from([3, 8]),
    "fn": st.sampled_from(["reduce", "aggregate", "process"]),
})
_TIMERS = st.fixed_dictionaries({"kind": st.just("timers"), "size_s": st.sampled_from([5, 10, 20])})


@st.composite
def _ds_spec(dr: st.DrawFn) -> dict[str, Any]:
    n = dr(st.sampled_from([1, 1, 2, 2, 3]))
    combine = "none" if n == 1 else dr(st.sampled_from(_DS_COMBINE if n == 2 else ("union",)))
    pairwise = combine in ("connect-coprocess", "connect-interval-join")
    stages = [] if pairwise else dr(st.lists(st.one_of(_WINDOW, _TIMERS), max_size=2))
    terminal = None if pairwise else dr(st.sampled_from([None, *_DS_TERMINAL]))
    timed = bool(stages) or combine == "connect-interval-join"
    return {
        "form": "ds",
        "data_seed": dr(st.integers(0, 2**20)),
        "sources": dr(_sources(n, few=combine == "connect-interval-join", changes=False, late=not timed)),
        "combine": combine,
        "join_bound_s": dr(st.sampled_from([2, 5, 20])),
        "prefilter": dr(st.sampled_from([None, None, 0, 50])),
        "rekey": dr(st.sampled_from([None, None, "literal", "prefix"])),
        "stages": stages,
        "terminal": terminal,
    }


# -- Table/SQL programs -----------------------------------------------------------------------------

_AGG_LIST = st.lists(st.sampled_from(_AGGS), min_size=1, max_size=4, unique=True)
_MAIN_FOR = {
    # what may follow each input shape without the planner refusing it for a reason known up front
    "time": _SQL_MAIN,
    "updating": ("sql-select", "sql-group-by", "sql-global-agg", "top-n"),
}

#: Operators whose result depends on the order among rows of equal event time.
_TIE_SENSITIVE = ("dedup-first", "dedup-last", "over-row-number", "over-sum-rows")


@st.composite
def _sql_spec(dr: st.DrawFn) -> dict[str, Any]:
    n = dr(st.sampled_from([1, 1, 2, 2, 3]))
    combine = "none" if n == 1 else dr(st.sampled_from(_SQL_COMBINE if n == 2 else ("sql-union-all",)))
    changelog = combine != "sql-join-interval" and dr(st.integers(0, 4)) == 0
    updating = changelog or combine in ("sql-join-inner", "sql-join-left")
    mains = _MAIN_FOR["updating" if updating else "time"]
    if combine == "sql-join-interval":  # its rows share the left side's time: no order among them
        mains = tuple(m for m in mains if m not in _TIE_SENSITIVE)
    main = dr(st.sampled_from(mains))
    post_choices: list[Any] = [None, None]
    if main in ("sql-group-by", "sql-global-agg", "top-n", "dedup-first", "dedup-last", "sql-select"):
        post_choices += ["post-group-by"]
    if main in ("sql-group-by", "dedup-last", "dedup-first"):
        post_choices += ["post-top-n"]
    if main in ("tvf-tumble", "tvf-hop", "tvf-cumulate"):
        post_choices += ["post-tvf"]
    if main == "sql-group-by" and n == 1:
        post_choices += ["post-join"]
    post = dr(st.sampled_from(post_choices))
    few = combine in ("sql-join-inner", "sql-join-left", "sql-join-interval") or post == "post-join"
    ops = {combine, main, post or ""}
    return {
        "form": "sql",
        "data_seed": dr(st.integers(0, 2**20)),
        "sources": dr(_sources(n + (1 if post == "post-join" else 0), few=few, changes=changelog,
                               late=not (ops & EVENT_TIME_OPS))),
        "changelog": changelog,
        "combine": combine,
        "join_bound_s": dr(st.sampled_from([2, 5, 20])),
        "where": dr(st.sampled_from([None, None, "v-ge", "k-not-null", "v-not-null"])),
        "where_c": dr(st.sampled_from([0, 10, 60])),
        "main": main,
        "aggs": dr(_AGG_LIST),
        "filter_c": dr(st.sampled_from([0, 20, 50])),
        "size_s": dr(st.sampled_from([5, 10, 30])),
        "slide_s": dr(st.sampled_from([1, 5])),
        "rows_preceding": dr(st.sampled_from([0, 2, 5])),
        "top_n": dr(st.sampled_from([1, 2, 3])),
        "post": post,
        "post_size_s": dr(st.sampled_from([60, 120])),
        "settings": {"minibatch": dr(st.booleans()), "two_phase": dr(st.booleans()),
                     "distinct_split": dr(st.booleans())},
    }


def spec_strategy(release: str | None = None) -> st.SearchStrategy[dict[str, Any]]:
    """Specs of both forms (DataStream and Table/SQL) for ``release`` (None: the pinned one).

    Every operator of the grammar exists in every release the recorder supports (1.19 to 2.x: the
    window TVFs since 1.13, window Top-N and deduplication since 1.14, ``Time`` kept in 2.x), so
    the release is recorded in the spec for the reader and for the renderer, not used to drop
    operators.
    """
    @st.composite
    def build(dr: st.DrawFn) -> dict[str, Any]:
        # the form is drawn inside the program, not as a top-level one_of: a seeded draw keeps
        # Hypothesis' second example, whose top-level branch is not spread evenly
        form = dr(st.sampled_from(["ds", "sql", "ds", "sql"]))
        return {**dr(_ds_spec() if form == "ds" else _sql_spec()), "release": release}

    return build()


def _novelty(ops: tuple[str, ...], prs: tuple[str, ...], coverage: Mapping[str, int]) -> float:
    """The mean of 1 / (1 + count) over the operators, plus half of it over the pairs.

    A program is worth its least covered parts, whatever its length.
    """
    def mean(xs: set[str]) -> float:
        return sum(1.0 / (1 + int(coverage.get(x, 0))) for x in xs) / len(xs) if xs else 0.0

    return mean(set(ops)) + 0.5 * mean(set(prs))


def make_program(pid: str, spec: dict[str, Any]) -> Program:
    """The :class:`Program` of ``spec`` (its module text rendered).

    Parameters
    ----------
    pid : str
        The program's id.
    spec : dict
        The drawn program's spec.
    """
    from rollcheck.flink_replay.hunt.render import render

    ops = operators(spec)
    return Program(id=pid, text=render(spec, title=pid), operators=ops, spec=spec, pairs=pairs(ops))


def program(seed: int, index: int, coverage: Mapping[str, int], release: str | None = None) -> Program:
    """Program number ``index`` of the hunt with ``seed``: the least covered of :data:`CANDIDATES` specs.

    The one whose operators and pairs ``coverage`` counts least (the first on a tie). Deterministic in
    ``(seed, index, coverage, release)``.

    Parameters
    ----------
    seed, index : int
        The hunt's seed and the program's number.
    coverage : Mapping[str, int]
        Operator kind / pair -> how many programs before this one used it.
    release : str, optional
        The apache-flink release hunted (None: the pinned one).

    Returns
    -------
    Program
    """
    strategy = spec_strategy(release)
    best: tuple[float, dict[str, Any]] | None = None
    for j in range(CANDIDATES):
        spec = draw(strategy, seed, index, salt=f"flink-program/{j}")
        ops = operators(spec)
        score = _novelty(ops, pairs(ops), coverage)
        if best is None or score > best[0]:
            best = (score, spec)
    assert best is not None
    return make_program(f"P{index:04d}", best[1])
