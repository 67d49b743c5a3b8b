"""Pattern commands: ``validate``, ``useless``, ``zpath``, ``recovery-line``, ``render``, ``consistent``.

Contract: ``specs/cli.md`` (from the design's cli-and-formats). Exit codes 0/1/2/3.
"""

from __future__ import annotations

import argparse
from typing import Any

from rollcheck.cli._util import (
    add_allow_large,
    add_parser,
    check_output_path,
    emit_json,
    load_pattern_arg,
    parse_checkpoint_ref,
    safe_name,
)


def register(sub: Any) -> None:
    """Add the pattern commands (``validate``, ``useless``, ``zpath``, ``render``...)."""
    p = add_parser(sub, "validate", "Check a rollcheck.pattern/1 file: exit 0 and 'valid', or exit 2 with the reason.", _validate)
    p.add_argument("pattern")
    add_allow_large(p)
    p.add_argument("--strict", action="store_true", help="also validate against the JSON Schema of the format")
    p.add_argument("--json", action="store_true")

    p = add_parser(sub, "useless", "List the useless checkpoints (those on a Z-cycle).", _useless)
    p.add_argument("pattern")
    add_allow_large(p)
    p.add_argument("--json", action="store_true")
    p.add_argument("--witness", action="store_true", help="include one Z-cycle per useless checkpoint")

    p = add_parser(sub, "zpath", "Find a Z-path between two checkpoints (one witness).", _zpath)
    p.add_argument("pattern")
    add_allow_large(p)
    p.add_argument("--from", dest="src", required=True, metavar="P:I")
    p.add_argument("--to", dest="dst", required=True, metavar="P:I")
    p.add_argument("--json", action="store_true")

    p = add_parser(sub, "recovery-line", "Compute the recovery line after the given processes fail.", _recovery)
    p.add_argument("pattern")
    add_allow_large(p)
    p.add_argument("--failed", action="append", required=True, metavar="PROCESS")
    p.add_argument("--no-virtual", action="store_true", help="no virtual checkpoints: everyone restores a real one")
    p.add_argument("--method", choices=["rgraph", "networkx", "cgraph"], default="rgraph",
                   help="rgraph (fast, default), networkx (readable), cgraph (rollback propagation)")
    p.add_argument("--json", action="store_true")

    p = add_parser(sub, "consistent", "Min/max consistent global checkpoint containing checkpoints (Wang).", _consistent)
    p.add_argument("pattern")
    add_allow_large(p)
    p.add_argument("checkpoints", nargs="+", metavar="P:I")
    p.add_argument("--no-volatile", action="store_true", help="real checkpoints only (no V)")
    p.add_argument("--json", action="store_true")

    p = add_parser(sub, "render", "Draw a space-time diagram (PNG or SVG).", _render)
    p.add_argument("pattern")
    add_allow_large(p)
    p.add_argument("-o", "--out", required=True, metavar="OUT.png|OUT.svg")
    p.add_argument("--failed", action="append", default=[], metavar="PROCESS")
    p.add_argument("--no-virtual", action="store_true")
    p.add_argument("--zcycles", action="store_true", help="highlight useless checkpoints and one Z-cycle each")
    p.add_argument("--title")


def _procs(pat: Any, names: list[str], flag: str, source: str | None = None) -> list[int]:
    from rollcheck.pyimpl.errors import InvalidInputError

    out = []
    for name in names:
        if name not in pat.processes:
            raise InvalidInputError(f"unknown process {safe_name(name)}", source=source, location=flag)
        out.append(pat.processes.index(name))
    return out


def _cp(pat: Any, c: tuple[int, int]) -> dict[str, Any]:
    return {"process": pat.processes[c[0]], "index": c[1]}


def _validate(args: argparse.Namespace) -> int:
    pat = load_pattern_arg(args.pattern, allow_large=args.allow_large)
    if args.strict:
        from rollcheck.pyimpl.jsonio import load_json_file
        from rollcheck.pyimpl.patternio import validate_schema

        validate_schema(load_json_file(args.pattern), args.pattern)
    if args.json:
        emit_json({"valid": True, "processes": len(pat.processes), "events": len(pat.events),
                   "messages": pat.num_messages, "in_transit": len(pat.in_transit),
                   "checkpoints": sum(pat.last_indices)})
    else:
        print("valid")
    return 0


