"""Helpers shared by the subcommands: safe input, safe output, JSON output, limits, progress.

Input: :func:`load_json_input`, the one JSON loader for every input file. Output:
:func:`check_output_path` (before any work), :func:`atomic_write_text` / :func:`atomic_output`
(a temporary file renamed into place; a write-protected file is never replaced),
:func:`emit_json` (exactly one JSON document). Options: :func:`check_limit`,
:func:`refuse_non_finite`. Text: :func:`safe_text`; progress: :func:`progress`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import sys
from collections.abc import Iterator
from typing import Any

from rollcheck.pyimpl.errors import InvalidInputError
from rollcheck.pyimpl.jsonio import load_json_file, safe_name
from rollcheck.pyimpl.pattern import Pattern
from rollcheck.pyimpl.patternio import (
    atomic_output,
    atomic_write_text,
    check_output_path,
    load_pattern,
)

__all__ = [
    "emit_json",
    "json_safe",
    "atomic_write_text",
    "atomic_output",
    "check_output_path",
    "check_limit",
    "refuse_non_finite",
    "load_json_input",
    "load_pattern_arg",
    "parse_checkpoint_ref",
    "add_parser",
    "add_allow_large",
    "safe_text",
    "safe_name",
    "progress",
]

MAX_MESSAGE_CHARS = 2000
"""Messages printed by the CLI are cut to this many characters."""


def safe_text(text: Any, limit: int = MAX_MESSAGE_CHARS) -> str:
    r"""One printable line: surrogates and control characters escaped, cut after ``limit`` characters.

    Parameters
    ----------
    text : object
        Anything; printed as ``str(text)``.
    limit : int, optional
        Characters kept before the cut.

    Returns
    -------
    str
        The escaped line, with the full length noted when it was cut.

    Examples
    --------
    >>> safe_text("bad name 'a\ud800'\nsecond line")
    "bad name 'a\\ud800'\\nsecond line"
    >>> safe_text("x" * 30, limit=10)
    'xxxxxxxxxx… (30 characters)'
    """
    s = str(text)
    n = len(s)
    if n > limit:
        s = s[:limit]
    s = s.encode("utf-8", "backslashreplace").decode("utf-8")
    s = "".join(ch if ch.isprintable() or ch == " " else repr(ch)[1:-1] for ch in s) if not s.isprintable() else s
    if n > limit:
        s += f"… ({n} characters)"
    return s


def json_safe(obj: Any) -> tuple[Any, list[str]]:
    """``obj`` with every non-finite float replaced by ``None``, and the JSON paths replaced.

    Examples
    --------
    >>> json_safe({"a": [1.0, float("inf")], "b": float("nan")})
    ({'a': [1.0, None], 'b': None}, ['a[1] = inf', 'b = nan'])
    """
    notes: list[str] = []

    def walk(x: Any, path: str) -> Any:
        if isinstance(x, float):
            if math.isfinite(x):
                return x
            notes.append(f"{path or '(document)'} = {x!r}")
            return None
        if isinstance(x, dict):
            return {k: walk(v, f"{path}.{k}" if path else str(k)) for k, v in x.items()}
        if isinstance(x, (list, tuple)):
            return [walk(v, f"{path}[{i}]") for i, v in enumerate(x)]
        return x

    return walk(obj, ""), notes


def emit_json(obj: Any) -> None:
    """Print exactly one JSON document on stdout (non-finite numbers as ``null`` with a ``"note"``).

    Examples
    --------
    >>> emit_json({"trt": float("inf")})
    {
      "trt": null,
      "note": "not finite, written as null: trt = inf"
    }
    """
    safe, notes = json_safe(obj)
    if notes:
        note = "not finite, written as null: " + ", ".join(notes[:20])
        if len(notes) > 20:
            note += f", … ({len(notes)} values)"
        if isinstance(safe, dict):
            if "note" in safe and safe["note"]:
                safe["note"] = f"{safe['note']}; {note}"
            else:
                safe["note"] = note
        else:
            safe = {"result": safe, "note": note}
    sys.stdout.write(json.dumps(safe, indent=2, sort_keys=False, allow_nan=False) + "\n")
    sys.stdout.flush()


def load_json_input(path: str, *, max_bytes: int | None = None, reject_duplicate_keys: bool = True) -> Any:
    """Read a (small) JSON input file with every safety check; errors name the file and place.

    Parameters
    ----------
    path : str
        The JSON file.
    max_bytes : int, optional
        Size limit in bytes (None: the loader's default).
    reject_duplicate_keys : bool, optional
        Refuse an object with a key twice.

    Returns
    -------
    object
        The parsed document.
    """
    return load_json_file(path, max_bytes=max_bytes, reject_duplicate_keys=reject_duplicate_keys)


def load_pattern_arg(path: str, *, allow_large: bool = False) -> Pattern:
    """Load the pattern file given as a command-line argument.

    Parameters
    ----------
    path : str
        The pattern JSON file.
    allow_large : bool, optional
        Accept a pattern above the documented size limits.

    Returns
    -------
    Pattern
        The validated pattern.
    """
    return load_pattern(path, allow_large=allow_large)


def check_limit(value: float | int, limit: float | int, flag: str, *, allow_large: bool = False,
                what: str = "", low: float | int | None = None) -> None:
    """Reject ``value`` above ``limit`` (unless ``allow_large``), below ``low``, or not finite.

    Parameters
    ----------
    value : int or float
        The option's value.
    limit : int or float
        The documented upper limit.
    flag : str
        The option named in the error (``--runs``).
    allow_large : bool, optional
        Accept a value above ``limit``.
    what : str, optional
        Words put before the value in the message.
    low : int or float, optional
        The lower bound (None: none).

    Raises
    ------
    InvalidInputError
        The value is out of bounds or not finite.

    Examples
    --------
    >>> check_limit(10, 100, "--runs")
    >>> check_limit(10**9, 100, "--runs")
    Traceback (most recent call last):
    ...
    rollcheck.pyimpl.errors.InvalidInputError: --runs: 1000000000 is above the limit of 100 (pass --allow-large to run it anyway)
    """
    if isinstance(value, float) and not math.isfinite(value):
        raise InvalidInputError(f"must be a finite number, got {value}", location=flag)
    if low is not None and value < low:
        raise InvalidInputError(f"must be at least {low}, got {value:g}" if isinstance(value, float)
                                else f"must be at least {low}, got {value}", location=flag)
    if value > limit and not allow_large:
        shown = f"{value:g}" if isinstance(value, float) else str(value)
        raise InvalidInputError(f"{what + ' ' if what else ''}{shown} is above the limit of {limit:g} "
                                f"(pass --allow-large to run it anyway)", location=flag)


def refuse_non_finite(action: argparse.Action, value: Any, arg_string: str) -> Any:
    """``value`` (an option value after its ``type``), or a usage error when it is a non-finite float.

    No numeric option means anything by ``nan`` or ``inf`` (nor by ``1e309``, which ``float``
    rounds to infinity), so the parser refuses them for every option
    (docs/internals/cli.md#non-finite-numbers-_utilrefuse_non_finite).

    Parameters
    ----------
    action : argparse.Action
        The option being parsed.
    value : object
        Its value after conversion.
    arg_string : str
        The text typed on the command line.

    Returns
    -------
    object
        ``value`` unchanged.

    Raises
    ------
    argparse.ArgumentError
        Naming the option (the parser turns it into exit 2 with one line).

    Examples
    --------
    >>> import argparse
    >>> act = argparse.ArgumentParser().add_argument("--i-max", type=float)
    >>> refuse_non_finite(act, 2.5, "2.5")
    2.5
    >>> refuse_non_finite(act, float("inf"), "1e309")
    Traceback (most recent call last):
    ...
    argparse.ArgumentError: argument --i-max: must be a finite number, got '1e309'
    """
    if isinstance(value, float) and not math.isfinite(value):
        raise argparse.ArgumentError(action, f"must be a finite number, got {safe_text(arg_string, 40)!r}")
    return value


def add_allow_large(p: argparse.ArgumentParser) -> None:
    p.add_argument("--allow-large", action="store_true",
                   help="run even when an option or the input is above its documented limit (specs/cli.md)")


@contextlib.contextmanager
def progress(total: int, description: str) -> Iterator[Any]:
    """A rich progress bar on stderr when it is a terminal; yields ``advance(n=1)``.

    Parameters
    ----------
    total : int
        Steps of the whole task.
    description : str
        The bar's label.

    Yields
    ------
    callable
        ``advance(n=1)``; does nothing when stderr is not a terminal.
    """
    if not sys.stderr.isatty() or total <= 1:
        yield lambda n=1: None
        return
    from rich.progress import Progress

    with Progress(transient=True, console=None) as bar:
        task = bar.add_task(description, total=total)
        yield lambda n=1: bar.advance(task, n)


def parse_checkpoint_ref(p: Pattern, ref: str, flag: str, source: str | None = None) -> tuple[int, int]:
    """Parse ``P0:1`` into (process index, checkpoint index), validating both against ``p``.

    Errors name ``flag`` (and ``source``, the pattern file the reference must fit).

    Parameters
    ----------
    p : Pattern
        The pattern the reference must name a checkpoint of.
    ref : str
        ``PROCESS:INDEX``.
    flag : str
        The option named in errors.
    source : str, optional
        The pattern file named in errors.

    Returns
    -------
    tuple of (int, int)
        The process index in ``p.processes`` and the checkpoint index.
    """
    name, sep, idx = ref.rpartition(":")
    if not sep or not name:
        raise InvalidInputError(f"expected PROCESS:INDEX, got {safe_name(ref)}", location=flag)
    if name not in p.processes:
        raise InvalidInputError(f"unknown process {safe_name(name)}", source=source, location=flag)
    i = p.processes.index(name)
    if not idx.isdigit() or len(idx) > 18:
        raise InvalidInputError(f"checkpoint index must be a non-negative integer, got {safe_name(idx)}",
                                location=flag)
    x = int(idx)
    if not 0 <= x <= p.last_index(i):
        raise InvalidInputError(
            f"{safe_name(name)} has checkpoints 0..{p.last_index(i)}, not {x}", source=source, location=flag
        )
    return i, x


def add_parser(sub: Any, name: str, help: str, handler: Any, **kw: Any) -> argparse.ArgumentParser:
    """Add a subcommand whose parsed arguments dispatch to ``handler(args)``.

    Parameters
    ----------
    sub : argparse subparsers action
        Where the subcommand is added.
    name : str
        The subcommand's name.
    help : str
        Its help and description.
    handler : callable
        Called with the parsed arguments.
    **kw : object
        Passed on to ``add_parser``.

    Returns
    -------
    argparse.ArgumentParser
        The new subcommand's parser (with ``--debug``).
    """
    parser: argparse.ArgumentParser = sub.add_parser(name, help=help, description=help, **kw)
    parser.set_defaults(handler=handler, _parser=parser)
    parser.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                        help="show the traceback of an internal error")
    return parser
