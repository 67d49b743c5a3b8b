"""Properties of the checkpointing protocols on random basic schedules (``specs/protocols.md``).

Every property takes the implementation under test as a keyword argument with the reference as
default, so the mutation catalogue (``properties/mutants_protocols.py``) substitutes a variant:
``run_property("hmnr-no-useless", protocol=HMNRNoC1())``. A failure raises
:class:`~rollcheck.pyimpl.errors.PropertyViolation` whose ``counterexample`` is the offending pattern (the
protocol's output, forced checkpoints marked).
"""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from rollcheck.properties.protocol_strategies import basic_schedules, protocol_schedules
from rollcheck.properties.registry import prop
from rollcheck.pyimpl.consistency import is_consistent
from rollcheck.pyimpl.errors import PropertyViolation
from rollcheck.pyimpl.pattern import CHECKPOINT, DELIVER, Event, Pattern
from rollcheck.pyimpl.protocols import (
    BCS,
    HMNR,
    PROTOCOLS,
    BasicTimer,
    Protocol,
    count_schedule,
    get_protocol,
    run_protocol,
)
from rollcheck.pyimpl.protocols.fast import forced_deliveries
from rollcheck.pyimpl.zpaths import useless_checkpoints, zcycle_checkpoints

__all__ = [
    "schedules",
    "dataflow_schedules",
    "zigzag",
    "check_no_useless",
    "check_bcs_lines",
    "check_forced_list",
    "check_keeps_basic",
    "check_fast_agrees",
    "check_timer",
    "bcs_checkpoint_indices",
]

#: The schedules every protocol property draws from (n = 2..5, non-FIFO, in-transit messages).
schedules = basic_schedules(min_processes=2, max_processes=5, max_actions=48)
#: Dataflow-shaped schedules: FIFO channels of a pipeline, scatter-gather, cycle or complete graph.
dataflow_schedules = basic_schedules(min_processes=3, max_processes=5, max_actions=48, topology=None, fifo=True)
#: Z-cycle-prone schedules (zig-zag motifs mixed with random traffic; n = 2..4, <= 30 events), the
#: schedules of ``rollcheck check protocol`` (``specs/protocols.md#your-protocol``).
zigzag = protocol_schedules(min_processes=2, max_processes=4, max_events=30)
_HMNR = HMNR()
_BCS = BCS()


def _fail(message: str, p: Pattern) -> None:
    raise PropertyViolation(message, counterexample=p)


def check_no_useless(p: Pattern, protocol: Protocol) -> Pattern:
    """Run ``protocol`` on ``p``; raise unless its output has no useless checkpoint.

    The SCC test is cross-checked with the Z-cycle definition. Returns the output pattern.

    Parameters
    ----------
    p : Pattern
        The basic schedule.
    protocol : Protocol
        The protocol run on it.

    Returns
    -------
    Pattern
        The protocol's output, forced checkpoints marked.

    Raises
    ------
    PropertyViolation
        A useless checkpoint, or the two useless-checkpoint tests disagree.
    """
    out = run_protocol(protocol, p).pattern
    useless = useless_checkpoints(out)
    on_cycle = [c for c in zcycle_checkpoints(out) if c.index > 0]
    if useless != on_cycle:
        _fail(f"SCC test {useless} disagrees with the Z-cycle search {on_cycle}", out)
    if useless:
        names = ", ".join(out.checkpoint_name(c) for c in useless)
        _fail(f"{protocol.name}: useless checkpoint(s) {names}", out)
    return out


@prop("hmnr-no-useless", target="hmnr", theorem="specs/protocols.md#thm-cic-no-useless")
@given(p=schedules)
def hmnr_no_useless(p: Pattern, protocol: Protocol = _HMNR) -> None:
    """HMNR never leaves a useless checkpoint (no checkpoint on a Z-cycle).

    Parameters
    ----------
    p : Pattern
        A basic schedule (drawn by Hypothesis).
    protocol : Protocol, optional
        The protocol checked (a mutation-catalogue variant replaces the reference).
    """
    check_no_useless(p, protocol)


