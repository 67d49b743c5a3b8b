"""Check a user's checkpointing protocol: :func:`check_protocol` and :func:`assert_protocol_safe`.

Every basic schedule up to the bounds (smallest counterexample first), then a given schedule,
then random schedules steered at the protocol; the user's code is vetted before any verdict.
SAFE means complete: a bound the budget cut makes the verdict inconclusive. The phases, the
vetting and the measured default budget: docs/internals/testing.md#protocol-checks-_check.

References
----------
FERDiS paper §5.3 (CIC protocols, Z-cycles); ``specs/protocols.md#your-protocol``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rollcheck.properties import profiles as _profiles
from rollcheck.properties.explore.calls import DEFAULT_CALL_TIMEOUT
from rollcheck.pyimpl.errors import InternalError, InvalidInputError
from rollcheck.pyimpl.pattern import Pattern
from rollcheck.pyimpl.protocols import get_protocol, resolve_protocol, run_protocol
from rollcheck.pyimpl.protocols.run import strip_forced
from rollcheck.pyimpl.recovery import recovery_line
from rollcheck.pyimpl.verdict import Check
from rollcheck.pyimpl.zpaths import useless_checkpoints
from rollcheck.testing._evidence import basic_events, folder, save_pattern, slug, user_error
from rollcheck.testing._guard import GuardedProtocol, UserCodeError
from rollcheck.testing._properties import PROTOCOL_PROPERTIES, ProtocolViolation, violation_of
from rollcheck.testing._random import (
    RANDOM_EXAMPLES,
    RANDOM_MAX_EVENTS,
    RANDOM_MAX_PROCESSES,
    nondeterminism,
    random_phase,
    without_idle,
)
from rollcheck.testing._report import (
    ProtocolReport,
    exhaustive_check,
    forced_per_delivery,
)

__all__ = ["check_protocol", "assert_protocol_safe", "DEFAULT_BUDGET"]

#: Seconds for the exhaustive phase when no budget is given: the default bounds complete with a
#: 4x margin on one core of a machine half as fast as the developer's (HMNR, the slowest built-in,
#: needs about 35 CPU s there). Measurements: docs/internals/testing.md#the-default-budget.
DEFAULT_BUDGET = 150.0


def _n(count: int, noun: str) -> str:
    """``"1 schedule"``, ``"2 schedules"``."""
    return f"{count} {noun}{'' if count == 1 else 's'}"


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
        Seconds for the exhaustive phase (default :data:`DEFAULT_BUDGET`); a bound it cuts is
        ``complete: False`` and makes the verdict inconclusive (unless a property was violated).
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
    run, the_bounds, given_p, n_random = _prepare(protocol, profile, out, seed, max_examples, budget, call_timeout,
                                                  bounds, schedule, line)
    violation, phase, counted, seen = _phases(run, the_bounds, given_p, n_random, budget=budget, workers=workers,
                                              call_timeout=call_timeout, spark=spark, master=master,
                                              progress=progress)
    run.report.examples = sum(counted.values())
    if seen:
        _compare(run, seen)
    run.report.checks = _checks(run, violation, counted, phase)
    _conclude(run, violation, phase, picture)
    return run.report


class _Run:
    """One check's protocol (as given and guarded), its claimed properties and where it saves."""

    def __init__(self, proto: Any, label: str, guarded: GuardedProtocol, props: list[str], rb: int | None,
                 line: Callable[..., Any], out: str | Path | None, report: ProtocolReport):
        self.proto, self.label, self.guarded, self.name, self.props = proto, label, guarded, guarded.name, props
        self.rb, self.line, self.out, self.report = rb, line, out, report
        self.claims = [p for p in props if p != "recovery-line-is-max-consistent"]

    def violation(self, p: Pattern) -> ProtocolViolation | None:
        """The first claimed property the guarded protocol violates on basic schedule ``p``."""
        self.guarded.reset()
        return violation_of(run_protocol(self.guarded, p).pattern, self.props, self.name, self.rb, self.line)


