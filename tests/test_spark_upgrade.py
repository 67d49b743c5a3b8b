"""The ``upgrade`` failure: ``query_next`` restarted from ``query``'s checkpoint.

- Spark's guide's rule read from the analysed plans: allowed changes (filters, projections, a
  stateless query's projection) pass, forbidden ones (grouping keys, aggregates, deduplication
  columns, join type and condition, an added stateful operator, the number of sources, the state
  schema of applyInPandasWithState) are refused with one line naming query_next and the change;
- the command line refuses a module without query_next, and an upgrade that leaves query_next
  no batch, before Spark starts;
- a real recording of examples/queries/page_views_upgrade.py is conformant, its trace shows which
  query ran which batch and the restart restoring the state stores;
- mutants: a restart that runs query again, and one that drops the state, are caught (a violated
  check, not a crash).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from rollcheck.pyimpl.errors import InvalidInputError
from rollcheck.spark_replay.oracles.upgrade_eval import judge_upgrade
from rollcheck.spark_replay.query.upgrade import (
    PlanShape,
    StatefulOp,
    check_upgrade,
    forbidden_change,
)

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = str(ROOT / "examples" / "queries" / "page_views_upgrade.py")
RC = [sys.executable, "-m", "rollcheck.cli.main"]


# ----------------------------------------------------------------------------- without Spark
def test_forbidden_change_names_the_first_forbidden_difference():
    agg = StatefulOp("aggregation", ("page", "user"), ("count(1)",))
    assert forbidden_change(PlanShape(["input"], [agg]), PlanShape(["input"], [agg])) is None
    other = StatefulOp("aggregation", ("page", "user"), ("sum(amount)",))
    assert forbidden_change(PlanShape(["input"], [agg]), PlanShape(["input"], [other])) == \
        "changes the aggregates of the aggregation: [count(1)] -> [sum(amount)]"
    join = StatefulOp("stream-stream join", ("(ad = ad)",), extra="Inner")
    outer = StatefulOp("stream-stream join", ("(ad = ad)",), extra="LeftOuter")
    assert "join type" in str(forbidden_change(PlanShape(["a", "b"], [join]), PlanShape(["a", "b"], [outer])))
    assert "removes a stateful operation" in str(forbidden_change(PlanShape(["a"], [agg]), PlanShape(["a"], [])))


def _module(tmp_path: Path, body: str) -> str:
    f = tmp_path / "q.py"
    f.write_text("SCHEMA = 'ts TIMESTAMP, page STRING, user STRING'\nOUTPUT_MODE = 'update'\nKEY = ['page']\n"
                 "def batches(seed):\n    import datetime as dt\n"
                 "    return [[(dt.datetime(2024, 1, 1, 0, 0, b), 'p', 'u')] for b in range(4)]\n" + body)
    return str(f)


def test_cli_refuses_an_upgrade_without_query_next_or_without_a_batch_for_it(tmp_path):
    spec = _module(tmp_path, "def query(df):\n    return df.groupBy('page').count()\n")
    r = subprocess.run([*RC, "spark", "record", "query", "--module", spec, "--out", str(tmp_path / "t.jsonl"),
                        "--failure", "upgrade", "--fail-at-batch", "1"], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 2 and "query_next" in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert "query_next" in r.stderr.strip().splitlines()[-1] and not (tmp_path / "t.jsonl").exists()
    spec = _module(tmp_path, "def query(df):\n    return df\ndef query_next(df):\n    return df\n")
    r = subprocess.run([*RC, "spark", "record", "query", "--module", spec, "--out", str(tmp_path / "t.jsonl"),
                        "--failure", "upgrade", "--fail-at-batch", "3"], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 2 and "--fail-at-batch" in r.stderr and "query_next" in r.stderr, r.stderr
    bad = _module(tmp_path, "def query(df):\n    return df\nquery_next = 3\n")
    r = subprocess.run([*RC, "spark", "record", "query", "--module", bad, "--out", str(tmp_path / "t.jsonl")],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 2 and "query_next" in r.stderr, r.stderr


def _trace(k: int, before: list[dict], after: list[dict], upto: list[dict], output: list[dict],
           **info) -> tuple[dict, list[dict]]:
    def ev(rows):
        return {"applicable": True, "rule": "r", "variants": [{"rows": rows, "modes": ["update", "append"]}]}

    header = {"config": {"failure": "upgrade", "fail_at_batch": k, "key": ["page"], "output_mode": "update"}}
    events = [{"kind": "failure", "mode": "upgrade", "batch": k, "seq": 1, **info},
              {"kind": "spark.output_final", "rows": output, "seq": 2},
              {"kind": "spark.batch_evaluation", "run": "final", "applicable": True, "seq": 3,
               "upgrade": {"last": k, "before": ev(before), "after": ev(after), "after_upto": ev(upto),
                           "after_only": None}}]
    return header, events


def test_judge_of_a_state_carried_upgrade():
    """Update mode, the change after the aggregation: a key updated after K shows query_next's
    row over the carried state; one not updated after K may keep query's row."""
    info = {"stateless": False, "state_prefix_same": True}
    before = [{"page": "a", "n": 2}, {"page": "b", "n": 1}]
    after = [{"page": "a", "n": 3, "tier": "x"}, {"page": "b", "n": 1, "tier": "y"}]
    upto = [{"page": "a", "n": 2, "tier": "x"}, {"page": "b", "n": 1, "tier": "y"}]
    good = [{"page": "a", "n": 2}, {"page": "b", "n": 1}, {"page": "a", "n": 3, "tier": "x"}]
    c = judge_upgrade(*_trace(1, before, after, upto, good, **info))
    assert c is not None and c.ok is True, c
    again = [{"page": "a", "n": 2}, {"page": "b", "n": 1}, {"page": "a", "n": 3}]  # the restart ran query again
    c = judge_upgrade(*_trace(1, before, after, upto, again, **info))
    assert c is not None and c.ok is False and "key" in c.detail, c
    dropped = [{"page": "a", "n": 2}, {"page": "b", "n": 1}, {"page": "a", "n": 1, "tier": "x"}]  # state lost
    c = judge_upgrade(*_trace(1, before, after, upto, dropped, **info))
    assert c is not None and c.ok is False, c
    c = judge_upgrade(*_trace(1, before, after, upto, good, stateless=False, state_prefix_same=False))
    assert c is not None and c.status.value == "unchecked", c


