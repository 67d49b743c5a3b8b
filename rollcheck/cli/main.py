"""Entry point of the ``rollcheck`` console command (see ``specs/cli.md``).

Exit codes: 0 ok, 1 violation found, 2 bad input or usage, 3 inconclusive.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from collections.abc import Sequence

from rollcheck.pyimpl.errors import InconclusiveError, InvalidInputError, PropertyViolation

EXIT_OK = 0
EXIT_VIOLATION = 1
EXIT_INVALID = 2
EXIT_INCONCLUSIVE = 3


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        self.exit(EXIT_INVALID, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    from rollcheck import __version__

    parser = _Parser(
        prog="rollcheck",
        description="Verify rollback-recovery algorithms: reference models, properties, TLC, Spark replay.",
    )
    parser.add_argument("--version", action="version", version=f"rollcheck {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    import rollcheck.cli as pkg

    for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda m: m.name):
        if info.name.startswith("cmd_"):
            module = importlib.import_module(f"rollcheck.cli.{info.name}")
            module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    handler = getattr(args, "handler", None)
    if handler is None:
        # A command family without its subcommand, or no command at all.
        target = getattr(args, "_parser", parser)
        target.print_help(sys.stderr)
        return EXIT_INVALID
    try:
        rc = handler(args)
    except InvalidInputError as e:
        print(f"rollcheck: error: {e}", file=sys.stderr)
        return EXIT_INVALID
    except PropertyViolation as e:
        print(f"rollcheck: violation: {e}", file=sys.stderr)
        return EXIT_VIOLATION
    except InconclusiveError as e:
        print(f"rollcheck: inconclusive: {e}", file=sys.stderr)
        return EXIT_INCONCLUSIVE
    except KeyboardInterrupt:
        print("rollcheck: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return EXIT_OK
    return EXIT_OK if rc is None else int(rc)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
