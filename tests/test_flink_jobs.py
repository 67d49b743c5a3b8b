"""Users' own Flink jobs, state backends and rescaled restores (issue 23).

Most tests replay stored traces (no Flink): the key-group assignment against values Flink itself
computed, the key-by-key restore checks on a real rescaled run and on tampered copies of it, the
user-job checks, the matrix's classification and table, the reproducer script. The job-module
contract's bad-input paths start only the PyFlink interpreter, not a JVM (about 2 s each). One
`slow` test records a real rescaled run of a library job (about 60-90 s on a loaded machine).
"""

from __future__ import annotations

import json
import py_compile
import subprocess
import sys
from pathlib import Path

import pytest

from rollcheck.flink_replay.checks.keygroups import (
    java_hash,
    key_group,
    key_group_range,
    murmur,
    operator_index,
    owner,
)
from rollcheck.flink_replay.checks.replay import read_flink_trace
from rollcheck.flink_replay.checks.rescale import keyed_state_check, operator_state_check
from rollcheck.flink_replay.checks.tamper import tamper
from rollcheck.flink_replay.checks.user_replay import replay_job, word_count_report
from rollcheck.flink_replay.matrix import Cell, cells, classify, summarise, write_html
from rollcheck.pyimpl.verdict import Check, Report, Status

ROOT = Path(__file__).resolve().parent.parent
WC_RESCALE = ROOT / "tests" / "data" / "flink" / "wordcount-rescale-2-3.jsonl"
JOB_RESCALE = ROOT / "examples" / "flink-job-rescale-2-1.jsonl"
OLD_TRACE = ROOT / "tests" / "data" / "flink" / "aligned-task-failure.jsonl"
CLI = [sys.executable, "-m", "rollcheck.cli.main"]


# -- key groups, against values computed by Flink 2.3 (KeyGroupRangeAssignment.assignToKeyGroup) --

@pytest.mark.parametrize(("i", "group"), [(-300, 19), (-151, 77), (-1, 49), (149, 2), (299, 28)])
def test_long_key_groups_match_flink(i: int, group: int) -> None:
    assert key_group(i * 7919 * 104729, 128) == group


@pytest.mark.parametrize(("i", "group"), [(0, 2015), (149, 2278), (299, 1541)])
def test_string_key_groups_match_flink(i: int, group: int) -> None:
    assert key_group(f"k\u00e9y-{i}\u4e2d", 4096) == group   # non-ASCII: UTF-16 code units


def test_row_keys_and_murmur_match_flink() -> None:
    # Row.of(k).hashCode() and MathUtils.murmurHash, as printed by Flink 2.3
    assert [key_group(k, 128, row=True) for k in range(8)] == [33, 44, 97, 104, 17, 17, 125, 17]
    assert (murmur(0), murmur(1)) == (593689054, 68075478)
    assert java_hash("hello") == 99162322


def test_key_group_ranges_partition_the_groups() -> None:
    for par in (1, 2, 3, 5, 7):
        owned = [operator_index(g, par, 128) for g in range(128)]
        for i in range(par):
            lo, hi = key_group_range(i, par, 128)
            assert [g for g in range(128) if owned[g] == i] == list(range(lo, hi + 1))
    assert owner("x", 1, 128) == 0


def test_key_types_are_checked() -> None:
    with pytest.raises(TypeError):
        java_hash(1.5)  # type: ignore[arg-type]


# -- key-by-key restore checks on a real rescaled word count (2 -> 3) ---------------------------

def test_rescaled_wordcount_is_conformant() -> None:
    rep = word_count_report(WC_RESCALE)
    assert rep.verdict.value == "conformant", rep.summary()
    keyed = rep.check("keyed-state-restored-once")
    assert keyed is not None and keyed.status is Status.HELD and keyed.examined == 8
    assert "rescaled 2 -> 3" in keyed.detail


@pytest.mark.parametrize("how", ["lose-key", "duplicate-key", "wrong-owner"])
def test_tampered_keyed_restores_are_caught(how: str, tmp_path: Path) -> None:
    out = tmp_path / f"{how}.jsonl"
    assert tamper(WC_RESCALE, how, out) == "keyed-state-restored-once"
    header, events, _ = read_flink_trace(out)
    c = keyed_state_check(header, events)
    assert c.status is Status.VIOLATED and c.offending_seq is not None
    word = {"lose-key": "lost", "duplicate-key": "twice", "wrong-owner": "its owner"}[how]
    assert word in c.detail


