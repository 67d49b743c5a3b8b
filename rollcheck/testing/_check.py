"""Checking a user's checkpointing protocol: :func:`check_protocol` and :func:`assert_protocol_safe`.

A protocol is run on Z-cycle-prone basic schedules (:func:`rollcheck.testing.schedules`); on each
schedule every property the protocol claims is checked on its output pattern:

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

The first violation is shrunk by Hypothesis, saved as a ``rollcheck.pattern/1`` file (the shrunk
schedule run under the protocol, forced checkpoints marked) and drawn with its Z-cycles. The
forced-checkpoint rate per delivery is measured on the same schedules for the protocol, HMNR and
BCS, with the fraction of schedules on which UC (no forced checkpoint at all) leaves a useless
checkpoint: the evidence that the schedules were hard.

References
----------
FERDiS paper §5.3 (CIC protocols, Z-cycles); ``specs/protocols.md#your-protocol``.
"""

from __future__ import annotations

import builtins
import re
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as hseed
from hypothesis.errors import Flaky, Unsatisfiable

from rollcheck.properties import profiles as _profiles
from rollcheck.properties.protocol_strategies import protocol_schedules
from rollcheck.pyimpl.errors import InternalError, InvalidInputError, PropertyViolation
from rollcheck.pyimpl.pattern import DELIVER, Pattern
from rollcheck.pyimpl.protocols import Protocol, get_protocol, resolve_protocol, run_protocol
from rollcheck.pyimpl.recovery import recovery_line
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

    def __init__(self, inner: Protocol):
        self.inner = inner
        self.name = str(inner.name)
        self.zcycle_free = bool(getattr(inner, "zcycle_free", False))
        self.event = -1
        self._after_force = False

    def _call(self, method: str, *args: Any) -> Any:
        try:
            return getattr(self.inner, method)(*args)
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

    def on_checkpoint(self, st: Any) -> Any:
        if not self._after_force:
            self.event += 1
        self._after_force = False
        return self._call("on_checkpoint", st)

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
        r = bool(self._call("must_force", st, src, pb))
        self._after_force = r
        return r

    def on_deliver(self, st: Any, src: int, pb: Any) -> Any:
        self._after_force = False
        return self._call("on_deliver", st, src, pb)


