"""PyFlink jobs with more than one input stream (``SOURCES``; issue 40, item 3).

A job module may name its input streams in ``SOURCES``, return ``{name: [tuples]}`` from
``records(seed)`` and take ``job(env, sources)``, a dict of checkpointed streams by name. rollcheck
runs every source's records as one checkpointed sequence, interleaved in proportion, split into one
stream per name; the source tap counts each source's records, so a record is (source, index).

The fast tests check the layout, the module checks, the shipped two-source trace (replayed, and
tampered so that the restore loses a record of the second source), the shrink leaving a source
out and the reproducer's copy of the layout; the bad modules go through the command line (the
PyFlink interpreter starts, no JVM). One real recording (about 45 s) stays unmarked; the
TaskManager kill, the rescaled restore, the mutant that loses a withdrawal, the reproducer run and
the matrix are ``engines``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from rollcheck.flink_replay.job.user import (
    KeyDeclarationError,
    _check_records,
    check_sources,
    interleave,
    source_layout,
)
from rollcheck.flink_replay.recording.record import source_of_record
from rollcheck.pyimpl.verdict import Check, Report

ROOT = Path(__file__).resolve().parent.parent
JOBS = ROOT / "tests" / "flink_jobs"
LEDGER = ROOT / "examples" / "flink_jobs" / "account_ledger.py"
TRACE = JOBS / "ledger-task.jsonl"
CLI = [sys.executable, "-m", "rollcheck.cli.main"]


# -- the layout: one sequence over every source ---------------------------------------------------

@pytest.mark.parametrize("counts", [[4, 2], [400, 200], [1, 7, 3], [0, 5], [5, 0, 0], [13, 13]])
def test_interleave_keeps_every_record_and_the_proportion(counts: list[int]) -> None:
    order = interleave(counts)
    assert [order.count(s) for s in range(len(counts))] == counts
    total = sum(counts)
    for g in range(total):  # at every point each source is as far through its records as the others
        seen = [order[: g + 1].count(s) for s in range(len(counts))]
        for s, n in enumerate(counts):
            if n:
                assert abs(seen[s] / n - (g + 1) / total) <= 1.0 / min(c for c in counts if c) + 1e-9


def test_layout_numbers_each_source_in_its_own_order() -> None:
    per = {"deposits": [("a", i) for i in range(6)], "withdrawals": [("b", i) for i in range(3)]}
    recs, lay = source_layout(["deposits", "withdrawals"], per)
    assert lay["records"] == [6, 3] and len(lay["order"]) == 9
    assert [r for r in recs if r[0] == "a"] == per["deposits"]
    assert [r for r in recs if r[0] == "b"] == per["withdrawals"]
    for g, r in enumerate(recs):  # the recorder's (source, index) of every sequence number
        where = source_of_record(lay, g)
        assert per[where["source"]][where["source_record"]] == r
    cut, lay2 = source_layout(["deposits", "withdrawals"], per, max_records=4)
    assert cut == recs[:4] and sum(lay2["records"]) == 4
    only, lay3 = source_layout(["deposits", "withdrawals"], per, drop=["deposits"])
    assert only == per["withdrawals"] and lay3["records"] == [0, 3]
    assert source_of_record(None, 3) == {} and source_of_record(lay, 99) == {}


# -- the module's SOURCES and records() -----------------------------------------------------------

@pytest.mark.parametrize(("value", "needle"), [
    ("deposits", "must be a tuple of the input streams' names"),
    ({"deposits": 1}, "must be a tuple of the input streams' names"),
    ((), "is empty"),
    (("deposits", ""), "'' is not a source name"),
    (("deposits", 3), "3 is not a source name"),
    (("a", "b", "a"), "names 'a' twice"),
    (tuple(f"s{i}" for i in range(33)), "at most 32"),
])
def test_bad_sources_are_named(value: object, needle: str) -> None:
    with pytest.raises(KeyDeclarationError) as e:
        check_sources(SimpleNamespace(SOURCES=value))
    assert e.value.name == "SOURCES" and needle in str(e.value), str(e.value)


@pytest.mark.parametrize(("recs", "names", "needle"), [
    ([("u", 1)], ["a", "b"], "must return a dict {source name: [tuples]} over SOURCES ('a', 'b'), got list"),
    ({"a": [("u", 1)], "c": []}, ["a", "b"], "names source 'c', which is not one of SOURCES ('a', 'b')"),
    ({"a": [("u", 1)], "b": [1]}, ["a", "b"], "['b'] must be a list of tuples, got list with element [0] of type int"),
    ({"a": (("u", 1),)}, ["a", "b"], "['a'] must be a list of tuples, got tuple"),
    ({"a": [("u", 1)]}, None, "must return a list of tuples, got dict (a dict of input streams by name needs SOURCES"),
    ([1, 2], None, "must return a list of tuples, got list with element [0] of type int"),
])
def test_records_of_the_wrong_shape_are_named(tmp_path: Path, recs: object, names: list[str] | None,
                                              needle: str) -> None:
    from rollcheck.flink_replay.job.user import UserCodeError

    with pytest.raises(UserCodeError):
        _check_records(str(tmp_path), recs, names)
    err = json.loads((tmp_path / "user-error.json").read_text())
    assert err["call"] == "records" and needle in err["error"], err


def test_an_idle_source_is_allowed(tmp_path: Path) -> None:
    _check_records(str(tmp_path), {"a": [("u", 1)], "b": []}, ["a", "b"])
    _check_records(str(tmp_path), {"a": [("u", 1)]}, ["a", "b"])  # no entry: idle too
    assert not (tmp_path / "user-error.json").exists()


_BODY = """
def job(env, sources):
    return sources["deposits"]
