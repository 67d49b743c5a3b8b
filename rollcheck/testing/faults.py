"""Fault injection for rollcheck itself: killed mid-run, a full disk, user code that hangs.

The means to test, from outside as a user meets them, the faults every command survives, and the
"faults" row of ``rollcheck verify``. Every process of a run carries a tag in its environment
(:func:`tagged_env`), so survivors are found (:func:`tagged_processes`, :func:`wait_gone`);
:func:`small_fs` gives a tiny ``tmpfs`` for disk-full runs; :data:`SCENARIOS`,
:func:`run_scenarios` and :func:`faults_row` are the harness (quick scenarios in ``make test``).
The scenarios: docs/internals/testing.md#fault-injection-faults.

References
----------
``specs/cli.md`` ("Faults the commands survive").
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

__all__ = [
    "TAG_VAR",
    "new_tag",
    "tagged_env",
    "tagged_processes",
    "wait_gone",
    "kill_tagged",
    "can_mount",
    "small_fs",
    "fill_to",
    "run_cli",
    "Scenario",
    "SCENARIOS",
    "PARENT_OURS",
    "PARENT_PLAIN",
    "children_die",
    "sigkill_during",
    "java_running",
    "tlc_sigkill",
    "run_scenarios",
    "faults_row",
]

TAG_VAR = "ROLLCHECK_FAULT_TAG"


def new_tag() -> str:
    """A fresh tag for one run."""
    return uuid.uuid4().hex


def tagged_env(tag: str, base: dict[str, str] | None = None, **extra: str) -> dict[str, str]:
    """``base`` (default: this process's environment) with the tag and ``extra`` set."""
    return {**(os.environ if base is None else base), TAG_VAR: tag, **extra}


def tagged_processes(tag: str) -> list[tuple[int, str]]:
    """Live (non-zombie) processes carrying ``tag``: ``(pid, command line)`` pairs.

    Parameters
    ----------
    tag : str
        The run's tag (:func:`new_tag`), found in each process's environment.

    Returns
    -------
    list of (int, str)
        The pid and the space-joined command line of each.
    """
    found = []
    for proc in psutil.process_iter():
        try:
            if proc.environ().get(TAG_VAR) != tag:
                continue
            if proc.status() == psutil.STATUS_ZOMBIE:
                continue
            cmd = " ".join(proc.cmdline()).strip()
        except psutil.Error:  # gone, a zombie, or not ours to read
            continue
        found.append((proc.pid, cmd))
    return found


def wait_gone(tag: str, seconds: float) -> list[tuple[int, str]]:
    """Wait up to ``seconds`` for every process carrying ``tag`` to end; return the survivors."""
    deadline = time.monotonic() + seconds
    while True:
        left = tagged_processes(tag)
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.05)


def kill_tagged(tag: str) -> None:
    """SIGKILL every process carrying ``tag`` (a test's own cleanup after a failed assertion)."""
    for pid, _ in tagged_processes(tag):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


def can_mount() -> bool:
    """Whether :func:`small_fs` can work here (root on Linux with ``mount``)."""
    return sys.platform.startswith("linux") and os.geteuid() == 0 and shutil.which("mount") is not None


@contextlib.contextmanager
def small_fs(size_kib: int, parent: str | None = None) -> Iterator[Path]:
    """A fresh ``tmpfs`` of ``size_kib`` KiB mounted on a temporary folder (root only).

    Raises
    ------
    OSError
        Not root, or the mount was refused.
    """
    if not can_mount():
        raise PermissionError("mounting a tmpfs needs root on Linux")
    d = Path(tempfile.mkdtemp(prefix="rollcheck-smallfs-", dir=parent))
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={int(size_kib)}k", "tmpfs", str(d)],
                       capture_output=True, text=True, timeout=30)
    if r.returncode != 0:
        d.rmdir()
        raise PermissionError(f"mount refused: {r.stderr.strip()}")
    try:
        yield d
    finally:
        subprocess.run(["umount", "-l", str(d)], capture_output=True, timeout=30)
        with contextlib.suppress(OSError):
            d.rmdir()


@dataclass
class CliRun:
    """The outcome of :func:`run_cli`."""

    code: int | None
    stdout: str
    stderr: str
    seconds: float


