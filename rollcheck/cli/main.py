"""Entry point of the ``rollcheck`` console command (see ``specs/cli.md``).

Exit codes: 0 ok, 1 violation found, 2 bad input or usage, 3 inconclusive, 4 internal error (a bug
in rollcheck), 130/143 interrupted by SIGINT/SIGTERM.

:func:`main` is the last line of defence: whatever escapes a command becomes one line on stderr
and an exit code, never a bare traceback (``--debug`` or ``ROLLCHECK_DEBUG=1`` shows it). Bad
input and environment faults (full disk, read-only, no permission) are 2; a resource error that
hit no input bound, and any other exception, is 4; SIGTERM unwinds like SIGINT. The mapping, one
exception type at a time: docs/internals/cli.md#the-last-line-of-defence-main.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import os
import pkgutil
import signal
import sys
import threading
import traceback
from collections.abc import Iterator, Sequence
from typing import Any

from rollcheck.pyimpl.errors import (
    EnvironmentFault,
    InconclusiveError,
    InternalError,
    InvalidInputError,
    PropertyViolation,
    TerminationRequested,
    environment_fault,
)

EXIT_OK = 0
EXIT_VIOLATION = 1
EXIT_INVALID = 2
EXIT_INCONCLUSIVE = 3
EXIT_INTERNAL = 4
EXIT_SIGINT = 130
EXIT_SIGTERM = 143

# Attributes of the parsed arguments that name output, not input.
_OUTPUT_ATTRS = {"out", "output", "write_config", "emit_system", "o"}


class _Parser(argparse.ArgumentParser):
    def _get_value(self, action: argparse.Action, arg_string: str) -> Any:
        # every numeric option of every command: a non-finite value is a usage error (exit 2)
        from rollcheck.cli._util import refuse_non_finite

        return refuse_non_finite(action, super()._get_value(action, arg_string), arg_string)

    def error(self, message: str) -> None:  # type: ignore[override]
        from rollcheck.cli._util import safe_text

        self.print_usage(sys.stderr)
        self.exit(EXIT_INVALID, f"{self.prog}: error: {safe_text(message)}\n")


def build_parser() -> argparse.ArgumentParser:
    """The ``rollcheck`` argument parser, every command registered."""
    from rollcheck import __version__

    parser = _Parser(
        prog="rollcheck",
        description="Verify rollback-recovery algorithms: reference models, properties, TLC, Spark replay.",
        epilog="Exit codes: 0 ok, 1 violation found, 2 bad input or usage, 3 inconclusive, "
               "4 internal error (a bug in rollcheck), 130/143 interrupted.",
    )
    parser.add_argument("--version", action="version", version=f"rollcheck {__version__}")
    parser.add_argument("--debug", action="store_true",
                        help="show the traceback of an internal error (also ROLLCHECK_DEBUG=1)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    import rollcheck.cli as pkg

    for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda m: m.name):
        if info.name.startswith("cmd_"):
            module = importlib.import_module(f"rollcheck.cli.{info.name}")
            module.register(sub)
    return parser


_PARSERS: dict[Any, argparse.ArgumentParser] = {}


def _parser() -> argparse.ArgumentParser:
    """The parser, built once per process (building it imports every command module: ~30 ms)."""
    key = build_parser  # a replaced build_parser (tests) gets its own parser
    parser = _PARSERS.get(key)
    if parser is None:
        _PARSERS.clear()
        parser = _PARSERS[key] = build_parser()
    return parser


@contextlib.contextmanager
def _signals() -> Iterator[None]:
    """SIGTERM raises :class:`TerminationRequested` in the main thread (a second one kills)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    seen = {"n": 0}

    def on_term(signum: int, frame: Any) -> None:
        seen["n"] += 1
        if seen["n"] > 1:  # cleanup is stuck: a second SIGTERM ends the process
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        raise TerminationRequested(signum)

    try:
        previous = signal.signal(signal.SIGTERM, on_term)
    except (ValueError, OSError):  # not the main interpreter / not supported
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def _escaping_streams() -> Iterator[None]:
    """Text that cannot be encoded (lone surrogates in names) is escaped instead of crashing."""
    changed = []
    for stream in (sys.stdout, sys.stderr):
        reconf = getattr(stream, "reconfigure", None)
        errors = getattr(stream, "errors", None)
        if reconf is not None and errors in ("strict", "surrogateescape"):
            try:
                reconf(errors="backslashreplace")
                changed.append((stream, errors))
            except (ValueError, OSError):
                pass
    try:
        yield
    finally:
        for stream, errors in changed:
            with contextlib.suppress(ValueError, OSError):
                stream.reconfigure(errors=errors)  # type: ignore[union-attr]


def _input_files(args: argparse.Namespace) -> list[str]:
    """The positional/option values that name existing input files (for messages)."""
    out: list[str] = []
    for key, value in vars(args).items():
        if key.startswith("_") or key in _OUTPUT_ATTRS:
            continue
        for v in value if isinstance(value, list) else [value]:
            if isinstance(v, str) and v and len(v) < 4096:
                with contextlib.suppress(OSError, ValueError):
                    if os.path.exists(v):
                        out.append(v)
    return out


