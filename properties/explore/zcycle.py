"""Incremental useless-checkpoint detection: whether the newest delivery closes a Z-cycle.

A delivered message is a tuple ``(src, sint, dst, dint)``: its sender, the sender's checkpoint
interval at the send (the number of checkpoints the sender took before it, the initial one not
counted), its receiver and the receiver's interval at the delivery. Message ``x`` is followed by
``y`` on a Z-path when ``y`` leaves the process that delivered ``x`` in the same or a later interval
(``y.src == x.dst and y.sint >= x.dint``), in either order inside the interval. C[i,x] is useless
iff a Z-path starts after it (``m1.src == i``, ``m1.sint >= x``) and ends before it
(``mk.dst == i``, ``mk.dint < x``) — Netzer and Xu's Z-cycle.

A new checkpoint or a new send never closes a Z-cycle (a Z-path needs delivered messages and
starts *after* a checkpoint, and nothing is after the newest one), and nothing later removes a
Z-path, so it suffices to look, at every delivery, for a cycle through the delivered message: a
useless checkpoint stays useless in every extension of the schedule.

References
----------
FERDiS paper §5.1–§5.3 (Z-paths, useless checkpoints); R. H. B. Netzer and J. Xu, "Necessary and
sufficient conditions for consistent global snapshots", IEEE TPDS 6(2), 1995.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["Delivered", "zcycle_through_last", "useless_from_delivered"]

#: ``(src, sint, dst, dint)`` of a delivered message.
Delivered = tuple[int, int, int, int]


def zcycle_through_last(dlv: Sequence[Delivered]) -> tuple[int, int, int] | None:
    """The useless checkpoints that the last message of ``dlv`` puts on a Z-cycle, if any.

    Parameters
    ----------
    dlv : sequence of (src, sint, dst, dint)
        The delivered messages; the last one is the newest delivery.

    Returns
    -------
    (process, first, last) or None
        C[process, first..last] lie on a Z-cycle through the newest message (the cycle found
        for the lowest process index); None if there is no such cycle.

    Examples
    --------
    m0: P1 -> P0 delivered before C[0,1]; m1: P0 -> P1 sent after C[0,1], delivered in the
    interval of P1 that sent m0:

    >>> zcycle_through_last([(1, 0, 0, 0)]) is None
    True
    >>> zcycle_through_last([(1, 0, 0, 0), (0, 1, 1, 0)])
    (0, 1, 1)
    """
    k = len(dlv)
    last = k - 1
    fwd = [False] * k
    fwd[last] = True
    stack = [last]
    while stack:
        _, _, xr, xd = dlv[stack.pop()]
        for j in range(k):
            if not fwd[j]:
                y = dlv[j]
                if y[0] == xr and y[1] >= xd:
                    fwd[j] = True
                    stack.append(j)
    bwd = [False] * k
    bwd[last] = True
    stack = [last]
    while stack:
        xs, xsi, _, _ = dlv[stack.pop()]
        for j in range(k):
            if not bwd[j]:
                y = dlv[j]
                if y[2] == xs and xsi >= y[3]:
                    bwd[j] = True
                    stack.append(j)
    low: dict[int, int] = {}
    high: dict[int, int] = {}
    for j in range(k):
        s, si, r, di = dlv[j]
        if fwd[j] and (r not in low or di < low[r]):
            low[r] = di
        if bwd[j] and (s not in high or si > high[s]):
            high[s] = si
    for i in sorted(low):
        if i in high and high[i] > low[i]:
            return (i, low[i] + 1, high[i])
    return None


def useless_from_delivered(dlv: Sequence[Delivered]) -> list[tuple[int, int]]:
    """Every useless checkpoint ``(process, index)`` of the delivered messages ``dlv``, sorted.

    Written from the definition (a Z-path from C[i,x] back to C[i,x]) for tests and reports,
    not for the hot loop.

    Examples
    --------
    >>> useless_from_delivered([(1, 0, 0, 0), (0, 1, 1, 0)])
    [(0, 1)]
    """
    k = len(dlv)
    reach = [[False] * k for _ in range(k)]
    for a in range(k):
        reach[a][a] = True
        stack = [a]
        while stack:
            _, _, xr, xd = dlv[stack.pop()]
            for j in range(k):
                if not reach[a][j] and dlv[j][0] == xr and dlv[j][1] >= xd:
                    reach[a][j] = True
                    stack.append(j)
    out: set[tuple[int, int]] = set()
    for a in range(k):
        for b in range(k):
            if reach[a][b] and dlv[a][0] == dlv[b][2]:
                for x in range(dlv[b][3] + 1, dlv[a][1] + 1):
                    out.add((dlv[a][0], x))
    return sorted(out)