def run_cli(argv: list[str], *, cwd: str | Path | None = None, timeout: float = 120,
            env: dict[str, str] | None = None, stdin: Any = subprocess.DEVNULL) -> CliRun:
    """Run ``python -m rollcheck.cli.main ARGV`` as a separate process.

    Not in-process: a fault test must see what a user sees.

    Parameters
    ----------
    argv : list of str
        The arguments after ``rollcheck``.
    cwd : str or Path, optional
        Working folder of the run.
    timeout : float, optional
        Seconds before the run is killed (then ``code`` is None).
    env : dict, optional
        Its environment (None: this one's).
    stdin : optional
        Its standard input.
    """
    t0 = time.monotonic()
    try:
        r = subprocess.run([sys.executable, "-m", "rollcheck.cli.main", *argv], cwd=cwd, env=env,
                           capture_output=True, text=True, timeout=timeout, stdin=stdin)
        return CliRun(r.returncode, r.stdout, r.stderr, time.monotonic() - t0)
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        err = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
        return CliRun(None, out, err, time.monotonic() - t0)


# ----------------------------------------------------------------------------- the harness
@dataclass(frozen=True)
class Scenario:
    """One fault scenario: ``run(work) -> problem or None``; ``quick`` ones run in ``make test``."""

    name: str
    run: Callable[[Path], str | None]
    quick: bool = True
    needs_root: bool = False


#: A parent that starts a child with a grandchild through rollcheck's own launcher.
PARENT_OURS = """
import time
from rollcheck.infra import children
children.spawn(["/bin/sh", "-c", "sleep 300 & sleep 301; wait"])
print("ready", flush=True)
time.sleep(600)
"""
#: The broken variant (the launcher rollcheck used before): a new session, nothing else.
PARENT_PLAIN = """
import subprocess, time
subprocess.Popen(["/bin/sh", "-c", "sleep 300 & sleep 301; wait"], start_new_session=True)
print("ready", flush=True)
time.sleep(600)
"""


def children_die(work: Path, parent: str = PARENT_OURS) -> str | None:
    """SIGKILL a parent that started a child and a grandchild: none may outlive it by 10 s."""
    tag = new_tag()
    p = subprocess.Popen([sys.executable, "-c", parent], env=tagged_env(tag), stdout=subprocess.PIPE,
                         text=True)
    try:
        assert p.stdout is not None
        if p.stdout.readline().strip() != "ready":
            return "the parent did not start its children"
        deadline = time.monotonic() + 10  # the parent, the shell and its two sleeps
        while len(tagged_processes(tag)) < 4:
            if time.monotonic() > deadline:
                return "the children were not found running"
            time.sleep(0.05)
        p.kill()
        p.wait()
        left = wait_gone(tag, 10)
        return f"{len(left)} process(es) outlived a SIGKILLed parent by 10 s: {left[:3]}" if left else None
    finally:
        p.kill()
        p.wait()
        kill_tagged(tag)


def _expect_env_error(r: CliRun, path_part: str) -> str | None:
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    if r.code != 2:
        return f"exit {r.code} (want 2): {r.stderr.strip()[-300:]}"
    if "Traceback" in r.stderr:
        return "a traceback on stderr"
    if not any("environment error" in x and "No space left on device" in x and path_part in x for x in lines):
        return f"no line naming {path_part!r} and the OS reason: {r.stderr.strip()[-300:]}"
    return None


def fill_to(fs: Path, leave: int) -> None:
    """Fill the file system of folder ``fs`` (one file, ``filler``) until ``leave`` bytes are free."""
    st = os.statvfs(fs)
    (fs / "filler").write_bytes(b"\0" * max(0, st.f_bavail * st.f_frsize - leave))


def _shipped(*parts: str) -> Path:
    """A file shipped with rollcheck's examples or tests (the harness runs from a checkout)."""
    return Path(__file__).resolve().parents[2].joinpath(*parts)


def render_disk_full(work: Path) -> str | None:
    """``render -o`` into a file system with 4 KiB free: exit 2 naming the picture, nothing left."""
    with small_fs(16, str(work)) as fs:
        fill_to(fs, 4096)
        r = run_cli(["render", str(_shipped("examples", "useless.json")), "-o", str(fs / "pic.png")])
        problem = _expect_env_error(r, "pic.png")
        if problem is None and any(p.name != "filler" for p in fs.iterdir()):
            problem = f"half-written files left: {sorted(p.name for p in fs.iterdir())}"
        return problem


def picture_does_not_fit(work: Path) -> str | None:
    """``check protocol --out`` where the counterexample fits but its picture does not."""
    with small_fs(16, str(work)) as fs:
        fill_to(fs, 8192)
        spec = f"{_shipped('tests', 'user_protocols', 'unsafe_protocols.py')}:LazyIndex"
        r = run_cli(["check", "protocol", spec, "--out", str(fs / "o")])
        return _expect_env_error(r, ".png")


