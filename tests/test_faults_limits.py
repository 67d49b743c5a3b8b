"""User code that hangs: ``--call-timeout`` and :func:`rollcheck.infra.calllimit.call_limited`.

The fast tests (about 10 s) bound calls in the main thread and in other threads and run the CLI on
a query module whose ``batches()`` never returns (no JVM: ``batches`` runs before Spark starts).
The Spark test (a sink blocked in C code inside ``foreachBatch``) costs one JVM start (~1–3 min
on a loaded 2-core machine) and is marked ``spark`` and ``slow``.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from rollcheck.infra.calllimit import call_limited, check_limit
from rollcheck.pyimpl.errors import InvalidInputError, UserCodeTimeout
from rollcheck.testing.faults import kill_tagged, new_tag, tagged_env, wait_gone

ROOT = Path(__file__).resolve().parents[1]
RC = [sys.executable, "-m", "rollcheck.cli.main"]


def _spin() -> None:
    while True:
        pass


def _swallow() -> str:
    try:
        while True:
            pass
    except Exception:  # the user's catch-all must not swallow the limit
        return "swallowed"


def test_a_loop_in_the_main_thread_is_stopped_and_named():
    t0 = time.monotonic()
    with pytest.raises(UserCodeTimeout) as e:
        call_limited(_spin, limit=0.3, file="q.py", method="batches")
    assert time.monotonic() - t0 < 3
    assert (e.value.file, e.value.method, e.value.limit) == ("q.py", "batches", 0.3)
    assert str(e.value) == "q.py: batches: did not return within 0.3 s (--call-timeout)"
    with pytest.raises(UserCodeTimeout):
        call_limited(_swallow, limit=0.3, file="q.py", method="batches")
    with pytest.raises(UserCodeTimeout):
        call_limited(time.sleep, 60, limit=0.3, file="q.py", method="batches")
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    assert call_limited(sorted, [3, 1], limit=5, file="q.py", method="x") == [1, 3]


def test_an_outer_timer_is_kept_and_restored():
    fired = []
    old = signal.signal(signal.SIGALRM, lambda *a: fired.append(1))
    try:
        signal.setitimer(signal.ITIMER_REAL, 1.0)
        assert call_limited(sum, [1, 2], limit=5, file="q.py", method="x") == 3
        left = signal.getitimer(signal.ITIMER_REAL)[0]
        assert 0 < left <= 1.0  # still armed, not extended
        time.sleep(left + 0.2)
        assert fired == [1]
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def test_a_loop_in_another_thread_is_stopped_and_the_thread_ends():
    box: list = []
    called = []

    def run() -> None:
        for fn in (_spin, _swallow):
            try:
                call_limited(fn, limit=0.3, file="q.py", method="sink", on_expire=lambda: called.append(1))
            except UserCodeTimeout as e:
                box.append(e.method)

    t = threading.Thread(target=run)
    t.start()
    t.join(10)
    assert not t.is_alive() and box == ["sink", "sink"] and called == [1, 1]


@pytest.mark.parametrize("bad", [0, -1, float("nan"), float("inf"), "x"])
def test_limits_must_be_positive_finite_seconds(bad):
    with pytest.raises(InvalidInputError):
        check_limit(bad)


SPIN_QUERY = '''
SCHEMA = "user STRING, n INT"
OUTPUT_MODE = "update"
KEY = ["user"]
def batches(seed):
    while True:
        pass
def query(df):
    return df.groupBy("user").count()
'''


def _private_tmp(tmp_path):
    """A temporary folder for a child whose group is killed (it cannot remove its own)."""
    d = tmp_path / "ptmp"
    d.mkdir(exist_ok=True)
    return d


def test_cli_batches_that_never_returns_is_exit_2_naming_file_method_and_limit(tmp_path):
    q = tmp_path / "spin.py"
    q.write_text(SPIN_QUERY, encoding="utf-8")
    out = tmp_path / "o.jsonl"
    out.write_text("previous\n", encoding="utf-8")
    tag = new_tag()
    t0 = time.monotonic()
    try:
        r = subprocess.run([*RC, "spark", "record", "query", "--module", str(q), "--out", str(out),
                            "--call-timeout", "1.5"], capture_output=True, text=True, cwd=ROOT,
                           env=tagged_env(tag, TMPDIR=str(_private_tmp(tmp_path))), timeout=120)
        took = time.monotonic() - t0
        assert r.returncode == 2, r.stderr
        last = r.stderr.strip().splitlines()[-1]
        assert "spin.py" in last and "batches" in last and "1.5 s" in last and "--call-timeout" in last
        assert "Traceback" not in r.stderr
        assert took < 60
        assert wait_gone(tag, 5) == []
        assert out.read_text(encoding="utf-8") == "previous\n"
        assert not (tmp_path / "o.jsonl.partial").exists()
    finally:
        kill_tagged(tag)


@pytest.mark.parametrize("value", ["0", "-3", "nan", "inf"])
def test_cli_refuses_a_bad_call_timeout(tmp_path, value):
    q = tmp_path / "spin.py"
    q.write_text(SPIN_QUERY, encoding="utf-8")
    r = subprocess.run([*RC, "spark", "record", "query", "--module", str(q), "--out", str(tmp_path / "o"),
                        "--call-timeout", value], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 2 and "call-timeout" in r.stderr and "Traceback" not in r.stderr, r.stderr


HANG_SINK = '''
import json, os, time
SCHEMA = "user STRING, n INT"
OUTPUT_MODE = "update"
KEY = ["user"]
def batches(seed):
    return [[("a", 1), ("b", 2)], [("a", 3)]]
def query(df):
    return df.groupBy("user").count()
def sink(df, batch_id, out_dir):
    rows = [r.asDict() for r in df.collect()]
    if batch_id == 1:
        time.sleep(10**6)   # blocked in C code: only the process group can end it
    with open(os.path.join(out_dir, f"b{batch_id}.json"), "w") as f:
        json.dump(rows, f)
def read_output(out_dir):
    out = []
    for n in sorted(os.listdir(out_dir)):
        with open(os.path.join(out_dir, n)) as f:
            out += json.load(f)
    return out
'''


@pytest.mark.spark
@pytest.mark.slow
def test_cli_sink_blocked_inside_spark_is_exit_2_and_leaves_nothing(tmp_path):
    q = tmp_path / "hang_sink.py"
    q.write_text(HANG_SINK, encoding="utf-8")
    tag = new_tag()
    try:
        r = subprocess.run([*RC, "spark", "record", "query", "--module", str(q), "--out", str(tmp_path / "o.jsonl"),
                            "--call-timeout", "15", "--no-reference"], capture_output=True, text=True,
                           cwd=ROOT, env=tagged_env(tag, JAVA_TOOL_OPTIONS=f"-Djava.io.tmpdir={tmp_path}",
                                                       TMPDIR=str(_private_tmp(tmp_path))),
                           timeout=900)
        assert r.returncode == 2, r.stderr[-2000:]
        last = r.stderr.strip().splitlines()[-1]
        assert "hang_sink.py" in last and "sink" in last and "15 s" in last, last
        assert wait_gone(tag, 10) == []
        assert not list((tmp_path / "o.jsonl.work").glob("tmp-*"))
    finally:
        kill_tagged(tag)
