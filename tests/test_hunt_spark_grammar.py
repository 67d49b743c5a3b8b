"""The Spark hunt's program grammar without Spark: determinism, the module contract, steering,
shrinking, coverage of the vocabulary, the analyser's rules and the data's corners."""

from __future__ import annotations

import collections
import datetime as dt
import json
import math
from pathlib import Path

import pytest

from rollcheck.infra.hunt.draw import draw
from rollcheck.spark_replay.hunt.data import BIGINT_MAX, INT_MIN, batches
from rollcheck.spark_replay.hunt.grammar import finish, program, vocabulary
from rollcheck.spark_replay.hunt.plan import PlanError, analyse, output_columns
from rollcheck.spark_replay.hunt.render import render
from rollcheck.spark_replay.hunt.shrink import shrink
from rollcheck.spark_replay.query.module import load_query

RELEASES = ("3.5.3", "4.0.0")

#: Text each operator kind puts in a module (DataFrame form, SQL form).
MARKERS = {
    "watermark": ("withWatermark(",), "filter": (".where(", " WHERE "), "filter-false": (".where(", " WHERE "),
    "project": (".select(", "SELECT "), "literal-key": ("F.lit(", " AS `"), "group-by": ("groupBy(", "GROUP BY"),
    "window-tumbling": ("F.window(", "window("), "window-sliding": ("F.window(", "window("),
    "window-session": ("session_window(",), "window-of-window": ("window_time(",),
    "agg-count": ("F.count(", "count(*)"), "agg-sum": ("F.sum(", "sum("), "agg-min": ("F.min(", "min("),
    "agg-max": ("F.max(", "max("), "agg-avg": ("F.avg(", "avg("), "agg-first": ("F.first(", "first("),
    "agg-last": ("F.last(", "last("), "agg-count-distinct": ("approx_count_distinct",),
    "dedup": (".dropDuplicates(",), "dedup-within-watermark": (".dropDuplicatesWithinWatermark(",),
    "join-inner": ('"inner")', " JOIN r"), "join-left-outer": ('"left_outer")', "LEFT OUTER JOIN"),
    "join-right-outer": ('"right_outer")', "RIGHT OUTER JOIN"), "join-full-outer": ('"full_outer")', "FULL OUTER JOIN"),
    "join-left-semi": ('"left_semi")', "LEFT SEMI JOIN"), "join-static": ("createDataFrame(",),
    "union": (".union(", "UNION ALL"), "pandas-state": ("applyInPandasWithState(",), "sql": (".sql(sql)",),
    "source": ("def query(",), "sink-foreachbatch": ("def sink(batch_df, batch_id, out_dir):",),
}


def _write(tmp: Path, p) -> Path:
    f = tmp / f"{p.id}_{abs(hash(p.text))}.py"
    f.write_text(p.text, encoding="utf-8")
    return f


def test_same_draw_same_text_and_spec_is_json():
    cov = {"union": 3, "window-session": 1}
    for rel in RELEASES:
        for i in range(6):
            a, b = program(11, i, cov, rel), program(11, i, dict(cov), rel)
            assert a.text == b.text and a.operators == b.operators and a.pairs == b.pairs
            assert json.loads(json.dumps(a.spec)) == a.spec
            assert render(a.spec) == a.text and a.id == f"P{i:04d}"
    assert program(11, 0, {}, "3.5.3").text != program(12, 0, {}, "3.5.3").text


@pytest.mark.parametrize("release", RELEASES)
def test_modules_load_and_show_their_operators(tmp_path, release):
    for i in range(30):
        p = program(5, i, {}, release)
        uq = load_query(str(_write(tmp_path, p)))
        assert uq.output_mode == p.spec["output_mode"] and uq.key == p.spec["key"]
        assert uq.has_sink == ("sink-foreachbatch" in p.operators)
        assert set(uq.key) <= set(output_columns(analyse(p.spec)[-1]))
        data = uq.batches(0)
        assert len(data) == len(p.spec["batches"]) and sum(len(r) for b in data for r in b.values()) > 0
        assert set(p.operators) <= set(vocabulary(release))
        for op in p.operators:
            if op.startswith("output-"):
                assert f'OUTPUT_MODE = "{op[7:]}"' in p.text
            else:
                assert any(m in p.text for m in MARKERS[op]), (p.id, op)
        assert f"seed 5, program {i}" in p.text.split('"""')[1]


