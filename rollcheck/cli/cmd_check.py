"""``rollcheck check protocol|trace``: check the user's own system.

Each subcommand lives in its own module (``rollcheck.cli.check_<name>``) exposing
``HELP``, ``add_arguments(parser)`` and ``run(args) -> int``; this module only wires them up, so the
heavy imports happen in the handlers.
"""

from __future__ import annotations

import argparse
import importlib
from typing import Any

from rollcheck.cli._util import add_parser

SUBCOMMANDS = ("protocol", "trace")


def register(sub: Any) -> None:
    p = add_parser(sub, "check", "Check your own system: a protocol class (check protocol) or an "
                   "engine's trace (check trace).", None)
    p.set_defaults(handler=None)
    csub = p.add_subparsers(dest="check_command", metavar="SUBCOMMAND", parser_class=type(p))
    for name in SUBCOMMANDS:
        try:
            module = importlib.import_module(f"rollcheck.cli.check_{name}")
        except ModuleNotFoundError as e:
            if e.name != f"rollcheck.cli.check_{name}":
                raise
            continue
        sp = add_parser(csub, name, module.HELP, _dispatch(module))
        module.add_arguments(sp)


def _dispatch(module: Any) -> Any:
    def handler(args: argparse.Namespace) -> int:
        return int(module.run(args) or 0)

    return handler