"""


def _record(module: Path, out: Path, *extra: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, "flink", "record", "job", "--module", str(module), "--out", str(out), *extra],
                          capture_output=True, text=True, timeout=timeout, cwd=ROOT)


@pytest.mark.parametrize(("head", "needle"), [
    ('SOURCES = ("deposits", "withdrawals")\ndef records(seed):\n    return [("u", 1)]\n',
     "records(): must return a dict {source name: [tuples]} over SOURCES ('deposits', 'withdrawals'), got list"),
    ('SOURCES = ("deposits", "withdrawals")\ndef records(seed):\n    return {"deposits": [("u", 1)], '
     '"refunds": [("u", 2)]}\n', "records(): names source 'refunds', which is not one of SOURCES"),
    ('SOURCES = "deposits"\ndef records(seed):\n    return {"deposits": [("u", 1)]}\n',
     "SOURCES: must be a tuple of the input streams' names (str), got str 'deposits'"),
    ('SOURCES = ("deposits", "deposits")\ndef records(seed):\n    return {"deposits": [("u", 1)]}\n',
     "SOURCES: names 'deposits' twice"),
    ('SOURCES = ("deposits", "withdrawals")\ndef records(seed):\n    return {"deposits": [], "withdrawals": []}\n',
     "records(): returned no records (every source is empty)"),
    ('def records(seed):\n    return {"deposits": [("u", 1)]}\n',
     "records(): must return a list of tuples, got dict (a dict of input streams by name needs SOURCES"),
])
def test_bad_sources_module_is_exit_2_before_flink_starts(head: str, needle: str, tmp_path: Path) -> None:
    mod = tmp_path / "two_streams_job.py"
    mod.write_text("KEY = [0]\n" + head + _BODY)
    t0 = time.monotonic()
    r = _record(mod, tmp_path / "o.jsonl", "--fail-at-record", "1", "--failure", "task", timeout=300)
    last = r.stderr.strip().splitlines()[-1]
    assert r.returncode == 2, r.stderr[-1500:]
    assert needle in last and "two_streams_job.py" in last, last
    assert not (tmp_path / "o.jsonl").exists() and not (tmp_path / "o.flinkrun").exists()
    assert time.monotonic() - t0 < 60  # no JVM: the PyFlink interpreter imported the module and stopped


@pytest.mark.slow
def test_job_asking_for_an_unknown_source_is_exit_2_naming_it(tmp_path: Path) -> None:
    """``job()`` builds the graph in Flink's gateway (a JVM, no job run): a name not in SOURCES is
    the module's KeyError, which says which names there are."""
    mod = tmp_path / "refunds_job.py"
    mod.write_text('KEY = [0]\nSOURCES = ("deposits", "withdrawals")\ndef records(seed):\n'
                   '    return {"deposits": [("u", 1)], "withdrawals": [("u", 2)]}\n'
                   'def job(env, sources):\n    return sources["refunds"]\n')
    r = _record(mod, tmp_path / "o.jsonl", "--fail-at-record", "1", "--failure", "task", timeout=300)
    last = r.stderr.strip().splitlines()[-1]
    assert r.returncode == 2, r.stderr[-1500:]
    assert "refunds_job.py" in last and "job(): raised KeyError" in last, last
    assert "'refunds' is not one of SOURCES ('deposits', 'withdrawals')" in last, last