def test_steering_favours_the_least_covered():
    everything = {k: 100 for k in vocabulary("3.5.3")}
    starved = dict(everything, **{"window-session": 0})
    def share(cov: dict[str, int]) -> int:
        return sum("window-session" in program(3, i, cov, "3.5.3").operators for i in range(60))
    assert share(starved) > share(everything) + 5


@pytest.mark.parametrize("release", RELEASES)
def test_every_vocabulary_kind_covered_in_200(release):
    cov: collections.Counter[str] = collections.Counter()
    multi = 0
    for i in range(200):
        p = program(2, i, cov, release)
        cov.update(set(p.operators) | set(p.pairs))
        multi += sum(1 for k in p.operators if k.startswith(("window-", "join-", "dedup", "pandas", "group-by"))
                     and k != "join-static") >= 2
    missing = [k for k in vocabulary(release) if cov[k] == 0]
    assert not missing
    assert multi >= 40 and len([k for k in cov if ">" in k]) >= 20


def test_shrink_gives_smaller_programs_that_load(tmp_path):
    def size(p) -> tuple[int, int, int, int]:
        s = p.spec
        return (len(s["sources"]), len(s["steps"]),
                sum(len(c) for c in s["sources"].values()) + sum(len(t.get("cols", [])) for t in s["steps"]),
                sum(len(r) for b in s["batches"] for r in b.values()) + len(s["batches"]))
    for i in (1, 4, 9):
        p = program(7, i, {}, "4.0.0")
        cands = list(shrink(p, "4.0.0"))
        assert cands, p.id
        for c in cands[:12]:
            assert c.id == p.id and c.spec.get("shrunk")
            assert sum(size(c)) < sum(size(p)) or size(c) < size(p)
            load_query(str(_write(tmp_path, c))).batches(0)
        steps = [len(c.spec["steps"]) for c in cands]
        assert steps[0] <= steps[-1]  # plan reductions come before data reductions


def test_shrink_drops_a_source_of_a_join_first():
    p = next(program(1, i, {}, "3.5.3") for i in range(100)
             if any(s["op"] == "join" for s in program(1, i, {}, "3.5.3").spec["steps"]))
    first = next(shrink(p, "3.5.3"))
    assert len(first.spec["sources"]) == 1 and "SCHEMA = " in first.text


def _spec(steps, release="3.5.3", mode="append"):
    src = {"a": [["a_ts", "TIMESTAMP"], ["a_k", "STRING"], ["a_v", "INT"]],
           "b": [["b_ts", "TIMESTAMP"], ["b_k", "STRING"], ["b_v", "INT"]]}
    used = {s["source"] for s in steps if s["op"] == "source"}
    return {"release": release, "sources": {n: c for n, c in src.items() if n in used}, "steps": steps,
            "output_mode": mode, "batches": [{"a": [["2024-01-01T00:00:00", "x", 1]]}]}


WM_A = [{"op": "source", "source": "a"}, {"op": "watermark", "in": 0, "col": "a_ts", "delay": 5}]
TUMBLE = {"kind": "tumbling", "col": "a_ts", "size": 10}