@prop("bcs-no-useless", target="bcs", theorem="specs/protocols.md#thm-cic-no-useless")
@given(p=schedules)
def bcs_no_useless(p: Pattern, protocol: Protocol = _BCS) -> None:
    """BCS never leaves a useless checkpoint.

    Parameters
    ----------
    p : Pattern
        A basic schedule (drawn by Hypothesis).
    protocol : Protocol, optional
        The protocol checked (a mutation-catalogue variant replaces the reference).
    """
    check_no_useless(p, protocol)


@prop("cic-no-useless-dataflow", target="protocols", theorem="specs/protocols.md#thm-cic-no-useless")
@given(p=dataflow_schedules, name=st.sampled_from(("bcs", "hmnr")))
def cic_no_useless_dataflow(p: Pattern, name: str, get: Any = get_protocol) -> None:
    """BCS and HMNR leave no useless checkpoint on FIFO dataflow topologies either.

    Parameters
    ----------
    p : Pattern
        A FIFO dataflow schedule (drawn by Hypothesis).
    name : str
        ``bcs`` or ``hmnr``.
    get : callable, optional
        ``get(name) -> Protocol`` (a variant replaces the reference lookup).
    """
    check_no_useless(p, get(name))


@prop("cic-no-useless-zigzag", target="protocols", theorem="specs/protocols.md#thm-cic-no-useless")
@given(p=zigzag, name=st.sampled_from(("bcs", "hmnr")))
def cic_no_useless_zigzag(p: Pattern, name: str, get: Any = get_protocol) -> None:
    """BCS and HMNR leave no useless checkpoint on Z-cycle-prone (zig-zag) schedules either.

    Parameters
    ----------
    p : Pattern
        A zig-zag schedule (drawn by Hypothesis).
    name : str
        ``bcs`` or ``hmnr``.
    get : callable, optional
        ``get(name) -> Protocol`` (a variant replaces the reference lookup).
    """
    check_no_useless(p, get(name))


def bcs_checkpoint_indices(out: Pattern, protocol: Protocol) -> list[list[int]]:
    """Replay a BCS-like protocol over its output pattern: per process, the lc of each checkpoint.

    Index 0 first; a forced checkpoint gets the lc adopted at the delivery it precedes.

    Parameters
    ----------
    out : Pattern
        The protocol's output pattern.
    protocol : Protocol
        A BCS-like protocol (its states carry ``lc``).

    Returns
    -------
    list of list of int
        ``lcs[i][x]``: the lc of checkpoint ``x`` of process ``i``.
    """
    n = out.n
    sender = {m.id: m.sender for m in out.messages}
    states = [protocol.initial(i, n) for i in range(n)]
    lcs: list[list[int]] = [[states[i].lc] for i in range(n)]
    pbs: dict[str, Any] = {}
    pending_forced = [False] * n
    for ev in out.events:
        i = ev.process
        if ev.kind == CHECKPOINT:
            states[i] = protocol.on_checkpoint(states[i])
            lcs[i].append(states[i].lc)
            pending_forced[i] = ev.forced
        elif ev.kind == DELIVER:
            src = sender[ev.message]  # type: ignore[index]
            states[i] = protocol.on_deliver(states[i], src, pbs[ev.message])  # type: ignore[index]
            if pending_forced[i]:
                lcs[i][-1] = states[i].lc
            pending_forced[i] = False
        else:
            states[i], pbs[ev.message] = protocol.on_send(states[i], ev.to)  # type: ignore[index, arg-type]
            pending_forced[i] = False
    return lcs


@prop("bcs-index-lines-consistent", target="bcs", theorem="specs/protocols.md#thm-bcs-lines")
@given(p=schedules)
def bcs_index_lines_consistent(p: Pattern, protocol: Protocol = _BCS) -> None:
    """For every L, each process's first checkpoint with lc >= L makes a consistent global one.

    A process without one contributes its volatile state.

    Parameters
    ----------
    p : Pattern
        A basic schedule (drawn by Hypothesis).
    protocol : Protocol, optional
        The protocol checked (a mutation-catalogue variant replaces the reference).
    """
    check_bcs_lines(p, protocol)