def _prepare(protocol: Any, profile: str | None, out: str | Path | None, seed: int | None,
             max_examples: int | None, budget: float | None, call_timeout: float | None, bounds: Any,
             schedule: Any, line: Callable[..., Any]) -> tuple[_Run, tuple[Any, ...], Pattern | None, int]:
    """Resolve the protocol and options: the run, the bounds, the given schedule, the random count.

    The given schedule is None when there is none; a bad option or claim is exit 2 naming it.
    """
    proto = resolve_protocol(protocol)
    label = protocol if isinstance(protocol, str) else type(proto).__name__
    short, seed, the_bounds = _options(profile, seed, max_examples, budget, call_timeout, bounds)
    guarded = GuardedProtocol(proto, label)
    rb = getattr(proto, "rollback_bound", None)
    if rb is not None and (not isinstance(rb, int) or isinstance(rb, bool) or rb < 0):
        raise InvalidInputError(f"rollback_bound must be a non-negative integer or None, got {rb!r}",
                                source=type(proto).__name__, location="rollback_bound")
    props = [k for k, claim in PROTOCOL_PROPERTIES.items()
             if claim is None or (claim == "zcycle_free" and guarded.zcycle_free)
             or (claim == "rollback_bound" and rb is not None)]
    report = ProtocolReport(guarded.name, properties=props, profile=short, seed=seed)
    given_p: Pattern | None = None
    if schedule is not None:
        from rollcheck.pyimpl.patternio import load_pattern

        given_p = strip_forced(schedule if isinstance(schedule, Pattern) else load_pattern(schedule))
        report.schedule = str(schedule) if not isinstance(schedule, Pattern) else "(pattern)"
    n_random = RANDOM_EXAMPLES.get(short, 600) if max_examples is None else max_examples
    return _Run(proto, label, guarded, props, rb, line, out, report), the_bounds, given_p, n_random


def _phases(run: _Run, the_bounds: tuple[Any, ...], given_p: Pattern | None, n_random: int, *,
            budget: float | None, workers: int | None, call_timeout: float | None, spark: bool,
            master: str | None, progress: Callable[[str], None] | None,
            ) -> tuple[ProtocolViolation | None, str, dict[str, int], list[Pattern]]:
    """Run the phases until one finds a violation.

    Returns the violation, its phase, the schedules each phase checked and the random schedules.
    """
    violation: ProtocolViolation | None = None
    phase = ""
    counted = {"exhaustive": 0, "random": 0, "given": 0}
    # 1. bounded-exhaustive (it vets the user's code first: copyable states, not changed in
    # place, the same results when a schedule is run twice)
    if run.claims and the_bounds:
        violation, counted["exhaustive"] = _exhaustive(run, the_bounds, budget=budget, workers=workers,
                                                       call_timeout=call_timeout, spark=spark, master=master,
                                                       progress=progress)
        phase = "exhaustive" if violation is not None else phase
    elif n_random > 0 or given_p is not None:
        # no exhaustive phase: vet the user's code all the same, at the random phase's sizes
        from rollcheck.properties.explore import ProtocolCodeError
        from rollcheck.properties.explore.explorer import vet

        try:
            _, run.report.determinism = vet(run.proto, run.label, call_timeout,
                                            range(2, RANDOM_MAX_PROCESSES + 1))
        except ProtocolCodeError as e:
            raise user_error(e, run.out, run.name) from None
    # 2. a given schedule
    if violation is None and given_p is not None:
        run.guarded.reset()
        try:
            ran = run_protocol(run.guarded, given_p)
        except UserCodeError as e:
            raise UserCodeError(f"{e.reason} (schedule {run.report.schedule})", source=e.source,
                                location=e.location) from None
        counted["given"] = 1
        violation = violation_of(ran.pattern, run.props, run.name, run.rb, run.line)
        phase = "the given schedule" if violation is not None else phase
    # 3. random, steered at the protocol
    seen: list[Pattern] = []
    if violation is None and n_random > 0:
        violation, seen = _random(run, n_random, run.report.seed, call_timeout, progress)
        counted["random"] = len(seen)
        phase = "random" if violation is not None else phase
    return violation, phase, counted, seen