def test_changed_restored_value_is_caught(tmp_path: Path) -> None:
    lines = WC_RESCALE.read_text().splitlines()
    evs = [json.loads(x) for x in lines[1:]]
    r = next(e for e in evs if e["kind"] == "flink.restore" and e["task"] == "keyed" and e["attempt"] > 0
             and e["keys"])
    k = sorted(r["keys"])[0]
    r["keys"][k] += 1
    header = json.loads(lines[0])
    c = keyed_state_check(header, evs)
    assert c.status is Status.VIOLATED and "restored as" in c.detail


def test_operator_state_lost_in_redistribution_is_caught() -> None:
    header, events, _ = read_flink_trace(WC_RESCALE)
    assert operator_state_check(header, events).status is Status.HELD
    src = next(e for e in events if e["kind"] == "flink.restore" and e["task"] == "source" and e["attempt"] > 0
               and any(e["per_key"]))
    k = next(i for i, v in enumerate(src["per_key"]) if v)
    src["per_key"][k] -= 1
    c = operator_state_check(header, events)
    assert c.status is Status.VIOLATED and "lost operator state" in c.detail


def test_trace_without_keyed_state_is_not_a_pass() -> None:
    header, events, _ = read_flink_trace(OLD_TRACE)
    c = keyed_state_check(header, events)
    assert c.status is Status.NOT_APPLICABLE   # recorded before the keyed tap, same parallelism
    header["config"]["rescale"] = [2, 3]
    assert keyed_state_check(header, events).status is Status.UNCHECKED


# -- a user's job: the shipped rescaled run (RocksDB, 2 -> 1) -----------------------------------

def test_user_job_trace_is_conformant() -> None:
    rep = replay_job(JOB_RESCALE)
    assert rep.verdict.value == "conformant", rep.summary()
    names = [c.name for c in rep.checks]
    mine = ["failure-observed", "restore-latest-completed", "keyed-state-restored-once",
            "operator-state-restored", "user-state-restored-once", "output-exactly-once", "user-sink-exactly-once"]
    # the shared trace checker's generic checks on the core events come first
    assert names[:2] == ["pattern-valid", "recovery-line"] and [n for n in names if n in mine] == mine
    assert rep.check("output-exactly-once").examined == 600  # type: ignore[union-attr]


def test_user_job_duplicate_row_is_caught(tmp_path: Path) -> None:
    out = tmp_path / "dup.jsonl"
    tamper(JOB_RESCALE, "duplicate-row", out)
    rep = replay_job(out)
    assert rep.verdict.value == "violated" and rep.root_cause.name == "output-exactly-once"  # type: ignore[union-attr]
    assert "committed 2 times" in rep.root_cause.detail  # type: ignore[union-attr]


def _rewrite(src: Path, dst: Path, edit) -> Path:  # type: ignore[no-untyped-def]
    lines = src.read_text().splitlines()
    header, evs = json.loads(lines[0]), [json.loads(x) for x in lines[1:]]
    header, evs = edit(header, evs)
    for n, e in enumerate(evs, start=1):
        e["seq"] = n
    dst.write_text("\n".join(json.dumps(x) for x in [header, *evs]) + "\n")
    return dst


def test_user_job_lost_row_and_wrong_final_row_are_caught(tmp_path: Path) -> None:
    def drop_last_row(h, evs):  # type: ignore[no-untyped-def]
        tx = next(e for e in evs if e["kind"] == "flink.sink_output" and e["sink"] == "tx")
        top = max(tx["lines"], key=lambda x: int(x.split("\x1f")[0]))
        tx["lines"].remove(top)
        return h, evs

    rep = replay_job(_rewrite(JOB_RESCALE, tmp_path / "lost.jsonl", drop_last_row))
    assert rep.verdict.value == "violated" and "lost output" in rep.root_cause.detail  # type: ignore[union-attr]

    def change_final(h, evs):  # type: ignore[no-untyped-def]
        ref = next(e for e in evs if e["kind"] == "flink.sink_output" and e["sink"] == "reference")
        top = max(ref["lines"], key=lambda x: int(x.split("\x1f")[0]))
        n, k, row = top.split("\x1f")
        ref["lines"][ref["lines"].index(top)] = "\x1f".join([n, k, row.replace("]", ", 0]")])
        return h, evs

    rep = replay_job(_rewrite(JOB_RESCALE, tmp_path / "final.jsonl", change_final))
    assert rep.verdict.value == "violated" and "final row" in rep.root_cause.detail  # type: ignore[union-attr]