def check_bcs_lines(p: Pattern, protocol: Protocol) -> None:
    """Raise unless every BCS index line of ``protocol``'s output on ``p`` is consistent.

    Parameters
    ----------
    p : Pattern
        The basic schedule.
    protocol : Protocol
        A BCS-like protocol run on it.

    Raises
    ------
    PropertyViolation
        Naming the level whose cut is inconsistent.
    """
    out = run_protocol(protocol, p).pattern
    lcs = bcs_checkpoint_indices(out, protocol)
    top = max(max(x) for x in lcs)
    for level in range(1, top + 1):
        cut = [next((x for x, lc in enumerate(lcs[i]) if lc >= level), out.volatile_index(i)) for i in range(out.n)]
        if not is_consistent(out, cut):
            _fail(f"{protocol.name}: checkpoints with lc >= {level} form the inconsistent cut {cut}", out)


def _forced_by_position(out: Pattern) -> tuple[str, ...]:
    """Deliveries whose process's previous event is a forced checkpoint, in event order."""
    last: dict[int, Event] = {}
    got = []
    for ev in out.events:
        prev = last.get(ev.process)
        if ev.kind == DELIVER and prev is not None and prev.kind == CHECKPOINT and prev.forced:
            got.append(ev.message)
        last[ev.process] = ev
    return tuple(got)  # type: ignore[arg-type]


@prop("protocol-forced-list", target="protocols", theorem="specs/protocols.md#thm-forced-list")
@given(p=schedules, name=st.sampled_from(PROTOCOLS))
def protocol_forced_list(p: Pattern, name: str, run: Any = run_protocol) -> None:
    """The reported forced list is exactly the deliveries preceded by a forced checkpoint.

    Every forced checkpoint precedes a delivery, and the counts agree.

    Parameters
    ----------
    p : Pattern
        A basic schedule (drawn by Hypothesis).
    name : str
        The protocol's registered name (``bcs``, ``hmnr``, ...).
    run : callable, optional
        ``run(name, p)``, the protocol runner checked.
    """
    check_forced_list(p, name, run)


def check_forced_list(p: Pattern, name: str, run: Any) -> None:
    """Raise unless ``run(name, p)`` reports exactly the deliveries after a forced checkpoint.

    Parameters
    ----------
    p : Pattern
        The basic schedule.
    name : str
        The protocol's registered name (``bcs``, ``hmnr``, ...).
    run : callable
        ``run(name, p) -> ProtocolRun``.

    Raises
    ------
    PropertyViolation
        The list or the counts disagree.
    """
    r = run(name, p)
    out = r.pattern
    got = _forced_by_position(out)
    if tuple(r.forced_messages) != got:
        _fail(f"{name}: forced list {list(r.forced_messages)} != deliveries after a forced checkpoint {list(got)}", out)
    n_forced = sum(1 for e in out.events if e.kind == CHECKPOINT and e.forced)
    if n_forced != len(got) or r.forced_checkpoints != n_forced:
        _fail(f"{name}: {n_forced} forced checkpoints, {len(got)} forced deliveries, reported {r.forced_checkpoints}", out)


@prop("protocol-keeps-basic", target="protocols", theorem="specs/protocols.md#thm-keeps-basic")
@given(p=schedules, name=st.sampled_from(PROTOCOLS))
def protocol_keeps_basic(p: Pattern, name: str, run: Any = run_protocol) -> None:
    """Removing the forced checkpoints from the output gives back the input schedule.

    The basic count is the input's number of checkpoints.

    Parameters
    ----------
    p : Pattern
        A basic schedule (drawn by Hypothesis).
    name : str
        The protocol's registered name (``bcs``, ``hmnr``, ...).
    run : callable, optional
        ``run(name, p)``, the protocol runner checked.
    """
    check_keeps_basic(p, name, run)


