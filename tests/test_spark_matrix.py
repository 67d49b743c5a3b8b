"""The Spark chaos matrix: cells, kill points, shared references, verdicts, witness, the table.

Everything but the last two tests runs without Spark (about 2 s): real recorded traces
(``tests/data/spark/spark-query-kill-*.jsonl``) and doctored copies of them stand for cells. The
kill supervisor is tested against a fake driver that writes a checkpoint's logs. One real cell
(``spark``, ``slow``: about 2-4 minutes on a loaded 2-core machine) runs the non-idempotent
``foreachBatch`` sink under a sink failure through ``rollcheck spark matrix``. The table is
rendered in headless Chromium when it is installed (required when ``CI=true``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from html.parser import HTMLParser
from pathlib import Path

import pytest

from rollcheck.infra.matrix import Minimised, matrix_verdict
from rollcheck.pyimpl.errors import InvalidInputError
from rollcheck.pyimpl.verdict import Status
from rollcheck.spark_replay.faults.killpoints import (
    KILL_POINTS,
    KillSupervisor,
    checkpoint_logs,
    kill_point_struck,
    state_files_of_version,
    validate_options,
)
from rollcheck.spark_replay.matrix.reproducer import module_with_rows, reproducer_source
from rollcheck.spark_replay.matrix.run import (
    Cell,
    MatrixOptions,
    cell_result,
    columns,
    expected_by_engine,
    plan_cells,
    render_html,
    report_of,
    summarize,
    witness,
)
from rollcheck.spark_replay.replay.conformance import replay_file
from rollcheck.spark_replay.shared_reference import shared_reference, write_shared_reference
from rollcheck.spark_replay.trace import read_trace

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "spark"
COMMIT = DATA / "spark-query-kill-commit.jsonl"
OFFSETS = DATA / "spark-query-kill-offsets-rocksdb.jsonl"
LIB = ROOT / "examples" / "queries"


def _lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def _write(path: Path, objs: list[dict]) -> Path:
    path.write_text("".join(json.dumps(o) + "\n" for o in objs))
    return path


def _doctor(src: Path, dst: Path, fn) -> Path:
    objs = _lines(src)
    return _write(dst, [objs[0], *[fn(o) for o in objs[1:]]])


# ----------------------------------------------------------------------------- planning
def test_plan_is_the_product_in_protocol_order():
    cells = plan_cells(["a.py", "b.py"], ["hdfs", "rocksdb"], ["kill", "task", "sink"], list(KILL_POINTS))
    assert len(cells) == 2 * 2 * (2 + 4)
    assert [c.column for c in cells[:6]] == ["task", "sink", "kill:offsets", "kill:state", "kill:sink",
                                             "kill:commit"]
    assert {c.config_id for c in cells} == {"a--hdfs", "a--rocksdb", "b--hdfs", "b--rocksdb"}
    assert columns(["kill"], ["commit"]) == ["kill:commit"]


@pytest.mark.parametrize("args, where", [
    (([], ["hdfs"], ["task"], []), "--module"),
    ((["a.py"], ["mem"], ["task"], []), "--providers"),
    ((["a.py"], ["hdfs"], ["oom"], []), "--failures"),
    ((["a.py"], ["hdfs"], ["kill"], ["later"]), "--kill-points"),
    ((["a.py"], ["hdfs"], ["kill"], []), "--failures"),
    ((["x/a.py", "y/a.py"], ["hdfs"], ["task"], []), "--module"),
])
def test_plan_refuses_bad_options(args, where):
    with pytest.raises(InvalidInputError) as e:
        plan_cells(*args)
    assert where in str(e.value)


def test_options_validate():
    with pytest.raises(InvalidInputError, match="--fail-at-batch"):
        MatrixOptions(["a.py"], batches=2, fail_at_batch=2).validate()
    with pytest.raises(InvalidInputError, match="--jobs"):
        MatrixOptions(["a.py"], jobs=0).validate()
    with pytest.raises(InvalidInputError, match="--call-timeout"):
        MatrixOptions(["a.py"], call_timeout=900.0, cell_timeout=900.0).validate()


def test_call_timeout_reaches_every_recording(tmp_path):
    from rollcheck.spark_replay.matrix.cell import CellConfig
    from rollcheck.spark_replay.matrix.run import Cell, _record_argv

    def config(argv):  # a recording's child reads its typed configuration, no command-line flags
        assert argv[1:3] == ["-m", "rollcheck.spark_replay.matrix.cell"] and "--call-timeout" not in argv
        return CellConfig.read(argv[3])

    opts = MatrixOptions(["q.py"], call_timeout=42.5)
    cell = Cell("q.py", "hdfs", "task", None)
    for argv in (_record_argv(None, "q.py", "hdfs", opts, tmp_path / "r.jsonl", None),
                 _record_argv(cell, "q.py", "hdfs", opts, tmp_path / "c.jsonl", tmp_path / "r.jsonl")):
        assert config(argv).query.call_timeout == 42.5
    from rollcheck.spark_replay.matrix.run import _shrink_argv

    shrink = config(_shrink_argv(cell, "try1.py", MatrixOptions(["q.py"], batches=3, call_timeout=42.5, seed=7),
                                 tmp_path / "t", 0))  # a minimiser's re-recording: the same limit, all batches
    assert shrink.query.call_timeout == 42.5 and shrink.query.batches is None and shrink.query.module == "try1.py"
    assert shrink.query.fail_at_batch == 0 and shrink.query.seed == 7 and shrink.reference_from is None
    with pytest.raises(InvalidInputError, match="needs --failure kill"):
        validate_options("sink", "state", "hdfs")
    with pytest.raises(InvalidInputError, match="--state-store"):
        validate_options(None, None, "memory")


def test_cli_refuses_bad_provider_before_any_spark_run():
    r = subprocess.run([sys.executable, "-m", "rollcheck.cli.main", "spark", "matrix", "--providers", "leveldb",
                        "--json"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2, r.stderr
    assert "leveldb" in r.stderr and "Traceback" not in r.stderr


# ----------------------------------------------------------------------------- the kill-point check
def test_real_kill_traces_prove_their_kill_point():
    for path, point in ((COMMIT, "commit"), (OFFSETS, "offsets")):
        tr = read_trace(path)
        c = kill_point_struck(tr.header, tr.events)
        assert c.status is Status.HELD, c.detail
        assert point in tr.header["config"]["kill_point"]
        rep = report_of(replay_file(path))
        assert rep.verdict.value == "conformant", rep.summary()


@pytest.mark.parametrize("logs, point, sunk, nstate, fragment", [
    ({"offsets": 2, "commits": 2}, "commit", True, 2, "after commits/2"),       # struck too late
    ({"offsets": 1, "commits": 1}, "offsets", False, 0, "offset log at 1"),     # struck too early
    ({"offsets": 2, "commits": 1}, "offsets", True, 0, "sink had written"),    # after the sink
    ({"offsets": 2, "commits": 1}, "sink", False, 2, "had not written"),       # before the sink
    ({"offsets": 2, "commits": 1}, "offsets", False, 2, "state file(s) of version 3"),
    ({"offsets": 2, "commits": 1}, "state", False, 0, "had not committed"),
])
def test_kill_struck_elsewhere_is_unchecked(logs, point, sunk, nstate, fragment):
    header = {"config": {"failure": "kill", "fail_at_batch": 2, "kill_point": point}}
    ev = [{"seq": 1, "kind": "spark.state_committed", "batch": 0, "partition": 0, "version": 1}]
    if sunk:
        ev.append({"seq": 2, "kind": "spark.sink_written", "batch": 2, "attempt": 1, "rows": []})
    ev.append({"seq": 3, "kind": "failure", "mode": "kill", "batch": 2, "attempt": 1, "kill_point": point,
               "checkpoint_logs": logs, "state_files": nstate})
    c = kill_point_struck(header, ev)
    assert c.status is Status.UNCHECKED and fragment in c.detail, c.detail


def test_kill_point_check_applies_only_to_kills_and_needs_the_evidence():
    assert kill_point_struck({"config": {"failure": "sink"}}, []).status is Status.NOT_APPLICABLE
    h = {"config": {"failure": "kill", "fail_at_batch": 1}}
    assert kill_point_struck(h, []).status is Status.UNCHECKED
    old = [{"seq": 4, "kind": "failure", "mode": "kill", "batch": 1, "attempt": 1}]
    assert "no checkpoint_logs" in kill_point_struck(h, old).detail


def test_doctored_late_kill_makes_the_replay_inconclusive(tmp_path):
    """Mutant: the recorder claims a commit-point kill, but commits/2 existed at the kill."""
    bad = _doctor(COMMIT, tmp_path / "late.jsonl", lambda o: {**o, "checkpoint_logs": {"offsets": 2, "commits": 2}}
                  if o.get("kind") == "failure" else o)
    rep = report_of(replay_file(bad))
    assert rep.verdict.value == "inconclusive"
    assert "kill-point" in (rep.why_inconclusive or "")


# ----------------------------------------------------------------------------- the supervisor
_FAKE_DRIVER = r"""
import os, sys, time, uuid
ck, point = sys.argv[1], sys.argv[2]
for d in ("offsets", "commits"):
    os.makedirs(os.path.join(ck, d), exist_ok=True)
