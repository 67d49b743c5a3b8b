"""Running rollcheck's CLI in-process on one fuzzed input, and the contract it must keep.

- :func:`run_cli` — ``rollcheck.cli.main.main(argv)`` in-process with stdout/stderr captured and
  a hard per-input bound on the CPU time it uses (``ITIMER_PROF``), with a generous wall-clock
  backstop (``ITIMER_REAL``): an input past its CPU time is an *unbounded run* (a finding); one cut
  by the backstop before using its CPU time waited (a loaded machine, a blocked call) and is
  *inconclusive* (``Outcome.overloaded``), never a finding;
- :func:`check_outcome` — the contract on (possibly) bad input: exit 2 with **one** line naming
  the file (or flag) and the place, within a bounded time, nothing written, never a traceback,
  never exit 4; valid input may give 0, 1 or 3;
- :func:`run_file_input`, :func:`run_options_input`, :func:`run_value_input` — one input of a
  format (:mod:`rollcheck.fuzz.formats`), run and checked.

References
----------
``specs/cli.md``.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rollcheck.fuzz.formats import FileFormat, ValueFormat

__all__ = ["TIME_LIMIT", "WALL_FACTOR", "Outcome", "run_cli", "check_outcome", "run_file_input",
           "run_options_input", "run_value_input"]

TIME_LIMIT = 20.0
"""CPU seconds one input may use in-process before it counts as an unbounded run."""
WALL_FACTOR = 10.0
"""The wall-clock backstop, as a multiple of the CPU limit: a run cut by it is inconclusive."""


# ---------------------------------------------------------------------------------------------
# Running the CLI in-process
# ---------------------------------------------------------------------------------------------


class _Timeout(BaseException):
    """Raised by a timer's signal inside the command: not an Exception, so main() does not map it.

    ``args[0]`` is ``"cpu"`` (the CPU limit) or ``"wall"`` (the backstop).
    """


@dataclass
class Outcome:
    """What one CLI run did."""

    code: int | None
    stdout: str
    stderr: str
    seconds: float
    timed_out: bool = False  # past its CPU time: an unbounded run
    crashed: str | None = None  # an exception that escaped main() itself
    cpu_seconds: float = 0.0
    overloaded: bool = False  # cut by the wall backstop before using its CPU time: inconclusive


@contextlib.contextmanager
def _alarm(seconds: float, wall: float | None = None) -> Iterator[None]:
    """Allow at most ``seconds`` of this process's CPU time and ``wall`` seconds of wall time.

    Past them ``_Timeout("cpu")`` or ``_Timeout("wall")`` is raised; ``wall`` defaults to
    ``WALL_FACTOR * seconds``.
    """
    if seconds <= 0 or not hasattr(signal, "setitimer"):
        yield
        return
    wall = WALL_FACTOR * seconds if wall is None else wall

    def fire(signum: int, frame: Any) -> None:
        raise _Timeout("cpu" if signum == signal.SIGPROF else "wall")

    old_prof = signal.signal(signal.SIGPROF, fire)
    old_alrm = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_PROF, seconds)
    signal.setitimer(signal.ITIMER_REAL, max(wall, seconds))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGPROF, old_prof)
        signal.signal(signal.SIGALRM, old_alrm)


def _cpu() -> float:
    """CPU seconds used by this process and the children it waited for."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def run_cli(argv: Sequence[str], time_limit: float = TIME_LIMIT, wall_limit: float | None = None) -> Outcome:
    """Run ``rollcheck ARGV`` in-process, stdout/stderr captured.

    Parameters
    ----------
    argv : sequence of str
        The command line.
    time_limit : float
        CPU seconds the run may use (past them: ``timed_out``, an unbounded run).
    wall_limit : float, optional
        Wall-clock backstop (default ``WALL_FACTOR * time_limit``); a run it cuts is
        ``overloaded`` (inconclusive: the machine was busy or the run was blocked).

    Returns
    -------
    Outcome
    """
    from rollcheck.cli.main import EXIT_SIGINT, EXIT_SIGTERM, main

    out, err = io.StringIO(), io.StringIO()
    t0, c0 = time.perf_counter(), _cpu()
    code: int | None = None
    timed_out = overloaded = False
    crashed = None
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), _alarm(time_limit, wall_limit):
            code = main(list(argv))
    except SystemExit as e:  # argparse usage errors
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 2)
    except _Timeout as e:
        timed_out, overloaded = (True, False) if e.args[:1] == ("cpu",) else (False, True)
    except BaseException as e:  # noqa: BLE001 - anything escaping main() is a finding
        crashed = f"{type(e).__name__}: {e}"[:300]
    if code in (EXIT_SIGINT, EXIT_SIGTERM):  # the fuzzing itself was interrupted (no input exits so)
        from rollcheck.pyimpl.errors import TerminationRequested

        raise KeyboardInterrupt() if code == EXIT_SIGINT else TerminationRequested(signal.SIGTERM)
    return Outcome(code, out.getvalue(), err.getvalue(), time.perf_counter() - t0, timed_out, crashed,
                   cpu_seconds=_cpu() - c0, overloaded=overloaded)


def _strict_json(text: str) -> Any:
    def bad(s: str) -> Any:
        raise ValueError(f"{s} in JSON output")

    return json.loads(text, parse_constant=bad)


