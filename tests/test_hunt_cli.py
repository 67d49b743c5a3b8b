"""``rollcheck spark hunt`` as a user runs it, on the toy engine (``ROLLCHECK_HUNT_ADAPTER``): a hunt
killed with SIGKILL and resumed ends as an uninterrupted one, SIGTERM writes what was decided,
resuming with another seed is refused, exit codes and flags."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

TESTS = Path(__file__).resolve().parent


def _env(adapter: str = "ToyHuntAdapter", delay: float = 0.0) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(TESTS), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env["ROLLCHECK_HUNT_ADAPTER"] = f"hunt_toy:{adapter}"
    env["ROLLCHECK_TOY_CELL_SECONDS"] = str(delay)
    return env


def _argv(*args: str) -> list[str]:
    return [sys.executable, "-P", "-m", "rollcheck.cli.main", "spark", "hunt", *args]


def run(*args: str, adapter: str = "ToyHuntAdapter", delay: float = 0.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run(_argv(*args), env=_env(adapter, delay), capture_output=True, text=True, timeout=120,
                          check=False)


def _done_cells(store: Path) -> int:
    if not store.exists():
        return 0
    try:
        conn = sqlite3.connect(f"file:{store}?mode=ro", uri=True, timeout=5)
        try:
            (n,), = conn.execute("SELECT COUNT(*) FROM cells WHERE status = 'done'").fetchall()
        finally:
            conn.close()
    except sqlite3.Error:
        return 0
    return int(n)


def _start_and_stop(out: Path, sig: int, after_cells: int, *args: str,
                    adapter: str = "ToyHuntAdapter") -> subprocess.Popen[str]:
    proc = subprocess.Popen(_argv(*args, "--out", str(out)), env=_env(adapter, delay=0.08), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while _done_cells(out / "hunt.sqlite") < after_cells:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the hunt made no progress"
        time.sleep(0.02)
    proc.send_signal(sig)
    proc.wait(timeout=30)
    return proc


def _summary(doc: dict[str, Any]) -> tuple[Any, ...]:
    return (doc["programs"], doc["cells"], doc["seed"], sorted(f["signature"] for f in doc["findings"]),
            sorted((f["id"], f["status"], f["programs"]) for f in doc["findings"]), doc["coverage"])


def test_a_killed_hunt_resumed_ends_as_an_uninterrupted_one(tmp_path: Path) -> None:
    whole = run("--programs", "8", "--seed", "3", "--out", str(tmp_path / "a"), "--json", adapter="ToyBugs")
    assert whole.returncode == 1, whole.stderr
    expected = json.loads(whole.stdout)
    assert expected["findings"] and expected["cells"] > 8

    killed = _start_and_stop(tmp_path / "b", signal.SIGKILL, 4, "--programs", "8", "--seed", "3", adapter="ToyBugs")
    assert killed.returncode == -signal.SIGKILL
    assert not (tmp_path / "b" / "hunt.json").exists()
    before = _done_cells(tmp_path / "b" / "hunt.sqlite")
    assert 4 <= before < expected["cells"]

    resumed = run("--programs", "8", "--out", str(tmp_path / "b"), "--json", adapter="ToyBugs")  # the stored seed
    assert resumed.returncode == 1, resumed.stderr
    assert "(resumed)" in resumed.stderr
    got = json.loads(resumed.stdout)
    assert _summary(got) == _summary(expected)
    assert json.loads((tmp_path / "b" / "hunt.json").read_text()) == got
    for name in ("programs", "findings"):
        a = {p.name: p.read_bytes() for p in (tmp_path / "a" / name).iterdir()}
        b = {p.name: p.read_bytes() for p in (tmp_path / "b" / name).iterdir()}
        assert a == b, name
    conn = sqlite3.connect(tmp_path / "b" / "hunt.sqlite")
    try:
        rows = conn.execute("SELECT program, key, status FROM cells").fetchall()
    finally:
        conn.close()
    assert len(rows) == got["cells"] and {s for _, _, s in rows} == {"done"}


def test_sigterm_stops_the_hunt_and_writes_what_was_decided(tmp_path: Path) -> None:
    stopped = _start_and_stop(tmp_path, signal.SIGTERM, 3, "--programs", "40", "--seed", "5")
    assert stopped.returncode == 143, stopped.communicate()
    doc = json.loads((tmp_path / "hunt.json").read_text())
    assert doc["cells"] >= 3 and doc["cells"] == _done_cells(tmp_path / "hunt.sqlite")
    assert doc["programs"] < 40


def test_resuming_with_another_seed_or_engine_is_refused(tmp_path: Path) -> None:
    first = run("--programs", "2", "--seed", "4", "--out", str(tmp_path), adapter="ToyClean")
    assert first.returncode == 0, first.stderr
    before = (tmp_path / "hunt.json").read_bytes()
    again = run("--programs", "3", "--seed", "5", "--out", str(tmp_path), adapter="ToyClean")
    assert again.returncode == 2
    assert again.stderr.strip().count("\n") == 0 and "--seed" in again.stderr, again.stderr
    other = run("--programs", "3", "--engine-version", "2.0", "--out", str(tmp_path), adapter="ToyClean")
    assert other.returncode == 2 and "--engine-version" in other.stderr
    flink = subprocess.run([sys.executable, "-P", "-m", "rollcheck.cli.main", "flink", "hunt", "--programs", "3",
                            "--out", str(tmp_path)], env=_env("ToyClean"), capture_output=True, text=True,
                           timeout=60, check=False)
    assert flink.returncode == 2 and "--out" in flink.stderr and "spark hunt" in flink.stderr
    assert (tmp_path / "hunt.json").read_bytes() == before
    same = run("--programs", "3", "--seed", "4", "--out", str(tmp_path), adapter="ToyClean", )
    assert same.returncode == 0 and json.loads((tmp_path / "hunt.json").read_text())["programs"] == 3


@pytest.mark.parametrize(("adapter", "code"), [("ToyClean", 0), ("ToyRejected", 3), ("ToyBugs", 1)])
def test_exit_codes(tmp_path: Path, adapter: str, code: int) -> None:
    r = run("--programs", "2", "--seed", "1", "--out", str(tmp_path), "--json", adapter=adapter)
    assert r.returncode == code, r.stderr
    doc = json.loads(r.stdout)
    assert doc["engine"] == "toy" and doc["seed"] == 1 and doc["programs"] == 2
    assert "hunt: seed 1" in r.stderr and "hunt: 2/2 programs" in r.stderr


@pytest.mark.parametrize(("args", "flag"), [
    (["--budget", "10x"], "--budget"),
    (["--budget", "0s"], "--budget"),
    (["--jobs", "0"], "--jobs"),
    (["--programs", "0"], "--programs"),
    (["--failures", "task"], "--failures"),
    (["--failures", "fail,"], "--failures"),
    (["--budget", "1m", "--programs", "3"], "--programs"),
])
def test_bad_flags_are_one_line_and_write_nothing(tmp_path: Path, args: list[str], flag: str) -> None:
    r = run(*args, "--out", str(tmp_path / "h"))
    assert r.returncode == 2, r.stderr
    assert flag in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "h").exists()


def test_a_missing_adapter_is_an_internal_error(tmp_path: Path) -> None:
    r = subprocess.run(_argv("--programs", "1", "--out", str(tmp_path / "h")),
                       env={**_env(), "ROLLCHECK_HUNT_ADAPTER": "no_such_module_here:X"},
                       capture_output=True, text=True, timeout=60, check=False)
    assert r.returncode == 4 and "internal error" in r.stderr
    assert not (tmp_path / "h").exists()


def test_a_time_budget_ends_the_hunt(tmp_path: Path) -> None:
    start = time.monotonic()
    r = run("--budget", "2s", "--seed", "2", "--out", str(tmp_path), "--json", adapter="ToyClean", delay=0.05)
    took = time.monotonic() - start
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["budget_left"] == 0 and 2 <= doc["programs"] < 50
    assert took < 15 and doc["seconds"] >= 2