def _useless(args: argparse.Namespace) -> int:
    from rollcheck.pyimpl.zpaths import useless_checkpoints, zcycle

    pat = load_pattern_arg(args.pattern, allow_large=args.allow_large)
    found = useless_checkpoints(pat)
    if args.json:
        doc: dict[str, Any] = {"useless": [_cp(pat, c) for c in found]}
        if args.witness:
            doc["zcycles"] = {pat.checkpoint_name(c): zcycle(pat, c) for c in found}
        emit_json(doc)
    else:
        if not found:
            print("no useless checkpoint")
        for c in found:
            extra = f"  Z-cycle: {' '.join(zcycle(pat, c) or [])}" if args.witness else ""
            print(f"{pat.checkpoint_name(c)}{extra}")
    return 0


def _zpath(args: argparse.Namespace) -> int:
    from rollcheck.pyimpl.zpaths import zpath

    pat = load_pattern_arg(args.pattern, allow_large=args.allow_large)
    a = parse_checkpoint_ref(pat, args.src, "--from", args.pattern)
    b = parse_checkpoint_ref(pat, args.dst, "--to", args.pattern)
    w = zpath(pat, a, b)
    if args.json:
        emit_json({"exists": w is not None, "messages": w or []})
    else:
        print(f"Z-path {args.src} -> {args.dst}: " + (" ".join(w) if w else "none"))
    return 0


def _recovery(args: argparse.Namespace) -> int:
    from rollcheck.pyimpl import recovery

    pat = load_pattern_arg(args.pattern, allow_large=args.allow_large)
    failed = _procs(pat, args.failed, "--failed", args.pattern)
    fn = {"rgraph": recovery.recovery_line, "networkx": recovery.recovery_line_networkx,
          "cgraph": recovery.rollback_propagation}[args.method]
    res = fn(pat, failed, virtual=not args.no_virtual)
    doc: dict[str, Any] = res.to_json(pat)
    if args.json:
        emit_json(doc)
    else:
        for name, x in doc["line"].items():
            print(f"{name}: {x}")
        print("in transit:", " ".join(doc["in_transit"]) or "none")
        print("rolled back:", " ".join(doc["rolled_back"]) or "none")
    return 0


def _consistent(args: argparse.Namespace) -> int:
    from rollcheck.pyimpl.recovery import max_consistent_containing, min_consistent_containing

    pat = load_pattern_arg(args.pattern, allow_large=args.allow_large)
    members = [parse_checkpoint_ref(pat, r, "checkpoints", args.pattern) for r in args.checkpoints]
    allow = not args.no_volatile
    hi = max_consistent_containing(pat, members, allow)
    lo = min_consistent_containing(pat, members, allow)

    def show(c: Any) -> Any:
        if c.cut is None:
            return None
        return {pat.processes[i]: ("volatile" if x == pat.volatile_index(i) else x) for i, x in enumerate(c.cut)}

    doc = {"exists": hi.exists, "max": show(hi), "min": show(lo),
           "reason": hi.reason or None, "witness": list(hi.witness)}
    if args.json:
        emit_json(doc)
    else:
        if not hi.exists:
            print(f"none: {hi.reason}" + (f" ({' '.join(hi.witness)})" if hi.witness else ""))
        else:
            print("max:", doc["max"])
            print("min:", doc["min"])
    return 0


def _render(args: argparse.Namespace) -> int:
    from rollcheck.pyimpl.render import render_pattern

    if not str(args.out).lower().endswith((".png", ".svg")):
        from rollcheck.pyimpl.errors import InvalidInputError

        raise InvalidInputError(f"output must end in .png or .svg, got {safe_name(args.out)}", location="-o")
    check_output_path(args.out, "-o")
    pat = load_pattern_arg(args.pattern, allow_large=args.allow_large)
    failed = _procs(pat, args.failed, "--failed", args.pattern)
    out = render_pattern(pat, args.out, failed=failed, zcycles=args.zcycles,
                         virtual=not args.no_virtual, title=args.title)
    print(f"wrote {out}")
    return 0