def _input_shaped(e: BaseException) -> str | None:
    """The reason to print when ``e`` is a library error that only bad input produces, else None.

    ``RecursionError``, ``OverflowError`` and ``MemoryError`` are not among them: bad input that
    would raise them is stopped at an input bound (an :class:`InvalidInputError`), so one that
    reaches :func:`main` is a bug (exit 4).
    """
    if isinstance(e, json.JSONDecodeError):
        return f"line {e.lineno} column {e.colno}: malformed JSON: {e.msg}"
    if isinstance(e, UnicodeDecodeError):
        return f"byte {e.start}: not UTF-8 text"
    if isinstance(e, ValueError) and "integer string conversion" in str(e):
        return "an integer in the input has too many digits"
    return None


_UNBOUNDED = {
    RecursionError: "the recursion limit was reached where no input bound applies",
    OverflowError: "a number overflowed where no input bound applies",
    MemoryError: "memory ran out where no input bound applies",
}
"""Why a resource error that escaped every input bound is a bug, by type."""


def _environment(e: BaseException, debug: bool, args: argparse.Namespace | None) -> bool:
    """Report ``e`` if the environment caused it (a full disk, read-only, no permission): exit 2.

    ENOSPC/EROFS/EACCES in an ``OSError`` or in a JVM's message
    (:func:`~rollcheck.pyimpl.errors.environment_fault`); an error that names no path is reported
    with the command's output path.
    """
    outs = [str(v) for k, v in (vars(args).items() if args is not None else ())
            if k in _OUTPUT_ATTRS and isinstance(v, str) and v]
    fault = environment_fault(e, outs[0] if outs else None)
    if fault is None:
        return False
    if debug:
        traceback.print_exc()
    _report("environment error", str(fault))
    return True


def _report(kind: str, message: str) -> None:
    from rollcheck.cli._util import safe_text

    print(f"rollcheck: {kind}: {safe_text(message)}", file=sys.stderr)


def _hypothesis_storage_outside_cwd() -> None:
    """Keep Hypothesis' storage in the user's cache folder, not in the working directory.

    A command must not leave files where the user runs it; a ``HYPOTHESIS_STORAGE_DIRECTORY`` the
    user chose is kept.
    """
    if not os.environ.get("HYPOTHESIS_STORAGE_DIRECTORY"):
        cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        os.environ["HYPOTHESIS_STORAGE_DIRECTORY"] = os.path.join(cache, "rollcheck", "hypothesis")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line ``argv`` (default ``sys.argv[1:]``) and return the exit code."""
    _hypothesis_storage_outside_cwd()
    with _escaping_streams(), _signals():
        return _main(argv)


def _main(argv: Sequence[str] | None) -> int:
    debug = bool(os.environ.get("ROLLCHECK_DEBUG", "").strip()) or "--debug" in (
        sys.argv[1:] if argv is None else list(argv))
    args: argparse.Namespace | None = None
    try:
        parser = _parser()
        args = parser.parse_args(argv)
        debug = debug or bool(getattr(args, "debug", False))
        handler = getattr(args, "handler", None)
        if handler is None:
            # A command family without its subcommand, or no command at all.
            target = getattr(args, "_parser", parser)
            target.print_help(sys.stderr)
            return EXIT_INVALID
        rc = handler(args)
        return EXIT_OK if rc is None else int(rc)
    except SystemExit:  # argparse: usage errors (2), --help/--version (0), as argparse does
        raise
    except EnvironmentFault as e:  # disk full, read-only, no permission: the machine's, exit 2
        _report("environment error", str(e))
        return EXIT_INVALID
    except InvalidInputError as e:
        _report("error", str(e))
        return EXIT_INVALID
    except PropertyViolation as e:
        _report("violation", str(e))
        return EXIT_VIOLATION
    except InconclusiveError as e:
        _report("inconclusive", str(e))
        return EXIT_INCONCLUSIVE
    except TerminationRequested as e:
        name = "SIGTERM" if e.signum == signal.SIGTERM else f"signal {e.signum}"
        print(f"rollcheck: terminated ({name})", file=sys.stderr)
        return 128 + e.signum
    except KeyboardInterrupt:
        print("rollcheck: interrupted", file=sys.stderr)
        return EXIT_SIGINT
    except BrokenPipeError:
        # The reader went away (``| head``): stop quietly; stdout is pointed at /dev/null so that
        # the interpreter's final flush does not complain.
        with contextlib.suppress(OSError, ValueError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK
    except InternalError as e:
        if _environment(e, debug, args):
            return EXIT_INVALID
        if debug:
            traceback.print_exc()
        _report("internal error", f"{e} (a bug in rollcheck; rerun with --debug for the traceback)")
        return EXIT_INTERNAL
    except Exception as e:
        if _environment(e, debug, args):
            return EXIT_INVALID
        reason = _input_shaped(e)
        if debug:
            traceback.print_exc()
        if reason is not None:
            files = _input_files(args) if args is not None else []
            where = ", ".join(files) if files else "input"
            _report("error", f"{where}: {reason}")
            return EXIT_INVALID
        why = next((w for t, w in _UNBOUNDED.items() if isinstance(e, t)), None)
        text = f"{type(e).__name__}: {e}" + (f"; {why}" if why else "")
        _report("internal error", f"{text} (a bug in rollcheck; rerun with --debug for the traceback)")
        return EXIT_INTERNAL


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
