"""Hypothesis strategies for protocol runs: random basic schedules on 2..5 processes, non-FIFO.

A *basic schedule* is a pattern whose checkpoints are all basic; a protocol run adds the forced
ones. Schedules are drawn as action lists (send on a channel / deliver a pending message /
checkpoint) so that they shrink towards few processes, few events and low indices; sends and
deliveries are drawn more often than checkpoints, as in a real run.
"""

from __future__ import annotations

from hypothesis import strategies as st

from rollcheck.properties.strategies import build_from_actions, topology_channels
from rollcheck.pyimpl.pattern import Pattern

__all__ = ["basic_schedules", "SCHEDULE_TOPOLOGIES"]

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
