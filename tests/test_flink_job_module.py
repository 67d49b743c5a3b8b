"""The user's PyFlink job module, read as the user wrote it (issue 29, item 6).

``KEY`` names output fields when the module gives ``FIELDS`` (as a Spark query names its
columns); any other bad ``KEY`` is exit 2 naming it — before Flink starts when the module shows
it, else at the first output row. An exception raised inside the engine is attributed from the
frames of Flink's failure: the user's function (exit 2, naming the function, the file and the
exception) or rollcheck's own code (exit 4) — never "inconclusive" without the reason.

The fast tests run the parsing and the recorder's reading of the run folder on captured texts
and fabricated folders, and the bad-``KEY`` modules through the CLI (the PyFlink interpreter
starts, no JVM). The ``slow`` ones record the held-out jobs of ``tests/flink_jobs/`` for real
(about 25-60 s each).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from rollcheck.flink_replay.job.main import KeyDeclarationError, classify_failure, resolve_key
from rollcheck.flink_replay.recording.record import job_outcome
from rollcheck.pyimpl.errors import InconclusiveError, InternalError, InvalidInputError

ROOT = Path(__file__).resolve().parent.parent
JOBS = ROOT / "tests" / "flink_jobs"
CLI = [sys.executable, "-m", "rollcheck.cli.main"]
OURS = ROOT / "flink_replay" / "job"


# -- KEY and FIELDS, as the module declares them -------------------------------------------------

def _mod(**attrs: object) -> SimpleNamespace:
    return SimpleNamespace(**attrs)


@pytest.mark.parametrize(("attrs", "want"), [
    ({"KEY": ("user",), "FIELDS": ("user", "total")}, [0]),
    ({"KEY": ["total", "user"], "FIELDS": ["user", "total"]}, [1, 0]),
    ({"KEY": "total", "FIELDS": ("user", "total")}, [1]),
    ({"KEY": [0, "total"], "FIELDS": ("user", "total")}, [0, 1]),
    ({"KEY": [0]}, [0]),
    ({"KEY": 1}, [1]),
    ({"KEY": (0, 3)}, [0, 3]),  # without FIELDS an index is checked at the first output row
])
def test_key_resolves_names_and_indices(attrs: dict[str, object], want: list[int]) -> None:
    assert resolve_key(_mod(**attrs)) == want


@pytest.mark.parametrize(("attrs", "name", "needle"), [
    ({"KEY": ("user",)}, "KEY", "'user' is a name, but the module has no FIELDS"),
    ({"KEY": ("usr",), "FIELDS": ("user", "total")}, "KEY", "'usr' is not one of FIELDS ('user', 'total')"),
    ({"KEY": [2], "FIELDS": ("user", "total")}, "KEY", "index 2 is beyond FIELDS"),
    ({"KEY": [-1]}, "KEY", "index -1 is negative"),
    ({"KEY": [True]}, "KEY", "neither an index"),
    ({"KEY": [0.5]}, "KEY", "neither an index"),
    ({"KEY": []}, "KEY", "is empty"),
    ({"KEY": {"user": 0}}, "KEY", "must be indices into the output tuple or names of FIELDS"),
    ({}, "KEY", "missing"),
    ({"KEY": ["user"], "FIELDS": "user,total"}, "FIELDS", "non-empty list of field names"),
    ({"KEY": ["user"], "FIELDS": ("user", "user")}, "FIELDS", "names 'user' twice"),
])
def test_bad_key_is_named(attrs: dict[str, object], name: str, needle: str) -> None:
    with pytest.raises(KeyDeclarationError) as e:
        resolve_key(_mod(**attrs))
    assert e.value.name == name and needle in str(e.value), str(e.value)


def _record(module: Path, out: Path, *extra: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, "flink", "record", "job", "--module", str(module), "--out", str(out), *extra],
                          capture_output=True, text=True, timeout=timeout, cwd=ROOT)


_BODY = """
def records(seed):
    return [("u1", 3), ("u2", 4)]


def job(env, source):
    return source