def check_keeps_basic(p: Pattern, name: str, run: Any) -> None:
    """Raise unless ``run(name, p)`` keeps the input schedule and reports its basic count.

    Parameters
    ----------
    p : Pattern
        The basic schedule.
    name : str
        The protocol's registered name (``bcs``, ``hmnr``, ...).
    run : callable
        ``run(name, p) -> ProtocolRun``.

    Raises
    ------
    PropertyViolation
        The schedule changed or the basic count is wrong.
    """
    r = run(name, p)
    stripped = tuple(e for e in r.pattern.events if not (e.kind == CHECKPOINT and e.forced))
    if stripped != p.events or r.pattern.processes != p.processes:
        _fail(f"{name}: the output without forced checkpoints is not the input schedule", p)
    basic = sum(1 for e in p.events if e.kind == CHECKPOINT)
    if r.basic_checkpoints != basic:
        _fail(f"{name}: reported {r.basic_checkpoints} basic checkpoints, the input has {basic}", r.pattern)


@prop("protocol-fast-path-agrees", target="protocols", theorem="specs/protocols.md#fast")
@given(p=schedules, name=st.sampled_from(("bcs", "hmnr")), backend=st.sampled_from(("python", "numpy")))
def protocol_fast_path_agrees(p: Pattern, name: str, backend: str, fast: Any = forced_deliveries) -> None:
    """The fast kernels (python lists, numpy) decide exactly like the state machines.

    Parameters
    ----------
    p : Pattern
        A basic schedule (drawn by Hypothesis).
    name : str
        ``bcs`` or ``hmnr``.
    backend : str
        ``python`` or ``numpy``.
    fast : callable, optional
        ``fast(name, p, backend)``, the fast kernel checked.
    """
    check_fast_agrees(p, name, backend, fast)


def check_fast_agrees(p: Pattern, name: str, backend: str, fast: Any) -> None:
    """Raise unless the fast kernel ``fast`` forces where the state machine of ``name`` does.

    Parameters
    ----------
    p : Pattern
        The basic schedule.
    name : str
        ``bcs`` or ``hmnr``.
    backend : str
        ``python`` or ``numpy``.
    fast : callable
        ``fast(name, p, backend) -> iterable of message ids``.

    Raises
    ------
    PropertyViolation
        The forced deliveries differ.
    """
    want = run_protocol(name, p).forced_messages
    got = tuple(fast(name, p, backend))
    if got != want:
        _fail(f"{name}/{backend}: fast path forces {list(got)}, state machine {list(want)}", p)


@prop("basic-timer-restarts", target="timer", theorem="specs/protocols.md#thm-timer")
@given(
    length=st.integers(0, 40),
    every=st.integers(1, 6),
    forced=st.sets(st.integers(0, 39), max_size=8),
)
def basic_timer_restarts(length: int, every: int, forced: set[int], schedule: Any = count_schedule) -> None:
    """A basic checkpoint is taken exactly ``every`` events after the latest checkpoint.

    The latest checkpoint may be basic or forced; never earlier.

    Parameters
    ----------
    length : int
        Events of the process.
    every : int
        The timer's period in events.
    forced : set of int
        Positions of forced checkpoints.
    schedule : callable, optional
        ``schedule(events, every, forced)``, the timer checked.
    """
    check_timer(length, every, forced, schedule)


def check_timer(length: int, every: int, forced: set[int], schedule: Any) -> None:
    """Raise unless ``schedule`` places basic checkpoints exactly ``every`` events apart.

    Distances are counted from the latest checkpoint, basic or one of the ``forced`` positions.

    Parameters
    ----------
    length : int
        Events of the process.
    every : int
        The timer's period in events.
    forced : set of int
        Positions of forced checkpoints (those at or past ``length`` are ignored).
    schedule : callable
        ``schedule(events, every, forced) -> positions of basic checkpoints``.

    Raises
    ------
    PropertyViolation
        A checkpoint too early, or a gap of ``every`` events without one.
    """
    forced_at = sorted(f for f in forced if f < length)
    basic = schedule(["send"] * length, every, forced_at)
    marks = sorted([(b, "basic") for b in basic] + [(f, "forced") for f in forced_at])
    last = 0
    for pos, kind in marks:
        if kind == "basic" and pos - last != every:
            raise PropertyViolation(f"basic checkpoint at {pos}, {pos - last} after the previous one (every={every})")
        last = pos
    if length - 1 >= last + every:
        raise PropertyViolation(f"no checkpoint between {last} and the end {length - 1} (every={every})")
    assert BasicTimer(every, last).deadline == last + every
