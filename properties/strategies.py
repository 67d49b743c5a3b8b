"""Hypothesis strategies for checkpoint-and-communication patterns.

Patterns are drawn as short lists of *actions* (send on an allowed channel, deliver one pending
message, checkpoint) interpreted in order, so they shrink towards few processes, few events and
low indices. Variants: arbitrary non-FIFO traffic with in-transit messages, FIFO channels, and
traffic restricted to a dataflow topology (pipeline, scatter-gather, cyclic).
"""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import strategies as st

from rollcheck.pyimpl.pattern import Pattern, PatternBuilder

__all__ = ["patterns", "walk_patterns", "zcycle_patterns", "topology_channels", "TOPOLOGIES", "failed_sets",
           "checkpoint_sets", "cuts", "weighted"]

TOPOLOGIES = ("complete", "pipeline", "scatter", "cyclic")


def topology_channels(topology: str, n: int) -> list[tuple[int, int]]:
    """Directed channels of a topology on n processes.

    ``pipeline``: P0→P1→…; ``scatter``: P0 scatters to P1..P(n-2) which gather into P(n-1);
    ``cyclic``: the pipeline plus a back-channel from the last process to the first;
    ``complete``: every ordered pair.
    """
    if topology == "complete":
        return [(i, j) for i in range(n) for j in range(n) if i != j]
    if topology == "pipeline":
        return [(i, i + 1) for i in range(n - 1)]
    if topology == "scatter":
        if n < 3:
            return [(0, 1)]
        mid = range(1, n - 1)
        return [(0, k) for k in mid] + [(k, n - 1) for k in mid]
    if topology == "cyclic":
        return [(i, i + 1) for i in range(n - 1)] + [(n - 1, 0)]
    raise ValueError(f"unknown topology {topology!r}")


def build_from_actions(
    n: int, actions: Sequence[tuple[int, int, int]], channels: Sequence[tuple[int, int]], fifo: bool,
    deliver_all: bool = False,
) -> Pattern:
    """Interpret actions ``(kind, a, c)``.

    0 = send on channel a, 1 = deliver pending message number a (FIFO: the oldest on channel
    a), 2 = checkpoint process a (forced if c).
    """
    b = PatternBuilder(n)
    pending: list[tuple[str, int, int]] = []  # (id, src, dst)
    for kind, a, c in actions:
        if kind == 0:
            s, d = channels[a % len(channels)]
            pending.append((b.send(s, d), s, d))
        elif kind == 1 and pending:
            if fifo:
                s, d = channels[a % len(channels)]
                idx = next((k for k, m in enumerate(pending) if (m[1], m[2]) == (s, d)), None)
                if idx is None:
                    continue
            else:
                idx = a % len(pending)
            mid, _s, dst = pending.pop(idx)
            b.deliver(dst, mid)
        elif kind == 2:
            b.checkpoint(a % n, forced=bool(c))
    if deliver_all:
        for mid, _s, dst in pending:
            b.deliver(dst, mid)
    return b.build()


@st.composite
def patterns(
    draw: st.DrawFn,
    min_processes: int = 2,
    max_processes: int = 4,
    max_actions: int = 14,
    min_actions: int = 0,
    fifo: bool = False,
    topology: str | None = "complete",
    deliver_all: bool = False,
    forced: bool = False,
) -> Pattern:
    """A random pattern; ``topology=None`` draws one of :data:`TOPOLOGIES` too.

    With ``forced=True`` some checkpoints are marked forced (for format round trips).
    """
    n = draw(st.integers(min_processes, max_processes), label="n")
    topo = topology or draw(st.sampled_from(TOPOLOGIES), label="topology")
    if topo == "scatter":
        n = max(n, 3)
    channels = topology_channels(topo, n)
    action = st.tuples(st.sampled_from((0, 1, 2)), st.integers(0, 30), st.sampled_from((0, 1)) if forced else st.just(0))
    actions = draw(st.lists(action, min_size=min_actions, max_size=max_actions), label="actions")
    return build_from_actions(n, actions, channels, fifo, deliver_all)


def failed_sets(p: Pattern) -> st.SearchStrategy[frozenset[int]]:
    """Non-empty sets of failed processes of ``p``."""
    return st.frozensets(st.integers(0, p.n - 1), min_size=1)


def checkpoint_sets(p: Pattern) -> st.SearchStrategy[dict[int, int]]:
    """Sets of real checkpoints with at most one per process, as {process: index}."""
    return st.dictionaries(st.integers(0, p.n - 1), st.integers(0, 50), min_size=1).map(
        lambda d: {i: x % (p.last_index(i) + 1) for i, x in d.items()}
    )


