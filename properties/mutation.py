"""The mutation catalogue's registry: deliberately broken (or costlier) variants of algorithms.

Each area registers its mutants in a module ``properties/mutants_<area>.py`` with :func:`mutant`.
A mutant's check runs the relevant properties against the variant and returns a
:class:`MutantOutcome`: *killed* (with the shrunk counterexample), *survived* (an unsafe variant the
properties missed: a gap in the suite), or *safe* (a variant that stays correct but costs more,
with its cost ratio against the reference; never counted as killed).
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["Mutant", "MutantOutcome", "MUTANTS", "mutant", "load_all"]


@dataclass
class MutantOutcome:
    verdict: str  # "killed" | "survived" | "safe"
    detail: str = ""
    counterexample: Any = None  # a pyimpl Pattern (or another document rollcheck can read)
    ratio: float | None = None  # for "safe": cost relative to the reference
    examples: int = 0


@dataclass(frozen=True)
class Mutant:
    name: str
    target: str
    description: str
    safe: bool  # True: expected to stay correct (reported with a ratio), False: must be killed
    check: Callable[[str], MutantOutcome]  # argument: Hypothesis profile name ("ci"/"verify")


MUTANTS: dict[str, Mutant] = {}


def mutant(name: str, *, target: str, description: str, safe: bool = False) -> Callable[
    [Callable[[str], MutantOutcome]], Callable[[str], MutantOutcome]
]:
    """Register ``check(profile) -> MutantOutcome`` as the mutant ``name``."""

    def deco(check: Callable[[str], MutantOutcome]) -> Callable[[str], MutantOutcome]:
        if name in MUTANTS and MUTANTS[name].check.__qualname__ != check.__qualname__:
            raise ValueError(f"duplicate mutant name {name}")
        MUTANTS[name] = Mutant(name, target, description, safe, check)
        return check

    return deco


def load_all() -> dict[str, Mutant]:
    """Import every ``rollcheck.properties.mutants_*`` module and return the registry."""
    import rollcheck.properties as pkg

    for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda m: m.name):
        if info.name.startswith("mutants_"):
            importlib.import_module(f"rollcheck.properties.{info.name}")
    return MUTANTS
