"""``rollcheck check protocol SPEC``: check your own checkpointing protocol.

SPEC is a built-in name (``hmnr``, ``bcs``, ``uc``, a variant), ``MODULE:CLASS`` or
``path/to/file.py:CLASS`` naming a subclass of ``rollcheck.testing.Protocol``. Every property the
protocol claims is checked on Z-cycle-prone schedules; a violation is shrunk, saved as a pattern
file and drawn (``specs/protocols.md#your-protocol``).

Exit codes: 0 safe, 1 unsafe (counterexample written), 2 bad SPEC or an exception in the
protocol's code, 3 inconclusive (nothing was checked, or the protocol claims nothing).
"""

from __future__ import annotations

import argparse
import sys

from rollcheck.cli._util import emit_json

__all__ = ["HELP", "add_arguments", "run"]

HELP = ("Check your own checkpointing protocol (a rollcheck.testing.Protocol subclass): no useless "
        "checkpoint, recovery lines, rollback bound; counterexamples are shrunk, saved and drawn.")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("spec", metavar="SPEC",
                   help="a built-in protocol name, MODULE:CLASS or path/to/file.py:CLASS")
    p.add_argument("--profile", choices=["ci", "verify"], default=None,
                   help="Hypothesis budget: ci = 60 schedules, verify = 600 (default: $ROLLCHECK_PROFILE or ci)")
    p.add_argument("--seed", type=int, default=None, metavar="N",
                   help="Hypothesis seed (default: $ROLLCHECK_SEED; unset or empty = derandomised)")
    p.add_argument("--out", metavar="DIR", default="rollcheck-out",
                   help="where the counterexample (.json) and its picture (.png) go (default rollcheck-out)")
    p.add_argument("--max-examples", type=int, default=None, metavar="N",
                   help="override the profile's number of schedules")
    p.add_argument("--no-picture", action="store_true", help="do not draw the counterexample")
    p.add_argument("--json", action="store_true", help="print one JSON document")


def run(args: argparse.Namespace) -> int:
    from rollcheck.properties.profiles import active_profile, seed, seed_text
    from rollcheck.pyimpl.errors import InvalidInputError
    from rollcheck.testing import check_protocol

    profile = args.profile or active_profile()
    the_seed = args.seed if args.seed is not None else seed()  # a bad ROLLCHECK_SEED: exit 2
    if args.max_examples is not None and args.max_examples < 0:
        raise InvalidInputError(f"must be >= 0, got {args.max_examples}", location="--max-examples")
    print(f"check protocol {args.spec}: profile {profile}, seed {seed_text(the_seed)}", file=sys.stderr)
    report = check_protocol(args.spec, profile=profile, out=args.out, seed=the_seed,
                            max_examples=args.max_examples, picture=not args.no_picture)
    if args.json:
        emit_json(report.to_json())
    else:
        print(report.summary())
    return report.exit_code