# ----------------------------------------------------------------------------- with Spark
@pytest.fixture(scope="module")
def spark():
    from rollcheck.spark_replay.query.record import session_conf
    from rollcheck.spark_replay.session import spark_session

    with spark_session(conf=session_conf()) as s:
        yield s


def _plans(spark, tmp_path: Path, query, query_next, schema: str = "ts TIMESTAMP, page STRING, user STRING"):
    folder = tmp_path / "in"
    folder.mkdir(exist_ok=True)
    df = spark.readStream.schema(schema).json(str(folder))
    mod = SimpleNamespace(query=query, query_next=query_next)
    uq = SimpleNamespace(spec="q.py", key=["page"],
                         run_query=lambda dfs, which="query": getattr(mod, which)(dfs["input"]))
    return check_upgrade(uq, {"input": df}, {str(folder): "input"})


def _cases():
    from pyspark.sql import functions as F

    def agg(df, keys=("page",), fn=None):
        return df.groupBy(*keys).agg((F.count("*") if fn is None else fn).alias("n"))

    allowed = {
        "projection after the aggregation (a column added, one renamed)":
            (lambda d: agg(d), lambda d: agg(d).select("page", F.col("n").alias("views"), (F.col("n") * 2).alias("x"))),
        "filter after the aggregation": (lambda d: agg(d), lambda d: agg(d).where("n > 1")),
        "filter before the aggregation": (lambda d: agg(d), lambda d: agg(d.where("user != 'bot'"))),
        "stateless projection": (lambda d: d.select("page"), lambda d: d.select("page", "user").where("user > 'a'")),
    }
    forbidden = {
        "grouping keys": (lambda d: agg(d, ("page", "user")), lambda d: agg(d), "[page, user] -> [page]"),
        "aggregates": (lambda d: agg(d), lambda d: agg(d, fn=F.max("ts")), "aggregates"),
        "deduplication columns": (lambda d: d.dropDuplicates(["user"]), lambda d: d.dropDuplicates(["user", "page"]),
                                  "deduplication"),
        "a stateful operation added": (lambda d: d.select("page", "user"), lambda d: d.dropDuplicates(["page"]),
                                       "adds a stateful operation"),
        "the number of sources": (lambda d: agg(d), lambda d: agg(d.union(d)), "input sources"),
        "join type": (lambda d: d.alias("a").join(d.alias("b"), F.expr("a.user = b.user"), "inner"),
                      lambda d: d.alias("a").join(d.alias("b"), F.expr("a.user = b.user"), "left_outer"),
                      "join type"),
        "join condition": (lambda d: d.alias("a").join(d.alias("b"), F.expr("a.user = b.user")),
                           lambda d: d.alias("a").join(d.alias("b"), F.expr("a.page = b.page")), "join condition"),
    }
    return allowed, forbidden


