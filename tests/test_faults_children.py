"""Children die with rollcheck: the process groups of :mod:`rollcheck.infra.children`.

Every process of a run carries a tag in its environment (``ROLLCHECK_FAULT_TAG``), inherited by
all descendants, so the test finds survivors by reading ``/proc/*/environ`` even after they were
re-parented to init. No JVM here: these run in about two seconds.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import uuid

import pytest

from rollcheck.infra import children

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs /proc to find survivors")


def tagged(tag: str) -> list[int]:
    """The pids of live (non-zombie) processes whose environment holds ``ROLLCHECK_FAULT_TAG=tag``."""
    want = f"ROLLCHECK_FAULT_TAG={tag}".encode()
    found = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/environ", "rb") as f:
                env = f.read().split(b"\0")
            with open(f"/proc/{d}/stat", "rb") as f:
                state = f.read().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue
        if want in env and state != b"Z":
            found.append(int(d))
    return found


def wait_gone(tag: str, seconds: float) -> list[int]:
    deadline = time.monotonic() + seconds
    while True:
        left = tagged(tag)
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.05)


def start(script: str) -> tuple[subprocess.Popen[str], str]:
    tag = uuid.uuid4().hex
    env = {**os.environ, "ROLLCHECK_FAULT_TAG": tag}
    p = subprocess.Popen([sys.executable, "-c", textwrap.dedent(script)], env=env, stdout=subprocess.PIPE,
                         text=True)
    assert p.stdout is not None
    line = p.stdout.readline()
    assert line.strip() == "ready", line
    return p, tag


PARENT = """
    import sys, threading, time
    from rollcheck.infra import children
    children.spawn(["/bin/sh", "-c", "sleep 300 & sleep 301; wait"])  # a child with a grandchild
    t = threading.Thread(target=lambda: children.spawn(["sleep", "302"]))  # watchdog only
    t.start(); t.join()
    print("ready", flush=True)
    time.sleep(600)
"""


def test_sigkill_of_the_parent_kills_children_and_grandchildren():
    p, tag = start(PARENT)
    try:
        deadline = time.monotonic() + 10  # parent, 2 watchdogs (+ their cat), sh, 2 sleeps, sleep 302
        while len(tagged(tag)) < 6 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(tagged(tag)) >= 6
        p.kill()
        p.wait()
        assert wait_gone(tag, 10) == []
    finally:
        p.kill()
        p.wait()


@pytest.mark.skipif(not children.PDEATHSIG_AVAILABLE, reason="PR_SET_PDEATHSIG is Linux-only")
def test_parent_death_signal_alone_kills_the_child():
    p, tag = start("""
        import os, signal, time
        from rollcheck.infra import children
        c = children.spawn(["sleep", "303"])
        os.killpg(c.group.pgid, 0)
        w = c.group._watchdog
        os.kill(w.pid, signal.SIGKILL); w.wait()   # no watchdog: only the kernel's signal is left
        print("ready", flush=True)
        time.sleep(600)
    """)
    try:
        p.kill()
        p.wait()
        left = wait_gone(tag, 10)
        # the watchdog's `cat` exits on end-of-file; the sleep must have got SIGKILL from the kernel
        assert left == []
    finally:
        p.kill()
        p.wait()


def test_sigterm_unwinding_kills_the_group_promptly():
    p, tag = start("""
        import signal, sys, time
        from rollcheck.infra import children
        def on_term(*a): raise KeyboardInterrupt
        signal.signal(signal.SIGTERM, on_term)
        print("ready", flush=True)
        try:
            children.run(["/bin/sh", "-c", "sleep 304 & sleep 305"], timeout=600)
        except KeyboardInterrupt:
            sys.exit(143)
    """)
    try:
        time.sleep(0.3)
        t0 = time.monotonic()
        p.send_signal(signal.SIGTERM)
        assert p.wait(timeout=10) == 143
        assert time.monotonic() - t0 < 2
        assert wait_gone(tag, 2) == []
    finally:
        p.kill()
        p.wait()


def test_run_timeout_kills_descendants_and_raises():
    tag = uuid.uuid4().hex
    env = {**os.environ, "ROLLCHECK_FAULT_TAG": tag}
    t0 = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):
        children.run(["/bin/sh", "-c", "sleep 306 & sleep 307"], timeout=0.5, env=env)
    assert time.monotonic() - t0 < 5
    assert wait_gone(tag, 2) == []


def test_run_returns_like_subprocess_run_and_leaves_no_straggler():
    tag = uuid.uuid4().hex
    env = {**os.environ, "ROLLCHECK_FAULT_TAG": tag}
    r = children.run(["/bin/sh", "-c", "sleep 308 & echo out; echo err >&2; exit 3"], capture_output=True,
                     text=True, env=env, timeout=30)
    assert (r.returncode, r.stdout, r.stderr) == (3, "out\n", "err\n")
    assert wait_gone(tag, 2) == []  # the backgrounded sleep died with the group
    with pytest.raises(subprocess.CalledProcessError):
        children.run(["false"], check=True, timeout=30)
    assert children.run(["cat"], input=b"abc", capture_output=True, timeout=30).stdout == b"abc"


def test_groups_are_tracked_and_kill_all_ends_them():
    # kill_all() ends *every* group of the calling process: run it in a fresh interpreter, not in
    # this test worker (whose other groups, e.g. a Spark session's JVM, must survive)
    code = textwrap.dedent("""
        import signal
        import pytest
        from rollcheck.infra import children
        g = children.ProcessGroup()
        p = g.spawn(["sleep", "309"])
        assert g in children.live_groups()
        assert children.kill_all() >= 1
        assert not g.alive and p.returncode == -signal.SIGKILL
        assert g not in children.live_groups()
        with pytest.raises(ValueError):
            g.spawn(["true"])
        with pytest.raises(ValueError):
            children.spawn(["true"], start_new_session=True)
        print("ok")
    """)
    r = subprocess.run([sys.executable, "-P", "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr


def test_a_child_started_from_a_thread_survives_the_thread():
    """PR_SET_PDEATHSIG fires when the starting *thread* ends: not used off the main thread."""
    box: list[children.Child] = []
    t = threading.Thread(target=lambda: box.append(children.spawn(["sleep", "310"])))
    t.start()
    t.join()
    time.sleep(0.3)
    try:
        assert box[0].poll() is None
    finally:
        box[0].kill_group()
