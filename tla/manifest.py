"""The manifest of TLA+ models: each model, its configuration, bound and expected outcome.

``tla/manifest.json`` lists one entry per (model, configuration)::

    {"name": "cic-uc-small", "module": "CIC.tla", "config": "cic-uc-small.cfg",
     "expected": "violation", "bound": "small", "deadlock_check": false,
     "invariants": ["NoUseless"], "crosscheck": "cic", "protocol": "uc", "description": "..."}

``expected`` is ``ok``, ``violation`` or ``deadlock``; ``bound`` is ``small`` (``make test``, the
quick ``verify``) or ``large`` (``make verify``). An entry *meets* its expectation when TLC's
status equals ``expected`` — an inconclusive run (timeout, zero states, no Java) never does.
Rules: ``specs/tla.md#manifest``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from importlib.resources import files
from pathlib import Path
from typing import Any

from rollcheck.pyimpl.errors import InvalidInputError
from rollcheck.tla.runner import TLCResult, run_tlc

__all__ = ["MANIFEST_PATH", "MODELS_DIR", "ModelEntry", "ModelOutcome", "load_manifest", "run_entry"]

# Package data (importlib.resources); TLC needs real files, which every filesystem install has.
MANIFEST_PATH = Path(str(files("rollcheck.tla") / "manifest.json"))
MODELS_DIR = Path(str(files("rollcheck.tla.models")))
EXPECTED = ("ok", "violation", "deadlock")
BOUNDS = ("small", "large")


@dataclass(frozen=True)
class ModelEntry:
    name: str
    module: str
    config: str
    expected: str
    bound: str
    deadlock_check: bool = True
    invariants: tuple[str, ...] = ()
    crosscheck: str | None = None
    protocol: str | None = None
    description: str = ""

    @property
    def module_path(self) -> Path:
        return MODELS_DIR / self.module

    @property
    def config_path(self) -> Path:
        return MODELS_DIR / self.config


@dataclass
class ModelOutcome:
    entry: ModelEntry
    result: TLCResult
    met: bool
    crosscheck: Any = field(default=None)

    def to_json(self) -> dict[str, Any]:
        r = self.result
        return {
            "name": self.entry.name, "expected": self.entry.expected, "status": r.status,
            "met": self.met, "distinct_states": r.distinct_states, "depth": r.depth,
            "seconds": round(r.seconds, 2), "violated": r.violated, "message": r.message,
        }


def load_manifest(path: str | Path = MANIFEST_PATH) -> list[ModelEntry]:
    """Read and check the manifest (every module and configuration must exist).

    Raises
    ------
    InvalidInputError
        Naming the entry ``models[k]`` and the field.
    """
    p = Path(path)
    try:
        doc = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as err:
        raise InvalidInputError(f"cannot read the manifest: {err}", source=str(p)) from None
    models = doc.get("models") if isinstance(doc, dict) else None
    if not isinstance(models, list):
        raise InvalidInputError("expected an object with a list 'models'", source=str(p))
    out: list[ModelEntry] = []
    names: set[str] = set()
    for k, e in enumerate(models):
        loc = f"models[{k}]"
        if not isinstance(e, dict):
            raise InvalidInputError("expected an object", source=str(p), location=loc)
        for key in ("name", "module", "config", "expected", "bound"):
            if not isinstance(e.get(key), str):
                raise InvalidInputError(f"missing or non-string {key!r}", source=str(p), location=loc)
        if e["expected"] not in EXPECTED:
            raise InvalidInputError(f"expected must be one of {EXPECTED}", source=str(p), location=f"{loc}.expected")
        if e["bound"] not in BOUNDS:
            raise InvalidInputError(f"bound must be one of {BOUNDS}", source=str(p), location=f"{loc}.bound")
        if e["name"] in names:
            raise InvalidInputError(f"duplicate name {e['name']!r}", source=str(p), location=f"{loc}.name")
        names.add(e["name"])
        entry = ModelEntry(
            e["name"], e["module"], e["config"], e["expected"], e["bound"],
            bool(e.get("deadlock_check", True)), tuple(e.get("invariants", ())),
            e.get("crosscheck"), e.get("protocol"), str(e.get("description", "")),
        )
        for f in (entry.module_path, entry.config_path):
            if not f.is_file():
                raise InvalidInputError(f"no such file {f.name}", source=str(p), location=loc)
        out.append(entry)
    return out


def run_entry(entry: ModelEntry, *, workers: int = 1, timeout: float | None = 600.0) -> ModelOutcome:
    """Run one manifest entry with TLC and compare with its expected outcome."""
    res = run_tlc(entry.module_path, entry.config_path, workers=workers, timeout=timeout,
                  deadlock=entry.deadlock_check)
    met = res.status == entry.expected and res.distinct_states > 0
    if met and entry.expected == "violation" and entry.invariants and res.violated:
        met = res.violated in entry.invariants
    return ModelOutcome(entry, res, met)
