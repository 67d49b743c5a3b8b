"""Hypothesis strategies for protocol runs.

Random basic schedules on 2..5 processes, non-FIFO, and Z-cycle-prone zig-zag schedules
(:func:`zigzag_schedules`).

A *basic schedule* is a pattern whose checkpoints are all basic; a protocol run adds the forced
ones. Schedules are drawn as action lists (send on a channel / deliver a pending message /
checkpoint) so that they shrink towards few processes, few events and low indices; sends and
deliveries are drawn more often than checkpoints, as in a real run.
"""

from __future__ import annotations

from hypothesis import strategies as st

from rollcheck.properties.strategies import build_from_actions, topology_channels
from rollcheck.pyimpl.pattern import Pattern, PatternBuilder

__all__ = ["basic_schedules", "zigzag_schedules", "protocol_schedules", "SCHEDULE_TOPOLOGIES"]

SCHEDULE_TOPOLOGIES = ("complete", "pipeline", "scatter", "cyclic")

# kind 0 = send, 1 = deliver, 2 = checkpoint; weights 3 : 3 : 1. One integer per action
# (v % 7 picks the kind, v // 7 the channel or pending message): one draw per action keeps
# generation and shrinking cheap, and v shrinks towards "deliver the oldest pending message"
# (a no-op when nothing is pending), so shrunk schedules have few messages in transit.
_KINDS = (1, 1, 1, 0, 0, 0, 2)
_ARG = 41


