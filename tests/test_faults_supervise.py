"""The Spark recorders' driver supervision (:mod:`rollcheck.spark_replay.supervise`) without Spark.

A stand-in driver module uses the real :func:`child_main` / :func:`request_kill` protocol, so the
supervision loop (kill on request, replies, error classes across the process boundary, scratch
folders removed on every exit path, the whole group killed) is tested in about 5 s.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from rollcheck.pyimpl.errors import EnvironmentFault, InvalidInputError, UserCodeTimeout
from rollcheck.spark_replay.supervise import run_driver
from rollcheck.testing.faults import kill_tagged, new_tag, tagged_env, wait_gone

FAKE = '''
import subprocess, sys, time
from pathlib import Path
from rollcheck.pyimpl.errors import InvalidInputError, UserCodeTimeout
from rollcheck.spark_replay.supervise import child_main, request_kill

def run(spec):
    act = spec["act"]
    subprocess.Popen(["sleep", "300"])  # a grandchild, like the driver's JVM
    if act == "ok":
        print("user code may print", flush=True)
        return {"status": "done", "n": 1}
    if act == "kill":
        request_kill(Path(spec["markers"]))
    if act == "sleep":
        time.sleep(600)
    if act == "invalid":
        raise InvalidInputError("bad attribute", source="q.py", location="KEY")
    if act == "enospc":
        raise OSError(28, "No space left on device", "/x/out.jsonl")
    if act == "java-enospc":
        raise RuntimeError("java.io.IOException: No space left on device\\n\\tat java.io.FileOutputStream")
    if act == "timeout":
        raise UserCodeTimeout("q.py", "sink", 5)
    if act == "crash":
        raise ZeroDivisionError("boom")

if __name__ == "__main__":
    sys.exit(child_main(run))
'''


@pytest.fixture
def driver(tmp_path, monkeypatch):
    (tmp_path / "fakedriver.py").write_text(FAKE, encoding="utf-8")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]))
    tag = new_tag()
    monkeypatch.setenv("ROLLCHECK_FAULT_TAG", tag)
    work = tmp_path / "work"
    markers = work / "markers"
    markers.mkdir(parents=True)

    def run(act: str, **kw):
        return run_driver("fakedriver", {"act": act, "markers": str(markers)}, workdir=work, n=1,
                          markers=markers, **kw)

    yield run, work, tag
    kill_tagged(tag)


def test_reply_and_the_group_dies_after_a_normal_end(driver):
    run, work, tag = driver
    r = run("ok")
    assert (r.killed, r.returncode, r.reply) == (False, 0, {"status": "done", "n": 1})
    assert wait_gone(tag, 5) == []  # the grandchild died with the group
    assert not (work / "tmp-1").exists()


def test_kill_on_request(driver):
    run, work, tag = driver
    t0 = time.monotonic()
    r = run("kill")
    assert r.killed and r.reply == {} and time.monotonic() - t0 < 30
    assert wait_gone(tag, 5) == [] and not (work / "tmp-1").exists()
    assert not (work / "markers" / "kill-requested").exists()


@pytest.mark.parametrize("act, cls, text", [
    ("invalid", InvalidInputError, "q.py: KEY: bad attribute"),
    ("enospc", EnvironmentFault, "/x/out.jsonl: No space left on device [ENOSPC]"),
    ("java-enospc", EnvironmentFault, "No space left on device [ENOSPC]"),
    ("timeout", UserCodeTimeout, "q.py: sink: did not return within 5 s"),
])
def test_errors_cross_the_process_boundary_as_their_own_class(driver, act, cls, text):
    run, work, tag = driver
    with pytest.raises(cls) as e:
        run(act)
    assert type(e.value) is cls and text in str(e.value)
    if act == "invalid":
        assert (e.value.source, e.value.location) == ("q.py", "KEY")
    assert wait_gone(tag, 5) == [] and not (work / "tmp-1").exists()


def test_a_crashing_driver_is_an_error_and_leaves_nothing(driver):
    run, work, tag = driver
    with pytest.raises(RuntimeError, match="exited with 1"):
        run("crash")
    assert wait_gone(tag, 5) == [] and not (work / "tmp-1").exists()


def test_a_driver_past_its_time_limit_is_killed(driver):
    run, work, tag = driver
    with pytest.raises(UserCodeTimeout):
        run("sleep", timeout=1)
    assert wait_gone(tag, 5) == [] and not (work / "tmp-1").exists()


PARENT = '''
import signal, sys
from pathlib import Path
from rollcheck.spark_replay.supervise import run_driver
def term(*a):
    raise KeyboardInterrupt
signal.signal(signal.SIGTERM, term)
work = Path(sys.argv[1]); (work / "markers").mkdir(parents=True)
print("ready", flush=True)
try:
    run_driver("fakedriver", {"act": "sleep"}, workdir=work, n=1, markers=work / "markers")
except KeyboardInterrupt:
    sys.exit(143)
'''


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_sigterm_and_sigint_remove_the_scratch_folder_and_the_group(tmp_path, sig):
    (tmp_path / "fakedriver.py").write_text(FAKE, encoding="utf-8")
    tag = new_tag()
    env = tagged_env(tag, PYTHONPATH=os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]))
    work = tmp_path / "work"
    p = subprocess.Popen([sys.executable, "-c", textwrap.dedent(PARENT), str(work)], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert p.stdout is not None and p.stdout.readline().strip() == "ready"
        deadline = time.monotonic() + 30
        while not (work / "tmp-1").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.5)
        p.send_signal(sig)
        rc = p.wait(timeout=20)
        assert rc == 143, p.stderr.read() if p.stderr else ""  # the stand-in exits 143 on both
        assert wait_gone(tag, 5) == []
        assert not (work / "tmp-1").exists()
    finally:
        p.kill()
        p.wait()
        kill_tagged(tag)


def test_environment_fault_reads_the_jvms_own_words():
    from rollcheck.pyimpl.errors import environment_fault

    java = ("org.apache.spark.SparkException: Job aborted\nCaused by: java.io.FileNotFoundException: "
            "/data/ck/offsets/.3.tmp (No space left on device)\n\tat java.base/java.io.FileOutputStream")
    f = environment_fault(RuntimeError(java), "/data")
    assert (f.path, f.os_reason, f.errno) == ("/data/ck/offsets/.3.tmp", "No space left on device", 28)
    f = environment_fault(RuntimeError("java.io.IOException: Read-only file system"), "/ro")
    assert (f.path, f.errno) == ("/ro", 30)
    inner = OSError(13, "Permission denied", "/etc/x")
    try:
        try:
            raise inner
        except OSError as e:
            raise ValueError("wrapped") from e
    except ValueError as outer:
        assert environment_fault(outer).path == "/etc/x"
    assert environment_fault(ValueError("the query failed: division by zero")) is None
    assert environment_fault(OSError(2, "No such file or directory", "/x")) is None
    assert isinstance(EnvironmentFault("/x", "No space left on device", 28), InvalidInputError)
