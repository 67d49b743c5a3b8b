"""The fuzzer's per-input bound is CPU time: a run that waits (a loaded machine, a blocked call) is
not an unbounded run; one that computes past its CPU time is."""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from rollcheck.fuzz import FileFormat, check_outcome, run_file_input


def _command(monkeypatch: pytest.MonkeyPatch, behaviour: Callable[[str], Any]) -> FileFormat:
    """A hidden command ``fuzz-probe INPUT`` doing ``behaviour(INPUT)``, as a file format."""
    import rollcheck.cli.main as cli_main

    real = cli_main.build_parser

    def build() -> argparse.ArgumentParser:
        parser = real()
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        p = sub.add_parser("fuzz-probe")
        p.add_argument("input")
        p.set_defaults(handler=lambda args: behaviour(args.input))
        return parser

    monkeypatch.setattr(cli_main, "build_parser", build)
    return FileFormat("probe", lambda: [{}], [["fuzz-probe", "{input}"]])


def _wait(seconds: float) -> Callable[[str], int]:
    def run(path: str) -> int:
        time.sleep(seconds)  # no CPU: what a run looks like on a machine busy with other work
        return 0
    return run


def _spin(path: str) -> int:
    while True:
        pass


def test_a_run_that_waits_past_the_limit_is_not_unbounded(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fmt = _command(monkeypatch, _wait(2.5))
    o, problem = run_file_input(fmt, fmt.commands[0], b"{}", tmp_path, time_limit=1.0)
    assert problem is None, (problem, o)
    assert o.code == 0 and not o.timed_out and o.seconds >= 2.5


def test_the_wall_backstop_is_inconclusive_not_a_finding(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fmt = _command(monkeypatch, _wait(30))
    t0 = time.perf_counter()
    o, problem = run_file_input(fmt, fmt.commands[0], b"{}", tmp_path, time_limit=1.0, wall_limit=1.5)
    assert time.perf_counter() - t0 < 10
    assert o.overloaded and not o.timed_out and o.code is None
    assert problem is None and check_outcome(o, names=[], json_out=False, out_dir=None) is None


def test_a_run_that_computes_past_its_cpu_time_is_unbounded(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fmt = _command(monkeypatch, _spin)
    o, problem = run_file_input(fmt, fmt.commands[0], b"{}", tmp_path, time_limit=1.0)
    assert o.timed_out and not o.overloaded
    assert problem is not None and problem.startswith("unbounded run") and "CPU s" in problem
    assert o.cpu_seconds >= 0.5  # os.times() and the kernel's profiling timer account CPU time apart