@st.composite
def basic_schedules(
    draw: st.DrawFn,
    min_processes: int = 2,
    max_processes: int = 5,
    max_actions: int = 48,
    topology: str | None = "complete",
    fifo: bool = False,
) -> Pattern:
    """A random basic schedule (no forced checkpoints); ``topology=None`` draws a topology too.

    Examples
    --------
    >>> from hypothesis import find
    >>> p = find(basic_schedules(), lambda p: p.num_messages >= 2)
    >>> p.n >= 2 and not any(e.forced for e in p.events)
    True
    """
    n = draw(st.integers(min_processes, max_processes), label="n")
    topo = topology or draw(st.sampled_from(SCHEDULE_TOPOLOGIES), label="topology")
    if topo == "scatter":
        n = max(n, 3)
    channels = topology_channels(topo, n)
    action = st.integers(0, len(_KINDS) * _ARG - 1).map(lambda v: (_KINDS[v % len(_KINDS)], v // len(_KINDS), 0))
    # The length is drawn first, uniformly (Hypothesis's own lists average about five elements,
    # too short for the Z-cycles that a broken protocol leaves); it still shrinks towards 0.
    size = draw(st.integers(0, max_actions), label="size")
    actions = draw(st.lists(action, min_size=size, max_size=size), label="actions")
    return build_from_actions(n, actions, channels, fifo)


# --- Z-cycle-prone schedules ------------------------------------------------------------------
#
# A checkpoint C[i,x] is useless iff a Z-path leads from C[i,x] back to C[i,x]: a chain of messages
# m_0, ..., m_{k-1} around processes c_0 = i, c_1, ..., c_{k-1} where m_0 leaves c_0 after C[i,x],
# m_{k-1} reaches c_0 before it, and at every intermediate c_t the message m_t is sent in the same
# or a later checkpoint interval than the one that delivered m_{t-1}. Such a chain needs at least
# one *non-causal* hop (c_t sends m_t before it delivers m_{t-1}, with no checkpoint in between);
# uniform random traffic rarely builds one. A *zig-zag motif* builds exactly that chain, and a
# schedule interleaves a few motifs with random background traffic, so that a protocol which
# fails to break some Z-cycle meets one within a few dozen examples (FERDiS paper §5.3; the
# Z-path definition of Netzer and Xu).


def _motif_events(cycle: list[int], brk: int, hop_ckpt: list[bool], before: int, tag: int,
                  lead: int = 0) -> list[tuple[str, int, int, str]]:
    """The events of one zig-zag motif as ``(kind, process, peer, message)`` tuples.

    In a causal order: ``lead`` checkpoints on c_brk, the tail m_brk..m_{k-1} (ending at c_0),
    ``before`` checkpoints on c_0, then the head m_0..m_{brk-1} (ending at c_brk, which sent
    m_brk earlier in the same interval).
    """
    k = len(cycle)
    ev: list[tuple[str, int, int, str]] = []
    mid = [f"z{tag}_{t}" for t in range(k)]

    def hop(t: int) -> None:  # c_t sends m_t to c_{t+1}
        ev.append(("send", cycle[t], cycle[(t + 1) % k], mid[t]))

    def arrive(t: int) -> None:  # c_{t+1} delivers m_t
        ev.append(("deliver", cycle[(t + 1) % k], cycle[t], mid[t]))

    # checkpoints before the non-causal send raise c_brk's indices without breaking the cycle
    ev.extend(("checkpoint", cycle[brk], -1, "") for _ in range(lead))
    # tail: c_brk sends m_brk, then causally onwards to c_0
    for t in range(brk, k):
        if t > brk and hop_ckpt[t]:
            ev.append(("checkpoint", cycle[t], -1, ""))
        hop(t)
        arrive(t)
    ev.extend(("checkpoint", cycle[0], -1, "") for _ in range(before))
    # head: c_0 sends m_0, causally onwards to c_brk, which delivers m_{brk-1}
    for t in range(brk):
        if t > 0 and hop_ckpt[t]:
            ev.append(("checkpoint", cycle[t], -1, ""))
        hop(t)
        arrive(t)
    return ev


@st.composite
def zigzag_schedules(
    draw: st.DrawFn,
    min_processes: int = 2,
    max_processes: int = 4,
    max_events: int = 30,
    max_motifs: int = 4,
) -> Pattern:
    """A basic schedule built around zig-zag motifs: Z-cycle-prone on purpose.

    Each motif is a cycle of messages through 2..n distinct processes with one non-causal hop and
    one to three checkpoints on the first process between the cycle's arrival and its departure
    (under UC that checkpoint is useless unless other events break the cycle). Up to
    ``max_motifs`` motifs are interleaved with each other and with random background traffic
    (sends, deliveries of pending messages, checkpoints), and the schedule is cut to
    ``max_events`` events (deliveries of cut sends are dropped with them).

    Parameters
    ----------
    min_processes, max_processes : int
        Bounds on the number of processes (at least 2).
    max_events : int
        Bound on the number of events of the schedule.
    max_motifs : int
        Bound on the number of zig-zag motifs (at least 1).

    Examples
    --------
    >>> from hypothesis import find
    >>> from rollcheck.pyimpl.protocols import run_protocol
    >>> from rollcheck.pyimpl.zpaths import useless_checkpoints
    >>> p = find(zigzag_schedules(), lambda p: bool(useless_checkpoints(run_protocol("uc", p).pattern)))
    >>> p.n, len(p.events)      # shrinks to the classic two-process Z-cycle
    (2, 5)

    References
    ----------
    FERDiS paper §5.3 (Z-cycles and useless checkpoints); ``specs/protocols.md#your-protocol``.
    """
    if min_processes < 2 or max_processes < min_processes:
        raise ValueError(f"need 2 <= min_processes <= max_processes, got {min_processes}, {max_processes}")
    n = draw(st.integers(min_processes, max_processes), label="n")
    motifs = draw(st.integers(1, max(1, max_motifs)), label="motifs")
    streams: list[list[tuple[str, int, int, str]]] = []
    for tag in range(motifs):
        k = draw(st.integers(2, n), label="cycle length")
        cycle = draw(st.permutations(range(n)), label="cycle")[:k]
        brk = draw(st.integers(1, k - 1), label="non-causal hop")
        hop_ckpt = draw(st.lists(st.booleans(), min_size=k, max_size=k), label="checkpoints on the way")
        before = draw(st.integers(1, 3), label="checkpoints on c0")
        lead = draw(st.integers(0, 2), label="checkpoints on the non-causal hop")
        streams.append(_motif_events(cycle, brk, hop_ckpt, before, tag, lead))
    # background traffic: (kind, a, b) with kind 0 send a->b, 1 deliver a pending one, 2 checkpoint a
    noise = draw(st.lists(st.tuples(st.integers(0, 2), st.integers(0, n - 1), st.integers(0, n - 1)),
                          max_size=max_events // 3), label="background")
    streams.append([("noise", a, b, str(kind)) for kind, a, b in noise])
    # interleave the streams: each step picks the stream that advances (shrinks to "in order")
    order = draw(st.lists(st.integers(0, len(streams) - 1), max_size=sum(map(len, streams))),
                 label="interleaving")
    pos = [0] * len(streams)
    merged: list[tuple[str, int, int, str]] = []
    for s in order:
        if pos[s] < len(streams[s]):
            merged.append(streams[s][pos[s]])
            pos[s] += 1
    for s, stream in enumerate(streams):
        merged.extend(stream[pos[s]:])

    b = PatternBuilder(n)
    pending: list[tuple[str, int]] = []  # background messages in transit: (id, receiver)
    sent: set[str] = set()
    count = 0
    for kind, proc, peer, name in merged:
        if count >= max_events:
            break
        if kind == "send":
            b.send(proc, peer, name)
            sent.add(name)
        elif kind == "deliver":
            if name not in sent:
                continue
            b.deliver(proc, name)
        elif kind == "checkpoint":
            b.checkpoint(proc)
        else:  # background
            if name == "0" and proc != peer:
                pending.append((b.send(proc, peer, f"r{count}"), peer))
            elif name == "1" and pending:
                mid, dst = pending.pop(proc % len(pending))
                b.deliver(dst, mid)
            elif name == "2":
                b.checkpoint(proc)
            else:
                continue
        count += 1
    return b.build()


@st.composite
def protocol_schedules(draw: st.DrawFn, min_processes: int = 2, max_processes: int = 4,
                       max_events: int = 30) -> Pattern:
    """The schedules ``rollcheck check protocol`` draws.

    Zig-zag schedules (three draws in four, :func:`zigzag_schedules`) mixed with uniform random
    basic schedules of the same size (traffic without a planted cycle). Shrinks towards a zig-zag
    schedule.

    Examples
    --------
    >>> from hypothesis import find
    >>> find(protocol_schedules(max_processes=3), lambda p: p.n == 3).n
    3
    """
    if draw(st.integers(0, 3), label="plain") < 3:
        return draw(zigzag_schedules(min_processes, max_processes, max_events))
    return draw(basic_schedules(min_processes, max_processes, max_actions=max_events))
