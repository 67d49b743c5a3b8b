"""The properties of a checkpointing protocol, each checkable on one output pattern.

``no-useless-checkpoint`` (when the protocol claims ``zcycle_free``)
    no checkpoint lies on a Z-cycle. Two independent encodings must agree: the R-graph test of
    :func:`rollcheck.pyimpl.useless_checkpoints` and a search of Z-cycles from the definition
    (:func:`rollcheck.pyimpl.zcycle_checkpoints`); a disagreement is a bug in rollcheck
    (:class:`~rollcheck.pyimpl.errors.InternalError`).
``recovery-line-is-max-consistent`` (always)
    for every single failure, the recovery line is the maximum consistent global checkpoint,
    computed independently by orphan elimination from the definition of consistency.
``rollback-bounded`` (when the class sets ``rollback_bound = k``)
    after any single failure no process discards more than ``k`` of its checkpoints.

References
----------
FERDiS paper §5.3 (CIC protocols, Z-cycles); ``specs/protocols.md#your-protocol``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from rollcheck.pyimpl.errors import InternalError, PropertyViolation
from rollcheck.pyimpl.pattern import Pattern
from rollcheck.pyimpl.recovery import recovery_line
from rollcheck.pyimpl.zpaths import useless_checkpoints, zcycle_checkpoints

__all__ = [
    "PROTOCOL_PROPERTIES",
    "ProtocolViolation",
    "check_no_useless",
    "max_consistent_line",
    "check_recovery_lines",
    "check_rollback_bound",
    "violation_of",
]

#: The properties in the order they are checked, with the claim that makes each apply.
PROTOCOL_PROPERTIES = {
    "no-useless-checkpoint": "zcycle_free",
    "recovery-line-is-max-consistent": None,
    "rollback-bounded": "rollback_bound",
}


class ProtocolViolation(PropertyViolation):
    """A protocol property does not hold.

    Parameters
    ----------
    prop : str
        The violated property.
    message : str
        What was found.
    counterexample : Pattern
        The protocol's output pattern.

    Attributes
    ----------
    property : str
        The violated property.
    counterexample : Pattern
        The protocol's output pattern on the offending schedule.
    """

    def __init__(self, prop: str, message: str, counterexample: Pattern):
        self.property = prop
        super().__init__(f"{prop}: {message}", counterexample)



def check_no_useless(out: Pattern, name: str = "protocol") -> None:
    """Raise :class:`ProtocolViolation` if ``out`` holds a useless checkpoint.

    Parameters
    ----------
    out : Pattern
        A protocol's output pattern.
    name : str, optional
        The protocol's name in the message.

    Raises
    ------
    ProtocolViolation
        A useless checkpoint.
    InternalError
        The two encodings disagree.

    Examples
    --------
    >>> from rollcheck.pyimpl import PatternBuilder
    >>> b = PatternBuilder(2)
    >>> b.deliver(0, b.send(1, 0)); _ = b.checkpoint(0); b.deliver(1, b.send(0, 1))
    >>> check_no_useless(b.build(), "uc")
    Traceback (most recent call last):
    ...
    rollcheck.testing._properties.ProtocolViolation: no-useless-checkpoint: uc leaves the useless checkpoint(s) P0:1
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

    Parameters
    ----------
    p : Pattern
        The pattern.
    failed : iterable of int
        Indices of the crashed processes.

    Returns
    -------
    tuple of int
        A checkpoint index per process.

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

    Parameters
    ----------
    out : Pattern
        A protocol's output pattern.
    line : callable, optional
        ``line(p, failed) -> RecoveryLine``, the implementation checked.
    """
    for f in range(out.n):
        got = tuple(line(out, [f]).line)
        want = max_consistent_line(out, [f])
        if got != want:
            raise ProtocolViolation("recovery-line-is-max-consistent",
                                    f"failure of {out.processes[f]}: recovery line {got}, "
                                    f"maximum consistent global checkpoint {want}", out)


def check_rollback_bound(out: Pattern, bound: int, name: str = "protocol") -> None:
    """Raise unless no single failure makes any process discard more than ``bound`` checkpoints.

    Parameters
    ----------
    out : Pattern
        A protocol's output pattern.
    bound : int
        Most checkpoints a process may discard.
    name : str, optional
        The protocol's name in the message.
    """
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


def violation_of(out_p: Pattern, props: list[str], name: str, bound: int | None = None,
                 line: Callable[..., Any] = recovery_line) -> ProtocolViolation | None:
    """The first property of ``props`` that ``out_p`` violates, or None.

    Parameters
    ----------
    out_p : Pattern
        A protocol's output pattern.
    props : list of str
        Properties that apply (``no-useless-checkpoint`` is checked only when listed).
    name : str
        The protocol's name in messages.
    bound : int, optional
        The claimed rollback bound (None: not checked).
    line : callable, optional
        The recovery-line implementation checked.

    Returns
    -------
    ProtocolViolation or None
        The first violation found.

    Examples
    --------
    >>> from rollcheck.pyimpl import PatternBuilder
    >>> b = PatternBuilder(2)
    >>> b.deliver(0, b.send(1, 0)); _ = b.checkpoint(0); b.deliver(1, b.send(0, 1))
    >>> violation_of(b.build(), ["no-useless-checkpoint"], "uc").property
    'no-useless-checkpoint'
    >>> violation_of(b.build(), ["recovery-line-is-max-consistent"], "uc") is None
    True
    """
    try:
        if "no-useless-checkpoint" in props:
            check_no_useless(out_p, name)
        check_recovery_lines(out_p, line)
        if bound is not None:
            check_rollback_bound(out_p, bound, name)
    except ProtocolViolation as v:
        return v
    return None