def _compare(run: _Run, seen: list[Pattern]) -> None:
    """Compare the cost with HMNR's and BCS's, and count UC's useless checkpoints, on ``seen``.

    Sets the report's forced checkpoints per delivery (the protocol's and the two built-ins') and
    the fraction of the random schedules on which UC leaves a useless checkpoint.
    """
    report = run.report
    report.forced_per_delivery = forced_per_delivery(run.guarded, seen)
    report.compared = {k: forced_per_delivery(get_protocol(k), seen) for k in ("hmnr", "bcs")}
    uc = get_protocol("uc")
    report.uc_useless_fraction = sum(
        1 for s in seen if useless_checkpoints(run_protocol(uc, s).pattern)) / len(seen)


def _options(profile: str | None, seed: int | None, max_examples: int | None, budget: float | None,
             call_timeout: float | None, bounds: Any) -> tuple[str, int | None, tuple[Any, ...]]:
    """The profile's short name, the seed and the exhaustive bounds; exit 2 naming a bad option."""
    from rollcheck.properties.explore import DEFAULT_BOUNDS, Bound, parse_bounds

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
    return short, seed, the_bounds


def _exhaustive(run: _Run, the_bounds: tuple[Any, ...], *, budget: float | None, workers: int | None,
                call_timeout: float | None, spark: bool, master: str | None,
                progress: Callable[[str], None] | None) -> tuple[ProtocolViolation | None, int]:
    """The bounded-exhaustive phase: its smallest violation (None: none) and its schedule count."""
    from rollcheck.properties.explore import ProtocolCodeError, drop_idle, explore, word_to_pattern

    report, name = run.report, run.name
    spark_fn: Any = None
    if spark:
        from rollcheck.testing._spark import spark_runner

        spark_fn = spark_runner(master)
    report.budget = DEFAULT_BUDGET if budget is None else budget
    try:
        ex = explore(run.proto, run.label, the_bounds, budget=report.budget, workers=workers,
                     call_timeout=call_timeout, zcycles="no-useless-checkpoint" in run.props,
                     rollback_bound=run.rb, spark=spark_fn, progress=progress)
    except ProtocolCodeError as e:
        raise user_error(e, run.out, name) from None
    finally:
        if spark_fn is not None:
            spark_fn.close()
    report.symmetry = ex.symmetry
    report.engine = ex.engine
    report.determinism = ex.determinism
    report.exhaustive = [dict(b.to_json(), limit=b.limit) for b in ex.bounds]
    count = sum(b.schedules for b in ex.bounds)
    if ex.best is None:
        return None, count
    # the schedule as walked (a protocol may treat processes by their ids), then without
    # its idle processes when the renumbered schedule shows the same flaw
    word = ex.best.word
    basic = word_to_pattern(ex.best_processes, word)
    violation = run.violation(basic)
    n, small_word = drop_idle(ex.best_processes, word)
    if violation is not None and n < ex.best_processes:
        small = run.violation(word_to_pattern(n, small_word))
        if small is not None and small.property == violation.property:
            violation = small
    if violation is None:
        # the walk and the pattern-level checks disagree: the protocol's results differ
        # from run to run (its error), or else a bug of ours
        named = nondeterminism(run.proto, run.label, [basic])
        if named is not None:
            path, _ = save_pattern(basic, folder(run.out), f"{slug(name)}-error-input", False, "")
            raise UserCodeError(f"{named.reason} (the schedule is saved in {path})",
                                source=named.source, location=named.location)
        raise InternalError(f"the explorer reports {ex.best.what} on {word}, but the "
                            f"pattern-level checks find nothing")
    return violation, count


