"""Checking a user's checkpointing protocol: :func:`check_protocol` and :func:`assert_protocol_safe`.

A protocol is checked first on **every** basic schedule up to the bounds (default 2×11, 3×9,
4×6: :mod:`rollcheck.properties.explore`, each partial order once, smallest counterexample first),
then on random schedules up to 6 processes × 60 events steered at the protocol under test
(:mod:`rollcheck.properties.explore.steered`), and on a given schedule if any. The properties
the protocol claims:

``no-useless-checkpoint`` (when ``zcycle_free``)
    no checkpoint lies on a Z-cycle. Two independent encodings must agree: the R-graph test of
    :func:`rollcheck.pyimpl.useless_checkpoints` and a search of Z-cycles from the definition
    (:func:`rollcheck.pyimpl.zcycle_checkpoints`); a disagreement is a bug in rollcheck
    (:class:`~rollcheck.pyimpl.errors.InternalError`).
``recovery-line-is-max-consistent`` (always)
    for every single failure, the recovery line is the maximum consistent global checkpoint, computed
    independently by orphan elimination from the definition of consistency.
``rollback-bounded`` (when the class sets ``rollback_bound = k``)
    after any single failure no process discards more than ``k`` of its checkpoints.

The exhaustive phase walks by size, so its counterexample is a smallest one (fewest basic events,
idle processes dropped); a random one is shrunk by Hypothesis. The counterexample is saved as a
``rollcheck.pattern/1`` file (the schedule run under the protocol, forced checkpoints marked) and
drawn with its Z-cycles. The forced-checkpoint rate per delivery is measured on the random schedules
for the protocol, HMNR and BCS, with the fraction of them on which UC (no forced checkpoint at all)
leaves a useless checkpoint. The verdict is :func:`rollcheck.pyimpl.verdict.decide` over one check
per property.

References
----------
FERDiS paper §5.3 (CIC protocols, Z-cycles); ``specs/protocols.md#your-protocol``.
"""

from __future__ import annotations

import builtins
import os
import re
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as hseed
from hypothesis.errors import Flaky

from rollcheck.properties import profiles as _profiles
from rollcheck.properties.explore.calls import DEFAULT_CALL_TIMEOUT
from rollcheck.pyimpl.errors import InternalError, InvalidInputError, PropertyViolation
from rollcheck.pyimpl.pattern import CHECKPOINT, DELIVER, Pattern, PatternBuilder
from rollcheck.pyimpl.protocols import Protocol, get_protocol, resolve_protocol, run_protocol
from rollcheck.pyimpl.protocols.base import checkpoint_function
from rollcheck.pyimpl.protocols.run import strip_forced
from rollcheck.pyimpl.recovery import recovery_line
from rollcheck.pyimpl.verdict import Check, Report, decide
from rollcheck.pyimpl.zpaths import useless_checkpoints, zcycle_checkpoints

__all__ = [
    "ProtocolReport",
    "ProtocolViolation",
    "UserCodeError",
    "PROTOCOL_PROPERTIES",
    "check_protocol",
    "assert_protocol_safe",
    "check_no_useless",
    "check_recovery_lines",
    "check_rollback_bound",
    "max_consistent_line",
    "forced_per_delivery",
    "guarded_protocol",
]

#: The properties in the order they are checked, with the claim that makes each apply.
PROTOCOL_PROPERTIES = {
    "no-useless-checkpoint": "zcycle_free",
    "recovery-line-is-max-consistent": None,
    "rollback-bounded": "rollback_bound",
}


#: The seed used when none is given (``ROLLCHECK_SEED`` unset or empty): the same schedules on every
#: run, from every caller.
_DERANDOMISED_SEED = 0


class ProtocolViolation(PropertyViolation):
    """A protocol property does not hold; ``property`` names it, ``counterexample`` is the output
    pattern of the protocol on the offending schedule."""

    def __init__(self, prop: str, message: str, counterexample: Pattern):
        self.property = prop
        super().__init__(f"{prop}: {message}", counterexample)


class UserCodeError(InvalidInputError):
    """The user's protocol raised (or returned something malformed): bad input, exit code 2."""


# --- the properties, each checkable on one output pattern -------------------------------------