@pytest.mark.spark
def test_guide_rule_from_the_analysed_plans(spark, tmp_path):
    allowed, forbidden = _cases()
    seen = {}
    for what, (q, qn) in allowed.items():
        seen[what] = _plans(spark, tmp_path, q, qn)
    assert seen["projection after the aggregation (a column added, one renamed)"]["state_prefix_same"] is True
    assert seen["filter after the aggregation"]["state_prefix_same"] is True
    assert seen["filter before the aggregation"]["state_prefix_same"] is False
    assert seen["stateless projection"]["stateless"] is True
    for what, (q, qn, needle) in forbidden.items():
        with pytest.raises(InvalidInputError) as e:
            _plans(spark, tmp_path, q, qn)
        line = str(e.value)
        assert "query_next" in line and needle in line and "\n" not in line, (what, line)


@pytest.mark.spark
def test_state_schema_of_apply_in_pandas_with_state(spark, tmp_path):
    from pyspark.sql.streaming.state import GroupStateTimeout

    def run(state_schema):
        def fn(key, pdfs, state):
            yield from ()

        return lambda d: d.groupBy("page").applyInPandasWithState(
            fn, "page STRING, n LONG", state_schema, "update", GroupStateTimeout.NoTimeout)

    assert _plans(spark, tmp_path, run("n LONG"), run("n LONG"))["stateless"] is False
    with pytest.raises(InvalidInputError, match="state schema"):
        _plans(spark, tmp_path, run("n LONG"), run("n LONG, last STRING"))


@pytest.fixture(scope="module")
def recorded(spark, tmp_path_factory):
    """The example recorded in one session: as shipped, and under the two mutants."""
    import rollcheck.spark_replay.query.run as qr
    from rollcheck.spark_replay.query.record import QueryConfig, record_query
    from rollcheck.spark_replay.replay.conformance import replay_file

    d = tmp_path_factory.mktemp("upgrade")
    out = {}
    cfg = QueryConfig(EXAMPLE, failure="upgrade", fail_at_batch=2)
    out["example"] = (record_query(cfg, d / "ok.jsonl", spark=spark), replay_file(d / "ok.jsonl"))
    mp = pytest.MonkeyPatch()
    try:  # mutant 1: the restart ignores the change and runs query again
        mp.setattr(qr, "restart_query", lambda markers: "query")
        out["query-again"] = (record_query(cfg, d / "again.jsonl", spark=spark), replay_file(d / "again.jsonl"))
        mp.undo()
        real = qr.record_upgrade

        def drop_state(markers, emit, last, committed, info):  # mutant 2: the state is lost at the restart
            import shutil

            real(markers, emit, last, committed, info)
            state = markers.parent / "checkpoint" / "state"
            shutil.rmtree(state)
            state.mkdir()

        mp.setattr(qr, "record_upgrade", drop_state)
        out["state-dropped"] = (record_query(cfg, d / "dropped.jsonl", spark=spark), replay_file(d / "dropped.jsonl"))
    finally:
        mp.undo()
    return out


@pytest.mark.spark
def test_example_upgrade_is_conformant_and_its_trace_shows_each_query(recorded):
    from rollcheck.spark_replay.trace import read_trace

    res, r = recorded["example"]
    bad = [c.to_json() for c in r.checks if c.ok is False or c.status.value == "unchecked"]
    assert res["status"] == "done" and r.conformant is True, bad
    checks = {c.name: c for c in r.checks}
    assert checks["batch-equivalent"].ok is True and checks["recovery-succeeded"].ok is True
    assert checks["state-failure-free"].ok is True and checks["failure-observed"].ok is True
    assert checks["output-exactly-once"].status.value == "not-applicable"
    t = read_trace(res["trace"])
    ran = {e["batch"]: e["query"] for e in t.of_kind("spark.batch_query")}
    assert ran and all(q == ("query" if b <= 2 else "query_next") for b, q in ran.items()), ran
    assert {0, 1, 2, 3, 4, 5} <= set(ran)
    restart = t.of_kind("spark.restart")[0]
    assert restart["resume_batch"] == 3 and restart["restored_versions"], restart
    assert [e["batch"] for e in t.of_kind("spark.upgrade")] == [2]


@pytest.mark.spark
@pytest.mark.parametrize("mutant", ["query-again", "state-dropped"])
def test_mutants_are_caught(recorded, mutant):
    res, r = recorded[mutant]
    assert r.conformant is False, [c.to_json() for c in r.checks]
    assert any(c.ok is False and c.name in ("batch-equivalent", "state-failure-free", "recovery-succeeded")
               for c in r.checks), [c.to_json() for c in r.checks]


def test_matrix_of_one_module_without_query_next_refuses_the_upgrade_column(tmp_path):
    spec = _module(tmp_path, "def query(df):\n    return df.groupBy('page').count()\n")
    r = subprocess.run([*RC, "spark", "matrix", "--module", spec, "--failures", "upgrade", "--providers", "hdfs",
                        "--out", str(tmp_path / "mx"), "--json"], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 2 and "query_next" in r.stderr.strip().splitlines()[-1], r.stderr
    assert "Traceback" not in r.stderr
