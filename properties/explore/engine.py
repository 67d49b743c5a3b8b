"""The exhaustive walk over every basic schedule of ``n`` processes and at most ``E`` events.

Each partial order is visited once (only its lexicographically least interleaving is generated;
optionally one representative per renaming of symmetric processes), with the protocol run
incrementally along the tree and the walk cut at the first Z-cycle. The counterexample returned
has the fewest events, then the least word. See docs/internals/properties.md#explore-engine.

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
    """The protocol's code failed during the walk.

    ``word`` is the schedule up to and including the event at which it failed, ``__cause__`` the
    exception.
    """

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
    """What one walk saw.

    ``schedules`` nodes (schedules) visited, whether it ended by itself (``complete``), the best
    (smallest) violation, and the split frontier (when asked).
    """

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
    lim = max_events if limit is None else min(limit, max_events)
    w = _Walk(n, calls, lim, split_at=split_at, deadline=deadline, symmetric=symmetric,
              zcycles=zcycles, rollback_bound=rollback_bound)
    # replay the prefix (its nodes were counted by the walk that produced it), then walk below it
    try:
        w.replay(prefix)
        w.node(len(prefix))
    except _Budget:
        w.res.complete = False
    except Exception as e:
        raise WalkError(tuple(w.word)) from e
    w.res.schedules = w.count[0] + (1 if not prefix else 0)
    return w.res


class _Walk:
    """The state of one walk, updated in place along the tree and restored on backtracking.

    ``word`` is the current schedule, ``st`` the protocol state per process, ``last`` the position
    of each process's latest event, ``nck`` its latest checkpoint's index, ``transit`` the
    messages in transit ``(pos, src, dst, pb, sint)``, ``dlv`` the delivered ones
    ``(src, sint, dst, dint)``; ``dsmax``/``ddmin`` per process: the latest send interval of its
    delivered messages and the earliest delivery interval of those delivered to it (a cheap
    necessary condition for a new Z-cycle). One-element lists are counters shared by the methods.
    """

    def __init__(self, n: int, calls: Any, lim: int, *, split_at: int | None,
                 deadline: float | None, symmetric: bool, zcycles: bool,
                 rollback_bound: int | None):
        self.n = n
        self.lim = [lim]
        self.res = WalkResult()
        self.st: list[Any] = [None] * n
        self.has_calls = calls is not None
        self.ckpt: Any = None
        self.send: Any = None
        self.force: Any = None
        self.deliver: Any = None
        if calls is not None:
            try:
                self.st = [calls.initial(i, n) for i in range(n)]
            except Exception as e:
                raise WalkError(()) from e
            self.ckpt = calls.on_checkpoint
            self.send = calls.on_send
            self.force = calls.must_force
            self.deliver = calls.on_deliver
        self.last = [-1] * n
        self.nck = [0] * n
        self.word: list[tuple[int, int, int]] = []
        self.transit: list[tuple[int, int, int, Any, int]] = []
        self.dlv: list[tuple[int, int, int, int]] = []
        self.active = [0]
        self.count = [0]
        self.check_at = [4096]
        self.dsmax = [-1] * n
        self.ddmin = [1 << 30] * n
        self.split_at = split_at
        self.deadline = deadline
        self.symmetric = symmetric
        self.zcycles = zcycles
        self.rb = rollback_bound
        self.now = time.monotonic

    def found(self, depth: int, what: tuple[Any, ...]) -> None:
        """Keep the violation if it is the smallest so far; look only below it from now on."""
        v = Violation(depth, tuple(self.word), what)
        res = self.res
        if res.best is None or v < res.best:
            res.best = v
        self.lim[0] = min(self.lim[0], depth - 1)

    def node(self, depth: int) -> None:
        """Expand the node ``word`` (of ``depth`` events): every canonical one-event extension."""
        lim = self.lim
        if depth >= lim[0]:
            return
        word = self.word
        if depth == self.split_at:
            self.res.frontier.append(tuple(word))
            return
        n = self.n
        last = self.last
        suf = [-1] * (n + 1)
        for q in range(n - 1, -1, -1):
            lq = last[q]
            suf[q] = lq if lq > suf[q + 1] else suf[q + 1]
        nd = depth + 1
        symmetric = self.symmetric
        active = self.active
        transit = self.transit
        if nd >= lim[0] and self.rb is None:
            # the children are leaves: a checkpoint or a send cannot close a Z-cycle, so they are
            # counted without calling the protocol; a delivery needs only must_force (its interval)
            count, st, nck, dsmax, ddmin = self.count, self.st, self.nck, self.dsmax, self.ddmin
            zcycles, has_calls, force, dlv = self.zcycles, self.has_calls, self.force, self.dlv
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
                            self.found(nd, ("zcycle",) + bad)
                    word.pop()
            if self.deadline is not None and count[0] >= self.check_at[0]:
                self.check_at[0] = count[0] + 4096
                if self.now() > self.deadline:
                    raise _Budget
            return
        for p in range(n):
            lp = last[p]
            if lp < 0 and symmetric:
                if p != active[0]:
                    continue
                active[0] += 1
            s = suf[p + 1]
            if s <= lp:
                self.checkpoint_and_sends(p, depth)
            # deliveries of messages in transit to p
            for j in range(len(transit)):
                m = transit[j]
                if m[2] != p or (s > lp and s > m[0]):
                    continue
                self.delivery(p, j, depth)
            if lp < 0 and symmetric:
                active[0] -= 1

    def checkpoint_and_sends(self, p: int, depth: int) -> None:
        """Walk below the children of node ``depth`` where ``p`` checkpoints or sends."""
        word, st, nck, last, transit = self.word, self.st, self.nck, self.last, self.transit
        lp = last[p]
        s0 = st[p]
        nd = depth + 1
        rb = self.rb
        word.append((p, CKPT, 0))
        last[p] = depth
        nck[p] += 1
        if self.has_calls:
            st[p] = self.ckpt(s0, False)
        count = self.count
        count[0] += 1
        if count[0] & 4095 == 0 and self.deadline is not None and self.now() > self.deadline:
            raise _Budget
        bad = rollback_excess(self.n, nck, self.dlv, rb) if rb is not None else None
        if bad:
            self.found(nd, ("rollback",) + bad)
        else:
            self.node(nd)
        st[p] = s0
        nck[p] -= 1
        for q in range(self.n):
            if q == p:
                continue
            word[-1] = (p, SEND, q)
            if self.has_calls:
                st[p], pb = self.send(s0, q)
            else:
                pb = None
            transit.append((depth, p, q, pb, nck[p]))
            count[0] += 1
            if count[0] & 4095 == 0 and self.deadline is not None and self.now() > self.deadline:
                raise _Budget
            self.node(nd)
            transit.pop()
            st[p] = s0
        word.pop()
        last[p] = lp

    def delivery(self, p: int, j: int, depth: int) -> None:
        """Walk below the child of node ``depth`` where ``p`` delivers ``transit[j]``."""
        word, st, nck, last, transit = self.word, self.st, self.nck, self.last, self.transit
        dlv, dsmax, ddmin = self.dlv, self.dsmax, self.ddmin
        m = transit[j]
        lp = last[p]
        s0 = st[p]
        nd = depth + 1
        src = m[1]
        pb = m[3]
        forced = False
        word.append((p, DELIVER, m[0]))
        if self.has_calls:
            forced = self.force(s0, src, pb)
            if forced is not True and forced is not False:
                raise NotBool(forced)
            if forced:
                nck[p] += 1
                s1 = self.ckpt(s0, True)
            else:
                s1 = s0
            st[p] = self.deliver(s1, src, pb)
        del transit[j]
        last[p] = depth
        di = nck[p]
        dlv.append((src, m[4], p, di))
        count = self.count
        count[0] += 1
        if count[0] & 4095 == 0 and self.deadline is not None and self.now() > self.deadline:
            raise _Budget
        bad = (zcycle_through_last(dlv) if self.zcycles and dsmax[p] >= di and ddmin[src] <= m[4]
               else None)
        old_s, old_d = dsmax[src], ddmin[p]
        if m[4] > old_s:
            dsmax[src] = m[4]
        if di < old_d:
            ddmin[p] = di
        if bad:
            self.found(nd, ("zcycle",) + bad)
        else:
            rb = self.rb
            bad = rollback_excess(self.n, nck, dlv, rb) if rb is not None else None
            if bad:
                self.found(nd, ("rollback",) + bad)
            else:
                self.node(nd)
        dsmax[src], ddmin[p] = old_s, old_d
        dlv.pop()
        word.pop()
        last[p] = lp
        transit.insert(j, m)
        if forced:
            nck[p] -= 1
        st[p] = s0

    def replay(self, events: tuple[Any, ...]) -> None:
        """Apply the canonical word ``events`` (not counted: the walk that produced it did)."""
        word, st, nck, last, transit = self.word, self.st, self.nck, self.last, self.transit
        has_calls = self.has_calls
        for depth, (p, kind, arg) in enumerate(events):
            if last[p] < 0:
                self.active[0] += 1
            s0 = st[p]
            if kind == CKPT:
                word.append((p, kind, arg))
                nck[p] += 1
                if has_calls:
                    st[p] = self.ckpt(s0, False)
            elif kind == SEND:
                word.append((p, kind, arg))
                pb = None
                if has_calls:
                    st[p], pb = self.send(s0, arg)
                transit.append((depth, p, arg, pb, nck[p]))
            else:
                self.replay_delivery(p, arg)
            last[p] = depth

    def replay_delivery(self, p: int, pos: int) -> None:
        """Apply ``p``'s delivery of the message sent at ``pos``."""
        st, nck = self.st, self.nck
        j = next(k for k, m in enumerate(self.transit) if m[0] == pos)
        m = self.transit.pop(j)
        self.word.append((p, DELIVER, pos))
        s0 = st[p]
        if self.has_calls:
            forced = self.force(s0, m[1], m[3])
            if forced is not True and forced is not False:
                raise NotBool(forced)
            if forced:
                nck[p] += 1
                s0 = self.ckpt(s0, True)
            st[p] = self.deliver(s0, m[1], m[3])
        self.dlv.append((m[1], m[4], p, nck[p]))
        self.dsmax[m[1]] = max(self.dsmax[m[1]], m[4])
        self.ddmin[p] = min(self.ddmin[p], nck[p])
