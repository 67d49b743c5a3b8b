"""The outcome of checking a protocol: :class:`ProtocolReport` and :func:`forced_per_delivery`.

The verdict is never stored: it is :func:`rollcheck.pyimpl.verdict.decide` over the report's
checks, so a bound the budget cut (an *unchecked* check) makes it inconclusive.

References
----------
``specs/protocols.md#your-protocol``.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from rollcheck.pyimpl.pattern import DELIVER, Pattern
from rollcheck.pyimpl.protocols import Protocol, run_protocol
from rollcheck.pyimpl.verdict import Check, Report, Status, decide

__all__ = ["ProtocolReport", "forced_per_delivery", "exhaustive_coverage", "exhaustive_check",
           "EXHAUSTIVE_CHECK"]


def forced_per_delivery(protocol: str | Protocol, schedules: Iterable[Pattern]) -> float | None:
    """Forced checkpoints per delivery of ``protocol`` over ``schedules`` (None: no delivery).

    Parameters
    ----------
    protocol : str or Protocol
        The protocol run.
    schedules : iterable of Pattern
        Basic schedules.

    Returns
    -------
    float or None
        The ratio over all schedules.

    Examples
    --------
    >>> from rollcheck.pyimpl import PatternBuilder
    >>> b = PatternBuilder(2)
    >>> b.deliver(0, b.send(1, 0)); _ = b.checkpoint(0); b.deliver(1, b.send(0, 1))
    >>> forced_per_delivery("hmnr", [b.build()]), forced_per_delivery("uc", [b.build()])
    (0.5, 0.0)
    """
    forced = deliveries = 0
    for s in schedules:
        r = run_protocol(protocol, s)
        forced += r.forced_checkpoints
        deliveries += sum(1 for e in s.events if e.kind == DELIVER)
    return forced / deliveries if deliveries else None


@dataclass
class ProtocolReport:
    """The outcome of :func:`check_protocol` (the fields of ``rollcheck check protocol --json``).

    The verdict is not stored: it is what :func:`rollcheck.pyimpl.verdict.decide` gives the
    :attr:`checks` (one per claimed property, plus the coverage of each phase), worded for protocols
    (``safe`` / ``unsafe`` / ``inconclusive``).

    Attributes
    ----------
    protocol : str
        The protocol's name.
    checks : list of Check
        What was checked and how it ended.
    property : str or None
        The violated property (``unsafe`` only).
    examples : int
        Schedules the protocol was checked on (exhaustive, random and given together).
    counterexample, picture : str or None
        The saved counterexample pattern (``rollcheck.pattern/1``) and its drawing.
    counterexample_events : int or None
        Basic events (sends, deliveries, basic checkpoints) of the counterexample schedule.
    exhaustive : list of dict
        Per bound: ``processes``, ``events``, ``schedules``, ``complete``, ``seconds``.
    random : dict
        ``schedules``, ``max_processes``, ``max_events`` of the random phase.
    forced_per_delivery : float or None
        Forced checkpoints per delivery of the protocol on the random schedules.
    compared : dict
        The same rate for HMNR and BCS on the same schedules.
    uc_useless_fraction : float or None
        Fraction of the random schedules on which UC leaves a useless checkpoint.
    properties : list of str
        The properties that applied (from the protocol's claims).
    profile, seed : str, int or None
        The profile (``ci``/``verify``) and seed (None: derandomised) of the random phase.
    detail : str
        One line: the violation, or why the verdict is inconclusive.
    useless : list of str
        The useless checkpoints of the counterexample (``P0:1``), if any.
    symmetry : str
        Whether the symmetry reduction was claimed, verified and used.
    budget : float or None
        Seconds the exhaustive phase was given (None: there was none).
    determinism : str
        What the determinism check ran (the same results twice on samples of every process
        count the bounds use).
    """

    protocol: str
    checks: list[Check] = field(default_factory=list)
    property: str | None = None
    examples: int = 0
    counterexample: str | None = None
    picture: str | None = None
    forced_per_delivery: float | None = None
    compared: dict[str, float | None] = field(default_factory=lambda: {"hmnr": None, "bcs": None})
    uc_useless_fraction: float | None = None
    properties: list[str] = field(default_factory=list)
    profile: str = "ci"
    seed: int | None = None
    detail: str = ""
    useless: list[str] = field(default_factory=list)
    pattern: Pattern | None = field(default=None, repr=False)
    counterexample_events: int | None = None
    exhaustive: list[dict[str, Any]] = field(default_factory=list)
    random: dict[str, Any] = field(default_factory=lambda: {"schedules": 0, "max_processes": 0,
                                                            "max_events": 0})
    schedule: str | None = None
    #: where the counterexample came from: "exhaustive" (a smallest one), "random" (shrunk), or
    #: "the given schedule"
    counterexample_phase: str | None = None
    symmetry: str = "not claimed"
    engine: str = "local"
    #: seconds the exhaustive phase was given (None: no exhaustive phase)
    budget: float | None = None
    #: what the determinism check of the protocol ran (empty: not run)
    determinism: str = ""

    @builtins.property
    def report(self) -> Report:
        """The checks as a :class:`~rollcheck.pyimpl.verdict.Report`."""
        return Report(list(self.checks), subject=self.protocol)

    @builtins.property
    def verdict(self) -> str:
        """``safe``, ``unsafe`` or ``inconclusive`` (:func:`~rollcheck.pyimpl.verdict.decide`)."""
        return decide(self.checks).word("protocol")

    @builtins.property
    def ok(self) -> bool:
        """True iff the verdict is ``safe``."""
        return self.verdict == "safe"

    @builtins.property
    def exit_code(self) -> int:
        """0 safe, 1 unsafe, 3 inconclusive (the CLI's exit code)."""
        return decide(self.checks).exit_code

    def to_json(self) -> dict[str, Any]:
        """The JSON document of ``rollcheck check protocol --json``."""
        rep = self.report
        return {
            "protocol": self.protocol,
            "verdict": self.verdict,
            "property": self.property,
            "examples": self.examples,
            "counterexample": self.counterexample,
            "picture": self.picture,
            "forced_per_delivery": _round(self.forced_per_delivery),
            "compared": {k: _round(v) for k, v in self.compared.items()},
            "exhaustive": list(self.exhaustive),
            "random": dict(self.random),
            "counterexample_events": self.counterexample_events,
            "counterexample_phase": self.counterexample_phase,
            "uc_useless_fraction": _round(self.uc_useless_fraction),
            "properties": list(self.properties),
            "useless": list(self.useless),
            "profile": self.profile,
            "seed": self.seed,
            "symmetry": self.symmetry,
            "engine": self.engine,
            "budget": self.budget,
            "determinism": self.determinism,
            "schedule": self.schedule,
            "detail": self.detail,
            "verdict_line": self.verdict_line(),
            "checks": [c.to_json() for c in rep.checks],
            "inconclusive_because": rep.why_inconclusive,
        }

    def coverage(self, exhaustive: bool = True) -> str:
        """What was covered: ``exhaustive 2x11 (S1 schedules), 3x9 (S2); random N schedules up to 6x60``.

        A bound the budget cut reads ``2x11 cut by the budget after S schedules``, one never
        reached ``3x9, 4x6 not started``; ``exhaustive=False`` leaves the exhaustive part out.
        """
        out = []
        if exhaustive and self.exhaustive:
            out.append(exhaustive_coverage(self.exhaustive))
        r = self.random
        if r["schedules"]:
            out.append(f"random {r['schedules']} schedule{'' if r['schedules'] == 1 else 's'} up to "
                       f"{r['max_processes']}x{r['max_events']}")
        if self.schedule:
            out.append(f"given schedule {self.schedule}")
        return "; ".join(out) or ("nothing" if exhaustive else "")

    def verdict_line(self) -> str:
        """The one line that says the verdict and what it covers (the contract's style).

        Inconclusive: the reasons (each unchecked check's detail), then what else was covered.
        """
        v = self.verdict
        if v == "unsafe":
            kind = ("smallest counterexample" if self.counterexample_phase == "exhaustive"
                    else "counterexample (shrunk)" if self.counterexample_phase == "random"
                    else "counterexample")
            size = (f"; {kind}: {self.counterexample_events} events"
                    if self.counterexample_events is not None else "")
            return f"UNSAFE: {self.detail}{size} ({self.coverage()})"
        if v == "inconclusive":
            gaps = sorted((c for c in self.checks if c.status is Status.UNCHECKED),
                          key=lambda c: c.name != EXHAUSTIVE_CHECK)  # the cut first: it explains
            reasons = list(dict.fromkeys(c.detail for c in gaps)) or ["nothing was examined"]
            cut = any(c.name == EXHAUSTIVE_CHECK for c in gaps)
            rest = self.coverage(exhaustive=not cut)
            return f"INCONCLUSIVE: {'; '.join(reasons)}" + (f" ({rest})" if rest else "")
        return f"SAFE: {self.coverage()}"

    def summary(self) -> str:
        """A few lines for a terminal; the first is :meth:`verdict_line`."""
        lines = [self.verdict_line()]
        if self.counterexample:
            lines.append(f"  counterexample: {self.counterexample}")
        if self.picture:
            lines.append(f"  picture:        {self.picture}")
        lines.append(f"  properties: {', '.join(self.properties)}; symmetry reduction: {self.symmetry}")
        if self.forced_per_delivery is not None:
            refs = ", ".join(f"{k} {_fmt(v)}" for k, v in self.compared.items())
            lines.append(f"  forced checkpoints per delivery (random schedules): "
                         f"{_fmt(self.forced_per_delivery)} ({refs})")
        if self.uc_useless_fraction is not None:
            lines.append(f"  random schedules on which UC leaves a useless checkpoint: "
                         f"{100 * self.uc_useless_fraction:.0f}%")
        return "\n".join(lines)


def _n(count: int, noun: str) -> str:
    """``"1 schedule"``, ``"2 schedules"``."""
    return f"{count} {noun}{'' if count == 1 else 's'}"


def _round(v: float | None) -> float | None:
    return None if v is None else round(float(v), 4)


def _fmt(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.3f}"


#: The name of the check that every requested exhaustive bound completed.
EXHAUSTIVE_CHECK = "exhaustive-bounds"


def exhaustive_coverage(bounds: list[dict[str, Any]]) -> str:
    """The exhaustive phase in words, from the ``"exhaustive"`` entries of the report.

    Examples
    --------
    >>> b = lambda p, e, n, done: {"processes": p, "events": e, "schedules": n, "complete": done}
    >>> exhaustive_coverage([b(2, 11, 2928583, True), b(3, 9, 15077682, True)])
    'exhaustive 2x11 (2928583 schedules), 3x9 (15077682)'
    >>> exhaustive_coverage([b(2, 11, 125652, False), b(3, 9, 0, False), b(4, 6, 0, False)])
    'exhaustive 2x11 cut by the budget after 125652 schedules; 3x9, 4x6 not started'
    >>> exhaustive_coverage([b(2, 6, 3020, True), b(3, 9, 52, False)])
    'exhaustive 2x6 (3020 schedules); 3x9 cut by the budget after 52 schedules'
    """
    groups: list[str] = []
    waiting: list[str] = []
    counted = False
    for b in bounds:
        name = f"{b['processes']}x{b['events']}"
        if not b["complete"] and b["schedules"] == 0:
            waiting.append(name)
            continue
        if waiting:
            groups.append(f"{', '.join(waiting)} not started")
            waiting = []
        n = b["schedules"]
        if not b["complete"]:
            groups.append(f"{name} cut by the budget after {_n(n, 'schedule')}")
            continue
        what = f"{n}" if counted else _n(n, "schedule")
        counted = True
        if b.get("limit") is not None and b["limit"] < b["events"]:
            what += f", searched up to {b['limit']} events for a smaller counterexample"
        groups.append(f"{name} ({what})")
    if waiting:
        groups.append(f"{', '.join(waiting)} not started")
    whole = all(b["complete"] for b in bounds)
    return "exhaustive " + (", " if whole else "; ").join(groups)


def exhaustive_check(bounds: list[dict[str, Any]], budget: float | None) -> Check | None:
    """The *unchecked* check for requested bounds that the budget cut (None: every bound completed).

    SAFE means complete: this check makes the verdict inconclusive unless a property was violated.

    Parameters
    ----------
    bounds : list of dict
        Per bound: ``processes``, ``events``, ``schedules``, ``complete``.
    budget : float, optional
        The ``--budget`` in seconds (None: unnamed in the message).

    Returns
    -------
    Check or None
        The unchecked check.

    Examples
    --------
    >>> b = lambda p, e, n, done: {"processes": p, "events": e, "schedules": n, "complete": done}
    >>> exhaustive_check([b(2, 6, 3020, True)], 150.0) is None
    True
    >>> print(exhaustive_check([b(2, 6, 3020, True), b(3, 9, 52, False), b(4, 6, 0, False)], 2).detail)
    exhaustive 2x6 (3020 schedules); 3x9 cut by the budget after 52 schedules; 4x6 not started; the budget of 2 s (--budget) ended the exhaustive phase: raise it, or choose smaller bounds (--bound)
    """
    if all(b["complete"] for b in bounds):
        return None
    name = lambda b: f"{b['processes']}x{b['events']}"  # noqa: E731
    done = [name(b) for b in bounds if b["complete"]]
    cut = [name(b) for b in bounds if not b["complete"] and b["schedules"]]
    waiting = [name(b) for b in bounds if not b["complete"] and not b["schedules"]]
    limit = f"the budget of {budget:g} s (--budget)" if budget is not None else "the budget"
    detail = (exhaustive_coverage(bounds) + ("" if done else "; no bound completed")
              + f"; {limit} ended the exhaustive phase: raise it, or choose smaller bounds (--bound)")
    return Check.unchecked(EXHAUSTIVE_CHECK, detail, completed=done, cut=cut, not_started=waiting)