def check_no_useless(out: Pattern, name: str = "protocol") -> None:
    """Raise :class:`ProtocolViolation` if ``out`` holds a useless checkpoint.

    Examples
    --------
    >>> from rollcheck.pyimpl import PatternBuilder
    >>> b = PatternBuilder(2)
    >>> b.deliver(0, b.send(1, 0)); _ = b.checkpoint(0); b.deliver(1, b.send(0, 1))
    >>> check_no_useless(b.build(), "uc")
    Traceback (most recent call last):
    ...
    rollcheck.testing._check.ProtocolViolation: no-useless-checkpoint: uc leaves the useless checkpoint(s) P0:1
    """
    useless = [tuple(c) for c in useless_checkpoints(out)]
    on_cycle = [tuple(c) for c in zcycle_checkpoints(out) if c.index > 0]
    if useless != on_cycle:
        raise InternalError(f"the R-graph test {useless} and the Z-cycle search {on_cycle} disagree")
    if useless:
        names = ", ".join(out.checkpoint_name((c[0], c[1])) for c in useless)
        raise ProtocolViolation("no-useless-checkpoint", f"{name} leaves the useless checkpoint(s) {names}", out)


def max_consistent_line(p: Pattern, failed: Iterable[int]) -> tuple[int, ...]:
    """The maximum consistent global checkpoint after ``failed`` crash, by orphan elimination.

    Start from every survivor's volatile state and every failed process's last checkpoint; while a
    message is an orphan (its send is undone, its delivery kept), move its receiver back to the
    checkpoint just before that delivery. Consistent cuts are closed under componentwise maximum,
    so the fixpoint is the maximum consistent cut below the start (written from the definition,
    independently of the R-graph of :func:`rollcheck.pyimpl.recovery_line`).

    Examples
    --------
    >>> from rollcheck.pyimpl import PatternBuilder
    >>> b = PatternBuilder(2); _ = b.checkpoint(0); b.deliver(1, b.send(0, 1))
    >>> max_consistent_line(b.build(), [0])
    (1, 0)
    """
    f = set(failed)
    cut = [p.last_index(i) if i in f else p.volatile_index(i) for i in range(p.n)]
    msgs = [m for m in p.messages if m.deliver_interval is not None]
    changed = True
    while changed:
        changed = False
        for m in msgs:
            d = m.deliver_interval
            assert d is not None
            if m.send_interval >= cut[m.sender] and d < cut[m.receiver]:
                cut[m.receiver] = d
                changed = True
    return tuple(cut)


def check_recovery_lines(out: Pattern, line: Callable[..., Any] = recovery_line) -> None:
    """Raise unless, for every single failure, ``line`` gives the maximum consistent cut.

    ``line`` is the implementation under test (default :func:`rollcheck.pyimpl.recovery_line`).
    """
    for f in range(out.n):
        got = tuple(line(out, [f]).line)
        want = max_consistent_line(out, [f])
        if got != want:
            raise ProtocolViolation("recovery-line-is-max-consistent",
                                    f"failure of {out.processes[f]}: recovery line {got}, "
                                    f"maximum consistent global checkpoint {want}", out)


def check_rollback_bound(out: Pattern, bound: int, name: str = "protocol") -> None:
    """Raise unless no single failure makes any process discard more than ``bound`` checkpoints."""
    for f in range(out.n):
        cut = max_consistent_line(out, [f])
        for i in range(out.n):
            lost = max(0, out.last_index(i) - cut[i])
            if lost > bound:
                raise ProtocolViolation(
                    "rollback-bounded",
                    f"{name} claims rollback_bound = {bound}, but a failure of {out.processes[f]} rolls "
                    f"{out.processes[i]} back to {out.processes[i]}:{cut[i]}, discarding {lost} checkpoints",
                    out)


# --- guarding the user's code --------------------------------------------------------------------


def _short(v: Any, limit: int = 80) -> str:
    s = repr(v)
    return s if len(s) <= limit else s[: limit - 3] + "..."