def cuts(p: Pattern, allow_volatile: bool = True) -> st.SearchStrategy[tuple[int, ...]]:
    """Global checkpoints of ``p`` (index last+1 = volatile when allowed)."""
    top = [p.volatile_index(i) if allow_volatile else p.last_index(i) for i in range(p.n)]
    return st.tuples(*[st.integers(0, t) for t in top])


@st.composite
def walk_patterns(draw: st.DrawFn, min_processes: int = 2, max_processes: int = 4, max_steps: int = 30) -> Pattern:
    """Patterns made by a walk of control between processes.

    The active process sends, a pending message is delivered (control moves to its receiver), or
    a checkpoint is taken.

    Walks return to earlier processes, so Z-cycles (and useless checkpoints) are far more
    frequent than in uniform random traffic of the same size (~12–20% of draws against ~1% at
    30 events). The choices come from Hypothesis's controlled Random, so they shrink.
    """
    r = draw(st.randoms(use_true_random=False), label="walk")
    n = draw(st.integers(min_processes, max_processes), label="n")
    steps = draw(st.integers(0, max_steps), label="steps")
    b = PatternBuilder(n)
    pending: list[tuple[str, int]] = []
    cur = r.randrange(n)
    for _ in range(steps):
        x = r.random()
        if x < 0.35:
            d = r.randrange(n - 1)
            d += d >= cur
            pending.append((b.send(cur, d), d))
        elif x < 0.8 and pending:
            # mostly the latest message (quick round trips), sometimes any (non-FIFO)
            k = len(pending) - 1 if r.random() < 0.6 else r.randrange(len(pending))
            mid, d = pending.pop(k)
            b.deliver(d, mid)
            cur = d
        else:
            b.checkpoint(cur if r.random() < 0.7 else r.randrange(n))
            if r.random() < 0.3:
                cur = r.randrange(n)
    return b.build()


@st.composite
def zcycle_patterns(draw: st.DrawFn, min_processes: int = 2, max_processes: int = 4, max_steps: int = 14) -> Pattern:
    """Z-cycle-prone patterns: random traffic with the smallest non-causal Z-cycle motif.

    The motif (``specs/theorems.md#t2-netzer-xu``): P_j sends m to P_i, P_i delivers m, takes a
    checkpoint C and sends m' to P_j, and P_j delivers m' without a checkpoint since sending m —
    the Z-path m'·m leads from C back before C, so C is useless unless noise breaks the cycle
    (a checkpoint of P_j between the send of m and the delivery of m').
    """
    n = draw(st.integers(min_processes, max_processes), label="n")
    b = PatternBuilder(n)
    pending: list[tuple[str, int]] = []
    steps = draw(st.lists(st.tuples(st.sampled_from(("motif", "send", "deliver", "checkpoint")),
                                    st.integers(0, n - 1), st.integers(0, n - 2)),
                          min_size=0, max_size=max_steps), label="steps")
    for _ in range(draw(st.integers(1, 2), label="motifs")):  # at least one motif, anywhere
        at = draw(st.integers(0, len(steps)), label="motif position")
        steps.insert(at, ("motif", draw(st.integers(0, n - 1)), draw(st.integers(0, n - 2))))
    for kind, i, k in steps:
        j = k + (k >= i)  # a process other than i
        if kind == "motif":
            m = b.send(j, i)
            b.deliver(i, m)
            b.checkpoint(i)
            m2 = b.send(i, j)
            if draw(st.integers(0, 7), label="break the cycle") == 5:  # rarely: an interior value
                b.checkpoint(j)
            b.deliver(j, m2)
        elif kind == "send":
            pending.append((b.send(i, j), j))
        elif kind == "deliver" and pending:
            mid, d = pending.pop(k % len(pending))
            b.deliver(d, mid)
        else:
            b.checkpoint(i)
    return b.build()


def weighted(*choices: tuple[int, st.SearchStrategy[Pattern]]) -> st.SearchStrategy[Pattern]:
    """Draw from one of ``choices`` with the given integer weights (``st.one_of`` weighs equally)."""
    table = [s for w, s in choices for _ in range(w)]
    # Hypothesis favours the ends of an integer range: put the first (main) choice at both ends
    if len(table) > 2:
        table = table[1:] + table[:1]

    @st.composite
    def pick(draw: st.DrawFn) -> Pattern:
        return draw(table[draw(st.integers(0, len(table) - 1), label="branch")])

    return pick()
