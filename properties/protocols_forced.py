"""Forced decisions of HMNR and BCS against an independent reference written from the rules.

The safety properties (``hmnr-no-useless``, ``bcs-no-useless``) only show that a protocol forces
*enough*; a protocol that forces at every delivery passes them. The properties here compare the
exact set of forced deliveries with a second encoding of the rules of ``specs/protocols.md``
(#bcs, #hmnr): it walks the raw event list of the basic schedule with plain per-process
dictionaries, keeps every piggyback as a frozen copy taken at the send event, and shares no code
with :mod:`rollcheck.pyimpl.protocols`. Forcing too much and forcing too little both fail.

Examples
--------
>>> from rollcheck.pyimpl.pattern import PatternBuilder
>>> b = PatternBuilder(2)
>>> b.deliver(0, b.send(1, 0)); c = b.checkpoint(0); b.deliver(1, b.send(0, 1))
>>> reference_forced("bcs", b.build())
('m1',)

References
----------
BCS: Briatico, Ciuffoletti, Simoncini (index-based CIC); HMNR: Hélary, Mostefaoui, Netzer,
Raynal (FERDiS paper §5.3); rules as stated in ``specs/protocols.md#bcs`` and ``#hmnr``.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from rollcheck.properties.registry import interesting, prop
from rollcheck.properties.strategies import build_from_actions, topology_channels
from rollcheck.pyimpl.errors import InvalidInputError, PropertyViolation
from rollcheck.pyimpl.pattern import CHECKPOINT, DELIVER, SEND, Pattern
from rollcheck.pyimpl.protocols import get_protocol, run_protocol
from rollcheck.pyimpl.protocols.hmnr import HMNR

__all__ = ["reference_forced", "OverForcingHMNR", "forced_schedules"]

AREA = "protocols"


def _bcs(p: Pattern) -> list[str]:
    """BCS from its rule.

    One integer ``lc`` per process; a checkpoint adds one; a message carries the sender's
    ``lc``; a delivery with ``m.lc > lc`` is preceded by a forced checkpoint whose label is
    ``m.lc``.
    """
    lc = {i: 0 for i in range(p.n)}
    carried: dict[str, int] = {}
    forced: list[str] = []
    for ev in p.events:
        me = ev.process
        if ev.kind == CHECKPOINT:
            lc[me] += 1
        elif ev.kind == SEND:
            carried[str(ev.message)] = lc[me]
        elif ev.kind == DELIVER:
            m = carried[str(ev.message)]
            if m > lc[me]:
                forced.append(str(ev.message))
                lc[me] = m
    return forced


_INF = float("inf")


def _hmnr(p: Pattern) -> list[str]:
    """HMNR from its rules (``specs/protocols.md#hmnr``), state as dictionaries of lists."""
    n = p.n
    S: list[dict[str, list[Any]]] = []
    for _ in range(n):
        S.append({"clock": [0] * n, "ckpt": [0] * n, "taken": [False] * n,
                  "sent_to": [False] * n, "min_to": [_INF] * n})

    def checkpoint(i: int) -> None:
        s = S[i]
        s["sent_to"] = [False] * n
        s["min_to"] = [_INF] * n
        s["taken"] = [k != i for k in range(n)]
        s["clock"][i] += 1
        s["ckpt"][i] += 1

    for i in range(n):  # the start: every process runs the checkpoint step once (C[i,0])
        checkpoint(i)
    carried: dict[str, tuple[int, tuple[int, ...], tuple[int, ...], tuple[bool, ...]]] = {}
    forced: list[str] = []
    for ev in p.events:
        i = ev.process
        s = S[i]
        if ev.kind == CHECKPOINT:
            checkpoint(i)
        elif ev.kind == SEND:
            k = ev.to
            assert k is not None
            if not s["sent_to"][k]:
                s["sent_to"][k] = True
                s["min_to"][k] = s["clock"][i]
            carried[str(ev.message)] = (i, tuple(s["clock"]), tuple(s["ckpt"]), tuple(s["taken"]))
        elif ev.kind == DELIVER:
            j, mclock, mckpt, mtaken = carried[str(ev.message)]
            c1 = any(s["sent_to"][k] and mclock[j] > s["min_to"][k] and mclock[j] > max(s["clock"][k], mclock[k])
                     for k in range(n))
            c2 = mckpt[i] == s["ckpt"][i] and mtaken[i]
            if c1 or c2:
                forced.append(str(ev.message))
                checkpoint(i)
            s["clock"][i] = max(s["clock"][i], mclock[j])
            for k in range(n):
                if k == i:
                    continue
                s["clock"][k] = max(s["clock"][k], mclock[k])
                if mckpt[k] > s["ckpt"][k]:
                    s["ckpt"][k], s["taken"][k] = mckpt[k], mtaken[k]
                elif mckpt[k] == s["ckpt"][k]:
                    s["taken"][k] = s["taken"][k] or mtaken[k]
    return forced


def reference_forced(protocol: str, p: Pattern) -> tuple[str, ...]:
    """The ids of the deliveries at which ``protocol`` forces on ``p``, from the rules alone.

    ``protocol`` is ``"hmnr"`` or ``"bcs"``; the checkpoints of the basic schedule ``p`` are
    basic (forced flags ignored).
    """
    if protocol == "hmnr":
        return tuple(_hmnr(p))
    if protocol == "bcs":
        return tuple(_bcs(p))
    raise InvalidInputError(f"no independent reference for protocol {protocol!r}", location="protocol")


class OverForcingHMNR(HMNR):
    """WRONG on purpose (a mutant): HMNR plus the checkpoint-after-send rule.

    It also forces at every delivery that follows a send in the current interval. Still free of
    useless checkpoints — the safety properties cannot tell — but it forces far more than HMNR's
    conditions require.
    """

    name = "hmnr-over-forcing"
    description = "HMNR that also forces whenever it has sent in the current interval"

    def must_force(self, st: Any, src: int, pb: Any) -> bool:
        """Force whenever the process has sent in its current interval, else as HMNR does."""
        return any(st.sent_to) or super().must_force(st, src, pb)


def forced_schedules() -> st.SearchStrategy[Pattern]:
    """Basic schedules on 2–5 processes in which forcing decisions happen.

    Half random traffic with checkpoints, half Z-cycle motifs in random traffic
    (:func:`rollcheck.properties.strategies.zcycle_patterns`, which a CIC protocol must break by
    forcing).
    """
    from rollcheck.properties.strategies import weighted, zcycle_patterns

    return weighted((3, zcycle_patterns(max_processes=5, max_steps=20)), (2, _random_schedules()))


@st.composite
def _random_schedules(draw: Any) -> Pattern:
    n = draw(st.integers(2, 5), label="n")
    action = st.tuples(st.sampled_from((0, 0, 0, 1, 1, 1, 2, 2)), st.integers(0, 40), st.just(0))
    actions = draw(st.lists(action, min_size=12, max_size=48), label="actions")
    return build_from_actions(n, actions, topology_channels("complete", n), False)


_HMNR = get_protocol("hmnr")
_BCS = get_protocol("bcs")


def _compare(name: str, p: Pattern, protocol: Any) -> None:
    got = tuple(run_protocol(protocol, p).forced_messages)
    want = reference_forced(name, p)
    interesting(bool(want), "the reference forces at least once")
    if got != want:
        out = run_protocol(protocol, p).pattern
        extra = sorted(set(got) - set(want))
        missing = sorted(set(want) - set(got))
        raise PropertyViolation(
            f"{getattr(protocol, 'name', protocol)} forces before {list(got)}, the rules force before "
            f"{list(want)} (forced too much: {extra}; too little: {missing})", counterexample=out)


@prop("hmnr-forced-reference", target="hmnr", theorem="specs/protocols.md#hmnr", area="protocols",
      interesting="the reference forces at least once", floor=0.3)
@given(p=forced_schedules())
def hmnr_forced_reference(p: Pattern, protocol: Any = _HMNR) -> None:
    """HMNR forces exactly where its rules say (no more: minimality; no less: safety)."""
    _compare("hmnr", p, protocol)


@prop("bcs-forced-reference", target="bcs", theorem="specs/protocols.md#bcs", area="protocols",
      interesting="the reference forces at least once", floor=0.3)
@given(p=forced_schedules())
def bcs_forced_reference(p: Pattern, protocol: Any = _BCS) -> None:
    """BCS forces exactly where its rule says (no more, no less)."""
    _compare("bcs", p, protocol)


# ------------------------------------------------------------------------------------------------
# Interesting-example measures for the CIC properties of protocols_cic (judged with the independent
# reference above, never with the implementation under test).
# ------------------------------------------------------------------------------------------------
FORCES = "the rules force at least once"


def _forces(p: Pattern, name: str = "hmnr", **_: Any) -> bool:
    return bool(reference_forced(name if name in ("hmnr", "bcs") else "hmnr", p))


def _register_measures() -> None:
    import rollcheck.properties.protocols_cic  # noqa: F401  (registers the properties)
    from rollcheck.properties.registry import measure

    measure("hmnr-no-useless", FORCES, lambda p, **_: _forces(p, "hmnr"), floor=0.15)
    measure("bcs-no-useless", FORCES, lambda p, **_: _forces(p, "bcs"), floor=0.15)
    measure("bcs-index-lines-consistent", FORCES, lambda p, **_: _forces(p, "bcs"), floor=0.15)
    measure("cic-no-useless-dataflow", FORCES, lambda p, name, **_: _forces(p, name), floor=0.1)
    measure("protocol-forced-list", FORCES, lambda p, name, **_: _forces(p, name), floor=0.2)
    measure("protocol-keeps-basic", "a message still in transit at the end",
            lambda p, **_: len({e.message for e in p.events if e.kind == SEND})
            > len({e.message for e in p.events if e.kind == DELIVER}), floor=0.2)
    measure("protocol-fast-path-agrees", FORCES, lambda p, name, **_: _forces(p, name), floor=0.2)
    measure("basic-timer-restarts", "a forced checkpoint inside the run, followed by a basic one",
            lambda length, every, forced, **_: any(f + every < length for f in forced), floor=0.1)


_register_measures()
