"""Helpers shared by the subcommands: JSON output, checkpoint references, atomic files."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from rollcheck.pyimpl.errors import InvalidInputError
from rollcheck.pyimpl.pattern import Pattern
from rollcheck.pyimpl.patternio import atomic_write_text, load_pattern

__all__ = [
    "emit_json",
    "atomic_write_text",
    "load_pattern_arg",
    "parse_checkpoint_ref",
    "add_parser",
]


def emit_json(obj: Any) -> None:
    """Print exactly one JSON document on stdout."""
    sys.stdout.write(json.dumps(obj, indent=2, sort_keys=False) + "\n")
    sys.stdout.flush()


def load_pattern_arg(path: str) -> Pattern:
    return load_pattern(path)


def parse_checkpoint_ref(p: Pattern, ref: str, flag: str) -> tuple[int, int]:
    """Parse ``P0:1`` into (process index, checkpoint index), validating both against ``p``."""
    name, sep, idx = ref.rpartition(":")
    if not sep or not name:
        raise InvalidInputError(f"expected PROCESS:INDEX, got {ref!r}", location=flag)
    if name not in p.processes:
        raise InvalidInputError(f"unknown process {name!r}", location=flag)
    i = p.processes.index(name)
    try:
        x = int(idx)
    except ValueError:
        raise InvalidInputError(f"checkpoint index must be an integer, got {idx!r}", location=flag) from None
    if not 0 <= x <= p.last_index(i):
        raise InvalidInputError(
            f"{name} has checkpoints 0..{p.last_index(i)}, not {x}", location=flag
        )
    return i, x


def add_parser(sub: Any, name: str, help: str, handler: Any, **kw: Any) -> argparse.ArgumentParser:
    """Add a subcommand whose parsed arguments dispatch to ``handler(args)``."""
    parser: argparse.ArgumentParser = sub.add_parser(name, help=help, description=help, **kw)
    parser.set_defaults(handler=handler, _parser=parser)
    return parser
