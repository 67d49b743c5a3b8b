"""The manifest of TLA+ models: each model, its configuration, bound and expected outcome.

``tla/manifest.json`` has one entry per (model, configuration); an entry *meets* its expectation
when TLC's status equals ``expected`` (``ok``, ``violation`` or ``deadlock``). Its ``cover`` goals
``Unreached_X`` are checked by :func:`check_coverage`, one TLC run each, so that an invariant does
not pass vacuously. See docs/internals/tla.md#manifest, ``specs/tla.md#manifest`` and
``specs/tla.md#coverage``.
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from importlib.resources import files
from pathlib import Path
from typing import Any

from rollcheck.pyimpl.errors import InvalidInputError
from rollcheck.tla.runner import TLCResult, run_tlc

__all__ = [
    "MANIFEST_PATH",
    "MODELS_DIR",
    "ModelEntry",
    "ModelOutcome",
    "CoverOutcome",
    "load_manifest",
    "run_entry",
    "coverage_config",
    "check_coverage",
]

# Package data (importlib.resources); TLC needs real files, which every filesystem install has.
MANIFEST_PATH = Path(str(files("rollcheck.tla") / "manifest.json"))
MODELS_DIR = Path(str(files("rollcheck.tla.models")))
EXPECTED = ("ok", "violation", "deadlock")
BOUNDS = ("small", "large")


@dataclass(frozen=True)
class ModelEntry:
    """One manifest entry: a model, its configuration, bound, expected outcome and coverage goals."""

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
    cover: tuple[str, ...] = ()

    @property
    def module_path(self) -> Path:
        """The path of the entry's ``.tla`` module."""
        return MODELS_DIR / self.module

    @property
    def config_path(self) -> Path:
        """The path of the entry's ``.cfg`` configuration."""
        return MODELS_DIR / self.config

    def constant(self, name: str) -> str | None:
        """The value the configuration assigns to constant ``name`` (quotes removed), if any."""
        text = self.config_path.read_text(encoding="utf-8")
        m = re.search(rf"^\s*{re.escape(name)}\s*=\s*(.+?)\s*$", text, re.M)
        return m.group(1).strip('"') if m else None


@dataclass
class ModelOutcome:
    """One entry's TLC run, whether it met its expectation, and its cross-check (if any)."""

    entry: ModelEntry
    result: TLCResult
    met: bool
    crosscheck: Any = field(default=None)

    def to_json(self) -> dict[str, Any]:
        """The outcome as a JSON-ready dictionary."""
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
        cover = e.get("cover", [])
        if not isinstance(cover, list) or not all(
                isinstance(c, str) and re.fullmatch(r"Unreached_\w+", c) for c in cover):
            raise InvalidInputError("cover must be a list of names Unreached_...", source=str(p),
                                    location=f"{loc}.cover")
        entry = ModelEntry(
            e["name"], e["module"], e["config"], e["expected"], e["bound"],
            bool(e.get("deadlock_check", True)), tuple(e.get("invariants", ())),
            e.get("crosscheck"), e.get("protocol"), str(e.get("description", "")), tuple(cover),
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
    if met and entry.expected == "violation" and entry.invariants:
        # A mutant is caught only by the property it is about: not by the type invariant.
        met = res.violated in entry.invariants and res.violated != "TypeOK"
    return ModelOutcome(entry, res, met)


@dataclass
class CoverOutcome:
    """Whether one coverage goal of an entry was reached (TLC violated ``Unreached_X``)."""

    entry: ModelEntry
    goal: str
    result: TLCResult

    @property
    def reached(self) -> bool:
        """Whether TLC violated the goal ``Unreached_X`` (the situation was reached)."""
        return self.result.status == "violation" and self.result.violated == self.goal

    @property
    def status(self) -> str:
        """``reached``, ``unreached`` or ``inconclusive``.

        ``unreached``: TLC explored everything without reaching it; ``inconclusive``: timeout, no
        Java, ...
        """
        if self.reached:
            return "reached"
        return "unreached" if self.result.status == "ok" else "inconclusive"

    def to_json(self) -> dict[str, Any]:
        """The goal's outcome as a JSON-ready dictionary."""
        r = self.result
        return {"name": self.entry.name, "goal": self.goal, "status": self.status,
                "depth": len(r.trace) or None, "distinct_states": r.distinct_states,
                "seconds": round(r.seconds, 2), "message": r.message}


_PROPERTY_LINE = re.compile(r"^\s*(INVARIANTS?|PROPERT(Y|IES))\b")


def coverage_config(entry: ModelEntry, goal: str) -> str:
    """The text of ``entry``'s configuration with its invariants and properties replaced.

    They are replaced by ``INVARIANT goal``.

    Examples
    --------
    >>> e = next(x for x in load_manifest() if x.cover)
    >>> text = coverage_config(e, e.cover[0])
    >>> text.splitlines()[-1] == f"INVARIANT {e.cover[0]}"
    True
    """
    lines = entry.config_path.read_text(encoding="utf-8").splitlines()
    kept = [ln for ln in lines if not _PROPERTY_LINE.match(ln)]
    return "\n".join(kept + [f"INVARIANT {goal}"]) + "\n"


def check_coverage(entry: ModelEntry, *, workers: int = 1, timeout: float | None = 600.0,
                   goals: tuple[str, ...] | None = None) -> list[CoverOutcome]:
    """Run TLC once per coverage goal of ``entry`` (deadlock checking off).

    Only reachability matters. A missing TLC gives inconclusive outcomes, never *reached*.
    """
    out: list[CoverOutcome] = []
    tmp = Path(tempfile.mkdtemp(prefix="rollcheck-tlc-cover-"))
    try:
        for goal in goals if goals is not None else entry.cover:
            cfg = tmp / f"{entry.name}--{goal}.cfg"
            cfg.write_text(coverage_config(entry, goal), encoding="utf-8")
            res = run_tlc(entry.module_path, cfg, workers=workers, timeout=timeout, deadlock=False)
            out.append(CoverOutcome(entry, goal, res))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out
