"""The mutation catalogue: one declarative list of broken (or costlier) variants, one runner.

Each area declares :class:`MutantSpec` records in ``properties/mutants_<area>.py`` naming the
properties that must kill the variant and the implementation slots it replaces;
:func:`run_mutant` runs any of them to *killed*, *survived*, *safe* or *error*.
See docs/internals/properties.md#mutation.

Examples
--------
>>> from rollcheck.properties.mutation import MutantSpec
>>> m = MutantSpec("demo", area="foundation", description="a demo", kills=("scc-useless",),
...                slots={"useless": lambda p: []})
>>> m.target, m.safe
('foundation', False)

References
----------
The catalogue is the suite's evidence that its properties have teeth: ``specs/theorems.md``,
``specs/protocols.md#variants``, ``specs/spans.md``, ``specs/elastic.md``, ``specs/intervals.md``.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["MutantSpec", "MutantOutcome", "MUTANTS", "VERDICTS", "register", "run_mutant", "load_all",
           "reduce_pattern", "by_area"]

#: Every verdict a mutant can get.
VERDICTS = ("killed", "survived", "safe", "error")


@dataclass
class MutantOutcome:
    """The verdict on one mutant.

    ``counterexample`` is the violating document (a pyimpl Pattern, a ``rollcheck.spans/1`` or
    ``rollcheck.elastic/1`` document, or the property's parameters); ``drawn`` the values the
    property was called with on it (for the reproducer); ``ratio`` the cost ratio of a safe variant.
    """

    verdict: str  # one of VERDICTS
    detail: str = ""
    counterexample: Any = None
    ratio: float | None = None
    examples: int = 0
    killed_by: str | None = None
    drawn: dict[str, Any] | None = field(default=None, repr=False)


@dataclass(frozen=True)
class MutantSpec:
    """One entry of the catalogue.

    Parameters
    ----------
    name : str
        Unique name (``rollcheck mutants --only NAME``).
    area : str
        One of :data:`rollcheck.properties.registry.AREAS`.
    description : str
        What is broken (or, for a safe variant, what changes).
    kills : tuple of str
        Registered properties tried in order: the first violation kills an unsafe variant; a safe
        variant must pass all of them.
    slots : mapping
        Implementation keyword arguments of those properties and their broken values.
    safe : bool
        True for a variant that stays correct; then ``cost(profile) -> (ratio, detail)`` is required.
    target : str, optional
        The algorithm (the contract's ``"target"`` key); default: the area.
    examples : mapping, optional
        Hypothesis examples per profile (default: the profile's own budget).
    shrink : bool, optional
        Let Hypothesis shrink the counterexample (default: only under ``verify``).
    reduce : bool
        Reduce a single drawn pattern greedily (drop events while the violation persists).
    """

    name: str
    area: str
    description: str
    kills: tuple[str, ...]
    slots: Mapping[str, Any] = field(default_factory=dict)
    safe: bool = False
    cost: Callable[[str], tuple[float, str]] | None = None
    target: str = ""
    examples: Mapping[str, int] | None = None
    shrink: bool | None = None
    reduce: bool = True

    def __post_init__(self) -> None:
        from rollcheck.properties.registry import AREAS

        if self.area not in AREAS:
            raise ValueError(f"mutant {self.name}: unknown area {self.area!r} (one of {AREAS})")
        if not self.kills:
            raise ValueError(f"mutant {self.name}: no property to kill it")
        if self.safe and self.cost is None:
            raise ValueError(f"mutant {self.name}: a safe variant needs a cost function")
        if not self.target:
            object.__setattr__(self, "target", self.area)

    def check(self, profile: str) -> MutantOutcome:
        """Run this mutant (see :func:`run_mutant`)."""
        return run_mutant(self, profile)


MUTANTS: dict[str, MutantSpec] = {}


def register(*specs: MutantSpec) -> None:
    """Add ``specs`` to the catalogue (a name may be registered again only with the same spec)."""
    for s in specs:
        old = MUTANTS.get(s.name)
        if old is not None and (old.area, old.description, old.kills) != (s.area, s.description, s.kills):
            raise ValueError(f"duplicate mutant name {s.name}")
        MUTANTS[s.name] = s


def by_area(area: str) -> list[MutantSpec]:
    """The registered mutants of ``area`` (load the catalogue first)."""
    return [m for m in MUTANTS.values() if m.area == area]


def reduce_pattern(p: Any, still_fails: Callable[[Any], bool]) -> Any:
    """Greedy 1-minimal reduction of a pattern.

    Drop single events (a send with its deliveries) while ``still_fails`` holds, then drop
    processes without events.

    Examples
    --------
    >>> from rollcheck.pyimpl.pattern import PatternBuilder
    >>> b = PatternBuilder(2); m = b.send(0, 1); b.deliver(1, m); c = b.checkpoint(0); c = b.checkpoint(1)
    >>> len(reduce_pattern(b.build(), lambda q: any(e.kind == "checkpoint" for e in q.events)))
    1
    """
    from rollcheck.pyimpl.pattern import DELIVER, SEND, Pattern

    events = list(p.events)
    changed = True
    while changed:
        changed = False
        for k in range(len(events) - 1, -1, -1):
            ev = events[k]
            drop = {k}
            if ev.kind == SEND:
                drop |= {j for j, e in enumerate(events) if e.kind == DELIVER and e.message == ev.message}
            cand = [e for j, e in enumerate(events) if j not in drop]
            q = Pattern(p.processes, tuple(cand))
            if still_fails(q):
                events, changed = cand, True
                break
    out = Pattern(p.processes, tuple(events))
    used = sorted({e.process for e in events} | {e.to for e in events if e.to is not None})
    if 2 <= len(used) < out.n:
        remap = {old: new for new, old in enumerate(used)}
        q = Pattern(tuple(p.processes[i] for i in used),
                    tuple(e._replace(process=remap[e.process], to=None if e.to is None else remap[e.to])
                          for e in events))
        if still_fails(q):
            return q
    return out


def _drawn_names(prop_name: str) -> list[str]:
    from rollcheck.properties.registry import PROPERTIES

    return list(inspect.signature(PROPERTIES[prop_name].func._core).parameters)  # type: ignore[attr-defined]


def _reduce(spec: MutantSpec, prop_name: str, drawn: dict[str, Any] | None, cex: Any) -> tuple[Any, Any, str | None]:
    """Reduce the drawn pattern of a violation; return (counterexample, drawn, the new message)."""
    from rollcheck.properties.registry import violation_on
    from rollcheck.pyimpl.pattern import Pattern

    if not spec.reduce or not drawn:
        return cex, drawn, None
    pats = [k for k, v in drawn.items() if isinstance(v, Pattern)]
    if len(pats) != 1 or len(drawn[pats[0]]) == 0:
        return cex, drawn, None
    if any(type(v).__name__ in ("DataObject", "HypothesisRandom") for v in drawn.values()):
        return cex, drawn, None  # values drawn interactively cannot be replayed on a smaller pattern
    key = pats[0]
    rest = {k: v for k, v in drawn.items() if k != key}

    def fails(q: Pattern) -> bool:
        return violation_on(prop_name, {key: q, **rest}, **spec.slots) is not None

    small = reduce_pattern(drawn[key], fails)
    e = violation_on(prop_name, {key: small, **rest}, **spec.slots)
    if e is None:  # the original does not replay (e.g. st.data()): keep it as Hypothesis found it
        return cex, drawn, None
    return (e.counterexample if e.counterexample is not None else small, {key: small, **rest},
            f"{type(e).__name__}: {e} (reduced from {len(drawn[key])} to {len(small)} events)")


def run_mutant(spec: MutantSpec, profile: str = "ci") -> MutantOutcome:
    """Run ``spec``'s properties with its slots under ``profile`` and give the verdict.

    Only a property *violation* kills; an exception that is not a violation makes the verdict
    ``error``; a run that checked nothing (zero examples) or whose examples were too trivial
    (below the property's floor) does not count for or against the mutant.
    """
    import rollcheck.properties.profiles  # noqa: F401  (registers the profiles)
    from rollcheck.properties.profiles import PROFILES
    from rollcheck.properties.registry import PROPERTIES, run_property

    prof = profile if profile in PROFILES else "ci"
    _load_area_properties()
    missing = [n for n in spec.kills if n not in PROPERTIES]
    if missing:
        return MutantOutcome("error", f"unknown propert{'y' if len(missing) == 1 else 'ies'} {missing}")
    shrink = spec.shrink if spec.shrink is not None else prof == "verify"
    max_examples = (spec.examples or {}).get(prof)
    total = 0
    notes: list[str] = []
    t0 = time.perf_counter()
    # An unsafe variant that every property missed gets one more pass with five times the budget
    # before it is declared a survivor (derandomised examples shift with what is imported).
    budget = max_examples or settings_budget(prof)
    passes = [(name, max_examples) for name in spec.kills]
    if not spec.safe:
        passes += [(name, 5 * budget) for name in spec.kills]
    for k, (name, n_examples) in enumerate(passes):
        if k == len(spec.kills) and not spec.safe:
            notes.append(f"retried with {5 * budget} examples")
        r = run_property(name, profile=prof, shrink=shrink if k < len(spec.kills) else False,
                         max_examples=n_examples, **spec.slots)
        total += r.examples
        if r.violated:
            cex, drawn, msg = r.counterexample, r.drawn, None
            if not spec.safe:
                cex, drawn, msg = _reduce(spec, name, drawn, cex)
            verdict = "killed"
            prefix = "declared safe, yet " if spec.safe else ""
            return MutantOutcome(verdict, f"{prefix}{name}: {msg or r.error} ({time.perf_counter() - t0:.1f} s)",
                                 cex, None, total, name, drawn)
        if r.outcome == "crash":
            return MutantOutcome("error", f"{name} crashed (not a violation): {r.error}", None, None, total)
        notes.append(f"{name}: {r.status} on {r.examples} examples"
                     + (f" ({r.error})" if r.status != "pass" and r.error else ""))
    if not spec.safe:
        return MutantOutcome("survived", "; ".join(notes), None, None, total)
    if any(": " in n and not n.split(": ", 1)[1].startswith("pass") for n in notes):
        return MutantOutcome("error", "a safe variant's properties did not run to a verdict: " + "; ".join(notes),
                             None, None, total)
    assert spec.cost is not None
    try:
        ratio, detail = spec.cost(prof)
    except Exception as e:  # the cost function is part of the harness: an error, not a verdict
        return MutantOutcome("error", f"cost function crashed: {type(e).__name__}: {e}", None, None, total)
    return MutantOutcome("safe", f"{', '.join(spec.kills)} hold on {total} examples; {detail}", None,
                         round(float(ratio), 3), total)


def settings_budget(profile: str) -> int:
    """The number of Hypothesis examples of ``profile``."""
    from rollcheck.properties.profiles import PROFILES

    return PROFILES.get(profile, PROFILES["ci"])


_AREA_MODULES = ("foundation", "z3check", "protocols_cic", "protocols_forced", "spans_props", "elastic_props",
                 "intervals_model", "intervals_sim", "intervals_trt", "simulate_props")


def _load_area_properties() -> None:
    for mod in _AREA_MODULES:
        importlib.import_module(f"rollcheck.properties.{mod}")


def load_all() -> dict[str, MutantSpec]:
    """Import every ``rollcheck.properties.mutants_*`` module (and the properties) and return the catalogue."""
    import rollcheck.properties as pkg

    _load_area_properties()
    for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda m: m.name):
        if info.name.startswith("mutants_"):
            importlib.import_module(f"rollcheck.properties.{info.name}")
    return MUTANTS