def check_outcome(o: Outcome, *, names: Sequence[str], json_out: bool, out_dir: Path | None,
                  in_dir: Path | None = None, allowed_inputs: Sequence[str] = ()) -> str | None:
    """The contract of a run on (possibly) bad input; None when kept, else what was broken.

    Parameters
    ----------
    o : Outcome
        The run.
    names : sequence of str
        Strings one of which an exit-2 message must contain (the file, the flag).
    json_out : bool
        Whether the command was run with ``--json`` (then its stdout must be one strict JSON
        document on exit 0, 1 or 3).
    out_dir : Path or None
        Must be empty after exit 2 (nothing written on bad input).
    in_dir : Path or None
        Must hold nothing but ``allowed_inputs`` afterwards (no temporary file left next to the
        input).
    allowed_inputs : sequence of str
        The names allowed in ``in_dir``.

    Returns
    -------
    str or None
        What the run broke, or None when it kept the contract.
    """
    if o.timed_out:
        return f"unbounded run (over {o.cpu_seconds:.1f} CPU s in {o.seconds:.1f} s)"
    if o.overloaded:  # cut by the wall backstop before its CPU time: not a finding (inconclusive)
        return None
    if o.crashed:
        return f"exception escaped main(): {o.crashed}"
    if "Traceback (most recent call last)" in o.stderr:
        return "traceback on stderr"
    if o.code not in (0, 1, 2, 3):
        return f"exit code {o.code}: {o.stderr.strip()[-300:]}"
    if o.code == 2:
        lines = [ln for ln in o.stderr.splitlines() if ": error:" in ln]
        if len(lines) != 1:
            return f"expected one error line, got {len(lines)}: {o.stderr[-300:]!r}"
        if len(lines[0]) > 2600:
            return f"error line of {len(lines[0])} characters"
        if names and not any(n in lines[0] for n in names):
            return f"error line names neither of {list(names)}: {lines[0][:300]!r}"
    # bad input writes nothing (a run that ended 1 or 3 may write what was asked: a counterexample)
    if o.code == 2 and out_dir is not None and out_dir.exists() and any(out_dir.iterdir()):
        return f"exit {o.code} but files were written: {sorted(p.name for p in out_dir.iterdir())}"
    if in_dir is not None:
        extra = sorted(p.name for p in in_dir.iterdir() if p.name not in allowed_inputs)
        if extra:
            return f"files left next to the input: {extra}"
    if o.code in (0, 1, 3) and json_out and o.stdout.strip():
        try:
            _strict_json(o.stdout)
        except ValueError as e:
            return f"stdout is not one strict JSON document: {e}"
    return None


def _empty(d: Path) -> None:
    """Make ``d`` an empty folder: created if missing, else emptied.

    Emptied means its files, and the folders a ``"directory"`` input or a command left, go.
    """
    try:
        entries = list(os.scandir(d))
    except FileNotFoundError:
        d.mkdir(parents=True)
        return
    for e in entries:
        if e.is_dir():
            for q in os.scandir(e.path):
                os.unlink(q.path)
            os.rmdir(e.path)
        else:
            os.unlink(e.path)


def run_file_input(fmt: FileFormat, command: list[str], data: bytes | str, workdir: Path,
                   time_limit: float = TIME_LIMIT, wall_limit: float | None = None) -> tuple[Outcome, str | None]:
    """Write ``data`` as the input (or use a folder / a missing path), run ``command``, check it.

    ``data`` may be the strings ``"directory"`` or ``"missing"`` for those special inputs.
    """
    in_dir = workdir / "in"
    out_dir = workdir / "out"
    for d in (in_dir, out_dir):
        _empty(d)
    path = in_dir / f"input{fmt.suffix}"
    if data == "directory":
        path.mkdir()
    elif data != "missing":
        assert isinstance(data, bytes)
        path.write_bytes(data)
    argv = [a.replace("{input}", str(path)).replace("{out}", str(out_dir)) for a in command]
    o = run_cli(argv, time_limit, wall_limit)
    # the message names the file, or the flag whose value the file does not support, or another
    # input file the command was given (a reference the trace does not fit)
    flags = [a for a in command if a.startswith("-") and a != "--json"]
    others = [a for a in command if "{" not in a and not a.startswith("-") and Path(a).is_file()]
    problem = check_outcome(o, names=[str(path), path.name, *flags, *others], json_out="--json" in command,
                            out_dir=out_dir, in_dir=in_dir, allowed_inputs=[path.name])
    return o, problem


def run_options_input(argv: list[str], workdir: Path, time_limit: float = TIME_LIMIT,
                      wall_limit: float | None = None) -> tuple[Outcome, str | None]:
    """Run an options argv and check it; an exit-2 message must name a flag (``--…``)."""
    o = run_cli(argv, time_limit, wall_limit)
    flags = [a.split("=")[0] for a in argv if a.startswith("--")] + ["rollcheck", "--"]
    problem = check_outcome(o, names=flags, json_out="--json" in argv, out_dir=None)
    return o, problem


def run_value_input(fmt: ValueFormat, text: str) -> str | None:
    """Parse ``text``: only :class:`InvalidInputError` (one line) may come out, within the bound."""
    from rollcheck.pyimpl.errors import InvalidInputError

    parse = fmt.parse()
    t0 = time.perf_counter()
    try:
        with _alarm(fmt.time_limit):
            parse(text)
    except _Timeout as e:
        if e.args[:1] == ("wall",):  # waited, did not compute: the machine's, not a finding
            return None
        return f"unbounded parse (over {fmt.time_limit} CPU s)"
    except InvalidInputError as e:
        if len(str(e)) > 2000:
            return f"message of {len(str(e))} characters"
        return None
    except BaseException as e:  # noqa: BLE001
        return f"{type(e).__name__}: {str(e)[:200]} ({time.perf_counter() - t0:.1f} s)"
    return None
