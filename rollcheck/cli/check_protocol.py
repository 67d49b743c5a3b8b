"""``rollcheck check protocol SPEC``: check your own checkpointing protocol.

SPEC is a built-in name (``hmnr``, ``bcs``, ``uc``, a variant), ``MODULE:CLASS`` or
``path/to/file.py:CLASS`` naming a subclass of ``rollcheck.testing.Protocol``. Every property the
protocol claims is checked on every basic schedule up to the bounds (default 2x11, 3x9, 4x6), then
on random schedules steered at the protocol; the smallest violation is saved as a pattern file and
drawn (``specs/protocols.md#your-protocol``, ``#exhaustive``).

SAFE means complete: a requested bound that the budget cut makes the verdict inconclusive, the
line naming the bounds completed, cut and not started (a counterexample found before the cut is
still UNSAFE).

Exit codes: 0 safe, 1 unsafe (counterexample written), 2 bad SPEC or a fault of the protocol's
code (an exception, a wrong type, a state changed in place or that cannot be copied, results that
differ when the same schedule is run twice; the method is named), 3 inconclusive (nothing was
checked, the protocol claims nothing, or the budget cut a requested bound).
"""

from __future__ import annotations

import argparse
import sys

from rollcheck.cli._util import emit_json

__all__ = ["HELP", "add_arguments", "run"]

HELP = ("Check your own checkpointing protocol (a rollcheck.testing.Protocol subclass) on every "
        "schedule up to a bound, then on random ones: no useless checkpoint, rollback bound; the "
        "smallest counterexample is saved and drawn.")


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Add the arguments of ``rollcheck check protocol`` to ``p``."""
    p.add_argument("spec", metavar="SPEC",
                   help="a built-in protocol name, MODULE:CLASS or path/to/file.py:CLASS")
    p.add_argument("--profile", choices=["ci", "verify"], default=None,
                   help="random phase: ci = 600 schedules, verify = 3000 (default: $ROLLCHECK_PROFILE or ci)")
    p.add_argument("--bound", metavar="PxE[,PxE...]", default=None,
                   help="exhaustive bounds: every schedule of P processes and at most E basic events "
                        "(default 2x11,3x9,4x6)")
    p.add_argument("--budget", type=float, default=None, metavar="SECONDS",
                   help="seconds for the exhaustive phase (default 150); a bound it cuts makes the "
                        "verdict inconclusive (exit 3)")
    p.add_argument("--schedule", metavar="PATTERN.json", default=None,
                   help="also run this basic schedule (e.g. a paper's counterexample)")
    p.add_argument("--spark", action="store_true",
                   help="split the exhaustive frontier over Spark tasks (local[*] unless --master)")
    p.add_argument("--master", metavar="URL", default=None,
                   help="Spark master for --spark (e.g. spark://host:7077)")
    p.add_argument("--call-timeout", type=float, default=10.0, metavar="SECONDS",
                   help="seconds one protocol method call may take (default 10)")
    p.add_argument("--workers", type=int, default=None, metavar="N",
                   help="local worker processes for the exhaustive phase (default: one per core, at most 2)")
    p.add_argument("--seed", type=int, default=None, metavar="N",
                   help="Hypothesis seed (default: $ROLLCHECK_SEED; unset or empty = derandomised)")
    p.add_argument("--out", metavar="DIR", default="rollcheck-out",
                   help="where the counterexample (.json) and its picture (.png) go (default rollcheck-out)")
    p.add_argument("--max-examples", type=int, default=None, metavar="N",
                   help="override the profile's number of random schedules (0: none)")
    p.add_argument("--no-picture", action="store_true", help="do not draw the counterexample")
    p.add_argument("--json", action="store_true", help="print one JSON document")


def run(args: argparse.Namespace) -> int:
    """Run ``rollcheck check protocol``; its exit code."""
    from rollcheck.properties.profiles import active_profile, seed, seed_text
    from rollcheck.pyimpl.errors import InvalidInputError
    from rollcheck.testing import check_protocol

    profile = args.profile or active_profile()
    the_seed = args.seed if args.seed is not None else seed()  # a bad ROLLCHECK_SEED: exit 2
    if args.max_examples is not None and args.max_examples < 0:
        raise InvalidInputError(f"must be >= 0, got {args.max_examples}", location="--max-examples")
    if args.master is not None and not args.spark:
        raise InvalidInputError("--master needs --spark", location="--master")
    if args.workers is not None and args.workers < 1:
        raise InvalidInputError(f"must be >= 1, got {args.workers}", location="--workers")
    if args.schedule is not None:
        from rollcheck.pyimpl.patternio import load_pattern

        load_pattern(args.schedule)  # a bad file: exit 2 before any work
    print(f"check protocol {args.spec}: profile {profile}, seed {seed_text(the_seed)}", file=sys.stderr)

    def progress(line: str) -> None:
        print(f"  {line}", file=sys.stderr, flush=True)

    report = check_protocol(args.spec, profile=profile, out=args.out, seed=the_seed,
                            max_examples=args.max_examples, picture=not args.no_picture,
                            bounds=args.bound, budget=args.budget, schedule=args.schedule,
                            spark=args.spark, master=args.master, call_timeout=args.call_timeout,
                            workers=args.workers, progress=progress)
    if args.json:
        emit_json(report.to_json())
    else:
        print(report.summary())
    return report.exit_code