class _Guarded(Protocol):
    """Delegates to the user's protocol; turns any exception it raises (or a malformed result)
    into :class:`UserCodeError` naming the method, its arguments and the schedule's event."""

    def __init__(self, inner: Protocol, label: str | None = None):
        self.inner = inner
        self.label = label or type(inner).__name__
        self._ckpt = checkpoint_function(inner)
        self.name = str(inner.name)
        self.zcycle_free = bool(getattr(inner, "zcycle_free", False))
        self.event = -1
        self._after_force = False

    def _call(self, method: str, *args: Any) -> Any:
        fn = self._ckpt if method == "on_checkpoint" else getattr(self.inner, method)
        try:
            return fn(*args)
        except Exception as e:
            where = f"events[{self.event}]" if self.event >= 0 else "initial state"
            call = f"{method}({', '.join(_short(a) for a in args)})"
            raise UserCodeError(f"{call} raised {type(e).__name__}: {e}",
                                source=f"{type(self.inner).__name__}.{method}",
                                location=where) from e

    def reset(self) -> None:
        self.event = -1
        self._after_force = False

    def initial(self, i: int, n: int) -> Any:
        return self._call("initial", i, n)

    def on_checkpoint(self, st: Any, forced: bool = False) -> Any:
        if not self._after_force:
            self.event += 1
        self._after_force = False
        return self._call("on_checkpoint", st, forced)

    def on_send(self, st: Any, dst: int) -> tuple[Any, Any]:
        self.event += 1
        self._after_force = False
        r = self._call("on_send", st, dst)
        if not (isinstance(r, tuple) and len(r) == 2):
            raise UserCodeError(f"on_send must return (state, piggyback), returned {_short(r)}",
                                source=f"{type(self.inner).__name__}.on_send",
                                location=f"events[{self.event}]")
        return r

    def must_force(self, st: Any, src: int, pb: Any) -> bool:
        self.event += 1
        r = self._call("must_force", st, src, pb)
        if r is not True and r is not False:
            raise UserCodeError(f"must_force must return a bool (True or False), returned "
                                f"{_short(r)} of type {type(r).__name__}",
                                source=f"{type(self.inner).__name__}.must_force",
                                location=f"events[{self.event}]")
        self._after_force = r
        return r

    def on_deliver(self, st: Any, src: int, pb: Any) -> Any:
        self._after_force = False
        return self._call("on_deliver", st, src, pb)


def guarded_protocol(protocol: Any) -> Protocol:
    """``protocol`` (anything :func:`~rollcheck.pyimpl.protocols.resolve_protocol` accepts) wrapped
    so that an exception in its code becomes a one-line :class:`UserCodeError` (exit code 2)."""
    return _Guarded(resolve_protocol(protocol), protocol if isinstance(protocol, str) else None)


# --- measuring ------------------------------------------------------------------------------------