def test_the_analysers_rules():
    outer = [{"op": "source", "source": "a"}, {"op": "source", "source": "b"},
             {"op": "join", "left": 0, "right": 1, "how": "left_outer", "eq": [["a_k", "b_k"]]}]
    with pytest.raises(PlanError, match="watermarks on both sides"):
        analyse(_spec(outer))
    two_aggs = WM_A + [{"op": "agg", "in": 1, "window": TUMBLE, "keys": ["a_k"], "aggs": [["count", None]]},
                       {"op": "agg", "in": 2, "window": None, "keys": ["window"], "aggs": [["sum", "cnt"]]}]
    assert analyse(_spec(two_aggs))[-1].modes == {"append"}
    with pytest.raises(PlanError, match="not allowed"):
        finish(_spec(two_aggs, mode="update"))
    with pytest.raises(PlanError, match="needs append mode"):  # a plain grouping cannot follow in append
        analyse(_spec(two_aggs[:3] + [{"op": "agg", "in": 2, "window": None, "keys": ["a_k"],
                                       "aggs": [["count", None]]}]))
    b_wm = [{"op": "source", "source": "b"}, {"op": "watermark", "in": 2, "col": "b_ts", "delay": 5}]
    joined = WM_A + b_wm + [{"op": "join", "left": 1, "right": 3, "how": "inner", "eq": [["a_k", "b_k"]]},
                            {"op": "dedup", "in": 4, "cols": ["a_k"]}]
    with pytest.raises(PlanError, match="more than one event-time column"):
        analyse(_spec(joined))
    static = {"op": "join_static", "in": 1, "col": "a_k", "how": "inner",
              "static": {"columns": [["s_k", "STRING"], ["s_tag", "STRING"]], "rows": [["a", "t0"]]}}
    with pytest.raises(PlanError, match="repeat the column s_tag"):
        analyse(_spec(WM_A + [static, dict(static, **{"in": 2})]))
    within = WM_A + [{"op": "dedup", "in": 1, "cols": ["a_k"], "within": True}]
    assert analyse(_spec(within))[-1].stateful == ("dedup-within-watermark",)
    with pytest.raises(PlanError, match="3.5"):
        analyse(_spec(within, release="3.4.1"))
    nowm = [{"op": "source", "source": "a"},
            {"op": "agg", "in": 0, "window": TUMBLE, "keys": [], "aggs": [["count", None]]}]
    assert analyse(_spec(nowm))[-1].modes == {"update", "complete"}
    session = WM_A + [{"op": "agg", "in": 1, "window": {"kind": "session", "col": "a_ts", "gap": 3}, "keys": [],
                       "aggs": [["count", None]]}]
    with pytest.raises(PlanError, match="global session window"):
        analyse(_spec(session))
    session[2]["keys"] = ["a_k"]
    by_session = session + [{"op": "agg", "in": 2, "window": None, "keys": ["session_window"],
                             "aggs": [["count", None]]}]
    with pytest.raises(PlanError, match="global session window"):
        analyse(_spec(by_session))
    assert finish(_spec(WM_A + [{"op": "agg", "in": 1, "window": TUMBLE, "keys": ["a_k"],
                                 "aggs": [["max", "a_v"]]}]))["key"] == ["window_start", "window_end", "a_k"]


def test_data_reaches_the_corners():
    src = {"a": [["a_ts", "TIMESTAMP"], ["a_k", "INT"], ["a_v", "DOUBLE"]],
           "b": [["b_ts", "TIMESTAMP"], ["b_k", "BIGINT"], ["b_v", "INT"]]}
    seen = collections.Counter()
    for i in range(60):
        data = draw(batches(src, 6, idle="b", late_ms=2000), 4, i)
        seen["idle"] += sum(1 for b in data if "b" in b) <= 1
        seen["empty"] += any(not b for b in data)
        newest = dt.datetime(2000, 1, 1)
        for b in data:
            rows = b.get("a", [])
            stamps = [dt.datetime.fromisoformat(r[0]) for r in rows]
            seen["late"] += any(t < newest - dt.timedelta(seconds=2) for t in stamps)
            seen["out-of-order"] += stamps != sorted(stamps)
            newest = max([newest, *stamps])
            seen["null-key"] += any(r[1] is None for r in rows)
            seen["int-min"] += any(r[1] == INT_MIN for r in rows)
            seen["nan"] += any(isinstance(r[2], str) and r[2] == "NaN" for r in rows)
            seen["dup"] += len({json.dumps(r) for r in rows}) < len(rows)
            seen["close"] += any(0 < abs((x - y).total_seconds()) < 0.01 for x in stamps for y in stamps)
        seen["bigint-max"] += any(r[1] == BIGINT_MAX for b in data for r in b.get("b", []))
    assert all(seen[k] > 0 for k in ("idle", "empty", "late", "out-of-order", "null-key", "int-min", "nan",
                                     "dup", "close", "bigint-max")), seen
    assert not any(isinstance(v, float) and (math.isnan(v) or math.isinf(v))
                   for d in [draw(batches(src, 6), 4, 0)] for b in d for r in b.values() for row in r for v in row)
