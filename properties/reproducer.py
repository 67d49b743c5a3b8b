"""Reproducers of killed mutants: a ``rollcheck.reproducer/1`` document that rollcheck reads back.

The document holds the mutant, the killing property, the profile, the seed and the drawn values
(tagged JSON); :func:`replay` runs the property's body once on them and returns the violation.
See docs/internals/properties.md#reproducer.

Examples
--------
>>> doc = encode({"x": (1, 2), "s": {3}})
>>> decode(doc) == {"x": (1, 2), "s": {3}}
True

References
----------
``specs/formats.md`` (the pattern, span system and elastic formats the tagged values embed).
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import os
from pathlib import Path
from typing import Any

from rollcheck.pyimpl.errors import InconclusiveError, InvalidInputError, PropertyViolation

__all__ = ["FORMAT", "encode", "decode", "reproducer_doc", "write_reproducer", "replay", "Unencodable"]

FORMAT = "rollcheck.reproducer/1"


class Unencodable(ValueError):
    """A drawn value that cannot be written as JSON (e.g. Hypothesis's ``data`` object)."""


def encode(v: Any) -> Any:
    """Tagged JSON for a drawn value (raises :class:`Unencodable`)."""
    from rollcheck.pyimpl.pattern import Pattern
    from rollcheck.pyimpl.patternio import pattern_to_dict

    if v is None or isinstance(v, bool | int | str):
        return v
    if isinstance(v, float):
        return v if v == v and v not in (float("inf"), float("-inf")) else {"$float": repr(v)}
    if isinstance(v, Pattern):
        return {"$pattern": pattern_to_dict(v)}
    if isinstance(v, tuple) and not hasattr(v, "_fields"):
        return {"$tuple": [encode(x) for x in v]}
    if isinstance(v, list):
        return [encode(x) for x in v]
    if isinstance(v, set | frozenset):
        return {"$set": [encode(x) for x in sorted(v, key=repr)], "frozen": isinstance(v, frozenset)}
    if isinstance(v, dict):
        if all(isinstance(k, str) for k in v):
            return {"$dict": {k: encode(x) for k, x in v.items()}}
        return {"$items": [[encode(k), encode(x)] for k, x in v.items()]}
    cls = type(v)
    if cls.__module__.startswith("rollcheck.") and (dataclasses.is_dataclass(v) or hasattr(v, "_fields")):
        fields = v._asdict() if hasattr(v, "_fields") else {f.name: getattr(v, f.name) for f in dataclasses.fields(v)}
        return {"$object": f"{cls.__module__}:{cls.__qualname__}", "fields": {k: encode(x) for k, x in fields.items()}}
    raise Unencodable(f"cannot write a {cls.__name__} as JSON")


def decode(v: Any) -> Any:
    """Inverse of :func:`encode`."""
    from rollcheck.pyimpl.patternio import pattern_from_dict

    if isinstance(v, list):
        return [decode(x) for x in v]
    if not isinstance(v, dict):
        return v
    if "$pattern" in v:
        return pattern_from_dict(v["$pattern"], "reproducer")
    if "$tuple" in v:
        return tuple(decode(x) for x in v["$tuple"])
    if "$set" in v:
        items = [decode(x) for x in v["$set"]]
        return frozenset(items) if v.get("frozen") else set(items)
    if "$dict" in v:
        return {k: decode(x) for k, x in v["$dict"].items()}
    if "$items" in v:
        return {decode(k): decode(x) for k, x in v["$items"]}
    if "$float" in v:
        return float(v["$float"])
    if "$object" in v:
        mod, _, name = str(v["$object"]).partition(":")
        if not mod.startswith("rollcheck."):
            raise InvalidInputError(f"refusing to build {v['$object']!r}: not a rollcheck type", location="drawn")
        obj: Any = importlib.import_module(mod)
        for part in name.split("."):
            obj = getattr(obj, part)
        return obj(**{k: decode(x) for k, x in v["fields"].items()})
    return {k: decode(x) for k, x in v.items()}


def reproducer_doc(name: str, killed_by: str, profile: str, seed: int | None, drawn: dict[str, Any] | None,
                   message: str) -> dict[str, Any]:
    """The ``rollcheck.reproducer/1`` document of one killed mutant."""
    doc: dict[str, Any] = {"format": FORMAT, "mutant": name, "property": killed_by, "profile": profile,
                           "seed": seed, "violation": message}
    try:
        doc["drawn"] = encode(dict(drawn)) if drawn else None
    except Unencodable as e:
        doc["drawn"] = None
        doc["note"] = f"replayed by re-running the property under profile {profile} and seed {seed} ({e})"
    return doc


def write_reproducer(path: str | os.PathLike[str], doc: dict[str, Any]) -> Path:
    """Write the reproducer document ``doc`` to ``path`` atomically; returns the path."""
    from rollcheck.pyimpl.patternio import atomic_write_text

    path = Path(path)
    atomic_write_text(path, json.dumps(doc, indent=1) + "\n")
    return path


def replay(path: str | os.PathLike[str]) -> PropertyViolation:
    """Read a reproducer and raise the violation again; return it.

    Raises InvalidInputError for a file that is not a reproducer, InconclusiveError when the
    violation does not come back.
    """
    from rollcheck.properties.mutation import load_all
    from rollcheck.properties.registry import run_property, violation_on

    src = str(path)
    from rollcheck.pyimpl.jsonio import load_json_file

    doc = load_json_file(path)  # the input bounds of every loader (nesting, NaN, numbers): exit 2
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise InvalidInputError(f"not a {FORMAT} document", source=src, location="format")
    cat = load_all()
    spec = cat.get(str(doc.get("mutant")))
    if spec is None:
        raise InvalidInputError(f"unknown mutant {doc.get('mutant')!r}", source=src, location="mutant")
    prop_name = str(doc.get("property"))
    if prop_name not in spec.kills:
        raise InvalidInputError(f"{prop_name!r} is not a property of mutant {spec.name}", source=src,
                                location="property")
    if doc.get("drawn"):
        drawn = decode(doc["drawn"])
        err = violation_on(prop_name, drawn, **spec.slots)
        if err is None:
            raise InconclusiveError(f"{spec.name}: {prop_name} holds on the recorded example: not reproduced")
        return err
    if doc.get("seed") is not None:
        os.environ["ROLLCHECK_SEED"] = str(doc["seed"])
    r = run_property(prop_name, profile=str(doc.get("profile") or "ci"), shrink=False,
                     max_examples=(spec.examples or {}).get(str(doc.get("profile"))), **spec.slots)
    if not r.violated:
        raise InconclusiveError(f"{spec.name}: {prop_name} {r.status} on re-run: not reproduced")
    return PropertyViolation(r.error or "violation", counterexample=r.counterexample)
