"""``rollcheck protocol NAME PATTERN --json``: run a checkpointing protocol over a pattern.

The pattern's checkpoints are the basic ones; the protocol decides at every delivery whether a
forced checkpoint precedes it (``specs/protocols.md#run``). NAME is a built-in protocol (``uc``,
``bcs``, ``hmnr``), a variant of the mutation catalogue (``hmnr-no-c1``, ``bcs-geq``, ...),
``MODULE:CLASS`` or ``path/to/file.py:CLASS`` (``specs/protocols.md#your-protocol``).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from rollcheck.cli._util import add_parser, emit_json


def register(sub: Any) -> None:
    p = add_parser(sub, "protocol", "Run a checkpointing protocol (uc, bcs, hmnr) over a pattern: "
                   "its checkpoints are the basic ones, the protocol adds the forced ones.", _run)
    p.add_argument("name", metavar="NAME", help="uc, bcs or hmnr (or a variant such as hmnr-no-c1), "
                   "MODULE:CLASS or path/to/file.py:CLASS")
    p.add_argument("pattern", metavar="PATTERN", help="a rollcheck.pattern/1 file")
    p.add_argument("--json", action="store_true", help="print one JSON document")
    p.add_argument("-o", "--out", metavar="OUT.json", help="also write the resulting pattern to this file")


def _run(args: argparse.Namespace) -> int:
    from rollcheck.pyimpl.patternio import atomic_write_text, load_pattern, pattern_to_dict
    from rollcheck.pyimpl.protocols import is_builtin_spec, resolve_protocol, run_protocol
    from rollcheck.testing._check import guarded_protocol

    # unknown name, module, file or class: exit 2; a user's protocol that raises: exit 2 too
    proto = resolve_protocol(args.name) if is_builtin_spec(args.name) else guarded_protocol(args.name)
    from rollcheck.testing import UserCodeError

    p = load_pattern(args.pattern)
    try:
        r = run_protocol(proto, p)
    except UserCodeError as e:
        raise UserCodeError(f"{e.reason} (input {args.pattern})", source=e.source, location=e.location) from None
    doc = pattern_to_dict(r.pattern)
    if args.out:
        atomic_write_text(args.out, json.dumps(doc, indent=1) + "\n")
    if args.json:
        emit_json({
            "protocol": r.protocol,
            "forced": list(r.forced_messages),
            "pattern": doc,
            "basic_checkpoints": r.basic_checkpoints,
            "forced_checkpoints": r.forced_checkpoints,
        })
    else:
        deliveries = sum(1 for e in p.events if e.kind == "deliver")
        print(f"{r.protocol}: {r.basic_checkpoints} basic, {r.forced_checkpoints} forced checkpoints "
              f"({deliveries} deliveries)")
        if r.forced_messages:
            print("forced before: " + ", ".join(r.forced_messages))
        if args.out:
            print(f"wrote {args.out}")
    return 0