def test_user_job_cut_short_or_failed_is_inconclusive(tmp_path: Path) -> None:
    rep = replay_job(_rewrite(JOB_RESCALE, tmp_path / "cut.jsonl", lambda h, e: (h, e[:-1])))
    assert rep.verdict.value == "inconclusive"

    def failed(h, evs):  # type: ignore[no-untyped-def]
        h["flink"]["final_state"] = "FAILED"
        return h, evs

    assert replay_job(_rewrite(JOB_RESCALE, tmp_path / "failed.jsonl", failed)).verdict.value == "inconclusive"

    def no_failure(h, evs):  # type: ignore[no-untyped-def]
        return h, [e for e in evs if e["kind"] not in ("failure", "recovery")]  # the core recovery goes too

    assert replay_job(_rewrite(JOB_RESCALE, tmp_path / "nofail.jsonl", no_failure)).exit_code == 3


def test_replay_cli_on_user_job(tmp_path: Path) -> None:
    r = subprocess.run([*CLI, "flink", "replay", str(JOB_RESCALE), "--json"], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["conformant"] is True and doc["first_offending_seq"] is None
    assert {c["name"] for c in doc["checks"]} >= {"keyed-state-restored-once", "output-exactly-once"}


# -- the matrix: cells, classification, table; the reproducer -----------------------------------

def test_matrix_cells_and_summary() -> None:
    cs = cells(["wordcount", "j.py"], ["hashmap", "rocksdb"], ["aligned"], ["task", "taskmanager"], [None, (2, 3)])
    assert len(cs) == 16 and len({c.ident for c in cs}) == 16
    with pytest.raises(ValueError):
        cells(["wordcount"], ["memory"], ["aligned"], ["task"], [None])
    assert summarise([{"verdict": "conformant"}, {"verdict": "not-conformant"}, {"verdict": "inconclusive"},
                      {"verdict": "not-conformant", "expected_by_engine": True}]) == \
        {"conformant": 1, "not_conformant": 2, "inconclusive": 1, "expected_by_engine": 1, "findings": 1}


def test_matrix_classification() -> None:
    ok = classify(Report([Check.held("output-exactly-once", "x", examined=3)]))
    assert ok["verdict"] == "conformant" and not ok["expected_by_engine"]
    lost = classify(Report([Check.violated("user-sink-exactly-once", "KEY [1]: 1 rows, 2 without (lost output)")]))
    assert lost["verdict"] == "not-conformant" and not lost["expected_by_engine"]
    from rollcheck.flink_replay.checks.user_replay import GUARANTEES_DOC
    from rollcheck.pyimpl.attribution import judge_sink

    j = judge_sink("exactly-once", {"[1]": {"r": 2}}, {"[1]": {"r": 3}}, redelivered={"[1]": 1},
                   documentation=GUARANTEES_DOC)
    dup = classify(Report([Check.violated("user-sink-exactly-once", j["detail"], **j["data"])]))
    assert dup["expected_by_engine"] and "Fault Tolerance Guarantees" in dup["reason"]
    inc = classify(Report([Check.unchecked("failure-observed", "no failure")]))
    assert inc["verdict"] == "inconclusive"


def test_matrix_html(tmp_path: Path) -> None:
    doc = {"cells": [{"module": "wordcount", "config": {"backend": "rocksdb", "checkpoints": "aligned",
                                                         "rescale": [2, 3]}, "failure": {"kind": "task"},
                      "verdict": "not-conformant", "expected_by_engine": False, "reason": "output <lost>",
                      "trace": "/x/a.jsonl", "witness": "/x/a.witness.json", "reproducer": "/x/a.repro.py"}],
           "summary": {"conformant": 0, "not_conformant": 1, "inconclusive": 0}}
    text = write_html(doc, tmp_path / "index.html").read_text()
    assert "wordcount | rocksdb | aligned | rescale 2:3" in text and "&lt;lost&gt;" in text
    assert "a.repro.py" in text and "<th>task</th>" in text


def test_reproducer_is_standalone(tmp_path: Path) -> None:
    from rollcheck.flink_replay.reproducer import write_reproducer

    cell = Cell(str(ROOT / "examples" / "flink_jobs" / "keyed_totals.py"), "rocksdb", "unaligned", "task", (2, 3))
    rep = Report([Check.violated("output-exactly-once", "row 3 of KEY [\"a\"] committed 2 times")])
    path = write_reproducer(cell, {"interval_ms": 300, "parallelism": 2, "fail_at_record": 300, "seed": 1,
                                   "rescale": [2, 3], "rate": 400.0}, tmp_path / "r.py", rep)
    py_compile.compile(str(path), doraise=True)
    text = path.read_text()
    assert "rollcheck" not in text.split('"""', 2)[2].split("JOB =")[0]  # the code imports no rollcheck
    assert "import rollcheck" not in text and "from rollcheck" not in text
    assert "RESCALE = 'rocksdb', 'unaligned', 300, 2, (2, 3)" in text.replace("BACKEND, CHECKPOINTS, INTERVAL_MS, PAR, ", "")


# -- the module contract's bad input: exit 2 naming the file and the call (no JVM starts) -------

def _record(module: Path, tmp_path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, "flink", "record", "job", "--module", str(module), "--out", str(tmp_path / "o.jsonl"),
                           "--fail-at-record", "2", "--failure", "task", *extra], capture_output=True, text=True,
                          timeout=300, cwd=ROOT)


