"""``rollcheck spans FILE --json``: globally consistent rollback spans (Falkirk Wheel §3.3).

``FILE`` is either an expanded span system (``rollcheck.spans/1``) or a dataflow description
(``rollcheck.dataflow/1``: processors, edges, what each processed and sent, checkpoints, failures),
from which the span system is built first. A span system goes straight into flat need tables
(:mod:`rollcheck.pyimpl.spans.tables`) and is solved by the bulk worklist; ``--order`` runs the
reference solver on explicit sets instead.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
from typing import Any

from rollcheck.cli._util import add_parser, atomic_write_text, emit_json
from rollcheck.pyimpl.errors import InvalidInputError
from rollcheck.pyimpl.jsonio import decode_utf8, loads_json, read_input_bytes

FORMATS = ("rollcheck.spans/1", "rollcheck.dataflow/1")


def register(sub: Any) -> None:
    """Add ``rollcheck spans`` to ``sub``."""
    p = add_parser(sub, "spans", "Compute the Falkirk Wheel rollback spans of a span system "
                   "(rollcheck.spans/1) or of a dataflow description (rollcheck.dataflow/1).", _run)
    p.add_argument("system", metavar="FILE", help="a rollcheck.spans/1 or rollcheck.dataflow/1 JSON file")
    p.add_argument("--json", action="store_true", help="print one JSON document")
    p.add_argument("--normalise-phi", "--normalize-phi", dest="normalise_phi", action="store_true",
                   help="replace φ(c_k) by the union of φ(c_0..c_k) instead of rejecting non-monotone φ")
    p.add_argument("--order", choices=["fifo", "lifo", "random", "rounds"], default=None,
                   help="run the reference solver on explicit sets in this evaluation order (every order "
                   "gives the same answer; default: the vectorised bulk worklist)")
    p.add_argument("--seed", type=int, default=0, help="seed of --order random")
    p.add_argument("--stats", action="store_true", help="add examinations/decreases to the output")
    p.add_argument("--watermark", action="store_true",
                   help="also print the low watermark (always printed for a dataflow description)")
    p.add_argument("--strict", action="store_true",
                   help="also validate a rollcheck.spans/1 file against its JSON Schema with jsonschema (slow on "
                   "large files; a dataflow description is always checked against its schema)")
    p.add_argument("--emit-system", metavar="OUT", default=None,
                   help="write the expanded rollcheck.spans/1 system to OUT")


class _Float(str):
    """A JSON number with a fraction or exponent: never a valid time.

    It is unhashable, so the fast path hands it to the per-time checks, which reject it naming its
    place.
    """

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return str.__str__(self)


_Float.__name__ = "float"  # what error messages call its type


def read_json(path: str) -> tuple[Any, bool]:
    """Parse a JSON file; every failure is an :class:`InvalidInputError` naming the file.

    Returns the document and whether it is *plain*: its text has no ``true``, ``false`` or
    ``null`` (floats are parsed as unhashable markers), so every scalar is a string or an integer.
    """
    # under the input bounds of rollcheck.pyimpl.jsonio: nesting is capped up front (a document
    # nested too deeply is refused before any recursive reader sees it), floats kept as markers
    data = read_input_bytes(path)
    doc = loads_json(decode_utf8(data, path), path, parse_float=_Float)
    plain = not any(tok in data for tok in (b"true", b"false", b"null"))
    return doc, plain


def _text(name: str) -> str:
    """A name safe to print on any terminal (lone surrogates escaped)."""
    return name.encode("utf-8", "backslashreplace").decode("utf-8")


def _run(args: argparse.Namespace) -> int:
    # millions of small containers: the cyclic collector would rescan them all many times
    gc.disable()
    try:
        return _dispatch(args)
    finally:
        gc.enable()


def _dispatch(args: argparse.Namespace) -> int:
    doc, plain = read_json(args.system)
    fmt = doc.get("format") if isinstance(doc, dict) else None
    if fmt not in FORMATS:
        raise InvalidInputError(f"format must be one of {list(FORMATS)}, got {fmt!r}"[:200],
                                source=args.system, location="format")
    if fmt == "rollcheck.dataflow/1":
        return _run_dataflow(args, doc)
    return _run_system(args, doc, plain)


def _run_system(args: argparse.Namespace, doc: Any, plain: bool) -> int:
    phi = "normalise" if args.normalise_phi else "reject"
    out: dict[str, Any] = {}
    if args.strict:
        from rollcheck.pyimpl.spans.system import validate_schema

        validate_schema(doc, "spans", source=args.system)
    if args.order is None and not args.emit_system:
        from rollcheck.pyimpl.spans.tables import compile_document, solve_tables, watermark_tables

        t = compile_document(doc, phi=phi, source=args.system, plain=plain)
        del doc
        spans, exams, steps = solve_tables(t)
        out["spans"] = spans
        if args.watermark:
            out["watermark"] = watermark_tables(t)
        if args.stats:
            out["stats"] = {"order": "bulk", "examinations": exams, "bulk_steps": steps}
    else:
        from rollcheck.pyimpl.spans.fixpoint import solve_levels
        from rollcheck.pyimpl.spans.system import system_from_dict, system_to_dict
        from rollcheck.pyimpl.spans.watermark import low_watermark

        s = system_from_dict(doc, phi=phi, source=args.system, semantic=True)
        order = args.order or "fifo"
        r = solve_levels(s, order, args.seed)
        out["spans"] = {p.name: p.label(r.levels[i]) for i, p in enumerate(s.processors)}
        if args.watermark:
            out["watermark"] = low_watermark(s)
        if args.stats:
            out["stats"] = {"order": order, "seed": args.seed, "examinations": r.examinations,
                            "decreases": r.decreases}
        if args.emit_system:
            atomic_write_text(args.emit_system, json.dumps(system_to_dict(s)) + "\n")
    _print(args, out)
    return 0


def _run_dataflow(args: argparse.Namespace, doc: Any) -> int:
    from rollcheck.pyimpl.spans.description import analyse, description_from_dict

    d = description_from_dict(doc, source=args.system)
    a = analyse(d, order=args.order or "fifo", seed=args.seed)
    if args.emit_system:
        atomic_write_text(args.emit_system, json.dumps(a.system_doc) + "\n")
    out = a.to_json()
    if args.stats:
        out["stats"] = {"order": args.order or "fifo", "seed": args.seed, "examinations": a.examinations,
                        "decreases": a.decreases}
    _print(args, out)
    return 0


def _print(args: argparse.Namespace, out: dict[str, Any]) -> None:
    if args.json:
        emit_json(out)
        return
    w = sys.stdout.write
    procs = out.get("processors")
    wm = out.get("watermark", {})
    for name, v in out["spans"].items():
        line = f"{_text(name)}: {v}"
        if procs:
            p = procs[name]
            if p["restore"] != "top":
                line += f"  (restore {p['restore']})"
            if p.get("discard"):
                line += f"; discard {json.dumps(p['discard'])}"
            for e, ts in p.get("replay", {}).items():
                line += f"; replay {json.dumps(ts)} on {_text(e)}"
            if p.get("resume_epoch") is not None:
                line += f"; resume at epoch {p['resume_epoch']}"
        if name in wm:
            line += f"  [watermark {wm[name]}]"
        w(_text(line) + "\n")
    for k in ("acknowledge", "release"):
        for name, ts in out.get(k, {}).items():
            w(_text(f"{k} {name}: {json.dumps(ts)}") + "\n")
    if "stats" in out:
        w(f"stats: {json.dumps(out['stats'])}\n")