def put(d, name):
    tmp = os.path.join(ck, d, ".%s.%s.tmp" % (name, uuid.uuid4().hex))
    open(tmp, "w").write("v1\n{}\n")
    time.sleep(0.3 if (d == "commits" and name == "2") else 0.0)
    os.rename(tmp, os.path.join(ck, d, name))
for b in range(4):
    put("offsets", str(b)); time.sleep(0.2)
    os.makedirs(os.path.join(ck, "state", "0", "0"), exist_ok=True)
    open(os.path.join(ck, "state", "0", "0", "%d.delta" % (b + 1)), "w").close(); time.sleep(0.2)
    put("commits", str(b)); time.sleep(0.2)
"""


@pytest.mark.parametrize("point, logs, nstate", [("offsets", {"offsets": 2, "commits": 1}, 0),
                                                 ("commit", {"offsets": 2, "commits": 1}, 1)])
def test_supervisor_kills_at_the_external_kill_points(tmp_path, point, logs, nstate):
    ck, markers = tmp_path / "checkpoint", tmp_path / "markers"
    markers.mkdir()
    proc = subprocess.Popen([sys.executable, "-c", _FAKE_DRIVER, str(ck), point], start_new_session=True)
    sup = KillSupervisor(ck, markers, 2, point)
    fired = sup.wait(proc)
    assert fired is not None and proc.returncode is not None
    assert fired["checkpoint_logs"] == logs and fired["state_files"] == nstate
    assert checkpoint_logs(ck) == logs and (markers / "failed").exists()
    assert sup.wait(subprocess.Popen([sys.executable, "-c", "pass"])) is None  # once per recording


def test_supervisor_kills_on_request(tmp_path):
    ck, markers = tmp_path / "checkpoint", tmp_path / "markers"
    markers.mkdir()
    code = f"import os,time; open({str(markers / 'kill-requested')!r},'w').write('1'); time.sleep(60)"
    proc = subprocess.Popen([sys.executable, "-c", code], start_new_session=True)
    t0 = time.perf_counter()
    fired = KillSupervisor(ck, markers, 1, "state").wait(proc)
    assert fired is not None and fired["kill_point"] == "state" and time.perf_counter() - t0 < 30
    assert fired["checkpoint_logs"] == {"offsets": None, "commits": None}


def test_state_files_of_every_provider_count(tmp_path):
    for rel in ("state/0/0/3.delta", "state/0/1/3.zip", "state/0/1/3_0e1f-aa.zip", "state/1/0/left/3.changelog",
                "state/0/0/2.delta", "state/0/_metadata/3.delta"):
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text("")
    assert state_files_of_version(tmp_path, 3) == 4


@pytest.mark.parametrize("provider, files, restored", [
    # RocksDB: every commit uploads V.zip; a restarted attempt that re-runs batch 2 rewrites 3.zip
    ("rocksdb", ["1.zip", "2.zip", "3.zip"], {"0": 2}),
    # changelog checkpointing: V.changelog per commit; 2.zip is the maintenance thread's snapshot
    ("rocksdb-changelog", ["1.changelog", "2.changelog", "2.zip", "3.changelog"], {"0": 2}),
    ("hdfs", ["1.delta", "2.delta", "2.snapshot", "3.delta"], {"0": 2}),
])
def test_watcher_records_the_state_files_of_every_provider(tmp_path, provider, files, restored):
    """The trace's state events and the restored versions cover RocksDB (zip, changelog), not only
    the HDFS-backed store's deltas; RocksDB's shared SST files and checksum files are no versions."""
    from rollcheck.spark_replay.checkpoint.watcher import CheckpointWatcher
    from rollcheck.spark_replay.trace import TraceWriter

    ck = tmp_path / "checkpoint"
    part = ck / "state" / "0" / "0"
    (part / "SSTs").mkdir(parents=True)
    (part / "SSTs" / "000008-4f.sst").write_text("x")
    (part / "_metadata").mkdir()
    (part / "_metadata" / "schema").write_text("x")
    for f in files:
        (part / f).write_text("v")
        (part / f".{f}.crc").write_text("c")
    w = TraceWriter(tmp_path / "t.jsonl", {"source": "spark", "job": "query"})
    watcher = CheckpointWatcher(ck, w, [], provider=provider)
    watcher.poll_now()
    watcher.new_attempt()  # a restart: the new attempt re-runs batch 2 and rewrites version 3
    time.sleep(0.01)
    last = part / files[-1]
    last.write_text("rewritten")
    watcher.poll_now()
    w.close()
    ev = [e for e in _lines(tmp_path / "t.jsonl")[1:] if e["kind"] == "spark.state_committed"]
    assert sorted({e["file"].rsplit("/", 1)[1] for e in ev}) == sorted(files)
    assert [e["version"] for e in ev][-1] == 3 and all(e["batch"] == e["version"] - 1 for e in ev)
    assert watcher.restored_versions() == restored
    with pytest.raises(ValueError, match="leveldb"):
        CheckpointWatcher(ck, w, [], provider="leveldb")


# ----------------------------------------------------------------------------- shared reference
def test_shared_reference_from_a_failure_free_run(tmp_path):
    objs = _lines(COMMIT)
    head = {**objs[0], "config": {**objs[0]["config"], "failure": None, "fail_at_batch": None,
                                  "kill_point": None}}
    keep = [o for o in objs[1:] if o["kind"] in ("spark.batch_committed", "spark.output_final",
                                                  "spark.state_final", "end")]
    keep = [{**o, "seq": i} for i, o in enumerate(keep, 1)]
    ref = _write(tmp_path / "ref.jsonl", [head, *keep])
    got = shared_reference(ref, objs[0])
    want = next(o for o in objs[1:] if o["kind"] == "spark.output_final")["rows"]
    assert got["output"] == want and got["batches"] == list(range(7))
    out = tmp_path / "cell.jsonl"
    write_shared_reference(ref, out, objs[0])
    ev = read_trace(out).events
    assert [e["kind"] for e in ev] == ["spark.reference"] and ev[0]["attempt"] == 0
    with pytest.raises(InvalidInputError, match="seed"):
        shared_reference(ref, {"config": {**objs[0]["config"], "seed": 7}})
    with pytest.raises(InvalidInputError, match="failure-free"):
        shared_reference(COMMIT)
    _write(tmp_path / "cut.jsonl", [head, *keep[:-3]])
    with pytest.raises(InvalidInputError, match="output_final"):
        shared_reference(tmp_path / "cut.jsonl")


# ----------------------------------------------------------------------------- verdicts per cell
def _duplicated(tmp_path: Path, user_sink: bool, lose: bool = False) -> Path:
    """The commit-kill trace doctored: the sink was handed batch 2 again and wrote it twice."""
    objs = _lines(COMMIT)
    objs[0]["config"]["user_sink"] = user_sink
    fin = next(o for o in objs[1:] if o["kind"] == "spark.output_final")
    again = [o for o in objs[1:] if o["kind"] == "spark.sink_written" and o["batch"] == 2]
    assert len(again) == 2 and again[0]["rows"]
    fin["rows"] = fin["rows"] + [again[0]["rows"][0]]
    if lose:
        fin["rows"] = fin["rows"][1:]
    return _write(tmp_path / "dup.jsonl", objs)


def test_duplicate_of_a_rerun_batch_by_a_users_sink_is_expected(tmp_path):
    path = _duplicated(tmp_path, user_sink=True)
    tr, rep = read_trace(path), report_of(replay_file(path))
    w = witness(tr.header, tr.events)
    assert w is not None and w["duplicated"][0]["batch"] == 2 and w["duplicated"][0]["written_in_attempts"] == [1, 2]
    why = expected_by_engine(rep, tr.header, w)
    assert why is not None and "Using Foreach and ForeachBatch" in why and "at-least-once" in why


@pytest.mark.parametrize("user_sink, lose", [(False, False), (True, True)])
def test_other_violations_are_findings(tmp_path, user_sink, lose):
    path = _duplicated(tmp_path, user_sink=user_sink, lose=lose)
    tr, rep = read_trace(path), report_of(replay_file(path))
    assert rep.verdict.value == "violated"
    assert expected_by_engine(rep, tr.header, witness(tr.header, tr.events)) is None


def test_cell_result_files_and_reasons(tmp_path):
    opts = MatrixOptions(["q.py"], out=tmp_path)
    cell = Cell("tests/queries/windowed_agg.py", "hdfs", "kill", "commit")
    (tmp_path / cell.config_id).mkdir()
    good = cell_result(cell, opts, COMMIT)
    assert good["verdict"] == "conformant" and good["witness"] is None
    assert json.loads(Path(good["checks"]).read_text())["verdict"] == "conformant"
    dup = cell_result(cell, opts, _duplicated(tmp_path, user_sink=True))
    assert dup["verdict"] == "not-conformant" and dup["expected_by_engine"] is True
    wit = json.loads(Path(dup["witness"]).read_text())
    assert wit["duplicated"][0]["batch"] == 2 and wit["failures"][0]["kill_point"] == "commit"
    bad = cell_result(cell, opts, _duplicated(tmp_path, user_sink=False))
    assert bad["reason"].startswith("finding:") and bad["expected_by_engine"] is False
    cut = tmp_path / "cut.jsonl"
    cut.write_text("".join(COMMIT.read_text().splitlines(keepends=True)[:12]))
    assert cell_result(cell, opts, cut)["verdict"] == "inconclusive"
    err = cell_result(cell, opts, tmp_path / "none.jsonl", error="inconclusive: timed out after 9 s")
    assert err["verdict"] == "inconclusive" and err["trace"] is None
    cells = [good, dup, bad, err]
    assert summarize(cells) == {"conformant": 1, "not_conformant": 2, "inconclusive": 1,
                                "expected_by_engine": 1, "findings": 1}
    # the one verdict rule decides the matrix: a cell the engine's documentation explains is still not
    # conformant (exit 1); an undecided cell is 3, and so is an empty matrix
    code = lambda cs: matrix_verdict(cs).exit_code  # noqa: E731
    assert code(cells) == 1 and code([good, dup]) == 1 and code([good, err]) == 3 and code([]) == 3
    assert code([good]) == 0


# ----------------------------------------------------------------------------- the table
class _Table(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.rows: list[list[str]] = []
        self.links: list[str] = []
        self._in = False

    def handle_starttag(self, tag, attrs):
        if tag == "tr":
            self.rows.append([])
        if tag in ("td", "th") and self.rows:
            self.rows[-1].append("")
            self._in = True
        if tag == "a":
            self.links.append(dict(attrs)["href"])

    def handle_endtag(self, tag):
        if tag in ("td", "th"):
            self._in = False

    def handle_data(self, data):
        if self._in and self.rows and self.rows[-1]:
            self.rows[-1][-1] += data


def _table(tmp_path: Path) -> tuple[str, list]:
    opts = MatrixOptions(["q.py"], out=tmp_path)
    planned = plan_cells(["tests/queries/windowed_agg.py"], ["hdfs", "rocksdb"], ["task", "kill"], ["commit"])
    (tmp_path / planned[0].config_id).mkdir()
    res = [cell_result(planned[1], opts, COMMIT), cell_result(planned[0], opts, _duplicated(tmp_path, True))]
    res[1]["column"] = "task"
    return render_html(res, planned, tmp_path, done=True, meta={"seed": 0, "fail_at_batch": 2}), planned


def test_html_has_one_row_per_configuration_and_relative_links(tmp_path):
    text, planned = _table(tmp_path)
    t = _Table()
    t.feed(text)
    assert t.rows[0] == ["query · state store", "task", "kill:commit"]
    assert [r[0] for r in t.rows[1:]] == ["windowed_agg · hdfs", "windowed_agg · rocksdb"]
    assert t.rows[1][1].startswith("not-conformant (expected by the engine)") and t.rows[1][2].startswith("conformant")
    assert t.rows[2][1:] == ["pending", "pending"]
    assert t.links and all(not h.startswith("/") for h in t.links)
    for h in t.links:
        if not h.endswith(".jsonl"):
            assert (tmp_path / h).exists(), h


def test_html_renders_in_headless_chromium(tmp_path, chromium):
    text, _ = _table(tmp_path)
    page = tmp_path / "index.html"
    page.write_text(text)
    js = ("<script>document.title = 'cells=' + document.querySelectorAll('#matrix td.cell').length + "
          "';links=' + document.querySelectorAll('#matrix a').length;</script></body>")
    page.write_text(text.replace("</body>", js))
    r = chromium("--dump-dom", page.as_uri())
    assert r.returncode == 0, r.stderr[-500:]
    assert "<title>cells=4;links=" in r.stdout and "windowed_agg · rocksdb" in r.stdout


# ----------------------------------------------------------------------------- the reproducer
def test_minimiser_keeps_only_the_rows_that_still_fail(tmp_path):
    """The minimiser's steps against a stand-in for the recordings (no Spark): the finding shows
    whenever the failing batch holds the row with id 9. From 5 batches of 4 rows it keeps only that
    row, in one batch, the failure moved to batch 0; each step kept only while the cell still fails."""
    from rollcheck.spark_replay.matrix.reproducer import minimise_and_write

    mod = tmp_path / "q.py"
    mod.write_text("SCHEMA = 'id INT'\nOUTPUT_MODE = 'append'\nKEY = ['id']\n\n\n"
                   "def batches(seed):\n    return [[(4 * b + i,) for i in range(4)] for b in range(5)]\n\n\n"
                   "def query(df):\n    return df\n")
    checks = tmp_path / "c.json"
    checks.write_text(json.dumps({"root_cause": "output-exactly-once"}))
    tried: list[tuple[int, list]] = []
    fails: dict[str, bool] = {}

    def argv_for(module: str, trace: Path, fail_at: int) -> list[str]:
        return ["rec", "--module", module, "--out", str(trace), "--fail-at-batch", str(fail_at)]

    def run(argv: list[str], timeout: float, log: Path) -> tuple[int | None, str]:
        if "-I" in argv:  # the reproducer's run
            return 1, 'LOST row (0 copies, the failure-free run has 1): {"id": 9}; handed to the sink in batch 0\n'
        ns: dict = {}
        exec(Path(argv[argv.index("--module") + 1]).read_text(), ns)
        rows, k = ns["batches"](0), int(argv[argv.index("--fail-at-batch") + 1])
        tried.append((k, rows))
        trace = argv[argv.index("--out") + 1]
        Path(trace).write_text("")
        fails[trace] = (9,) in rows[k]
        return 1, ""

    cell = Cell(str(mod), "hdfs", "kill", "commit")
    opts = MatrixOptions([str(mod)], fail_at_batch=2, out=tmp_path / "m")
    res = minimise_and_write(cell, opts, {"checks": str(checks), "reason": "finding: lost"}, run, argv_for,
                             lambda t: "output-exactly-once" if fails[str(t)] else None)
    m = res["minimised"]
    assert Minimised.from_json(m).to_json() == m and m["check"] == "output-exactly-once"
    assert (m["input"], m["batches"], m["fail_at"], m["runs"], m["sources_dropped"]) == (
        {"unit": "rows", "kept": 1, "of": 20}, {"kept": 1, "of": 5}, {"batch": 0}, 5, [])
    assert [(t["input"], t["batches"], t["shows"]) for t in m["tries"]] == [
        (12, 3, True), (4, 1, True), (2, 1, True), (1, 1, False), (1, 1, True)]
    assert m["trace"] is not None and m["trace"].endswith("try5.jsonl")
    assert [k for k, _ in tried] == [2, 0, 0, 0, 0] and tried[0][1] == [[(4 * b + i,) for i in range(4)]
                                                                       for b in range(3)]
    assert tried[-1][1] == [[(9,)]] and [r for _k, r in tried[2:4]] == [[[(8,), (9,)]], [[(8,)]]]
    text = Path(res["reproducer"]).read_text()
    assert "FAIL_AT = 0" in text and "return [[(9,)]]" in text and "KILL_POINT = 'commit'" in text
    assert res["reproducer_run"]["reproduced"] is True and res["reproducer_run"]["shows"]


def test_reproducer_is_standalone_and_carries_the_minimised_input():
    src = (LIB / "foreachbatch_append.py").read_text()
    rows = [[("p", 1)], [("q", 2), ("p", 3)], [("r", 4)]]
    mod = module_with_rows(src, rows)
    ns: dict = {"__name__": "x"}
    exec(compile(mod, "m.py", "exec"), ns)
    assert ns["batches"](0) == rows
    text = reproducer_source(src, rows, failure="kill", kill_point="commit", fail_at=1, state_store="rocksdb",
                             title="t", reason="lost row")
    import ast

    tree = ast.parse(text)
    imports = {(a.name if isinstance(n, ast.Import) else n.module).split(".")[0]
               for n in ast.walk(tree) if isinstance(n, ast.Import | ast.ImportFrom)
               for a in (n.names if isinstance(n, ast.Import) else n.names[:1])}
    assert imports == {"json", "os", "re", "signal", "subprocess", "sys", "tempfile", "threading", "time", "pyspark"}
    assert "rollcheck" not in imports
    assert "RocksDBStateStoreProvider" in text and "KILL_POINT = 'commit'" in text
    user = next(n.value.value for n in tree.body if isinstance(n, ast.Assign) and n.targets[0].id == "USER_SOURCE")
    assert user == mod  # the user's module verbatim, readable in the script, with the minimised input
    assert "def sink(batch_df, batch_id, out_dir):\n" in text


# ----------------------------------------------------------------------------- one real cell
@pytest.mark.spark
@pytest.mark.slow
def test_real_cells_declared_and_undeclared_at_least_once_sink(tmp_path):
    """foreachbatch_append declares at-least-once and keeps it: conformant. The same module without
    the declaration asks for exactly-once and does not get it: not conformant, exit 1, with the
    engine's documentation cited (expected_by_engine) and the module to blame."""
    undeclared = tmp_path / "append_undeclared.py"
    undeclared.write_text((LIB / "foreachbatch_append.py").read_text().replace(
        'SINK_GUARANTEE = "at-least-once"', "# no SINK_GUARANTEE: exactly-once"))
    out = tmp_path / "m"
    r = subprocess.run([sys.executable, "-m", "rollcheck.cli.main", "spark", "matrix", "--module",
                        str(LIB / "foreachbatch_append.py"), "--module", str(undeclared), "--providers", "hdfs",
                        "--failures", "sink", "--batches", "3", "--fail-at-batch", "1", "--out", str(out), "--json"],
                       capture_output=True, text=True, timeout=1800)
    assert r.returncode == 1, r.stderr[-2000:]
    doc = json.loads(r.stdout)
    declared, plain = sorted(doc["cells"], key=lambda c: "undeclared" in c["module"])
    assert declared["verdict"] == "conformant" and declared["attributed_to"] is None, declared
    assert "at-least-once" in declared["reason"] and "foreachBatch" in declared["reason"]
    checks = json.loads(Path(declared["checks"]).read_text())["checks"]
    alo = next(c for c in checks if c["name"] == "output-at-least-once")
    assert alo["status"] == "held" and sum(alo["extra_copies"].values()) > 0
    assert plain["verdict"] == "not-conformant" and plain["expected_by_engine"] is True, plain
    assert plain["attributed_to"] == "module" and "foreachBatch" in plain["reason"] and plain["witness"]
    assert (out / "index.html").exists()


