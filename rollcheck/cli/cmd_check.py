"""``rollcheck check protocol|trace``: check the user's own system.

Each subcommand lives in its own module (``rollcheck.cli.check_<name>``) exposing
``HELP``, ``add_arguments(parser)`` and ``run(args) -> int``; this module only wires them up, so the
heavy imports happen in the handlers. A subcommand whose module fails to import stays on the
command line and reports an internal error (exit 4) when run: never silently dropped.
"""

from __future__ import annotations

import argparse
import importlib
from typing import Any

from rollcheck.cli._util import add_parser
from rollcheck.pyimpl.errors import InternalError

SUBCOMMANDS = ("protocol", "trace")


def register(sub: Any) -> None:
    """Add ``rollcheck check`` (``check protocol``, ``check trace``) to ``sub``."""
    p = add_parser(sub, "check", "Check your own system: a protocol class (check protocol) or an "
                   "engine's trace (check trace).", None)
    p.set_defaults(handler=None)
    csub = p.add_subparsers(dest="check_command", metavar="SUBCOMMAND", parser_class=type(p))
    for name in SUBCOMMANDS:
        try:
            module = importlib.import_module(f"rollcheck.cli.check_{name}")
        except Exception as e:  # noqa: BLE001 - reported when the subcommand is run (exit 4)
            _broken(csub, name, e)
            continue
        sp = add_parser(csub, name, module.HELP, _dispatch(module))
        module.add_arguments(sp)


def _dispatch(module: Any) -> Any:
    def handler(args: argparse.Namespace) -> int:
        return int(module.run(args) or 0)

    return handler


def _broken(csub: Any, name: str, error: Exception) -> None:
    """Register ``check NAME`` whose module failed to import: running it is an internal error.

    A subcommand of :data:`SUBCOMMANDS` is part of rollcheck; one whose module does not import
    (missing, a syntax error, a broken import inside it) is a bug in the installation, so
    ``rollcheck check NAME`` says so with exit 4 instead of vanishing from the command line (which
    would read as a usage error, exit 2) — and the other commands keep working.
    """
    why = f"{type(error).__name__}: {error}"

    def handler(args: argparse.Namespace) -> int:
        raise InternalError(f"check {name}: its module rollcheck.cli.check_{name} failed to import ({why})")

    sp = add_parser(csub, name, f"(unavailable: its module failed to import: {why})", handler)
    sp.add_argument("rest", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
