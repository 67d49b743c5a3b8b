"""The ``retry`` failure as a schedule (``spark_replay/faults/retry.py``, ``faults/retry_check.py``).

Fast tests: the schedule's text, flags and refusals; the matrix's retry columns; and, per schedule
parameter, a trace whose failure struck elsewhere than asked, which ``task-retried`` must call
*unchecked* (the replay inconclusive), never held.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from rollcheck.cli.main import main
from rollcheck.pyimpl.errors import InvalidInputError
from rollcheck.spark_replay.faults.retry import RetrySchedule
from rollcheck.spark_replay.faults.retry_check import retry_struck
from rollcheck.spark_replay.matrix.plan import Cell, MatrixOptions, columns, plan_cells
from rollcheck.spark_replay.matrix.run import _record_argv
from rollcheck.spark_replay.query.config import QueryConfig


def _attempt(part: int, att: int, failed: bool, files: list[str] | None = None, where: str = "after-commit",
             stage: int = 27) -> dict:
    return {"partition": part, "attempt": att, "stage": stage, "batch": 2, "failed": failed, "where": where,
            "state_files": ["3.zip"] if files is None else files, "state_files_any": 0 if where == "input" else 2}


def _trace(schedule: dict, failed: list[dict], ok: list[dict], *, batch_failed: bool = False,
           restart: bool = True, before: tuple[int, ...] = (0, 1), kind: str = "failure") -> tuple[dict, list]:
    """A header asking for ``schedule`` and the events of a retry at batch 2."""
    cfg = {"failure": "retry", "fail_at_batch": 2, **RetrySchedule(**schedule).config()}
    ev: list[dict] = [{"seq": i + 1, "kind": "spark.sink_written", "attempt": 1, "batch": b} for i, b in enumerate(before)]
    ev.append({"seq": 10, "kind": kind, "mode": "retry", "batch": 2, "attempt": 1, "stateful": True,
               "stage_partitions": 2, "batch_failed": batch_failed, "failed_attempt": failed[0] if failed else None,
               "failed_attempts": failed, "succeeded_attempts": ok})
    if restart:
        ev += [{"seq": 20, "kind": "spark.attempt_start", "attempt": 2},
               {"seq": 21, "kind": "spark.restart", "attempt": 2, "resume_batch": 3}]
    ev.append({"seq": 30, "kind": "end", "status": "done"})
    return {"config": cfg}, ev


DEFAULT = _trace({}, [_attempt(1, 0, True)], [_attempt(0, 0, False), _attempt(1, 1, False)])
ALL2 = _trace({"tasks": "all", "attempts": 2, "then": "continue"},
              [_attempt(p, a, True) for p in (0, 1) for a in (0, 1)], [_attempt(0, 2, False), _attempt(1, 2, False)],
              restart=False, kind="spark.failure")
INPUT4 = _trace({"stage": "input", "attempts": 4},
                [_attempt(0, a, True, [], "input", stage=25) for a in range(4)], [], batch_failed=True)
FIRST = _trace({"load": "first"}, [_attempt(1, 0, True)], [_attempt(0, 0, False), _attempt(1, 1, False)], before=())


@pytest.mark.parametrize("trace", [DEFAULT, ALL2, INPUT4, FIRST], ids=["default", "all2", "input4", "first"])
def test_each_schedule_as_struck_is_held(trace):
    c = retry_struck(*trace)
    assert c.status.value == "held", c.detail


def _tampered(trace: tuple[dict, list], fn) -> tuple[dict, list]:
    header, events = copy.deepcopy(trace)
    fn(header["config"], next(e for e in events if e.get("mode") == "retry"), events)
    return header, events


def _drop_failed_partition(cfg, f, ev):  # only partition 0 failed
    f["failed_attempts"] = [a for a in f["failed_attempts"] if a["partition"] == 0]
    f["succeeded_attempts"].append(_attempt(1, 0, False))


def _two_partitions_failed(cfg, f, ev):
    f["failed_attempts"].append(_attempt(0, 0, True))


def _input_saw_state(cfg, f, ev):  # the failed attempts ran in the stateful stage
    for a in f["failed_attempts"]:
        a.update(where="after-commit", state_files=["3.zip"], state_files_any=2)


def _stateful_struck_input(cfg, f, ev):
    for a in f["failed_attempts"]:
        a["where"] = "input"


def _before_the_commit(cfg, f, ev):
    for a in f["failed_attempts"]:
        a["state_files"] = []


def _one_attempt_only(cfg, f, ev):
    f["failed_attempts"] = [a for a in f["failed_attempts"] if a["attempt"] == 0]


def _a_second_attempt_failed(cfg, f, ev):
    f["failed_attempts"].append(_attempt(1, 1, True))
    f["succeeded_attempts"] = [_attempt(0, 0, False), _attempt(1, 2, False)]


def _batch_did_not_fail(cfg, f, ev):
    f["batch_failed"] = False


def _driver_ran_earlier_batches(cfg, f, ev):
    ev.insert(0, {"seq": 1, "kind": "spark.sink_written", "attempt": 1, "batch": 1})


def _first_batch_of_its_driver(cfg, f, ev):
    ev[:] = [e for e in ev if e.get("kind") != "spark.sink_written"]


def _restarted_after(cfg, f, ev):
    ev.insert(-1, {"seq": 21, "kind": "spark.restart", "attempt": 2, "resume_batch": 3})


def _never_restarted(cfg, f, ev):
    ev[:] = [e for e in ev if e.get("kind") not in ("spark.restart", "spark.attempt_start")]


def _went_on_without_end(cfg, f, ev):
    ev[:] = [e for e in ev if e.get("kind") != "end"]


@pytest.mark.parametrize("param,trace,tamper,fragment", [
    ("tasks=all", ALL2, _drop_failed_partition, "never failed"),
    ("tasks=one", DEFAULT, _two_partitions_failed, "asked for one task"),
    ("stage=input", INPUT4, _input_saw_state, "not the input stage"),
    ("stage=stateful", DEFAULT, _stateful_struck_input, "not the stateful stage"),
    ("where=after-commit", DEFAULT, _before_the_commit, "did not fail after its state store committed"),
    ("attempts=2", ALL2, _one_attempt_only, "asked for the first 2"),
    ("attempts=1", DEFAULT, _a_second_attempt_failed, "asked for the first 1"),
    ("attempts=4", INPUT4, _batch_did_not_fail, "did not fail"),
    ("load=first", FIRST, _driver_ran_earlier_batches, "load=first"),
    ("load=later", _tampered(DEFAULT, lambda c, f, e: c.update(fail_load="later")), _first_batch_of_its_driver,
     "load=later"),
    ("then=continue", ALL2, _restarted_after, "asked the query to go on"),
    ("then=continue", ALL2, _went_on_without_end, "did not go on to its end"),
    ("then=restart", DEFAULT, _never_restarted, "never followed by a restart"),
])
def test_a_failure_struck_elsewhere_is_unchecked(param, trace, tamper, fragment):
    assert retry_struck(*trace).status.value == "held"
    c = retry_struck(*_tampered(trace, tamper))
    assert c.status.value == "unchecked" and fragment in c.detail, (param, c.detail)


def test_an_older_trace_without_a_schedule_is_judged_by_the_default():
    header, events = copy.deepcopy(DEFAULT)
    header["config"] = {"failure": "retry", "fail_at_batch": 2}
    f = events[2]
    for k in ("failed_attempts", "stage_partitions", "batch_failed"):
        f.pop(k)
    assert retry_struck(header, events).status.value == "held"


# ----------------------------------------------------------------------------- flags and plans
def test_schedule_text_round_trips_and_gives_the_record_flags():
    s = RetrySchedule.parse("stage=input+attempts=4+load=first")
    assert RetrySchedule.parse(s.text()) == s
    assert s.argv() == ["--fail-stage", "input", "--fail-attempts", "4", "--fail-load", "first"]
    assert RetrySchedule.of_config(s.config()) == s


@pytest.mark.parametrize("text,fragment", [
    ("attempts=5", "1..4"), ("attempts=0", "1..4"), ("where=before-commit", "cannot be struck"),
    ("attempts=4+then=continue", "continue cannot follow"), ("tasks=two", "tasks is one of"),
    ("depth=3", "KEY=VALUE")])
def test_bad_schedules_are_refused(text, fragment):
    with pytest.raises(InvalidInputError, match=fragment):
        RetrySchedule.parse(text)


def test_schedule_flags_need_the_retry_failure_and_batch_one_for_load_later():
    with pytest.raises(InvalidInputError, match="needs --failure retry"):
        QueryConfig("q.py", failure="kill", fail_at_batch=1, fail_attempts=2).validate()
    with pytest.raises(InvalidInputError, match="needs --fail-at-batch >= 1"):
        QueryConfig("q.py", failure="retry", fail_at_batch=0, fail_load="later").validate()
    QueryConfig("q.py", failure="retry", fail_at_batch=1, fail_tasks="all", fail_stage="input", fail_attempts=4,
                fail_load="first").validate()


def test_record_query_refuses_a_schedule_without_retry_in_one_line(capsys, tmp_path):
    rc = main(["spark", "record", "query", "--module", "q.py", "--out", str(tmp_path / "t.jsonl"), "--failure", "task",
               "--fail-at-batch", "1", "--fail-tasks", "all"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "--fail-tasks" in err[0] and not (tmp_path / "t.jsonl").exists()


def test_the_matrix_sweeps_schedules_one_column_each(tmp_path):
    cols = columns(["retry", "task"], [], ["default", "tasks=all+attempts=2", "attempts=2+tasks=all"])
    assert cols == ["task", "retry", "retry:tasks=all+attempts=2"]
    cells = plan_cells(["q.py"], ["rocksdb"], ["retry"], [], [None], ["stage=input", "load=first"])
    assert [c.column for c in cells] == ["retry:stage=input", "retry:load=first"]
    assert cells[0].stem == "q--rocksdb/retry-stage=input"
    opts = MatrixOptions(modules=["q.py"], failures=["retry"], retry_schedules=["stage=input"])
    argv = _record_argv(cells[0], "q.py", "rocksdb", opts, tmp_path / "t.jsonl", None)
    q = json.loads(Path(argv[-1]).read_text())["query"]  # the child's typed configuration
    assert q["failure"] == "retry" and q["fail_stage"] == "input"
    argv = _record_argv(Cell("q.py", "rocksdb", "retry"), "q.py", "rocksdb", opts, tmp_path / "d.jsonl", None)
    assert json.loads(Path(argv[-1]).read_text())["query"]["fail_stage"] is None


@pytest.mark.parametrize("opts,fragment", [
    ({"failures": ["task"], "retry_schedules": ["tasks=all"]}, "need the retry failure"),
    ({"failures": ["retry"], "retry_schedules": ["attempts=9"]}, "1..4"),
    ({"failures": ["retry"], "retry_schedules": ["load=later"], "fail_at_batch": 0}, "needs --fail-at-batch")])
def test_matrix_refuses_bad_schedules(opts, fragment):
    with pytest.raises(InvalidInputError, match=fragment) as e:
        MatrixOptions(modules=["q.py"], **opts).validate()
    assert e.value.location == "--retry-schedules"


# ----------------------------------------------------------------------------- a shipped recording
def test_shipped_schedule_recording_is_conformant_and_its_tampered_attempts_inconclusive(capsys, tmp_path):
    """A real RocksDB recording (``tasks=all+attempts=2+then=continue``, pyspark 4.3.0): conformant,
    ``task-retried`` held; with one failed attempt of partition 1 dropped it is inconclusive."""
    import json

    data = Path(__file__).parent / "data" / "spark" / "spark-query-retry-schedule.jsonl"
    assert main(["spark", "replay", str(data), "--json"]) == 0
    checks = {c["name"]: c for c in json.loads(capsys.readouterr().out)["checks"]}
    assert checks["task-retried"]["status"] == "held" and checks["failure-observed"]["status"] == "held"
    lines = []
    for ln in data.read_text(encoding="utf-8").splitlines():
        e = json.loads(ln)
        if e.get("mode") == "retry":
            e["failed_attempts"] = [a for a in e["failed_attempts"] if (a["partition"], a["attempt"]) != (1, 1)]
        lines.append(json.dumps(e))
    bad = tmp_path / "t.jsonl"
    bad.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert main(["spark", "replay", str(bad), "--json"]) == 3
    checks = {c["name"]: c for c in json.loads(capsys.readouterr().out)["checks"]}
    assert checks["task-retried"]["status"] == "unchecked" and "asked for the first 2" in checks["task-retried"]["detail"]