# -- the shipped two-source trace -----------------------------------------------------------------

def _replay(path: Path) -> Report:
    from rollcheck.flink_replay.checks.user_replay import replay_job

    return replay_job(path)


def test_two_source_trace_replays_conformant_naming_the_sources() -> None:
    header = json.loads(TRACE.read_text().splitlines()[0])
    assert header["sources"] == {"names": ["deposits", "withdrawals"], "records": [400, 200]}
    rep = _replay(TRACE)
    checks = {c.name: c for c in rep.checks}
    assert rep.conformant is True, [(c.name, c.detail) for c in rep.checks if c.status.value != "held"]
    assert "deposits record 99" in checks["failure-observed"].detail
    op = checks["operator-state-restored"].detail
    assert "'deposits' 113" in op and "'withdrawals' 56" in op, op
    assert checks["batch-equivalent"].status.value == "held"


def test_lost_record_of_the_second_source_is_caught(tmp_path: Path) -> None:
    out = tmp_path / "t.jsonl"
    r = subprocess.run([*CLI, "flink", "tamper", str(TRACE), "--how", "lose-source-record", "-o", str(out)],
                       capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    rep = _replay(out)
    bad = [c for c in rep.checks if c.status.value == "violated"]
    assert [c.name for c in bad] == ["operator-state-restored"], [(c.name, c.detail) for c in bad]
    assert "55 records of source 'withdrawals', checkpoint 2 holds 56 (lost" in bad[0].detail, bad[0].detail
    rp = subprocess.run([*CLI, "flink", "replay", str(out)], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert rp.returncode == 1, rp.stdout + rp.stderr


def test_rescaled_two_source_trace_sums_each_source_over_the_new_subtasks(tmp_path: Path) -> None:
    """Recorded with ``--rescale 2:1``: one source subtask restores both subtasks' list-state
    entries, each source's count on its own; a record of the second source lost there is caught."""
    rescaled = JOBS / "ledger-rescale-2-1.jsonl"
    rep = _replay(rescaled)
    checks = {c.name: c for c in rep.checks}
    assert rep.conformant is True, [(c.name, c.detail) for c in rep.checks if c.status.value != "held"]
    assert "rescaled 2 -> 1" in checks["keyed-state-restored-once"].detail
    assert "1 source subtask restores" in checks["operator-state-restored"].detail
    assert "'deposits' 68, 'withdrawals' 34" in checks["operator-state-restored"].detail
    out = tmp_path / "t.jsonl"
    assert subprocess.run([*CLI, "flink", "tamper", str(rescaled), "--how", "lose-source-record", "-o", str(out)],
                          capture_output=True, text=True, timeout=120, cwd=ROOT).returncode == 0
    bad = [c for c in _replay(out).checks if c.status.value == "violated"]
    assert [c.name for c in bad] == ["operator-state-restored"] and "33 records of source 'withdrawals'" in \
        bad[0].detail, [(c.name, c.detail) for c in bad]


@pytest.mark.parametrize("name", ["ledger-task.jsonl", "ledger-rescale-2-1.jsonl"])
def test_two_source_events_are_as_the_recorder_writes_them(name: str) -> None:
    """The failure's ``source``/``source_record`` are fields the recorder writes: an exception inside
    a check on such a trace is rollcheck's bug, not malformed events."""
    from rollcheck.flink_replay.checks.event_shape import malformed_reason
    from rollcheck.pyimpl.traces.reader import read_events

    lines, events = read_events(JOBS / name)
    flink = [{k: v for k, v in e.items() if k != "_line"} for e in events
             if e["kind"] == "failure" or e["kind"].startswith("flink.")]
    assert any("source_record" in e for e in flink)
    assert malformed_reason(lines.header, flink) is None


def test_lose_source_record_needs_several_sources(tmp_path: Path) -> None:
    r = subprocess.run([*CLI, "flink", "tamper", str(JOBS / "job-rocksdb-rescale-2-3.jsonl"), "--how",
                        "lose-source-record", "-o", str(tmp_path / "x.jsonl")],
                       capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert r.returncode == 2 and "several input streams" in r.stderr, r.stderr


# -- the shrink may leave a source out; the reproducer lays the sources out as rollcheck does ------

def test_shrink_leaves_out_a_source_the_finding_does_not_need(tmp_path: Path) -> None:
    from rollcheck.flink_replay.matrix import Cell, shrink_finding

    calls: list[dict] = []

    def fake(trace: Path, c: dict) -> Report:  # the finding needs deposits and 7 records
        calls.append(c)
        ok = "deposits" not in (c.get("drop_sources") or []) and c["max_records"] >= 7
        return Report([Check.violated("x", "lost") if ok else Check.held("x", "ok", examined=1)])

    cell = Cell(str(LEDGER), "hashmap", "aligned", "task", None)
    r = shrink_finding(cell, {}, tmp_path, "x", 600, runs=6, run=fake,
                       sources={"names": ["deposits", "withdrawals"], "records": [400, 200]})
    # one try without withdrawals (shows it), then 5 bisection runs over the 400 deposits: 200 .. 12
    assert r.sources_dropped == ("withdrawals",) and r.of == 600 and r.kept == 12
    assert calls[0]["drop_sources"] == ["withdrawals"] and calls[0]["max_records"] == 400
    assert len(calls) == 6 and all(c.get("drop_sources") == ["withdrawals"] for c in calls)
    # a one-source job: the bisection alone, as before
    r1 = shrink_finding(cell, {}, tmp_path, "x", 100, runs=6, run=fake)
    assert r1.sources_dropped == () and [x["input"] for x in r1.tries] == [50, 25, 12, 6, 9, 7]


def test_reproducer_lays_out_the_sources_as_rollcheck_does(tmp_path: Path) -> None:
    from rollcheck.flink_replay.matrix import Cell
    from rollcheck.flink_replay.reproducer import write_reproducer

    cell = Cell(str(LEDGER), "hashmap", "aligned", "task", None)
    rep = Report([Check.violated("output-exactly-once", "KEY [\"acct-1\"] lost")])
    path = write_reproducer(cell, {"interval_ms": 300, "parallelism": 2, "fail_at_record": 60, "seed": 0,
                                   "rate": 200.0}, tmp_path / "r.py", rep, records=90, drop=["withdrawals"])
    ns: dict = {"__name__": "repro"}
    exec(compile(path.read_text(), str(path), "exec"), ns)  # defines only (main() runs under __main__)
    assert ns["DROP"] == ["withdrawals"] and ns["JOB"] == LEDGER.read_text() and ns["RECORDS"] == 90
    names = ["deposits", "withdrawals", "refunds"]
    per = {"deposits": [("d", i) for i in range(40)], "withdrawals": [("w", i) for i in range(17)],
           "refunds": [("r", i) for i in range(3)]}
    for n, drop in ((None, []), (30, ["withdrawals"]), (17, []), (None, ["deposits", "refunds"])):
        ns["DROP"] = drop
        recs, order = ns["sequence"](names, per, n)
        want, lay = source_layout(names, per, n, drop)
        assert recs == want and order == lay["order"]


# -- real recordings ------------------------------------------------------------------------------

def _replay_cli(trace: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, "flink", "replay", str(trace), "--json"], capture_output=True, text=True,
                          timeout=300, cwd=ROOT)


def test_two_source_job_records_and_replays(tmp_path: Path) -> None:
    """A real two-source recording with a task failure (about 45 s): conformant, the failure named
    by its source and index, each source's records counted in the restored operator state."""
    out = tmp_path / "l.jsonl"
    r = _record(LEDGER, out, "--fail-at-record", "300", "--failure", "task")
    assert r.returncode == 0, r.stderr[-2000:]
    header = json.loads(out.read_text().splitlines()[0])
    assert header["sources"]["names"] == ["deposits", "withdrawals"]
    rp = _replay_cli(out)
    doc = json.loads(rp.stdout)
    assert rp.returncode == 0 and doc["conformant"] is True, rp.stdout[-3000:]
    checks = {c["name"]: c for c in doc["checks"]}
    assert "deposits record" in checks["failure-observed"]["detail"] or \
        "withdrawals record" in checks["failure-observed"]["detail"], checks["failure-observed"]
    assert "'withdrawals'" in checks["operator-state-restored"]["detail"]
    assert checks["batch-equivalent"]["ok"] is True


@pytest.mark.engines
@pytest.mark.parametrize("extra", [("--failure", "taskmanager"), ("--failure", "task", "--rescale", "2:1")],
                         ids=["taskmanager", "rescale-2-1"])
def test_two_source_job_survives_a_taskmanager_kill_and_a_rescale(tmp_path: Path, extra: tuple[str, ...]) -> None:
    out = tmp_path / "l.jsonl"
    r = _record(LEDGER, out, "--fail-at-record", "300", *extra)
    assert r.returncode == 0, r.stderr[-2000:]
    rp = _replay_cli(out)
    assert rp.returncode == 0 and json.loads(rp.stdout)["conformant"] is True, rp.stdout[-3000:]


@pytest.mark.engines
def test_a_withdrawal_held_outside_flink_state_is_lost_and_caught(tmp_path: Path) -> None:
    """The mutant keeps the last withdrawal of each subtask in a Python attribute: the record the
    checkpoint's source offsets had passed is gone after the restore (output-exactly-once)."""
    out = tmp_path / "m.jsonl"
    r = _record(JOBS / "ledger_held_withdrawal.py", out, "--fail-at-record", "300", "--failure", "task")
    assert r.returncode == 0, r.stderr[-2000:]
    rp = _replay_cli(out)
    doc = json.loads(rp.stdout)
    assert rp.returncode == 1 and doc["conformant"] is False, rp.stdout[-3000:]
    bad = {c["name"]: c["detail"] for c in doc["checks"] if c["ok"] is False}
    assert "output-exactly-once" in bad, bad


@pytest.mark.engines
def test_two_source_matrix_through_the_pytest_api(tmp_path: Path) -> None:
    from rollcheck.testing import assert_job_exactly_once

    rep = assert_job_exactly_once(LEDGER, backends=("hashmap", "rocksdb"), checkpoints=("aligned",),
                                  failures=("task",), out=tmp_path / "m")
    assert rep.exit_code == 0


@pytest.mark.engines
def test_two_source_reproducer_runs_clean(tmp_path: Path) -> None:
    from rollcheck.flink_replay.environment import find_flink
    from rollcheck.flink_replay.matrix import Cell
    from rollcheck.flink_replay.reproducer import write_reproducer

    cell = Cell(str(LEDGER), "hashmap", "aligned", "task", None)
    rep = Report([Check.violated("output-exactly-once", "KEY [\"acct-1\"] lost")])
    path = write_reproducer(cell, {"interval_ms": 300, "parallelism": 2, "fail_at_record": 60, "seed": 0,
                                   "rate": 200.0}, tmp_path / "r.py", rep, records=120)
    r = subprocess.run([str(find_flink().python), str(path)], capture_output=True, text=True, timeout=600,
                       cwd=tmp_path)
    assert r.returncode == 0 and "not reproduced" in r.stdout, (r.stdout + r.stderr)[-2000:]
