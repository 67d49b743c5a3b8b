"""Fault injection for rollcheck itself: killed mid-run, a full disk, user code that hangs.

The contract (``specs/cli.md``, "Faults the commands survive") says what every command survives;
this module provides the means to test it from outside, as a user would meet the faults, and the
"faults" row of the fuzz/fault harness in ``rollcheck verify``:

- :func:`tagged_env` / :func:`tagged_processes` / :func:`wait_gone`: every process of a run
  carries ``ROLLCHECK_FAULT_TAG=<tag>`` in its environment (inherited by every descendant, even
  one re-parented to init), so survivors are found by reading ``/proc/*/environ``;
- :func:`small_fs`: a ``tmpfs`` of a few KiB (root only) for disk-full runs;
- :data:`SCENARIOS` and :func:`run_scenarios`: the harness's scenarios (each a function returning a
  problem or ``None``); :func:`faults_row` turns their outcome into a ``verify`` row.

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
import textwrap
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "TAG_VAR",
    "new_tag",
    "tagged_env",
    "tagged_processes",
    "wait_gone",
    "kill_tagged",
    "can_mount",
    "small_fs",
    "run_cli",
    "Scenario",
    "SCENARIOS",
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
    """Live (non-zombie) processes carrying ``tag``: ``(pid, command line)`` pairs."""
    want = f"{TAG_VAR}={tag}".encode()
    found = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/environ", "rb") as f:
                env = f.read().split(b"\0")
            if want not in env:
                continue
            with open(f"/proc/{d}/stat", "rb") as f:
                state = f.read().rsplit(b")", 1)[1].split()[0]
            with open(f"/proc/{d}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        if state != b"Z":
            found.append((int(d), cmd))
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
    """Run ``python -m rollcheck.cli.main ARGV`` as a separate process (not in-process: a fault
    test must see what a user sees)."""
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


_PARENT = """
    import sys, time
    from rollcheck.pyimpl import children
    children.spawn(["/bin/sh", "-c", "sleep 300 & sleep 301; wait"])
    print("ready", flush=True)
    time.sleep(600)
"""


def _children_die(work: Path) -> str | None:
    tag = new_tag()
    p = subprocess.Popen([sys.executable, "-c", textwrap.dedent(_PARENT)], env=tagged_env(tag),
                         stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout is not None
        if p.stdout.readline().strip() != "ready":
            return "the parent did not start its children"
        if len(tagged_processes(tag)) < 4:
            return "the children were not found running"
        p.kill()
        p.wait()
        left = wait_gone(tag, 10)
        return f"{len(left)} process(es) outlived a SIGKILLed parent by 10 s: {left[:3]}" if left else None
    finally:
        p.kill()
        p.wait()
        kill_tagged(tag)


def _pattern(work: Path) -> Path:
    f = work / "p.json"
    if not f.exists():
        r = run_cli(["generate", "--processes", "3", "--events", "40", "--seed", "1", "-o", str(f)])
        if r.code != 0:
            raise RuntimeError(f"rollcheck generate failed: {r.stderr.strip()[-300:]}")
    return f


def _expect_env_error(r: CliRun, path_part: str) -> str | None:
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    if r.code != 2:
        return f"exit {r.code} (want 2): {r.stderr.strip()[-300:]}"
    if "Traceback" in r.stderr:
        return "a traceback on stderr"
    if not any(("No space left on device" in x or "File too large" in x) and path_part in x for x in lines):
        return f"no line naming {path_part!r} and the OS reason: {r.stderr.strip()[-300:]}"
    return None


def _render_disk_full(work: Path) -> str | None:
    pat = _pattern(work)
    with small_fs(16) as fs:
        (fs / "filler").write_bytes(b"\0" * (12 * 1024))
        r = run_cli(["render", str(pat), "-o", str(fs / "pic.png")])
        problem = _expect_env_error(r, "pic.png")
        if problem is None and any(p.name != "filler" for p in fs.iterdir()):
            problem = f"half-written files left: {sorted(p.name for p in fs.iterdir())}"
        return problem


def _sigterm_prompt(work: Path) -> str | None:
    """SIGTERM during a long command: exit 143 quickly, nothing left behind."""
    pat = _pattern(work)
    tag = new_tag()
    p = subprocess.Popen([sys.executable, "-m", "rollcheck.cli.main", "check", "properties", "--examples",
                          "100000", "--seed", "1"], env=tagged_env(tag), stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True, cwd=work)
    del pat
    try:
        time.sleep(3)
        if p.poll() is not None:
            return f"the command ended before the signal (exit {p.returncode})"
        t0 = time.monotonic()
        p.send_signal(signal.SIGTERM)
        code = p.wait(timeout=20)
        took = time.monotonic() - t0
        left = wait_gone(tag, 2)
        if code != 143:
            return f"exit {code} after SIGTERM (want 143)"
        if took > 2:
            return f"took {took:.1f} s to stop after SIGTERM"
        return f"{len(left)} process(es) left" if left else None
    finally:
        p.kill()
        p.wait()
        kill_tagged(tag)


SCENARIOS: list[Scenario] = [
    Scenario("children die with a SIGKILLed parent", _children_die),
    Scenario("render -o on a full disk: exit 2 naming the path", _render_disk_full, needs_root=True),
]


def run_scenarios(quick: bool, work: Path) -> list[tuple[str, str]]:
    """Run the scenarios (only the quick ones if ``quick``); ``(name, outcome)`` with outcome
    ``"ok"``, ``"skipped: ..."`` or the problem found."""
    out = []
    for sc in SCENARIOS:
        if quick and not sc.quick:
            continue
        if sc.needs_root and not can_mount():
            out.append((sc.name, "skipped: needs root to mount a small tmpfs"))
            continue
        try:
            problem = sc.run(work)
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
