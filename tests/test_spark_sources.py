"""Queries that read several input streams (``SOURCES``): the module contract, the feeding of
each source batch by batch (an idle source reads nothing in its micro-batch), the
``input-batches`` check, and a real two-stream join recorded under a failure."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from rollcheck.pyimpl.errors import InvalidInputError
from rollcheck.spark_replay.query.checks import input_batches
from rollcheck.spark_replay.query.files import feed_inputs, prepare_workdir
from rollcheck.spark_replay.query.record import QueryConfig, load_query, record_query

ROOT = Path(__file__).resolve().parent.parent
RC = [sys.executable, "-m", "rollcheck.cli.main"]
EXAMPLE = ROOT / "examples" / "queries" / "impressions_clicks.py"

GOOD = '''
SOURCES = {"imps": "ts TIMESTAMP, ad INT", "clicks": "ts TIMESTAMP, ad INT, user STRING"}
OUTPUT_MODE = "update"
KEY = ["ad"]
def batches(seed):
    return [{"imps": [(None, 1)], "clicks": [(None, 1, "u")]}, {"clicks": [(None, 2, "v")]}, {}]
def query(imps, clicks):
    return imps.union(clicks.select("ts", "ad")).groupBy("ad").count()
'''


def _module(tmp_path: Path, text: str) -> str:
    p = tmp_path / "q.py"
    p.write_text(text, encoding="utf-8")
    return str(p)


@pytest.mark.parametrize("edit, where, words", [
    (lambda s: 'SCHEMA = "x INT"\n' + s, "SOURCES", "not both"),
    (lambda s: s.replace("def query(imps, clicks)", "def query(imps, click)"), "query", "clicks"),
    (lambda s: s.replace("def query(imps, clicks)", "def query(df)"), "query", "source"),
    (lambda s: s.replace('{"clicks": [(None, 2, "v")]}', '{"views": [(None, 2)]}'), "batches(seed)[1]",
     "unknown source 'views'"),
    (lambda s: s.replace('(None, 2, "v")', "(None, 2)"), "batches(seed)[1]['clicks'][0]", "3 values"),
    (lambda s: s.replace('[{"imps"', '[[(None, 1)], {"imps"'), "batches(seed)[0]", "dict"),
    (lambda s: s.replace('"imps": "ts', '"my imps": "ts'), "SOURCES", "identifier"),
    (lambda s: s.replace('"clicks": "ts TIMESTAMP, ad INT, user STRING"', '"clicks": 3'), "SOURCES", "DDL"),
    (lambda s: s.replace("return [{", "return [{}, {}] or [{"), "batches", "no row"),
])
def test_contract_violations_are_named(tmp_path, edit, where, words):
    spec = _module(tmp_path, edit(GOOD))
    with pytest.raises(InvalidInputError) as e:
        record_query(QueryConfig(spec), tmp_path / "t.jsonl")
    assert e.value.location == where and "q.py" in str(e.value) and words in str(e.value), str(e.value)
    assert not (tmp_path / "t.jsonl").exists() and not (tmp_path / "t.jsonl.work").exists()


def test_cli_refuses_a_bad_module_in_one_line_before_spark(tmp_path):
    spec = _module(tmp_path, GOOD.replace("def query(imps, clicks)", "def query(imps)"))
    r = subprocess.run([*RC, "spark", "record", "query", "--module", spec, "--out", str(tmp_path / "t.jsonl")],
                       capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    line = r.stderr.strip().splitlines()[-1]
    assert "q.py" in line and "query" in line and "clicks" in line, r.stderr


def test_one_source_modules_keep_their_shape(tmp_path):
    uq = load_query(_module(tmp_path, 'SCHEMA = "u STRING, n INT"\nOUTPUT_MODE = "update"\nKEY = ["u"]\n'
                                      'def batches(seed):\n    return [[("a", 1)], []]\n'
                                      'def query(df):\n    return df.groupBy("u").count()\n'))
    assert not uq.multi and uq.schema == "u STRING, n INT" and uq.columns == ["u", "n"]
    assert uq.batches(0) == [{"input": [("a", 1)]}, {"input": []}]


def test_each_source_is_fed_batch_by_batch(tmp_path):
    """Every batch's files are staged; a run sees batch b's files only once fed, an idle source
    none for that batch, and a batch where no source moves keeps its number with an empty file."""
    uq = load_query(_module(tmp_path, GOOD))
    rows = uq.batches(0)
    paths = prepare_workdir(tmp_path / "w", rows, uq)
    staged = sorted(str(p.relative_to(paths.staged)) for p in paths.staged.rglob("*.json"))
    assert staged == ["clicks/batch-00000.json", "clicks/batch-00001.json", "imps/batch-00000.json",
                      "imps/batch-00002.json"]
    assert (paths.staged / "imps" / "batch-00002.json").read_text() == ""

    def visible(ref: bool) -> list[str]:
        return sorted(str(p.relative_to(paths.inputs_of(ref))) for p in paths.inputs_of(ref).rglob("*.json"))

    feed_inputs(paths, False, 0)
    assert visible(False) == ["clicks/batch-00000.json", "imps/batch-00000.json"] and visible(True) == []
    feed_inputs(paths, False, 1)
    assert visible(False) == ["clicks/batch-00000.json", "clicks/batch-00001.json", "imps/batch-00000.json"]
    feed_inputs(paths, True, 99)  # beyond the input: everything, once; the other run untouched
    assert len(visible(True)) == 4 and len(visible(False)) == 3
    feed_inputs(paths, True, 99)
    line = json.loads((paths.inputs_of(False) / "imps" / "batch-00000.json").read_text())
    assert line == {"ts": None, "ad": 1}


def _view(batch_rows, read, sources=("imps", "clicks")):
    ends = {} if read is None else {"input_files": {"seq": 9, "batches": {str(k): v for k, v in read.items()}}}
    return SimpleNamespace(header={"config": {"batch_rows": batch_rows, "sources": dict.fromkeys(sources, "x INT")}},
                           ends=ends)


def test_input_batches_holds_and_catches_a_batch_read_elsewhere():
    want = [{"imps": 1, "clicks": 1}, {"clicks": 1}, {}]
    ok = {0: {"clicks": [0], "imps": [0]}, 1: {"clicks": [1]}, 2: {"imps": [2]}}  # 2: no source moves
    c = input_batches(_view(want, ok))
    assert c is not None and c.ok is True and c.examined == 3, c
    # an idle source read in its idle batch (the next batch's file read early)
    early = {**ok, 1: {"clicks": [1], "imps": [2]}}
    c = input_batches(_view(want, early))
    assert c.ok is False and "source 'imps'" in c.detail and "idle" in c.detail and c.offending_seq == 9
    # two batches of one source read in one micro-batch, and a batch never read
    merged = {0: {"clicks": [0, 1], "imps": [0]}, 2: {"imps": [2]}}
    c = input_batches(_view(want, merged))
    assert c.ok is False and "[0, 1]" in c.detail
    c = input_batches(_view(want, {0: ok[0], 1: ok[1]}))
    assert c.ok is False and "input batch 2 was never read" in c.detail
    # a data-less batch beyond the input that read a file
    assert input_batches(_view(want, {**ok, 3: {"clicks": [3]}})).ok is False
    assert input_batches(_view(None, ok)) is None and input_batches(_view(want, None)) is None
    ended = _view(want, None)  # several sources, the run done, no record of what was read: unchecked
    ended.ends["end"] = {"status": "done", "seq": 10}
    assert input_batches(ended).status.value == "unchecked"
    # one source (SCHEMA): every batch reads its file, also an empty one
    one = _view([{"input": 2}, {"input": 0}], {0: {"input": [0]}, 1: {"input": [1]}}, sources=())
    assert input_batches(one).ok is True


def test_file_source_logs_name_what_each_micro_batch_read(tmp_path):
    """A file source numbers its reads with a counter of its own (the log's ``batchId``); the
    offset log says where each source's counter stood at the end of each micro-batch. Here the
    clicks are idle in micro-batches 0 and 2 and the impressions in 3; 12 is data-less; the
    impressions' log is compacted."""
    from rollcheck.spark_replay.query.input_files import files_per_batch

    imps = [b for b in range(12) if b != 3]  # the impressions' n-th read is input batch imps[n]
    clicks = [1, 3]
    logs = {"0": [("9.compact", range(10)), ("10", [10])], "1": [("0", [0]), ("1", [1])]}
    for src, files in logs.items():
        d = tmp_path / "sources" / src
        d.mkdir(parents=True)
        inputs, name = (imps, "imps") if src == "0" else (clicks, "clicks")
        for fname, ns in files:
            lines = ["v1"] + [json.dumps({"path": f"file:///w/in/{name}/batch-{inputs[n]:05d}.json", "timestamp": 1,
                                          "batchId": n}) for n in ns]
            (d / fname).write_text("\n".join(lines) + "\n")
    (tmp_path / "sources" / "0" / ".10.crc").write_text("x")
    (tmp_path / "offsets").mkdir()
    for b in range(13):
        counters = [sum(1 for x in inputs if x <= b) - 1 for inputs in (imps, clicks)]
        lines = ["v1", "{}"] + [json.dumps({"logOffset": c}) if c >= 0 else "-" for c in counters]
        (tmp_path / "offsets" / str(b)).write_text("\n".join(lines) + "\n")
    got = files_per_batch(tmp_path)
    assert got[0] == {"imps": [0]} and got[1] == {"clicks": [1], "imps": [1]} and got[3] == {"clicks": [3]}
    assert got[11] == {"imps": [11]} and got[12] == {} and len(got) == 13
    assert files_per_batch(tmp_path / "nothing") == {}


# ----------------------------------------------------------------------------- with Spark
@pytest.mark.spark
def test_two_stream_join_recovers_from_a_task_failure(tmp_path):
    """The shipped two-stream join (impressions and clicks, a watermark each, an event-time bound)
    under a task failure: conformant, every micro-batch read exactly its batch of each source
    (the clicks idle in batches 0, 2 and 4, the impressions in batch 3)."""
    from rollcheck.spark_replay.query.record import session_conf
    from rollcheck.spark_replay.replay.conformance import replay_file
    from rollcheck.spark_replay.session import spark_session
    from rollcheck.spark_replay.trace import read_trace

    trace = tmp_path / "join.jsonl"
    with spark_session(conf=session_conf()) as spark:
        res = record_query(QueryConfig(str(EXAMPLE), failure="task", fail_at_batch=3), trace, spark=spark)
    assert res["status"] == "done"
    r = replay_file(trace)
    bad = [c.to_json() for c in r.checks if c.ok is False or c.status.value == "unchecked"]
    assert r.conformant is True, bad
    assert r.check("input-batches").ok is True and r.check("failure-observed").ok is True
    t = read_trace(trace)
    assert t.header["config"]["sources"] == load_query(str(EXAMPLE)).sources
    read = t.of_kind("spark.input_files")[0]["batches"]
    assert "clicks" not in read["0"] and "impressions" not in read["3"] and read["3"]["clicks"] == [3]
    assert [(e["mode"], e["batch"]) for e in t.of_kind("failure")] == [("task", 3)]


def test_reproducer_writes_and_feeds_every_source(tmp_path):
    """The standalone reproducer of a module of several sources carries the input as one dict per
    batch, stages every source's files and feeds each run's folders batch by batch, as the recorder."""
    from rollcheck.spark_replay.matrix.reproducer import module_with_rows, reproducer_source

    uq = load_query(str(EXAMPLE))
    rows = uq.batches(0)
    src = EXAMPLE.read_text(encoding="utf-8")
    assert "return [{'impressions': [(datetime.datetime(" in module_with_rows(src, rows)
    text = reproducer_source(src, rows, failure="sink", kill_point=None, fail_at=2, state_store="hdfs",
                             title="t", reason="r")
    assert "import rollcheck" not in text and "from rollcheck" not in text
    ns: dict = {"__name__": "reproducer", "__file__": str(tmp_path / "r.py")}
    exec(compile(text, "r.py", "exec"), ns)
    user = ns["load_user"]()
    ns["write_inputs"](user, str(tmp_path))
    staged = {n: sorted(p.name for p in (tmp_path / "staged" / n).iterdir()) for n in uq.sources}
    first = next(iter(uq.sources))
    moving = [[n for n in batch if batch[n]] or [first] for batch in rows]  # no source moves: an empty file
    assert staged == {n: [f"batch-{b:05d}.json" for b, names in enumerate(moving) if n in names] for n in uq.sources}
    assert ["clicks" not in names for names in moving] == [True, False, True, False, True, False]
    assert ["impressions" not in names for names in moving] == [False, False, False, True, False, False]
    ns["feed"](str(tmp_path), "", 1)
    fed = sorted(str(p.relative_to(tmp_path / "in")) for p in (tmp_path / "in").rglob("*.json"))
    assert fed == sorted(f"{n}/batch-{b:05d}.json" for b in (0, 1) for n in rows[b])
    assert not list((tmp_path / "in-ref").rglob("*.json"))


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.engines
def test_pytest_api_checks_a_query_of_two_sources(tmp_path):
    """``rollcheck.testing.assert_query_exactly_once`` on the two-stream join: one conformant cell."""
    from rollcheck.testing import assert_query_exactly_once

    rep = assert_query_exactly_once(EXAMPLE, batches=4, fail_at_batch=1, out=tmp_path)
    (cell,) = rep.cells
    assert cell["verdict"] == "conformant" and Path(cell["trace"]).is_file()
    checks = json.loads(Path(cell["checks"]).read_text())["checks"]
    assert {c["name"]: c["status"] for c in checks}["input-batches"] == "held"


def test_minimiser_leaves_a_source_out_and_keeps_dict_batches(tmp_path):
    """The finding needs one click of ad 3 only: the minimiser drops the impressions first (a source
    left out), then batches and rows, and the minimised module and reproducer keep the SOURCES shape."""
    import ast
    import importlib.util

    from rollcheck.spark_replay.matrix.reproducer import minimise_and_write

    checks = tmp_path / "cell.checks.json"
    checks.write_text(json.dumps({"root_cause": "batch-equivalent", "checks": [
        {"name": "batch-equivalent", "status": "violated"}]}))
    tried: list[dict] = []

    def run(argv, timeout, log):  # the recording of a candidate: "fails" while a click of ad 3 is in it
        if argv[0] == "record":
            spec = importlib.util.spec_from_file_location("cand", argv[1])
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
            data = mod.batches(0)
            tried.append(data)
            Path(argv[2]).write_text("" if any(r[1] == 3 for b in data for r in b.get("clicks", [])) else "ok")
            return 1, ""
        return 0, ""

    cell = SimpleNamespace(module=str(EXAMPLE), stem="cell", failure="task", kill_point=None, provider="hdfs",
                           name="impressions_clicks", column="task")
    opts = SimpleNamespace(seed=0, batches=None, out=tmp_path, fail_at_batch=2, shrink_runs=6, cell_timeout=60,
                           run_reproducer=False)
    got = minimise_and_write(cell, opts, {"checks": str(checks), "trace": None, "reason": "r"}, run,
                             lambda module, trace, k: ["record", module, str(trace)],
                             lambda trace: "batch-equivalent" if trace.read_text() == "" else None)
    assert all(isinstance(b, dict) for d in tried for b in d)
    assert "impressions" not in {n for b in tried[0] for n in b}  # the first try: the impressions left out
    m = got["minimised"]
    assert m["runs"] <= 6 and m["input"]["of"] > m["input"]["kept"] >= 1 and m["batches"]["of"] == 6, m
    assert m["tries"][0]["sources_dropped"] == ["impressions"], m
    script = Path(got["reproducer"]).read_text()
    ast.parse(script)
    assert "'clicks': [(datetime.datetime(" in script and "'impressions'" not in script.split("def batches(seed)")[-1]
