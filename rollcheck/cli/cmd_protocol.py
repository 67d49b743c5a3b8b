"""``rollcheck protocol NAME PATTERN --json``: run a checkpointing protocol over a pattern.

The pattern's checkpoints are the basic ones; the protocol decides at every delivery whether a
forced checkpoint precedes it (``specs/protocols.md#run``). NAME is a built-in protocol (``uc``,
``bcs``, ``hmnr``), a variant of the mutation catalogue (``hmnr-no-c1``, ``bcs-geq``, ...),
``MODULE:CLASS`` or ``path/to/file.py:CLASS`` (``specs/protocols.md#your-protocol``).

Exit codes: 0, or 1 when a protocol that claims ``zcycle_free`` leaves a useless checkpoint on the
pattern (the JSON then names them under ``"useless"``), 2 for bad input or a failure of the
protocol's own code.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from rollcheck.cli._util import add_parser, emit_json


def register(sub: Any) -> None:
    """Add ``rollcheck protocol`` to ``sub``."""
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
    from rollcheck.testing._guard import guarded_protocol

    # unknown name, module, file or class: exit 2; a user's protocol that raises: exit 2 too
    proto = resolve_protocol(args.name) if is_builtin_spec(args.name) else guarded_protocol(args.name)
    from rollcheck.testing import UserCodeError

    p = load_pattern(args.pattern)
    try:
        r = run_protocol(proto, p)
    except UserCodeError as e:
        raise UserCodeError(f"{e.reason} (input {args.pattern})", source=e.source, location=e.location) from None
    from rollcheck.pyimpl.zpaths import useless_checkpoints

    claims = bool(getattr(proto, "zcycle_free", False))
    useless = [r.pattern.checkpoint_name(c) for c in useless_checkpoints(r.pattern)] if claims else []
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
            "zcycle_free_claimed": claims,
            "useless": useless,
        })
    else:
        deliveries = sum(1 for e in p.events if e.kind == "deliver")
        print(f"{r.protocol}: {r.basic_checkpoints} basic, {r.forced_checkpoints} forced checkpoints "
              f"({deliveries} deliveries)")
        if r.forced_messages:
            print("forced before: " + ", ".join(r.forced_messages))
        if args.out:
            print(f"wrote {args.out}")
        if useless:
            print(f"UNSAFE: {r.protocol} claims zcycle_free but leaves the useless checkpoint(s) "
                  f"{', '.join(useless)}")
    from rollcheck.pyimpl.verdict import Check, exit_code

    return exit_code([Check.violated("zcycle-free", f"useless checkpoint(s) {', '.join(useless)}") if useless
                      else Check.held("zcycle-free", f"{r.protocol}: no useless checkpoint")])
