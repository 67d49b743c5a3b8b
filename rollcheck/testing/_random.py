"""The random phase of a protocol check: Hypothesis over schedules steered at the protocol.

Schedules of up to 6 processes and 60 events (:mod:`rollcheck.properties.explore.steered`); a
counterexample is made smaller by dropping its idle processes.

References
----------
``specs/protocols.md#random``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as hseed
from hypothesis.errors import Flaky

from rollcheck.properties import profiles as _profiles
from rollcheck.pyimpl.errors import InvalidInputError
from rollcheck.pyimpl.pattern import CHECKPOINT, DELIVER, Pattern, PatternBuilder
from rollcheck.pyimpl.protocols import run_protocol
from rollcheck.pyimpl.protocols.run import strip_forced
from rollcheck.testing._evidence import with_input
from rollcheck.testing._guard import GuardedProtocol, UserCodeError
from rollcheck.testing._properties import ProtocolViolation, violation_of

__all__ = ["RANDOM_EXAMPLES", "RANDOM_MAX_PROCESSES", "RANDOM_MAX_EVENTS", "random_phase",
           "without_idle", "nondeterminism"]

#: Random schedules of the random phase, per profile.
RANDOM_EXAMPLES = {"ci": 600, "verify": 3000}
#: The random phase's shapes: at most this many processes and events.
RANDOM_MAX_PROCESSES, RANDOM_MAX_EVENTS = 6, 60

#: The seed used when none is given (``ROLLCHECK_SEED`` unset or empty): the same schedules on every
#: run, from every caller.
_DERANDOMISED_SEED = 0


def nondeterminism(proto: Any, label: str, schedules: Sequence[Pattern], runs: int = 4
                   ) -> UserCodeError | None:
    """Name the user's method whose results differ when one of ``schedules`` is run again.

    Returns the user's error, or None when each schedule gave the same results ``runs`` times.

    Parameters
    ----------
    proto : Protocol
        The user's protocol (unguarded).
    label : str
        Its name in the error.
    schedules : sequence of Pattern
        The schedules replayed (forced checkpoints removed first).
    runs : int, optional
        Runs compared per schedule.

    Examples
    --------
    >>> from rollcheck.pyimpl import PatternBuilder
    >>> from rollcheck.pyimpl.protocols import BCS
    >>> b = PatternBuilder(2); b.deliver(1, b.send(0, 1))
    >>> class Flip(BCS):
    ...     n = 0
    ...     def must_force(self, st, src, pb):
    ...         Flip.n += 1
    ...         return Flip.n % 2 == 0
    >>> nondeterminism(BCS(), "bcs", [b.build()]) is None
    True
    >>> nondeterminism(Flip(), "Flip", [b.build()]).source
    'Flip.must_force'
    """
    from rollcheck.properties.explore.determinism import nondeterminism_on
    from rollcheck.properties.explore.words import pattern_to_word

    for p in schedules:
        err = nondeterminism_on(proto, label, max(p.n, 2), pattern_to_word(strip_forced(p)),
                                runs=runs)
        if err is not None:
            return UserCodeError(err.reason, source=err.source, location=err.location)
    return None


def without_idle(out_p: Pattern) -> Pattern | None:
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


def random_phase(guarded: GuardedProtocol, props: list[str], name: str, rb: int | None,
                 line: Callable[..., Any], n_examples: int, seed: int | None,
                 out: str | Path | None, call_timeout: float | None
                 ) -> tuple[ProtocolViolation | None, list[Pattern]]:
    """Run Hypothesis over schedules steered by ``target(zigzag_score)``.

    Returns the (shrunk) violation, None when there is none, and the schedules checked before it
    (:func:`~rollcheck.properties.explore.steered.steered_schedules`).

    Parameters
    ----------
    guarded : GuardedProtocol
        The user's protocol, guarded.
    props : list of str
        The properties that apply.
    name : str
        The protocol's name (messages, saved files).
    rb : int, optional
        The claimed rollback bound (None: none).
    line : callable
        The recovery-line implementation checked.
    n_examples : int
        Hypothesis's ``max_examples``.
    seed : int, optional
        Hypothesis's seed (None: a fixed one).
    out : str or Path, optional
        Folder for the saved schedule (None: a fresh temporary one).
    call_timeout : float, optional
        Seconds one call of the user's code may take (None: no limit).
    """
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
        v = violation_of(run.pattern, props, name, rb, line)
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
        raise with_input(e, seen, out, name) from None
    except CallTimeout:
        method = dog.method or "a protocol method"
        raise UserCodeError(f"{method} did not return within {call_timeout:g} s (--call-timeout)",
                            source=method_source(guarded.label, type(guarded.inner).__name__, method),
                            location="random schedules") from None
    except Flaky:  # FlakyFailure is also an ExceptionGroup: catch it first
        named = nondeterminism(guarded.inner, guarded.label, seen[-8:][::-1])
        if named is not None:
            raise with_input(named, seen, out, name) from None
        from rollcheck.properties.explore.determinism import NONDETERMINISTIC

        raise InvalidInputError(f"the same schedule gave different outcomes: {NONDETERMINISTIC}",
                                source=type(guarded.inner).__name__, location="protocol") from None
    checked = seen[: first_failure[0]] if first_failure else seen
    return violation, checked