"""


@pytest.mark.parametrize(("head", "needle"), [
    ('KEY = ("user",)\n', "KEY: 'user' is a name, but the module has no FIELDS"),
    ('FIELDS = ("user", "total")\nKEY = ("usr",)\n', "KEY: 'usr' is not one of FIELDS"),
    ('FIELDS = ("user", "total")\nKEY = [5]\n', "KEY: index 5 is beyond FIELDS"),
])
def test_bad_key_is_exit_2_before_flink_starts(head: str, needle: str, tmp_path: Path) -> None:
    mod = tmp_path / "named_key_job.py"
    mod.write_text(head + _BODY)
    t0 = time.monotonic()
    r = _record(mod, tmp_path / "o.jsonl", timeout=300)
    last = r.stderr.strip().splitlines()[-1]
    assert r.returncode == 2, r.stderr[-1500:]
    assert needle in last and "named_key_job.py" in last and "KEY()" not in last, last
    assert not (tmp_path / "o.jsonl").exists() and not (tmp_path / "o.flinkrun").exists()
    # no JVM started: the PyFlink interpreter imported the module and stopped (a run is 25 s+)
    assert time.monotonic() - t0 < 60


# -- whose code raised inside the engine ---------------------------------------------------------

# as Flink reports it (REST root-exception / the client's exception), shortened: PyFlink 2.3,
# thread mode, a sink's open() calling runtime_context.get_attempt_number()
SITE = "/v/.venv-flink/lib/python3.11/site-packages"
USER_FAILURE = f"""org.apache.flink.runtime.JobException: Recovery is suppressed by FixedDelayRestartBackoffTimeStrategy
\tat org.apache.flink.runtime.executiongraph.failover.ExecutionFailureHandler.handleFailure(ExecutionFailureHandler.java:219)
\t... 4 more
Caused by: pemja.core.PythonException: <class 'AttributeError'>: 'pemja.PyJObject' object has no attribute 'getAttemptNumber'
\tat {SITE}/pyflink/fn_execution/datastream/embedded/runtime_context.get_attempt_number(runtime_context.py:64)
\tat {JOBS}/sink_attempt_number.open(sink_attempt_number.py:29)
\tat {SITE}/pyflink/datastream/data_stream.open(data_stream.py:304)
\tat pemja.core.PythonInterpreter.invokeMethodNoArgs(Native Method)
\tat org.apache.flink.streaming.runtime.tasks.StreamTask.restore(StreamTask.java:789)
"""


def test_user_function_is_named_from_the_frames() -> None:
    err = classify_failure(USER_FAILURE, str(JOBS / "sink_attempt_number.py"))
    assert err == {"code": "user", "function": "AttemptSink.open", "file": str(JOBS / "sink_attempt_number.py"),
                   "line": 29, "type": "AttributeError",
                   "message": "'pemja.PyJObject' object has no attribute 'getAttemptNumber'"}


def test_rollcheck_code_is_named_as_rollcheck() -> None:
    ours = USER_FAILURE.replace(f"{JOBS}/sink_attempt_number.open(sink_attempt_number.py:29)",
                                f"{OURS}/main.map(main.py:12)")
    err = classify_failure(ours, str(JOBS / "sink_attempt_number.py"))
    assert err is not None and err["code"] == "rollcheck" and err["file"] == str(OURS / "main.py"), err
    java = ("java.lang.IllegalStateException: tap broke\n"
            "\tat rollcheck.flink.RollcheckKeyedTap.snapshotState(RollcheckKeyedTap.java:88)\n"
            "\tat org.apache.flink.streaming.runtime.tasks.StreamTask.run(StreamTask.java:1)\n")
    err = classify_failure(java, None)
    assert err is not None and err["code"] == "rollcheck" and err["function"] == "RollcheckKeyedTap.snapshotState"
    assert err["type"] == "java.lang.IllegalStateException" and err["message"] == "tap broke"


def test_user_frame_inside_a_rollcheck_chain_is_the_users() -> None:
    """The innermost frame that belongs to someone decides (a user's map called by a rollcheck tap)."""
    text = ("java.lang.RuntimeException: boom\n"
            f"\tat {JOBS}/totals_by_name.<lambda>(totals_by_name.py:34)\n"
            "\tat rollcheck.flink.RollcheckTap.processElement(RollcheckTap.java:70)\n")
    err = classify_failure(text, str(JOBS / "totals_by_name.py"))
    assert err is not None and err["code"] == "user" and err["function"] == "<lambda>" and err["line"] == 34


def test_process_mode_traceback_is_read_too() -> None:
    """In process mode the Python worker's traceback is inside the Java text (outermost frame first)."""
    text = ("org.apache.flink.runtime.JobException: Recovery is suppressed\n"
            "Caused by: java.lang.RuntimeException: Error received from SDK harness for instruction 4: "
            "Traceback (most recent call last):\n"
            f'  File "{SITE}/apache_beam/runners/worker/sdk_worker.py", line 300, in _execute\n'
            "    response = task()\n"
            f'  File "{JOBS}/sink_attempt_number.py", line 29, in open\n'
            "    self.attempt = runtime_context.get_attempt_number()\n"
            f'  File "{SITE}/pyflink/fn_execution/datastream/process/runtime_context.py", line 70, in get_attempt_number\n'
            "    return self._attempt\n"
            "AttributeError: 'RuntimeContext' object has no attribute '_attempt'\n"
            "\n"
            "\tat java.base/java.util.concurrent.FutureTask.report(FutureTask.java:122)\n")
    err = classify_failure(text, str(JOBS / "sink_attempt_number.py"))
    assert err is not None and (err["code"], err["function"], err["line"], err["type"]) == \
        ("user", "AttemptSink.open", 29, "AttributeError"), err
    assert err["message"] == "'RuntimeContext' object has no attribute '_attempt'"


def test_injected_and_engine_failures_are_nobodys_code() -> None:
    injected = USER_FAILURE.replace("object has no attribute 'getAttemptNumber'",
                                    "rollcheck: injected task failure at record 7")
    assert classify_failure(injected, str(JOBS / "sink_attempt_number.py")) is None
    engine = ("java.util.concurrent.TimeoutException: heartbeat of TaskManager timed out\n"
              "\tat org.apache.flink.runtime.jobmaster.JobMaster.run(JobMaster.java:1)\n")
    assert classify_failure(engine, None) is None
    assert classify_failure("", None) is None


def test_driver_errors_name_rollcheck_only_for_its_own_bugs() -> None:
    import errno

    from rollcheck.flink_replay.job.failures import driver_error
    from rollcheck.flink_replay.job.files import write_json

    try:
        write_json("/dev/null/x.json", {})
    except OSError as e:
        rec = driver_error(e)  # NotADirectoryError raised in rollcheck's write_json
    assert rec is not None and rec["code"] == "rollcheck" and rec["function"] == "write_json", rec
    assert driver_error(OSError(errno.ENOSPC, "No space left on device")) is None  # the machine's
    py4j = type("Py4JJavaError", (Exception,), {"__module__": "py4j.protocol"})
    assert driver_error(py4j("the JVM failed")) is None  # the engine's, reported with its reason
    try:
        json.loads("{")
    except ValueError as e:
        assert driver_error(e) is None  # no frame of rollcheck's took part


# -- what the recorder makes of the run folder ---------------------------------------------------

def _cfg(tmp_path: Path) -> dict[str, str]:
    return {"module": str(tmp_path / "j.py"), "module_arg": "j.py"}


def test_user_error_in_the_engine_is_exit_2_naming_the_function(tmp_path: Path) -> None:
    (tmp_path / "reference").mkdir()
    err = classify_failure(USER_FAILURE, str(JOBS / "sink_attempt_number.py"))
    (tmp_path / "reference" / "engine-error.json").write_text(json.dumps(err))
    gone: list[bool] = []
    with pytest.raises(InvalidInputError) as e:
        job_outcome(tmp_path, _cfg(tmp_path), 2, discard=lambda: gone.append(True))
    msg = str(e.value)
    for needle in ("sink_attempt_number.py", "AttemptSink.open() line 29", "AttributeError", "getAttemptNumber"):
        assert needle in msg, msg
    assert gone == [True]


def test_rollcheck_error_in_the_engine_is_internal(tmp_path: Path) -> None:
    (tmp_path / "engine-error.json").write_text(json.dumps(
        {"code": "rollcheck", "function": "Output.map", "file": str(OURS / "main.py"), "line": 800,
         "type": "TypeError", "message": "'>=' not supported between instances of 'str' and 'int'"}))
    with pytest.raises(InternalError) as e:
        job_outcome(tmp_path, _cfg(tmp_path), 4)
    assert "rollcheck's own Output.map() (main.py:800) raised TypeError" in str(e.value)


def test_key_error_record_names_key_not_a_call(tmp_path: Path) -> None:
    (tmp_path / "reference").mkdir()
    (tmp_path / "reference" / "user-error.json").write_text(json.dumps(
        {"call": "KEY", "kind": "attribute", "error": "index 2 is beyond the output tuple"}))
    with pytest.raises(InvalidInputError) as e:
        job_outcome(tmp_path, _cfg(tmp_path), 2)
    assert "j.py: KEY: index 2 is beyond the output tuple" in str(e.value) and "KEY()" not in str(e.value)


def test_a_job_without_result_always_says_why(tmp_path: Path) -> None:
    (tmp_path / "job.out").write_text("")
    (tmp_path / "reference").mkdir()
    (tmp_path / "reference" / "run.json").write_text(json.dumps(
        {"final_state": "FAILED", "failure_cause": "java.io.IOException: the disk went away"}))
    with pytest.raises(InconclusiveError) as e:
        job_outcome(tmp_path, _cfg(tmp_path), 1)
    assert str(e.value).endswith("reference run ended FAILED: java.io.IOException: the disk went away"), str(e.value)
    (tmp_path / "reference" / "run.json").unlink()
    with pytest.raises(InconclusiveError) as e:
        job_outcome(tmp_path, _cfg(tmp_path), 1)
    assert not str(e.value).rstrip().endswith(":") and "printed nothing" in str(e.value)


# -- the held-out jobs, recorded for real --------------------------------------------------------

@pytest.mark.slow
def test_key_by_name_records_and_replays(tmp_path: Path) -> None:
    out = tmp_path / "n.jsonl"
    r = _record(JOBS / "totals_by_name.py", out, "--fail-at-record", "120", "--failure", "task", "--rate", "200")
    assert r.returncode == 0, r.stderr[-2000:]
    header = json.loads(out.read_text().splitlines()[0])
    assert header["key"] == [0]  # the name resolved through FIELDS
    rp = subprocess.run([*CLI, "flink", "replay", str(out), "--json"], capture_output=True, text=True,
                        timeout=300, cwd=ROOT)
    assert rp.returncode == 0, rp.stdout[-2000:] + rp.stderr[-2000:]
    assert json.loads(rp.stdout)["conformant"] is True


@pytest.mark.slow
def test_sink_open_raising_is_exit_2_naming_it(tmp_path: Path) -> None:
    r = _record(JOBS / "sink_attempt_number.py", tmp_path / "a.jsonl")
    last = r.stderr.strip().splitlines()[-1]
    assert r.returncode == 2, r.stderr[-2000:]
    for needle in ("sink_attempt_number.py", "AttemptSink.open()", "AttributeError", "inside the Flink job"):
        assert needle in last, last
    assert not (tmp_path / "a.flinkrun").exists()


@pytest.mark.slow
def test_key_beyond_the_row_is_exit_2_at_the_first_row(tmp_path: Path) -> None:
    r = _record(JOBS / "key_beyond_row.py", tmp_path / "k.jsonl", "--fail-at-record", "40", "--failure", "task")
    last = r.stderr.strip().splitlines()[-1]
    assert r.returncode == 2, r.stderr[-2000:]
    assert "key_beyond_row.py: KEY: index 2 is beyond the output tuple" in last, last


@pytest.mark.slow
def test_reproducer_reads_key_by_name(tmp_path: Path) -> None:
    """The standalone reproducer carries the module as written: KEY by name resolves through FIELDS."""
    from rollcheck.flink_replay.environment import find_flink
    from rollcheck.flink_replay.matrix import Cell
    from rollcheck.flink_replay.reproducer import write_reproducer
    from rollcheck.pyimpl.verdict import Check, Report

    cell = Cell(str(JOBS / "totals_by_name.py"), "hashmap", "aligned", "task", None)
    rep = Report([Check.violated("output-exactly-once", "row 2 of KEY [\"u1\"] committed 2 times")])
    path = write_reproducer(cell, {"interval_ms": 300, "parallelism": 2, "fail_at_record": 60, "seed": 0,
                                   "rate": 200.0}, tmp_path / "r.py", rep)
    r = subprocess.run([str(find_flink().python), str(path), "--records", "120"], capture_output=True, text=True,
                       timeout=600, cwd=tmp_path)
    assert r.returncode == 0, (r.stdout + r.stderr)[-2000:]
    assert "not reproduced" in r.stdout


@pytest.mark.slow
def test_rollcheck_code_raising_in_the_engine_is_internal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A deliberately broken copy of rollcheck's output step (it raises TypeError in every row): the
    real engine's failure frames name rollcheck's code, and the recording is an internal error."""
    from rollcheck.flink_replay.recording import record as record_mod

    job = _broken_copy(tmp_path, "pipelines.py", "key = json.dumps([row[i] for i in key_idx], default=str)\n",
                       "key = json.dumps([row[i] for i in key_idx]) + 1\n")
    monkeypatch.setattr(record_mod, "_job_file", lambda: job)
    cfg = record_mod.RecordConfig.make(module=str(JOBS / "totals_by_name.py"), call_timeout=120.0)
    with pytest.raises(InternalError) as e:
        record_mod.record(tmp_path / "o.jsonl", cfg)
    msg = str(e.value)
    assert "rollcheck's own user_pipeline.Output.map() (pipelines.py:" in msg and "TypeError" in msg, msg


def _broken_copy(tmp_path: Path, module: str, needle: str, replacement: str) -> Path:
    """A copy of rollcheck's job process files with one line of ``module`` replaced (a mutant)."""
    import shutil

    copy = tmp_path / "job_copy"
    copy.mkdir()
    for f in OURS.glob("*.py"):
        shutil.copy(f, copy / f.name)
    path = copy / module
    assert needle in path.read_text()
    path.write_text(path.read_text().replace(needle, replacement))
    return copy / "main.py"


def test_rollcheck_code_raising_in_the_job_process_is_internal(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """A broken copy of rollcheck's driver code (before any JVM starts): exit 4 naming its function,
    not an inconclusive "the job ended without a result"."""
    from rollcheck.flink_replay.recording import record as record_mod

    job = _broken_copy(tmp_path, "user.py", "    recs = call_user(run_dir, \"records\"",
                       "    key_idx = key_idx + None\n    recs = call_user(run_dir, \"records\"")
    monkeypatch.setattr(record_mod, "_job_file", lambda: job)
    cfg = record_mod.RecordConfig.make(module=str(JOBS / "totals_by_name.py"), call_timeout=120.0)
    with pytest.raises(InternalError) as e:
        record_mod.record(tmp_path / "o.jsonl", cfg)
    assert "rollcheck's own load_user_job() (user.py:" in str(e.value) and "TypeError" in str(e.value), str(e.value)


@pytest.mark.slow
def test_job_failing_in_the_reference_run_is_exit_2(tmp_path: Path) -> None:
    """job() is called while the failure-free reference run is built: its error record lies in the
    run's reference folder, which the recorder reads too (it said "ended without a result")."""
    mod = tmp_path / "list_job.py"
    mod.write_text("KEY = [0]\n" + _BODY.replace("    return source\n", "    return [source]\n"))
    r = _record(mod, tmp_path / "o.jsonl", timeout=300)
    last = r.stderr.strip().splitlines()[-1]
    assert r.returncode == 2, r.stderr[-1500:]
    assert "list_job.py: job(): must return a DataStream, got list" in last, last