_SPIN = """SCHEMA = "user STRING, n INT"
OUTPUT_MODE = "update"
KEY = ["user"]
def batches(seed):
    while True:
        pass
def query(df):
    return df
"""


def batches_hang(work: Path) -> str | None:
    """A query module whose ``batches()`` never returns: exit 2 naming file, method and limit."""
    q = work / "spin_query.py"
    q.write_text(_SPIN, encoding="utf-8")
    tag = new_tag()
    try:
        r = run_cli(["spark", "record", "query", "--module", str(q), "--out", str(work / "spin.jsonl"),
                     "--call-timeout", "1"], env=tagged_env(tag), timeout=120)
        last = r.stderr.strip().splitlines()[-1] if r.stderr.strip() else ""
        if r.code != 2 or not all(w in last for w in ("spin_query.py", "batches", "1 s")):
            return f"exit {r.code}: {last[-300:]}"
        left = wait_gone(tag, 5)
        return f"{len(left)} process(es) left" if left else None
    finally:
        kill_tagged(tag)


_BIG_TLA = """---- MODULE Big ----
EXTENDS Naturals
VARIABLES x, y
Init == x = 0 /\\ y = 0
Next == \\/ x < 100000 /\\ x' = x + 1 /\\ UNCHANGED y
        \\/ y < 100000 /\\ y' = y + 1 /\\ UNCHANGED x
====
"""