def forced_per_delivery(protocol: str | Protocol, schedules: Iterable[Pattern]) -> float | None:
    """Forced checkpoints per delivery of ``protocol`` over ``schedules`` (None: no delivery).

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


# --- the report -----------------------------------------------------------------------------------


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
            "schedule": self.schedule,
            "detail": self.detail,
            "verdict_line": self.verdict_line(),
            "checks": [c.to_json() for c in rep.checks],
            "inconclusive_because": rep.why_inconclusive,
        }

    def coverage(self) -> str:
        """What was covered: ``exhaustive 2x11 (S1 schedules), 3x9 (S2); random N schedules up to 6x60``."""
        parts = []
        for k, b in enumerate(self.exhaustive):
            n = b["schedules"]
            what = f"{n} schedule{'' if n == 1 else 's'}" if k == 0 else f"{n}"
            if not b["complete"]:
                what += ", incomplete: the budget ended it"
            elif b.get("limit") is not None and b["limit"] < b["events"]:
                what += f", searched up to {b['limit']} events for a smaller counterexample"
            parts.append(f"{b['processes']}x{b['events']} ({what})")
        out = []
        if parts:
            out.append("exhaustive " + ", ".join(parts))
        r = self.random
        if r["schedules"]:
            out.append(f"random {r['schedules']} schedule{'' if r['schedules'] == 1 else 's'} up to "
                       f"{r['max_processes']}x{r['max_events']}")
        if self.schedule:
            out.append(f"given schedule {self.schedule}")
        return "; ".join(out) or "nothing"

    def verdict_line(self) -> str:
        """The one line that says the verdict and what it covers (the contract's style)."""
        v = self.verdict
        if v == "unsafe":
            kind = ("smallest counterexample" if self.counterexample_phase == "exhaustive"
                    else "counterexample (shrunk)" if self.counterexample_phase == "random"
                    else "counterexample")
            size = (f"; {kind}: {self.counterexample_events} events"
                    if self.counterexample_events is not None else "")
            return f"UNSAFE: {self.detail}{size} ({self.coverage()})"
        if v == "inconclusive":
            return f"INCONCLUSIVE: {self.report.why_inconclusive} ({self.coverage()})"
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


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-") or "protocol"


def _save(p: Pattern, out: Path, stem: str, picture: bool, title: str) -> tuple[str, str | None]:
    from rollcheck.pyimpl.patternio import dump_pattern

    json_path = out / f"{stem}.json"
    try:
        out.mkdir(parents=True, exist_ok=True)
        dump_pattern(p, json_path)
    except OSError as e:
        raise InvalidInputError(f"cannot write the counterexample there: {e.strerror or e}",
                                source=str(out), location="out") from None
    png: str | None = None
    if picture:
        from rollcheck.pyimpl.render import render_pattern

        try:
            png = str(render_pattern(p, out / f"{stem}.png", zcycles=True, title=title))
        except OSError as e:
            raise InvalidInputError(f"cannot write the picture there: {e.strerror or e}",
                                    source=str(out), location="out") from None
    return str(json_path), png


def _basic_events(p: Pattern) -> int:
    return sum(1 for e in p.events if not (e.kind == CHECKPOINT and e.forced))


# --- the runner -----------------------------------------------------------------------------------

#: Random schedules of the random phase, per profile.
RANDOM_EXAMPLES = {"ci": 600, "verify": 3000}
#: The random phase's shapes: at most this many processes and events.
RANDOM_MAX_PROCESSES, RANDOM_MAX_EVENTS = 6, 60
#: Seconds for the exhaustive phase when no budget is given.
DEFAULT_BUDGET = 150.0


def _violation_of(out_p: Pattern, props: list[str], name: str, bound: int | None,
                  line: Callable[..., Any]) -> ProtocolViolation | None:
    try:
        if "no-useless-checkpoint" in props:
            check_no_useless(out_p, name)
        check_recovery_lines(out_p, line)
        if bound is not None:
            check_rollback_bound(out_p, bound, name)
    except ProtocolViolation as v:
        return v
    return None


def check_protocol(
    protocol: Any,
    profile: str | None = "ci",
    out: str | Path | None = None,
    *,
    seed: int | None = None,
    max_examples: int | None = None,
    picture: bool = True,
    line: Callable[..., Any] = recovery_line,
    bounds: Any = None,
    budget: float | None = None,
    schedule: Any = None,
    spark: bool = False,
    master: str | None = None,
    call_timeout: float | None = DEFAULT_CALL_TIMEOUT,
    workers: int | None = None,
    progress: Callable[[str], None] | None = None,
) -> ProtocolReport:
    """Check a checkpointing protocol: every schedule up to the bounds, then random ones.

    Parameters
    ----------
    protocol : Protocol, Protocol subclass or str
        The protocol: an instance, a class (instantiated without arguments), a built-in name,
        ``"MODULE:CLASS"`` or ``"path/to/file.py:CLASS"``.
    profile : {"ci", "verify"}, optional
        The random phase's budget (600 or 3000 schedules); None: ``ROLLCHECK_PROFILE``.
    out : path, optional
        Where the counterexample (``.json``) and its picture (``.png``) are saved; default: a fresh
        temporary directory, created only when there is something to save.
    seed : int, optional
        The Hypothesis seed; default ``ROLLCHECK_SEED`` (unset or empty: derandomised).
    max_examples : int, optional
        Override the profile's number of random schedules (0: no random phase).
    picture : bool
        Draw the counterexample (PNG).
    line : callable
        The recovery-line implementation checked by ``recovery-line-is-max-consistent``.
    bounds : str or sequence of Bound, optional
        The exhaustive bounds (``"2x11,3x9,4x6"``, the default, or ``ROLLCHECK_BOUND`` when set);
        ``()`` or ``""``: none.
    budget : float, optional
        Seconds for the exhaustive phase (default 150); a bound it cuts is ``complete: False``.
    schedule : path or Pattern, optional
        Also run this basic schedule (a ``rollcheck.pattern/1`` file; forced marks are dropped).
    spark, master : bool, str
        Split the exhaustive frontier over Spark tasks (``local[*]`` unless ``master``).
    call_timeout : float, optional
        Seconds one protocol method call may take.
    workers : int, optional
        Local worker processes for the exhaustive phase (default: one per core, at most 2).
    progress : callable, optional
        Receives a line per finished phase (the CLI prints them on stderr).

    Returns
    -------
    ProtocolReport

    Raises
    ------
    InvalidInputError
        The spec names no usable protocol, or the protocol's own code misbehaved
        (:class:`UserCodeError`, naming the method, the event and the schedule).

    Examples
    --------
    >>> r = check_protocol("hmnr", bounds="2x5", max_examples=5, picture=False)
    >>> r.verdict, r.property, r.examples
    ('safe', None, 835)
    >>> r.verdict_line()
    'SAFE: exhaustive 2x5 (830 schedules); random 5 schedules up to 6x60'
    >>> from rollcheck.pyimpl.protocols import UC
    >>> class Optimist(UC):          # claims what UC cannot keep
    ...     zcycle_free = True
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as out:
    ...     r = check_protocol(Optimist, out=out, picture=False, bounds="2x6,3x5")
    >>> r.verdict, r.property, r.counterexample_events, r.useless
    ('unsafe', 'no-useless-checkpoint', 5, ['P1:1'])

    References
    ----------
    FERDiS paper §5.3; ``specs/protocols.md#your-protocol``.
    """
    from rollcheck.properties.explore import (
        DEFAULT_BOUNDS,
        Bound,
        ProtocolCodeError,
        drop_idle,
        explore,
        parse_bounds,
        word_to_pattern,
    )

    proto = resolve_protocol(protocol)
    label = protocol if isinstance(protocol, str) else type(proto).__name__
    short = _profiles.short_name(profile or _profiles.active_profile())
    if profile is not None and _profiles.short_name(profile) != profile.removeprefix(_profiles.PREFIX):
        raise InvalidInputError(f"unknown profile {profile!r} (ci or verify)", location="profile")
    if seed is None:
        seed = _profiles.seed()
    if max_examples is not None and max_examples < 0:
        raise InvalidInputError(f"max_examples must be >= 0, got {max_examples}", location="max_examples")
    if budget is not None and not budget >= 0:
        raise InvalidInputError(f"must be >= 0 seconds, got {budget}", location="budget")
    if call_timeout is not None and not call_timeout > 0:
        raise InvalidInputError(f"must be > 0 seconds, got {call_timeout}", location="call-timeout")
    if bounds is None:
        bounds = os.environ.get("ROLLCHECK_BOUND", "").strip() or None
    the_bounds: tuple[Bound, ...]
    if bounds is None:
        the_bounds = DEFAULT_BOUNDS
    elif isinstance(bounds, str):
        try:
            the_bounds = parse_bounds(bounds) if bounds.strip() else ()
        except ValueError as e:
            raise InvalidInputError(str(e), location="bound") from None
    else:
        the_bounds = tuple(bounds)
    guarded = _Guarded(proto, label)
    name = guarded.name
    rb = getattr(proto, "rollback_bound", None)
    if rb is not None and (not isinstance(rb, int) or isinstance(rb, bool) or rb < 0):
        raise InvalidInputError(f"rollback_bound must be a non-negative integer or None, got {rb!r}",
                                source=type(proto).__name__, location="rollback_bound")
    props = [k for k, claim in PROTOCOL_PROPERTIES.items()
             if claim is None or (claim == "zcycle_free" and guarded.zcycle_free)
             or (claim == "rollback_bound" and rb is not None)]
    claims = [p for p in props if p != "recovery-line-is-max-consistent"]
    report = ProtocolReport(name, properties=props, profile=short, seed=seed)
    given_p: Pattern | None = None
    if schedule is not None:
        from rollcheck.pyimpl.patternio import load_pattern

        given_p = strip_forced(schedule if isinstance(schedule, Pattern) else load_pattern(schedule))
        report.schedule = str(schedule) if not isinstance(schedule, Pattern) else "(pattern)"

    violation: ProtocolViolation | None = None
    phase = ""
    counted = {"exhaustive": 0, "random": 0, "given": 0}
    # 1. bounded-exhaustive
    if claims and the_bounds:
        spark_fn: Any = None
        if spark:
            from rollcheck.testing._spark import spark_runner

            spark_fn = spark_runner(master)
        try:
            ex = explore(proto, label, the_bounds,
                         budget=DEFAULT_BUDGET if budget is None else budget, workers=workers,
                         call_timeout=call_timeout, zcycles="no-useless-checkpoint" in props,
                         rollback_bound=rb, spark=spark_fn, progress=progress)
        except ProtocolCodeError as e:
            raise _user_error(e, out, name) from None
        finally:
            if spark_fn is not None:
                spark_fn.close()
        report.symmetry = ex.symmetry
        report.engine = ex.engine
        report.exhaustive = [dict(b.to_json(), limit=b.limit) for b in ex.bounds]
        counted["exhaustive"] = sum(b.schedules for b in ex.bounds)
        if ex.best is not None:
            n, word = drop_idle(ex.best_processes, ex.best.word)
            basic = word_to_pattern(n, word)
            run = run_protocol(guarded, basic)
            violation = _violation_of(run.pattern, props, name, rb, line)
            if violation is None and run.forced_messages != run_protocol(guarded, basic).forced_messages:
                raise InvalidInputError(
                    "the protocol is not deterministic: the same schedule gave different outcomes; "
                    "keep every piece of state in the per-process state that the methods receive "
                    "and return, not in the object or the class",
                    source=type(proto).__name__, location="protocol")
            if violation is None:  # the walk and the pattern-level checks disagree: our bug
                raise InternalError(f"the explorer reports {ex.best.what} on {word}, but the "
                                    f"pattern-level checks find nothing")
            phase = "exhaustive"
    # 2. a given schedule
    if violation is None and given_p is not None:
        guarded.reset()
        try:
            run = run_protocol(guarded, given_p)
        except UserCodeError as e:
            raise UserCodeError(f"{e.reason} (schedule {report.schedule})", source=e.source,
                                location=e.location) from None
        counted["given"] = 1
        violation = _violation_of(run.pattern, props, name, rb, line)
        phase = "the given schedule" if violation is not None else phase
    # 3. random, steered at the protocol
    n_random = RANDOM_EXAMPLES.get(short, 600) if max_examples is None else max_examples
    seen: list[Pattern] = []
    if violation is None and n_random > 0:
        violation, seen = _random_phase(guarded, props, name, rb, line, n_random, seed, out,
                                        call_timeout)
        counted["random"] = len(seen)
        report.random = {"schedules": len(seen), "max_processes": RANDOM_MAX_PROCESSES,
                         "max_events": RANDOM_MAX_EVENTS}
        if violation is not None:
            phase = "random"
            smaller = _without_idle(violation.counterexample)
            if smaller is not None:
                guarded.reset()
                v2 = _violation_of(run_protocol(guarded, smaller).pattern, props, name, rb, line)
                if v2 is not None and v2.property == violation.property:
                    violation = v2
        if progress is not None:
            progress(f"random: {_n(len(seen), 'schedule')} up to {RANDOM_MAX_PROCESSES}x{RANDOM_MAX_EVENTS}")
    report.examples = sum(counted.values())
    if seen:
        report.forced_per_delivery = forced_per_delivery(guarded, seen)
        report.compared = {k: forced_per_delivery(get_protocol(k), seen) for k in ("hmnr", "bcs")}
        uc = get_protocol("uc")
        report.uc_useless_fraction = sum(
            1 for s in seen if useless_checkpoints(run_protocol(uc, s).pattern)) / len(seen)
    # the checks and the verdict
    checks: list[Check] = []
    cover: dict[str, Any] = {"exhaustive": counted["exhaustive"], "random": counted["random"],
             "given": counted["given"]}
    for prop in props:
        if violation is not None and violation.property == prop:
            checks.append(Check.violated(prop, str(violation), examined=report.examples,
                                         phase=phase))
        elif prop == "recovery-line-is-max-consistent":
            n_lines = counted["random"] + counted["given"] + (1 if violation is not None else 0)
            if n_lines:
                checks.append(Check.held(prop, f"held on {_n(n_lines, 'schedule')}", examined=n_lines,
                                         substantive=False))
            else:
                checks.append(Check.not_applicable(prop, "no random or given schedule was run"))
        else:
            n_ok = report.examples
            checks.append(Check.held(prop, f"held on {_n(n_ok, 'schedule')}", examined=n_ok, **cover))
    if not claims:
        checks.append(Check.unchecked(
            "claims", f"{name} claims neither zcycle_free nor a rollback_bound: only the recovery "
            f"lines were checked, nothing about the protocol itself"))
    report.checks = checks
    if violation is not None:
        cex = violation.counterexample
        report.property = violation.property
        report.detail = str(violation)
        report.pattern = cex
        report.counterexample_events = _basic_events(cex)
        report.counterexample_phase = phase
        report.useless = [cex.checkpoint_name(c) for c in useless_checkpoints(cex)]
        folder = Path(out) if out is not None else Path(tempfile.mkdtemp(prefix="rollcheck-"))
        report.counterexample, report.picture = _save(
            cex, folder, f"{_slug(name)}-{violation.property}", picture, f"{name}: {violation.property}")
    elif not claims:
        report.detail = checks[-1].detail
    elif report.examples == 0:
        report.detail = "no schedule was checked (zero examples): nothing is proven"
    else:
        report.detail = f"{', '.join(props)} held on {_n(report.examples, 'schedule')}"
    return report


def _without_idle(out_p: Pattern) -> Pattern | None:
    """The basic schedule of ``out_p`` without its idle processes (None: there are none)."""
    busy = sorted({e.process for e in out_p.events} | {e.to for e in out_p.events if e.to is not None})
    if len(busy) == out_p.n or len(busy) < 2:
        return None
    new = {p: k for k, p in enumerate(busy)}
    b = PatternBuilder([out_p.processes[p] for p in busy])
    for e in strip_forced(out_p).events:
        if e.kind == CHECKPOINT:
            b.checkpoint(new[e.process])
        elif e.kind == DELIVER:
            assert e.message is not None
            b.deliver(new[e.process], e.message)
        else:
            assert e.to is not None
            b.send(new[e.process], new[e.to], e.message)
    return b.build()


def _random_phase(guarded: _Guarded, props: list[str], name: str, rb: int | None,
                  line: Callable[..., Any], n_examples: int, seed: int | None,
                  out: str | Path | None, call_timeout: float | None
                  ) -> tuple[ProtocolViolation | None, list[Pattern]]:
    """Hypothesis over :func:`~rollcheck.properties.explore.steered.steered_schedules`, steered
    by ``target(zigzag_score)``; returns the (shrunk) violation and the schedules checked before it."""
    from hypothesis import strategies as st
    from hypothesis import target

    from rollcheck.properties.explore.calls import (
        CallTimeout,
        Watchdog,
        method_codes,
        method_source,
    )
    from rollcheck.properties.explore.steered import steered_schedules, zigzag_score
    from rollcheck.properties.protocol_strategies import zigzag_schedules

    seen: list[Pattern] = []
    first_failure: list[int] = []

    def body(p: Pattern) -> None:
        seen.append(p)
        guarded.reset()
        try:
            run = run_protocol(guarded, p)
        except UserCodeError:
            if not first_failure:
                first_failure.append(len(seen))
            raise
        target(float(zigzag_score(run.pattern)), label="zigzags closed without forcing")
        v = _violation_of(run.pattern, props, name, rb, line)
        if v is not None:
            if not first_failure:
                first_failure.append(len(seen))
            raise v

    base = _profiles.profile_settings("ci")
    test = settings(base, max_examples=n_examples, database=None, deadline=None,
                    derandomize=False, print_blob=False, report_multiple_bugs=False,
                    suppress_health_check=list(HealthCheck),
                    phases=[Phase.explicit, Phase.generate, Phase.target, Phase.shrink])(
        given(st.one_of(steered_schedules(RANDOM_MAX_PROCESSES, RANDOM_MAX_EVENTS),
                        zigzag_schedules(2, RANDOM_MAX_PROCESSES, RANDOM_MAX_EVENTS)))(body))
    # derandomised = a fixed seed of our own: Hypothesis's derandomize derives its seed from
    # the test function's digest, which differs between calling contexts
    test = hseed(_DERANDOMISED_SEED if seed is None else seed)(test)
    violation = None
    dog = Watchdog(method_codes(guarded.inner), call_timeout)
    try:
        with dog:
            test()
    except ProtocolViolation as e:
        violation = e
    except UserCodeError as e:
        raise _with_input(e, seen, out, name) from None
    except CallTimeout:
        method = dog.method or "a protocol method"
        raise UserCodeError(f"{method} did not return within {call_timeout:g} s (--call-timeout)",
                            source=method_source(guarded.label, type(guarded.inner).__name__, method),
                            location="random schedules") from None
    except Flaky:  # FlakyFailure is also an ExceptionGroup: catch it first
        raise InvalidInputError(
            "the protocol is not deterministic: the same schedule gave different outcomes; keep "
            "every piece of state in the per-process state that the methods receive and return, "
            "not in the object or the class",
            source=type(guarded.inner).__name__, location="protocol") from None
    checked = seen[: first_failure[0]] if first_failure else seen
    return violation, checked


def _user_error(e: Any, out: str | Path | None, name: str) -> UserCodeError:
    """A :class:`ProtocolCodeError` of the explorer as the user's error, its schedule saved."""
    from rollcheck.properties.explore import drop_idle, word_to_pattern

    reason = e.reason
    if e.word:
        n = max([p for p, _, _ in e.word] + [a for _, k, a in e.word if k == 1] + [1]) + 1
        n, word = drop_idle(n, e.word)
        folder = Path(out) if out is not None else Path(tempfile.mkdtemp(prefix="rollcheck-"))
        path, _ = _save(word_to_pattern(max(n, 2), word), folder, f"{_slug(name)}-error-input",
                        False, "")
        reason = f"{reason} (the schedule is saved in {path})"
    return UserCodeError(reason, source=e.source, location=e.location)


def _with_input(e: UserCodeError, seen: list[Pattern], out: str | Path | None, name: str) -> UserCodeError:
    """The user's error, naming the (shrunk) schedule it happened on, saved as a pattern file."""
    if not seen:
        return e
    folder = Path(out) if out is not None else Path(tempfile.mkdtemp(prefix="rollcheck-"))
    path, _ = _save(seen[-1], folder, f"{_slug(name)}-error-input", False, "")
    return UserCodeError(f"{e.reason} (the schedule is saved in {path})", source=e.source,
                         location=e.location)


def assert_protocol_safe(protocol: Any, profile: str | None = None, out: str | Path | None = None,
                         **kw: Any) -> ProtocolReport:
    """Check ``protocol`` and raise :class:`AssertionError` unless the verdict is ``safe``.

    ``profile`` and ``out`` default to the pytest plugin's ``--rollcheck-profile`` and
    ``--rollcheck-out`` (then ``ci`` and a temporary directory). The message names the violated
    property and the counterexample file.

    Examples
    --------
    >>> assert_protocol_safe("bcs", bounds="2x5", max_examples=5).verdict
    'safe'
    >>> assert_protocol_safe("uc", bounds="2x5", max_examples=5)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    AssertionError: uc: inconclusive ... claims neither zcycle_free nor a rollback_bound...
    """
    __tracebackhide__ = True  # pytest shows the user's test line and the message, not our code
    from rollcheck.testing import _config

    profile = profile or _config.PROFILE  # None: $ROLLCHECK_PROFILE or ci
    out = out if out is not None else _config.OUT
    report = check_protocol(protocol, profile=profile, out=out, **kw)
    _config.record(report)
    if report.verdict != "safe":
        where = f"; counterexample {report.counterexample}" if report.counterexample else ""
        pic = f", picture {report.picture}" if report.picture else ""
        raise AssertionError(f"{report.protocol}: {report.verdict} ({report.detail}){where}{pic}")
    return report