def test_runner_bounds_each_recording_in_time(tmp_path):
    from rollcheck.spark_replay.matrix.run import _Runner

    r = _Runner()
    rc, out = r.run([sys.executable, "-c", "print('hi')"], 60, tmp_path / "a.log")
    assert rc == 0 and out.strip() == "hi"
    t0 = time.perf_counter()
    rc, why = r.run([sys.executable, "-c", "import time; time.sleep(60)"], 1.0, tmp_path / "b.log")
    assert rc is None and "timed out" in why and time.perf_counter() - t0 < 30
    r.stop()
    assert r.run([sys.executable, "-c", "pass"], 60, tmp_path / "c.log") == (None, "the matrix was stopped")


def test_every_kill_through_the_driver_supervision_is_recorded(tmp_path, monkeypatch):
    """The driver asks for its kill; with the kill-point watcher, the watcher (and only it) kills and
    keeps the facts (a supervision loop that served the request itself lost the failure event)."""
    from rollcheck.spark_replay.supervise import run_driver

    pkg = tmp_path / "fakepkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "driver.py").write_text(
        "import sys\n"
        "from pathlib import Path\n"
        "from rollcheck.spark_replay.supervise import child_main, request_kill\n"
        "def run(spec):\n"
        "    request_kill(Path(spec['markers']))\n"
        "if __name__ == '__main__':\n"
        "    sys.exit(child_main(run))\n")
    monkeypatch.setenv("PYTHONPATH", f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    for n in range(3):
        markers = tmp_path / f"markers{n}"
        markers.mkdir()
        sup = KillSupervisor(tmp_path / "checkpoint", markers, 2, "sink")
        run = run_driver("fakepkg.driver", {"markers": str(markers)}, workdir=tmp_path, n=n + 1, markers=markers,
                         watch=sup.watch, timeout=120)
        assert run.killed
        facts = sup.take()
        assert facts is not None and facts["kill_point"] == "sink"


def test_a_worker_that_did_not_connect_back_is_the_machines_fault(tmp_path):
    from rollcheck.spark_replay.matrix.run import overloaded

    log = tmp_path / "task.log"
    log.write_text("rollcheck: error: q.py: environment: not the query's failure: Spark's Python worker did not "
                   "connect back within Spark's fixed 10 s (...): [STREAM_FAILED] Query [id = 9] terminated with "
                   "exception: Python worker failed to connect back. SQLSTATE: XXKST\n")
    assert overloaded(log)
    log.write_text("rollcheck: error: q.py: query: the query failed on its own: division by zero\n")
    assert not overloaded(log) and not overloaded(tmp_path / "missing.log")


def test_minimised_rows_with_floats_that_are_not_finite_evaluate():
    """A minimised input holding NaN or an infinity is a module that runs (``repr`` gives ``nan``)."""
    import math

    rows = [{"a": [(1, float("nan"), float("inf")), (2, float("-inf"), -0.0)]}, {}]
    namespace: dict = {}
    exec(compile(module_with_rows("SOURCES = {}\n", rows), "<m>", "exec"), namespace)
    (first, second), empty = namespace["batches"](0)[0]["a"], namespace["batches"](0)[1]
    assert math.isnan(first[1]) and first[2] == math.inf and second[1] == -math.inf
    assert math.copysign(1, second[2]) == -1 and empty == {}