def sigkill_during(argv: list[str], work: Path, ready: Callable[[str], bool], wait_s: float,
                   within: float = 10.0) -> str | None:
    """Start the CLI, wait for ``ready(tag)``, SIGKILL it; the problem found, or None.

    No process of the run may survive it by ``within`` seconds (the contract's 10 s by default).

    Parameters
    ----------
    argv : list of str
        The CLI arguments.
    work : Path
        Working folder (log and temporary files stay there).
    ready : callable
        ``ready(tag) -> bool``: the moment to kill.
    wait_s : float
        Seconds allowed to get ready.
    within : float, optional
        Seconds the processes have to end.
    """
    tag = new_tag()
    scratch = work / "tmp"  # a SIGKILLed run cannot clean up: its temporary files stay inside ``work``
    scratch.mkdir(exist_ok=True)
    env = tagged_env(tag, JAVA_TOOL_OPTIONS=f"-Djava.io.tmpdir={scratch}", TMPDIR=str(scratch))
    with open(work / "cli.log", "wb") as log:
        p = subprocess.Popen([sys.executable, "-m", "rollcheck.cli.main", *argv], cwd=work, env=env,
                             stdout=log, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + wait_s
            while not ready(tag):
                if p.poll() is not None or time.monotonic() > deadline:
                    log.flush()
                    tail = (work / "cli.log").read_text(errors="replace")[-1500:]
                    return f"the run never got going (exit {p.poll()}): {tail}"
                time.sleep(0.1)
            p.kill()
            p.wait()
            left = wait_gone(tag, within)
            return f"{len(left)} process(es) outlived rollcheck by {within:g} s: {left[:2]}" if left else None
        finally:
            p.kill()
            p.wait()
            kill_tagged(tag)


def java_running(tag: str) -> bool:
    """Whether a JVM carrying ``tag`` in its environment is running."""
    return any("java" in cmd.split(" ", 1)[0] for _, cmd in tagged_processes(tag))


def tlc_sigkill(work: Path) -> str | None:
    """SIGKILL rollcheck while TLC runs: TLC's JVM dies with it."""
    if shutil.which("java") is None:
        return "skipped: no java"
    (work / "Big.tla").write_text(_BIG_TLA, encoding="utf-8")
    (work / "Big.cfg").write_text("INIT Init\nNEXT Next\n", encoding="utf-8")
    return sigkill_during(["tlc", str(work / "Big.tla")], work, java_running, 120)


def spark_sigkill(work: Path) -> str | None:
    """SIGKILL rollcheck during a kill-mode recording: driver, JVM and workers die with it.

    The previous trace is unchanged.
    """
    out = work / "o.jsonl"
    out.write_text("previous\n", encoding="utf-8")
    partial = work / "o.jsonl.partial"

    def ready(tag: str) -> bool:
        try:
            lines = partial.read_bytes().count(b"\n")
        except OSError:
            lines = 0
        return lines >= 3 and java_running(tag)

    problem = sigkill_during(["spark", "record", "query", "--module",
                              str(_shipped("examples", "queries", "clicks_per_window.py")), "--out", str(out),
                              "--fail-at-batch", "2", "--failure", "kill", "--no-reference"], work, ready, 600)
    if problem is None and out.read_text(encoding="utf-8") != "previous\n":
        problem = "the previous trace was changed"
    return problem


def spark_sigterm(work: Path) -> str | None:
    """SIGTERM during a kill-mode recording: exit 143, the previous trace unchanged.

    The reporter's case was a good trace replaced by a one-line header. The fragment is kept as
    ``OUT.partial``; no scratch folder ``OUT.work/tmp-N`` and no process may be left.
    """
    out = work / "o.jsonl"
    out.write_text("previous\n", encoding="utf-8")
    partial = work / "o.jsonl.partial"
    tag = new_tag()
    env = tagged_env(tag, JAVA_TOOL_OPTIONS=f"-Djava.io.tmpdir={work}")
    argv = ["spark", "record", "query", "--module", str(_shipped("examples", "queries", "clicks_per_window.py")),
            "--out", str(out), "--fail-at-batch", "2", "--failure", "kill", "--no-reference"]
    with open(work / "cli.log", "wb") as log:
        p = subprocess.Popen([sys.executable, "-m", "rollcheck.cli.main", *argv], cwd=work, env=env,
                             stdout=log, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 600
            while not (java_running(tag) and partial.exists() and partial.read_bytes().count(b"\n") >= 3):
                if p.poll() is not None or time.monotonic() > deadline:
                    return f"the run never got going (exit {p.poll()})"
                time.sleep(0.1)
            p.send_signal(signal.SIGTERM)
            code = p.wait(timeout=60)
            left = wait_gone(tag, 10)
        finally:
            p.kill()
            p.wait()
            kill_tagged(tag)
    problems = []
    if code != 143:
        problems.append(f"exit {code} (want 143)")
    if out.read_text(encoding="utf-8") != "previous\n":
        problems.append("the previous trace was changed")
    if not partial.exists():
        problems.append("no OUT.partial left")
    if list((work / "o.jsonl.work").glob("tmp-*")):
        problems.append("a scratch folder OUT.work/tmp-N was left")
    if left:
        problems.append(f"{len(left)} process(es) left")
    return "; ".join(problems) or None


SCENARIOS: list[Scenario] = [
    Scenario("children die with a SIGKILLed parent", children_die),
    Scenario("batches() that never returns: --call-timeout", batches_hang),
    Scenario("render -o on a full disk", render_disk_full, needs_root=True),
    Scenario("check protocol --out: the picture does not fit", picture_does_not_fit, needs_root=True),
    Scenario("SIGKILL during TLC", tlc_sigkill, quick=False),
    Scenario("SIGKILL during a Spark recording", spark_sigkill, quick=False),
    Scenario("SIGTERM during a Spark recording", spark_sigterm, quick=False),
]


def run_scenarios(quick: bool, work: Path) -> list[tuple[str, str]]:
    """Run the scenarios (only the quick ones if ``quick``).

    Returns ``(name, outcome)`` pairs, the outcome ``"ok"``, ``"skipped: ..."`` or the problem found.

    Parameters
    ----------
    quick : bool
        Run only the quick scenarios.
    work : Path
        Folder for the scenarios' files (one subfolder each).
    """
    out = []
    for sc in SCENARIOS:
        if quick and not sc.quick:
            continue
        if sc.needs_root and not can_mount():
            out.append((sc.name, "skipped: needs root to mount a small tmpfs"))
            continue
        d = work / f"s{len(out)}"
        d.mkdir(parents=True)
        try:
            problem = sc.run(d)
        except Exception as e:  # noqa: BLE001 -- a broken scenario is a finding, not a crash
            problem = f"the scenario itself failed: {type(e).__name__}: {e}"
        out.append((sc.name, "ok" if problem is None else problem))
    return out


def faults_row(quick: bool, seed: int) -> Any:
    """The "faults" row of ``rollcheck verify`` (section ``sec_fuzz``)."""
    from rollcheck.suite import Row

    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="rollcheck-faults-") as tmp:
        results = run_scenarios(quick, Path(tmp))
    ok = [n for n, o in results if o == "ok"]
    skipped = [f"{n} ({o})" for n, o in results if o.startswith("skipped")]
    bad = [f"{n}: {o}" for n, o in results if o != "ok" and not o.startswith("skipped")]
    status = "fail" if bad else ("inconclusive" if skipped or not ok else "pass")
    detail = f"{len(ok)} of {len(results)} fault scenarios survived as the contract says"
    if bad:
        detail += "; " + " | ".join(b[:200] for b in bad)
    if skipped:
        detail += "; not run: " + ", ".join(skipped)
    return Row("rollcheck itself", "faults", "faults: killed, disk full, hanging user code", status,
               len(ok), "scenarios", time.perf_counter() - t0, detail)