@pytest.mark.parametrize(("body", "needle"), [
    ("def records(seed):\n    return [1, 2]\n", "records(): must return a list of tuples"),
    ("def records(seed):\n    raise KeyError('boom')\n", "records(): raised KeyError"),
    ("def records(seed):\n    while True:\n        pass\n", "records(): did not return within 2 s"),
    ("import no_such_module_here\n", "import: raised ModuleNotFoundError"),
])
def test_bad_job_module_is_exit_2(body: str, needle: str, tmp_path: Path) -> None:
    mod = tmp_path / "bad_job.py"
    mod.write_text("KEY = [0]\n" + body + "def job(env, source):\n    return source\n")
    r = _record(mod, tmp_path, "--call-timeout", "2")
    assert r.returncode == 2, r.stderr
    assert needle in r.stderr and "bad_job.py" in r.stderr
    assert not (tmp_path / "o.jsonl").exists() and not (tmp_path / "o.flinkrun").exists()


def test_missing_module_and_bad_rescale_are_exit_2(tmp_path: Path) -> None:
    r = _record(tmp_path / "nope.py", tmp_path)
    assert r.returncode == 2 and "no such job module" in r.stderr
    r = subprocess.run([*CLI, "flink", "record", "wordcount", "--out", str(tmp_path / "o.jsonl"), "--rescale", "2:2",
                        "--fail-at-record", "5", "--failure", "task"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "two different parallelisms" in r.stderr
    r = subprocess.run([*CLI, "flink", "record", "wordcount", "--out", str(tmp_path / "o.jsonl"), "--rescale", "2:1"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "--fail-at-record" in r.stderr


# -- one real recording ------------------------------------------------------------------------

@pytest.mark.slow
def test_record_library_job_rescaled_for_real(tmp_path: Path) -> None:
    out = tmp_path / "t.jsonl"
    r = subprocess.run([*CLI, "flink", "record", "job", "--module", "examples/flink_jobs/keyed_totals.py",
                        "--out", str(out), "--fail-at-record", "300", "--failure", "task", "--rescale", "2:3",
                        "--json"], capture_output=True, text=True, timeout=900, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-2000:]
    rep = replay_job(out)
    assert rep.verdict.value == "conformant", rep.summary()
    keyed = rep.check("keyed-state-restored-once")
    assert keyed is not None and "rescaled 2 -> 3" in keyed.detail
    user = rep.check("user-state-restored-once")   # the job's own KeyedProcessFunction, key by key
    assert user is not None and user.status is Status.HELD and user.examined == 24, user.detail
    assert not Path(str(out) + ".partial").exists()


def test_verify_runs_the_tutorial_job() -> None:
    """verify reads the library job from package data; the tutorial shows examples/: one content."""
    assert (ROOT / "rollcheck" / "data" / "keyed_totals.py").read_bytes() == \
        (ROOT / "examples" / "flink_jobs" / "keyed_totals.py").read_bytes()


def test_checks_as_trace_checker_plugins() -> None:
    """The key-by-key checks also run as plug-ins of the shared trace checker (hooks, finish)."""
    from types import SimpleNamespace

    from rollcheck.flink_replay.checks.rescale import PLUGINS

    header, events, _ = read_flink_trace(WC_RESCALE)
    for cls in PLUGINS:
        plugin = cls()
        assert plugin.hooks() == ["on_event"]
        for e in events:
            plugin.on_event(None, e["seq"] + 1, e)
        c = plugin.finish(SimpleNamespace(header=header), {})
        # the user operators' state is a user job's: not applicable to the word count
        want = Status.NOT_APPLICABLE if cls.name == "user-state-restored-once" else Status.HELD
        assert c.name == cls.name and c.status is want


def test_user_sink_check_counts_rows_per_key() -> None:
    from rollcheck.flink_replay.checks.user_replay import user_sink_check

    ref = {"seq": 9, "lines": [["a", 1], ["a", 2], ["b", 1]]}
    same = user_sink_check({"user": {"seq": 8, "lines": [["b", 1], ["a", 1], ["a", 2]]}, "user-reference": ref},
                           [0], True)
    assert same.status is Status.HELD
    dup = user_sink_check({"user": {"seq": 8, "lines": [["a", 1], ["a", 2], ["a", 2], ["b", 1]]},
                           "user-reference": ref}, [0], True)
    assert dup.status is Status.VIOLATED and "duplicated" in dup.detail and dup.offending_seq == 8
    lost = user_sink_check({"user": {"seq": 8, "lines": [["a", 1], ["b", 1]]}, "user-reference": ref}, [0], True)
    assert lost.status is Status.VIOLATED and "lost" in lost.detail
    assert user_sink_check({}, [0], True).status is Status.NOT_APPLICABLE
    assert user_sink_check({"user": ref}, [0], True).status is Status.UNCHECKED


def test_a_failed_job_names_flinks_root_cause() -> None:
    """A job that did not finish: the trace header carries Flink's innermost cause, and the
    unchecked output check says it (the matrix's reason for an inconclusive cell)."""
    from rollcheck.flink_replay.checks.user_replay import output_check
    from rollcheck.flink_replay.job.main import _root_cause_text

    text = ("org.apache.flink.runtime.JobException: Recovery is suppressed by FixedDelayRestartBackoffTimeStrategy\n"
            "\tat org.apache.flink...\nCaused by: java.lang.Exception: Error while triggering checkpoint 6\n"
            "Caused by: java.lang.IllegalStateException: Configured state backend does not support enforcing a "
            "full snapshot.\n\tat org.apache.flink.streaming.runtime.tasks.StreamTask")
    cause = _root_cause_text(text)
    assert cause is not None and cause.startswith("java.lang.IllegalStateException: Configured state backend")
    assert _root_cause_text("") is None and _root_cause_text("boom") == "boom"
    c = output_check({}, False, cause)
    assert c.status is Status.UNCHECKED and "Flink: java.lang.IllegalStateException" in c.detail


def test_rescale_restores_the_latest_completed_checkpoint_even_if_rest_missed_it(tmp_path: Path) -> None:
    """The failed job completed chk-3 just before it failed and the REST poll saw only 1 and 2:
    the restore must still start from chk-3 (the matrix found output duplicated by restoring 2),
    and the trace must show chk-3 as completed."""
    from rollcheck.flink_replay.job.main import _latest_retained

    base = tmp_path / "checkpoints"
    for n in (1, 2, 3):
        (base / "j1" / f"chk-{n}").mkdir(parents=True)
        (base / "j1" / f"chk-{n}" / "_metadata").write_text("m")
    (base / "j1" / "chk-4").mkdir()  # in progress at the failure: no _metadata
    rest = {str(n): {"id": n, "status": "COMPLETED", "external_path": f"file:{base}/j1/chk-{n}"} for n in (1, 2)}
    info = {"job_id": "j1", "rest": {"checkpoints": rest}}
    assert _latest_retained(info, str(base)) == f"file:{base}/j1/chk-3"
    assert info["rest"]["checkpoints"]["3"]["status"] == "COMPLETED" and "4" not in info["rest"]["checkpoints"]