def _random(run: _Run, n_random: int, seed: int | None, call_timeout: float | None,
            progress: Callable[[str], None] | None) -> tuple[ProtocolViolation | None, list[Pattern]]:
    """Run the random phase, steered at the protocol: its violation and the schedules it ran.

    The violation drops idle processes when the smaller schedule shows the same flaw.
    """
    violation, seen = random_phase(run.guarded, run.props, run.name, run.rb, run.line, n_random, seed, run.out,
                                    call_timeout)
    run.report.random = {"schedules": len(seen), "max_processes": RANDOM_MAX_PROCESSES,
                         "max_events": RANDOM_MAX_EVENTS}
    if violation is not None:
        smaller = without_idle(violation.counterexample)
        if smaller is not None:
            v2 = run.violation(smaller)
            if v2 is not None and v2.property == violation.property:
                violation = v2
    if progress is not None:
        progress(f"random: {_n(len(seen), 'schedule')} up to {RANDOM_MAX_PROCESSES}x{RANDOM_MAX_EVENTS}")
    return violation, seen


def _checks(run: _Run, violation: ProtocolViolation | None, counted: dict[str, int], phase: str) -> list[Check]:
    """One check per claimed property, the claims' check, and the cut bound's (if any)."""
    report = run.report
    checks: list[Check] = []
    cover: dict[str, Any] = {"exhaustive": counted["exhaustive"], "random": counted["random"],
             "given": counted["given"]}
    for prop in run.props:
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
        elif report.examples == 0:
            checks.append(Check.unchecked(prop, "no schedule was checked (zero examples): nothing "
                                          "is proven", **cover))
        else:
            n_ok = report.examples
            checks.append(Check.held(prop, f"held on {_n(n_ok, 'schedule')}", examined=n_ok, **cover))
    if not run.claims:
        checks.append(Check.unchecked(
            "claims", f"{run.name} claims neither zcycle_free nor a rollback_bound: only the recovery "
            f"lines were checked, nothing about the protocol itself"))
    cut = exhaustive_check(report.exhaustive, report.budget)
    if cut is not None:  # SAFE means complete: a requested bound the budget cut is a gap
        checks.append(cut)
    return checks


def _conclude(run: _Run, violation: ProtocolViolation | None, phase: str, picture: bool) -> None:
    """The report's counterexample (saved, drawn) or the detail of a pass or an inconclusive run."""
    report, name = run.report, run.name
    if violation is not None:
        cex = violation.counterexample
        report.property = violation.property
        report.detail = str(violation)
        report.pattern = cex
        report.counterexample_events = basic_events(cex)
        report.counterexample_phase = phase
        report.useless = [cex.checkpoint_name(c) for c in useless_checkpoints(cex)]
        report.counterexample, report.picture = save_pattern(
            cex, folder(run.out), f"{slug(name)}-{violation.property}", picture, f"{name}: {violation.property}")
    elif report.report.why_inconclusive is not None:
        report.detail = report.verdict_line().removeprefix("INCONCLUSIVE: ")
    else:
        report.detail = f"{', '.join(run.props)} held on {_n(report.examples, 'schedule')}"


def assert_protocol_safe(protocol: Any, profile: str | None = None, out: str | Path | None = None,
                         **kw: Any) -> ProtocolReport:
    """Check ``protocol`` and raise :class:`AssertionError` unless the verdict is ``safe``.

    Parameters
    ----------
    protocol : Protocol, Protocol subclass or str
        As :func:`check_protocol`.
    profile : {"ci", "verify"}, optional
        Default: the pytest plugin's ``--rollcheck-profile``, then ``ROLLCHECK_PROFILE`` or ``ci``.
    out : path, optional
        Default: the pytest plugin's ``--rollcheck-out``, then a temporary directory.
    **kw
        The other keyword arguments of :func:`check_protocol`.

    Returns
    -------
    ProtocolReport
        The report of a safe protocol.

    Raises
    ------
    AssertionError
        The verdict is ``unsafe`` or ``inconclusive``; the message names the violated property (or
        why nothing is proven) and the counterexample file.

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
