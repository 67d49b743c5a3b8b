"""Process listings through psutil: executors, tagged survivors, groups and the scheduler's table."""

import os
import signal
import subprocess
import sys
import time
from types import SimpleNamespace

import psutil
import pytest

from rollcheck import scheduler
from rollcheck.sections import _class_archive
from rollcheck.spark_replay import cluster
from rollcheck.testing import faults


class _Fake:
    """A stand-in for a ``psutil.Process``: an environment, a state and a command line, or an error."""

    def __init__(self, pid, argv=(), env=None, status=psutil.STATUS_RUNNING, error=None):
        self.pid, self._argv, self._env, self._status, self._error = pid, list(argv), env or {}, status, error

    def _check(self):
        if self._error is not None:
            raise self._error

    def cmdline(self):
        self._check()
        return self._argv

    def environ(self):
        self._check()
        return self._env

    def status(self):
        self._check()
        return self._status


def _executor(pid, eid, app):
    return _Fake(pid, ["java", "-cp", "x", cluster.EXECUTOR_CLASS, "--driver-url", "spark://d",
                       "--executor-id", eid, "--hostname", "h", "--app-id", app])


def test_executor_processes_reads_command_lines(monkeypatch):
    procs = [_executor(30, "10", "app-1"), _executor(31, "2", "app-1"), _executor(32, "0", "app-2"),
             _Fake(33, ["java", cluster.EXECUTOR_CLASS, "--executor-id", "5"]),  # no --app-id
             _Fake(34, error=psutil.AccessDenied(34)), _Fake(35, error=psutil.ZombieProcess(35)),
             _Fake(36, ["python", "-c", "pass"])]
    monkeypatch.setattr(cluster.psutil, "process_iter", lambda *a, **k: iter(procs))
    got = cluster.executor_processes("app-1")
    assert [(e.pid, e.executor_id, e.app_id) for e in got] == [(31, "2", "app-1"), (30, "10", "app-1")]
    assert [e.pid for e in cluster.executor_processes()] == [32, 31, 30]


def test_kill_executor_counts_an_unreaped_child_as_gone():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        ex = cluster.ExecutorProcess(child.pid, "1", "app")
        assert cluster.kill_executor(ex, timeout=10)
        assert psutil.Process(child.pid).status() == psutil.STATUS_ZOMBIE  # not reaped yet
    finally:
        child.kill()
        child.wait()


def test_tagged_processes_skip_zombies_strangers_and_the_unreadable(monkeypatch):
    tag = faults.new_tag()
    env = {faults.TAG_VAR: tag}
    procs = [_Fake(40, ["sleep", "9"], env), _Fake(41, ["sleep", "8"], env, status=psutil.STATUS_ZOMBIE),
             _Fake(42, ["sleep", "7"], {faults.TAG_VAR: "other"}), _Fake(43, error=psutil.AccessDenied(43)),
             _Fake(44, ["java", "", "-jar", "a.jar"], env)]
    monkeypatch.setattr(faults.psutil, "process_iter", lambda *a, **k: iter(procs))
    assert faults.tagged_processes(tag) == [(40, "sleep 9"), (44, "java  -jar a.jar")]


def test_tagged_processes_finds_a_real_child_until_it_dies():
    tag = faults.new_tag()
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                             env=faults.tagged_env(tag))
    try:
        found = dict(faults.tagged_processes(tag))
        assert list(found) == [child.pid] and "time.sleep(60)" in found[child.pid]
        child.kill()
        assert faults.wait_gone(tag, 10) == []  # a zombie no longer counts
    finally:
        child.kill()
        child.wait()


def test_members_left_sees_an_orphan_of_the_group_not_the_leaders_children():
    # the leader's own child (a sleep it waits for) does not count; an orphan in the group does
    leader = subprocess.Popen(["sh", "-c", "sleep 60 & wait"], start_new_session=True)
    try:
        deadline = time.monotonic() + 10
        while not psutil.Process(leader.pid).children() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _class_archive._members_left(leader.pid)
    finally:
        os.killpg(leader.pid, signal.SIGKILL)
        leader.wait()
    leader = subprocess.Popen(["sh", "-c", "(sleep 60 &); sleep 60"], start_new_session=True)
    try:
        deadline = time.monotonic() + 10
        while not _class_archive._members_left(leader.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _class_archive._members_left(leader.pid)
    finally:
        os.killpg(leader.pid, signal.SIGKILL)
        leader.wait()
    deadline = time.monotonic() + 10
    while _class_archive._members_left(leader.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _class_archive._members_left(leader.pid)


def test_proc_table_gives_cpu_seconds_and_the_tree():
    burn = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.6: pass\ntime.sleep(60)"
    child = subprocess.Popen([sys.executable, "-c", burn])
    try:
        deadline = time.monotonic() + 30
        while sum(psutil.Process(child.pid).cpu_times()[:2]) < 0.6 and time.monotonic() < deadline:
            time.sleep(0.05)
        cpu: dict = {}
        table = scheduler._proc_table(cpu)
        ppid, start = table[child.pid]
        assert ppid == os.getpid()
        assert 0.5 <= cpu[(child.pid, start)] < 10  # seconds, not clock ticks
        assert (child.pid, start) in scheduler._descendants([os.getpid()], table)
    finally:
        child.kill()
        child.wait()
    scheduler._kill_tracked({(child.pid, start)})  # reaped: nothing to kill, nothing raised


def test_default_engine_slots_follows_available_memory(monkeypatch):
    gib = 1024 ** 3
    monkeypatch.setattr(scheduler.psutil, "virtual_memory", lambda: SimpleNamespace(available=5 * gib))
    assert scheduler.default_engine_slots() == 2
    monkeypatch.setattr(scheduler.psutil, "virtual_memory", lambda: SimpleNamespace(available=3 * gib))
    assert scheduler.default_engine_slots() == 1


@pytest.mark.parametrize("module", [cluster, scheduler, faults, _class_archive])
def test_no_module_reads_proc_itself(module):
    assert '"/proc' not in open(module.__file__, encoding="utf-8").read()


def test_no_module_reads_proc_by_hand():
    """Process trees and command lines come from psutil: no package module opens ``/proc``."""
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    folders = ("pyimpl", "infra", "properties", "tla", "spark_replay", "flink_replay", "rollcheck")
    readers = [str(p.relative_to(root)) for f in folders for p in (root / f).rglob("*.py")
               if '"/proc' in p.read_text(encoding="utf-8") or "f\"/proc" in p.read_text(encoding="utf-8")]
    assert readers == []
