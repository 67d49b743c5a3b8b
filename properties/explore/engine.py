"""The exhaustive walk: every basic schedule of ``n`` processes and at most ``E`` events, each
partial order once, with the protocol run incrementally along the tree.

**Schedules.** A basic schedule is, per process, a sequence of events — a basic checkpoint, a
send to another process, or the delivery of a message sent to it (in any order: channels are not
FIFO) — plus the matching of deliveries to sends. A word is one interleaving of it; an event is
written ``(p, kind, arg)`` with kind :data:`CKPT` (arg 0), :data:`SEND` (arg: the destination) or
:data:`DELIVER` (arg: the position of the message's send in the word).

**Partial-order reduction.** The protocol's decisions depend only on each process's own sequence
and on the piggybacks, i.e. on the partial order, not on the interleaving. The walk generates only
the lexicographically least interleaving of each partial order (events compared by process id):
appending an event of process ``p`` is allowed iff no event after the last one ``p``'s event
depends on (``p``'s previous event; for a delivery, also its send) belongs to a process with a
larger id. This test looks at the prefix only, so every prefix of a canonical word is canonical and
a depth-first walk yields every partial order exactly once (Anisimov and Knuth's characterisation
of lexicographic normal forms of traces).

**Symmetry** (optional, for protocols that claim ``symmetric``): a process may start only after
every lower-numbered process has started. Every renaming class still has a representative (rename
the processes in the order in which they first act in the least interleaving), so nothing is lost;
the caller verifies the claim first.

**Incremental protocol and Z-cycle check.** The protocol state of every process, the messages in
transit and the delivered messages are updated in place and restored on backtracking (prefix
sharing: each node costs the calls of one event). At a delivery the walk asks whether it closes a
Z-cycle (:func:`~rollcheck.properties.explore.zcycle.zcycle_through_last`); a useless checkpoint
stays useless in every extension, so the branch stops there. The walk then only looks for strictly
smaller counterexamples, so the one it returns has the fewest events, and among those the least
word: the same result however the tree is split.

References
----------
A. V. Anisimov and D. E. Knuth, "Inhomogeneous sorting", Int. J. Comput. Inf. Sci. 8, 1979;
P. Godefroid, *Partial-Order Methods for the Verification of Concurrent Systems*, LNCS 1032, 1996;
FERDiS paper §5.1–§5.3; ``specs/protocols.md#exhaustive``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from rollcheck.properties.explore.zcycle import zcycle_through_last

__all__ = ["CKPT", "SEND", "DELIVER", "Violation", "WalkResult", "WalkError", "NotBool", "walk",
           "rollback_excess"]

#: Event kinds of a word.
CKPT, SEND, DELIVER = 0, 1, 2


class _Budget(Exception):
    """The deadline passed."""


class NotBool(Exception):
    """``must_force`` returned something other than True or False (the value is ``args[0]``)."""


class WalkError(Exception):
    """The protocol's code failed during the walk; ``word`` is the schedule up to and including
    the event at which it failed, ``__cause__`` the exception."""

    def __init__(self, word: tuple[Any, ...]):
        super().__init__(f"the protocol failed on a schedule of {len(word)} events")
        self.word = word


@dataclass(frozen=True, order=True)
class Violation:
    """A violating schedule: ``events`` long, ``word`` its least interleaving.

    ``what`` is ``("zcycle", process, first, last)`` (C[process, first..last] useless) or
    ``("rollback", failed, process, lost)``.
    """

    events: int
    word: tuple[tuple[int, int, int], ...]
    what: tuple[Any, ...] = field(compare=False)


@dataclass
class WalkResult:
    """What one walk saw: ``schedules`` nodes (schedules) visited, whether it ended by itself
    (``complete``), the best (smallest) violation, and the split frontier (when asked)."""

    schedules: int = 0
    complete: bool = True
    best: Violation | None = None
    frontier: list[tuple[tuple[int, int, int], ...]] = field(default_factory=list)


def rollback_excess(n: int, nck: list[int], msgs: list[tuple[int, int, int, int]],
                    bound: int) -> tuple[int, int, int] | None:
    """``(failed, process, lost)`` if a single failure discards more than ``bound`` checkpoints.

    ``nck[i]`` is the index of P_i's latest checkpoint, ``msgs`` the delivered messages
    ``(src, sint, dst, dint)``. The recovery line is the maximum consistent cut below (failed:
    latest checkpoint, others: volatile state), by orphan elimination.

    Examples
    --------
    >>> rollback_excess(2, [1, 3], [(0, 1, 1, 0)], 2)    # P0 fails: P1 back to C[1,0]
    (0, 1, 3)
    """
    for f in range(n):
        cut = [nck[i] + (0 if i == f else 1) for i in range(n)]
        changed = True
        while changed:
            changed = False
            for s, si, r, di in msgs:
                if si >= cut[s] and di < cut[r]:
                    cut[r] = di
                    changed = True
        for i in range(n):
            lost = nck[i] - cut[i]
            if lost > bound:
                return (f, i, lost)
    return None


def walk(n: int, max_events: int, calls: Any = None, *, prefix: tuple[Any, ...] = (),
         limit: int | None = None, split_at: int | None = None, deadline: float | None = None,
         symmetric: bool = False, zcycles: bool = True, rollback_bound: int | None = None
         ) -> WalkResult:
    """Walk every canonical schedule below ``prefix``.

    Parameters
    ----------
    n : int
        Processes (>= 2).
    max_events : int
        At most this many basic events per schedule.
    calls : ProtocolCalls or None
        The protocol (``initial``, ``on_checkpoint(st, forced)``, ``on_send``, ``must_force``,
        ``on_deliver``); None walks the schedules alone (no forced checkpoint).
    prefix : tuple of events
        Start below this canonical word (counted by whoever produced it, not here).
    limit : int, optional
        Expand no node of this many events or more (default ``max_events``).
    split_at : int, optional
        Do not expand nodes of this depth: return them as the frontier (counted here).
    deadline : float, optional
        ``time.monotonic()`` value after which the walk stops (``complete`` False).
    symmetric : bool
        One representative per renaming of the processes.
    zcycles : bool
        Stop at (and report) the first useless checkpoint of each branch.
    rollback_bound : int, optional
        Also report a single failure that discards more than this many checkpoints.

    Returns
    -------
    WalkResult

    Examples
    --------
    Every schedule of 2 processes with at most 2 events, each partial order once:

    >>> walk(2, 2, zcycles=False).schedules
    19
    >>> r = walk(2, 5)                  # no protocol: UC's smallest useless checkpoint
    >>> r.best.events, r.best.word, r.best.what
    (5, ((0, 1, 1), (1, 2, 0), (1, 0, 0), (1, 1, 0), (0, 2, 3)), ('zcycle', 1, 1, 1))
    """
    if n < 2:
        raise ValueError(f"need at least 2 processes, got {n}")
    lim = [max_events if limit is None else min(limit, max_events)]
    res = WalkResult()
    st: list[Any] = [None] * n
    if calls is not None:
        try:
            st = [calls.initial(i, n) for i in range(n)]
        except Exception as e:
            raise WalkError(()) from e
        ckpt = calls.on_checkpoint
        send = calls.on_send
        force = calls.must_force
        deliver = calls.on_deliver
    last = [-1] * n
    nck = [0] * n
    word: list[tuple[int, int, int]] = []
    transit: list[tuple[int, int, int, Any, int]] = []  # (pos, src, dst, pb, sint)
    dlv: list[tuple[int, int, int, int]] = []           # (src, sint, dst, dint)
    active = [0]
    count = [0]
    check_at = [4096]
    # per process: the latest send interval of its delivered messages, the earliest delivery
    # interval of those delivered to it (a cheap necessary condition for a new Z-cycle)
    dsmax = [-1] * n
    ddmin = [1 << 30] * n
    frontier = res.frontier
    now = time.monotonic
    has_calls = calls is not None
    rb = rollback_bound

    def found(depth: int, what: tuple[Any, ...]) -> None:
        v = Violation(depth, tuple(word), what)
        if res.best is None or v < res.best:
            res.best = v
        lim[0] = min(lim[0], depth - 1)

    def node(depth: int) -> None:
        if depth >= lim[0]:
            return
        if depth == split_at:
            frontier.append(tuple(word))
            return
        suf = [-1] * (n + 1)
        for q in range(n - 1, -1, -1):
            lq = last[q]
            suf[q] = lq if lq > suf[q + 1] else suf[q + 1]
        nd = depth + 1
        if nd >= lim[0] and rb is None:
            # the children are leaves: a checkpoint or a send cannot close a Z-cycle, so they are
            # counted without calling the protocol; a delivery needs only must_force (its interval)
            for p in range(n):
                lp = last[p]
                if lp < 0 and symmetric and p != active[0]:
                    continue
                s = suf[p + 1]
                if s <= lp:
                    count[0] += n  # a checkpoint and n - 1 sends
                s0 = st[p]
                for j in range(len(transit)):
                    m = transit[j]
                    if m[2] != p or (s > lp and s > m[0]):
                        continue
                    count[0] += 1
                    if not zcycles:
                        continue
                    word.append((p, DELIVER, m[0]))
                    forced = False
                    if has_calls:
                        forced = force(s0, m[1], m[3])
                        if forced is not True and forced is not False:
                            raise NotBool(forced)
                    # a cycle through m needs a delivered message from p sent in m's interval or
                    # later, and one delivered to m's sender in the send's interval or earlier
                    di = nck[p] + 1 if forced else nck[p]
                    if dsmax[p] >= di and ddmin[m[1]] <= m[4]:
                        dlv.append((m[1], m[4], p, di))
                        bad = zcycle_through_last(dlv)
                        dlv.pop()
                        if bad:
                            found(nd, ("zcycle",) + bad)
                    word.pop()
            if deadline is not None and count[0] >= check_at[0]:
                check_at[0] = count[0] + 4096
                if now() > deadline:
                    raise _Budget
            return
        for p in range(n):
            lp = last[p]
            if lp < 0 and symmetric:
                if p != active[0]:
                    continue
                active[0] += 1
            s = suf[p + 1]
            s0 = st[p]
            if s <= lp:
                # a basic checkpoint
                word.append((p, CKPT, 0))
                last[p] = depth
                nck[p] += 1
                if has_calls:
                    st[p] = ckpt(s0, False)
                count[0] += 1
                if count[0] & 4095 == 0 and deadline is not None and now() > deadline:
                    raise _Budget
                bad = rollback_excess(n, nck, dlv, rb) if rb is not None else None
                if bad:
                    found(nd, ("rollback",) + bad)
                else:
                    node(nd)
                st[p] = s0
                nck[p] -= 1
                # sends
                for q in range(n):
                    if q == p:
                        continue
                    word[-1] = (p, SEND, q)
                    if has_calls:
                        st[p], pb = send(s0, q)
                    else:
                        pb = None
                    transit.append((depth, p, q, pb, nck[p]))
                    count[0] += 1
                    if count[0] & 4095 == 0 and deadline is not None and now() > deadline:
                        raise _Budget
                    node(nd)
                    transit.pop()
                    st[p] = s0
                word.pop()
                last[p] = lp
            # deliveries of messages in transit to p
            for j in range(len(transit)):
                m = transit[j]
                if m[2] != p or (s > lp and s > m[0]):
                    continue
                src = m[1]
                pb = m[3]
                forced = False
                word.append((p, DELIVER, m[0]))
                if has_calls:
                    forced = force(s0, src, pb)
                    if forced is not True and forced is not False:
                        raise NotBool(forced)
                    if forced:
                        nck[p] += 1
                        s1 = ckpt(s0, True)
                    else:
                        s1 = s0
                    st[p] = deliver(s1, src, pb)
                del transit[j]
                last[p] = depth
                di = nck[p]
                dlv.append((src, m[4], p, di))
                count[0] += 1
                if count[0] & 4095 == 0 and deadline is not None and now() > deadline:
                    raise _Budget
                bad = (zcycle_through_last(dlv) if zcycles and dsmax[p] >= di and ddmin[src] <= m[4]
                       else None)
                old_s, old_d = dsmax[src], ddmin[p]
                if m[4] > old_s:
                    dsmax[src] = m[4]
                if di < old_d:
                    ddmin[p] = di
                if bad:
                    found(nd, ("zcycle",) + bad)
                else:
                    bad = rollback_excess(n, nck, dlv, rb) if rb is not None else None
                    if bad:
                        found(nd, ("rollback",) + bad)
                    else:
                        node(nd)
                dsmax[src], ddmin[p] = old_s, old_d
                dlv.pop()
                word.pop()
                last[p] = lp
                transit.insert(j, m)
                if forced:
                    nck[p] -= 1
                st[p] = s0
            if lp < 0 and symmetric:
                active[0] -= 1

    def _replay(events: tuple[Any, ...]) -> None:
        for depth, (p, kind, arg) in enumerate(events):
            if last[p] < 0:
                active[0] += 1
            s0 = st[p]
            if kind == CKPT:
                word.append((p, kind, arg))
                nck[p] += 1
                if has_calls:
                    st[p] = ckpt(s0, False)
            elif kind == SEND:
                word.append((p, kind, arg))
                pb = None
                if has_calls:
                    st[p], pb = send(s0, arg)
                transit.append((depth, p, arg, pb, nck[p]))
            else:
                j = next(k for k, m in enumerate(transit) if m[0] == arg)
                m = transit.pop(j)
                word.append((p, kind, arg))
                if has_calls:
                    forced = force(s0, m[1], m[3])
                    if forced is not True and forced is not False:
                        raise NotBool(forced)
                    if forced:
                        nck[p] += 1
                        s0 = ckpt(s0, True)
                    st[p] = deliver(s0, m[1], m[3])
                dlv.append((m[1], m[4], p, nck[p]))
                dsmax[m[1]] = max(dsmax[m[1]], m[4])
                ddmin[p] = min(ddmin[p], nck[p])
            last[p] = depth

    # replay the prefix (its nodes were counted by the walk that produced it), then walk below it
    try:
        _replay(prefix)
        node(len(prefix))
    except _Budget:
        res.complete = False
    except Exception as e:
        raise WalkError(tuple(word)) from e
    res.schedules = count[0] + (1 if not prefix else 0)
    return res