def guarded_protocol(protocol: Any) -> Protocol:
    """``protocol`` (anything :func:`~rollcheck.pyimpl.protocols.resolve_protocol` accepts) wrapped
    so that an exception in its code becomes a one-line :class:`UserCodeError` (exit code 2)."""
    return _Guarded(resolve_protocol(protocol))


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

    Attributes
    ----------
    protocol : str
        The protocol's name.
    verdict : {"safe", "unsafe", "inconclusive"}
    property : str or None
        The violated property (``unsafe`` only).
    examples : int
        Schedules the protocol was checked on.
    counterexample, picture : str or None
        The saved counterexample pattern (``rollcheck.pattern/1``) and its drawing.
    forced_per_delivery : float or None
        Forced checkpoints per delivery of the protocol on the checked schedules.
    compared : dict
        The same rate for HMNR and BCS on the same schedules.
    uc_useless_fraction : float or None
        Fraction of the checked schedules on which UC leaves a useless checkpoint.
    properties : list of str
        The properties that applied (from the protocol's claims).
    profile, seed : str, int or None
        The profile (``ci``/``verify``) and seed (None: derandomised) used.
    detail : str
        One line: the violation, or why the verdict is inconclusive.
    useless : list of str
        The useless checkpoints of the counterexample (``P0:1``), if any.
    """

    protocol: str
    verdict: str
    property: str | None
    examples: int
    counterexample: str | None
    picture: str | None
    forced_per_delivery: float | None
    compared: dict[str, float | None]
    uc_useless_fraction: float | None = None
    properties: list[str] = field(default_factory=list)
    profile: str = "ci"
    seed: int | None = None
    detail: str = ""
    useless: list[str] = field(default_factory=list)
    pattern: Pattern | None = field(default=None, repr=False)

    @builtins.property
    def ok(self) -> bool:
        """True iff the verdict is ``safe``."""
        return self.verdict == "safe"

    @builtins.property
    def exit_code(self) -> int:
        """0 safe, 1 unsafe, 3 inconclusive (the CLI's exit code)."""
        return {"safe": 0, "unsafe": 1}.get(self.verdict, 3)

    def to_json(self) -> dict[str, Any]:
        """The JSON document of ``rollcheck check protocol --json``."""
        return {
            "protocol": self.protocol,
            "verdict": self.verdict,
            "property": self.property,
            "examples": self.examples,
            "counterexample": self.counterexample,
            "picture": self.picture,
            "forced_per_delivery": _round(self.forced_per_delivery),
            "compared": {k: _round(v) for k, v in self.compared.items()},
            "uc_useless_fraction": _round(self.uc_useless_fraction),
            "properties": list(self.properties),
            "useless": list(self.useless),
            "profile": self.profile,
            "seed": self.seed,
            "detail": self.detail,
        }

    def summary(self) -> str:
        """A few lines for a terminal."""
        lines = [f"{self.protocol}: {self.verdict.upper()} ({self.examples} schedules, profile "
                 f"{self.profile}, seed {_profiles.seed_text(self.seed)})"]
        if self.detail:
            lines.append(f"  {self.detail}")
        if self.counterexample:
            lines.append(f"  counterexample: {self.counterexample}")
        if self.picture:
            lines.append(f"  picture:        {self.picture}")
        refs = ", ".join(f"{k} {_fmt(v)}" for k, v in self.compared.items())
        lines.append(f"  forced checkpoints per delivery: {_fmt(self.forced_per_delivery)} ({refs})")
        if self.uc_useless_fraction is not None:
            lines.append(f"  schedules on which UC leaves a useless checkpoint: "
                         f"{100 * self.uc_useless_fraction:.0f}%")
        return "\n".join(lines)


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

        png = str(render_pattern(p, out / f"{stem}.png", zcycles=True, title=title))
    return str(json_path), png


# --- the runner -----------------------------------------------------------------------------------


def check_protocol(
    protocol: Any,
    profile: str | None = "ci",
    out: str | Path | None = None,
    *,
    seed: int | None = None,
    max_examples: int | None = None,
    picture: bool = True,
    line: Callable[..., Any] = recovery_line,
) -> ProtocolReport:
    """Check a checkpointing protocol on Z-cycle-prone schedules and return a report.

    Parameters
    ----------
    protocol : Protocol, Protocol subclass or str
        The protocol: an instance, a class (instantiated without arguments), a built-in name,
        ``"MODULE:CLASS"`` or ``"path/to/file.py:CLASS"``.
    profile : {"ci", "verify"}, optional
        The Hypothesis budget (60 or 600 schedules); None: ``ROLLCHECK_PROFILE``.
    out : path, optional
        Where the counterexample (``.json``) and its picture (``.png``) are saved; default: a fresh
        temporary directory, created only when there is something to save.
    seed : int, optional
        The Hypothesis seed; default ``ROLLCHECK_SEED`` (unset or empty: derandomised).
    max_examples : int, optional
        Override the profile's number of schedules.
    picture : bool
        Draw the counterexample (PNG).
    line : callable
        The recovery-line implementation checked by ``recovery-line-is-max-consistent``.

    Returns
    -------
    ProtocolReport

    Raises
    ------
    InvalidInputError
        The spec names no usable protocol, or the protocol's own code raised
        (:class:`UserCodeError`, naming the method, its arguments and the event).

    Examples
    --------
    >>> r = check_protocol("hmnr", max_examples=5, picture=False)
    >>> r.verdict, r.property, r.examples
    ('safe', None, 5)
    >>> from rollcheck.pyimpl.protocols import UC
    >>> class Optimist(UC):          # claims what UC cannot keep
    ...     zcycle_free = True
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as out:
    ...     r = check_protocol(Optimist, out=out, picture=False)
    >>> r.verdict, r.property, r.examples, r.useless
    ('unsafe', 'no-useless-checkpoint', 1, ['P0:1'])

    References
    ----------
    FERDiS paper §5.3; ``specs/protocols.md#your-protocol``.
    """
    proto = resolve_protocol(protocol)
    short = _profiles.short_name(profile or _profiles.active_profile())
    if profile is not None and _profiles.short_name(profile) != profile.removeprefix(_profiles.PREFIX):
        raise InvalidInputError(f"unknown profile {profile!r} (ci or verify)", location="profile")
    if seed is None:
        seed = _profiles.seed()
    if max_examples is not None and max_examples < 0:
        raise InvalidInputError(f"max_examples must be >= 0, got {max_examples}", location="max_examples")
    guarded = _Guarded(proto)
    name = guarded.name
    bound = getattr(proto, "rollback_bound", None)
    if bound is not None and (not isinstance(bound, int) or isinstance(bound, bool) or bound < 0):
        raise InvalidInputError(f"rollback_bound must be a non-negative integer or None, got {bound!r}",
                                source=type(proto).__name__, location="rollback_bound")
    props = [k for k, claim in PROTOCOL_PROPERTIES.items()
             if claim is None or (claim == "zcycle_free" and guarded.zcycle_free)
             or (claim == "rollback_bound" and bound is not None)]
    base = _profiles.profile_settings(short)
    n_examples = base.max_examples if max_examples is None else max_examples

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
        try:
            out_p = run.pattern
            if "no-useless-checkpoint" in props:
                check_no_useless(out_p, name)
            check_recovery_lines(out_p, line)
            if bound is not None:
                check_rollback_bound(out_p, bound, name)
        except ProtocolViolation:
            if not first_failure:
                first_failure.append(len(seen))
            raise

    report = ProtocolReport(name, "inconclusive", None, 0, None, None, None, {}, properties=props,
                            profile=short, seed=seed)
    violation: ProtocolViolation | None = None
    if n_examples > 0:
        test = settings(base, max_examples=n_examples, database=None, deadline=None,
                        derandomize=False, print_blob=False, report_multiple_bugs=False,
                        suppress_health_check=list(HealthCheck),
                        phases=[Phase.explicit, Phase.generate, Phase.shrink])(
            given(protocol_schedules())(body))
        # derandomised = a fixed seed of our own: Hypothesis's derandomize derives its seed from
        # the test function's digest, which differs between calling contexts
        test = hseed(_DERANDOMISED_SEED if seed is None else seed)(test)
        try:
            test()
        except ProtocolViolation as e:
            violation = e
        except UserCodeError as e:
            raise _with_input(e, seen, out, name) from None
        except Flaky as e:  # FlakyFailure is also an ExceptionGroup: catch it first
            raise InvalidInputError(
                "the protocol is not deterministic: the same schedule gave different outcomes "
                f"({type(e).__name__}); keep every piece of state in the per-process state that the "
                "methods receive and return, not in the object or the class",
                source=type(proto).__name__, location="protocol") from None
        except Unsatisfiable as e:  # pragma: no cover - the schedules are never filtered
            report.detail = f"no schedule could be generated: {e}"
    checked = seen[: first_failure[0]] if first_failure else seen
    report.examples = len(checked)
    if checked:
        report.forced_per_delivery = forced_per_delivery(guarded, checked)
        report.compared = {k: forced_per_delivery(get_protocol(k), checked) for k in ("hmnr", "bcs")}
        uc = get_protocol("uc")
        report.uc_useless_fraction = sum(
            1 for s in checked if useless_checkpoints(run_protocol(uc, s).pattern)) / len(checked)
    else:
        report.compared = {"hmnr": None, "bcs": None}
    if violation is not None:
        cex = violation.counterexample
        report.verdict, report.property = "unsafe", violation.property
        report.detail = str(violation)
        report.pattern = cex
        report.useless = [cex.checkpoint_name(c) for c in useless_checkpoints(cex)]
        folder = Path(out) if out is not None else Path(tempfile.mkdtemp(prefix="rollcheck-"))
        report.counterexample, report.picture = _save(
            cex, folder, f"{_slug(name)}-{violation.property}", picture, f"{name}: {violation.property}")
    elif report.examples == 0:
        report.detail = report.detail or "no schedule was checked (zero examples): nothing is proven"
    elif props == ["recovery-line-is-max-consistent"]:
        report.detail = (f"{name} claims neither zcycle_free nor a rollback_bound: only the recovery "
                         f"lines were checked, nothing about the protocol itself")
    else:
        report.verdict = "safe"
        report.detail = f"{', '.join(props)} held on {report.examples} schedules"
    return report


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
    >>> assert_protocol_safe("bcs", max_examples=5).verdict
    'safe'
    >>> assert_protocol_safe("uc", max_examples=5)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    AssertionError: uc: inconclusive ... claims neither zcycle_free nor a rollback_bound...
    """
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
