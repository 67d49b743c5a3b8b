"""Sequence-number span systems in frontier form, compiled to flat need tables (for scale).

In the sequence-number domain every span of a processor restricted to an in-edge is a prefix,
so the metadata of edge ``e = (a, b)`` is a handful of non-decreasing integer arrays indexed by
chain index (Falkirk Wheel §3.1–3.3):

* ``sent[k]``: messages ``a`` sent on ``e`` from the events of its checkpoint ``k``
  (``sent[0] = 0``); then ``φ_e(c_k) = {1..sent[k]}`` and, if ``e`` is unlogged,
  ``T_D(c_k) = {1..sent[k]}`` (``T_D(⊤_a) = {1..total}``);
* ``recv[j]``: messages of ``e`` included in ``b``'s checkpoint ``j`` (``recv[0] = 0``);
  ``processed``: messages of ``e`` that ``b`` processed, so ``⊤_b`` holds ``{1..processed}``.

C1 (owner ``a`` at ``x``) holds iff ``dmax[x] <= recv[y]`` (or both at ⊤), C2 (owner ``b`` at
``y``) iff ``min(processed, recv[y]) <= sent[x]`` (always when ``a`` is at ⊤). Each check
becomes a lookup in a *need table* ("the least neighbour level at which it holds", computed
with a vectorised bisect), stored flat as bytes; the worklist then runs over flat arrays.
:meth:`SeqSystem.to_span_system` gives the explicit-set system, so both representations can be
compared (``specs/spans.md#frontiers``).

References
----------
.. [1] I. Gog, M. Isard, M. Abadi. "Falkirk Wheel: Rollback Recovery for Dataflow Systems",
   SoCC 2021, §3.1 (sequence numbers), §3.3 (the algorithm), §5.5 (the monitor's scalability).
"""

from __future__ import annotations

from array import array
from collections import deque
from dataclasses import dataclass
from typing import Any

import numpy as np

from rollcheck.pyimpl.errors import InvalidInputError
from rollcheck.pyimpl.spans.system import EdgeSpec, ProcessorSpec, SpanSystem

__all__ = ["SeqSystem", "FlatCompiled", "compile_seq", "run_flat", "run_bulk", "random_seq_system"]

NONE = 255  # "no level works" in a need table


@dataclass
class SeqSystem:
    """``n`` processors with ``K`` checkpoints each (levels ``0..K``, ⊤ = ``K+1`` when live).

    Arrays: ``src, dst, logged`` (per edge), ``sent`` and ``recv`` of shape ``(E, K+1)``,
    ``total`` and ``processed`` (per edge), ``failed`` (per processor, bool).
    """

    n: int
    K: int
    src: np.ndarray
    dst: np.ndarray
    logged: np.ndarray
    sent: np.ndarray
    recv: np.ndarray
    total: np.ndarray
    processed: np.ndarray
    failed: np.ndarray

    def top_levels(self) -> np.ndarray:
        """The largest level of every processor: ``K`` when failed, ⊤ = ``K+1`` when live."""
        return np.where(self.failed, self.K, self.K + 1)

    def to_span_system(self) -> SpanSystem:
        """The explicit-set system (times ``(e, n)``) with the same constraints."""
        procs = []
        chains: list[list[set]] = [[set() for _ in range(self.K + 1)] for _ in range(self.n)]
        tops: list[set] = [set() for _ in range(self.n)]
        for e in range(len(self.src)):
            b = int(self.dst[e])
            for j in range(self.K + 1):
                chains[b][j] |= {(f"e{e}", m) for m in range(1, int(self.recv[e, j]) + 1)}
            tops[b] |= {(f"e{e}", m) for m in range(1, int(max(self.processed[e], self.recv[e, -1])) + 1)}
        for p in range(self.n):
            # make chains strictly increasing with a private marker time per checkpoint
            ch = [frozenset(c | {(f"p{p}", i) for i in range(1, j + 1)}) for j, c in enumerate(chains[p])]
            top = None if self.failed[p] else frozenset(tops[p] | ch[-1])
            procs.append(ProcessorSpec(f"p{p}", tuple(ch), top))
        edges = []
        for e in range(len(self.src)):
            a, b = int(self.src[e]), int(self.dst[e])
            pref = [frozenset((f"e{e}", m) for m in range(1, int(k) + 1)) for k in self.sent[e]]
            allm = frozenset((f"e{e}", m) for m in range(1, int(self.total[e]) + 1))
            disc = tuple(frozenset() if self.logged[e] else x for x in pref)
            dtop = None if self.failed[a] else (frozenset() if self.logged[e] else allm)
            proc = frozenset((f"e{e}", m) for m in range(1, int(self.processed[e]) + 1))
            edges.append(EdgeSpec(f"e{e}", f"p{a}", f"p{b}", disc, dtop, proc, tuple(pref)))
        return SpanSystem(tuple(procs), tuple(edges))


@dataclass
class FlatCompiled:
    """Flat constraint tables: constraint ``c`` is owned by ``owner[c]`` and looks at ``nbr[c]``.

    It holds at owner level ``x`` iff ``level[nbr[c]] >= need[c, x]``. The watchers of ``p``
    (owners to re-examine when ``p`` changes) are the owners of the constraints whose neighbour is
    ``p``.
    """

    top: np.ndarray
    L: int
    owner: np.ndarray
    nbr: np.ndarray
    need: np.ndarray  # (C, L) uint8

    def csr(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(cstart, nbr, need) sorted by owner, and (wstart, wlist) for the Python worklist."""
        n = len(self.top)
        order = np.argsort(self.owner, kind="stable")
        cstart = np.concatenate([[0], np.cumsum(np.bincount(self.owner, minlength=n))])
        worder = np.argsort(self.nbr, kind="stable")
        wstart = np.concatenate([[0], np.cumsum(np.bincount(self.nbr, minlength=n))])
        return cstart, self.nbr[order], self.need[order], wstart, self.owner[worder]


def _count_below(vals: np.ndarray, thr: np.ndarray) -> np.ndarray:
    """``out[e, x] = #{y : vals[e, y] < thr[e, x]}`` (= bisect_left when rows are sorted)."""
    out = np.zeros(thr.shape, dtype=np.uint8)
    for y in range(vals.shape[1]):
        out += vals[:, y:y + 1] < thr
    return out


def compile_seq(s: SeqSystem) -> FlatCompiled:
    """Vectorised need tables of every C1 and C2 constraint of ``s``."""
    K, E = s.K, len(s.src)
    if K + 2 >= NONE:
        raise InvalidInputError(f"at most {NONE - 3} checkpoints per processor in the flat form")
    L = K + 2
    topl = s.top_levels()
    big = np.int32(1 << 30)
    i32 = np.int32
    fail_dst = s.failed[s.dst]
    # receiver side, levels 0..K and ⊤ (K+1); ⊤ holds the processed prefix (and the last ckpt)
    recv = np.empty((E, L), dtype=i32)
    recv[:, : K + 1] = s.recv
    recv[:, K + 1] = np.where(fail_dst, big, np.maximum(s.processed, s.recv[:, -1]))  # no ⊤: never below
    dmax = np.zeros((E, L), dtype=i32)
    unl = ~s.logged
    dmax[unl, : K + 1] = s.sent[unl]
    dmax[unl, K + 1] = s.total[unl]
    # C1 need[x] = min y with recv[y] >= dmax[x]  (recv is non-decreasing: a vectorised bisect)
    need1 = _count_below(recv, dmax)
    need1[need1 > topl[s.dst].astype(np.uint8)[:, None]] = NONE
    live_b = ~fail_dst
    need1[live_b, K + 1] = np.minimum(need1[live_b, K + 1], K + 1)  # the ⊤–⊤ exemption
    # C2 need[y] = min x with sent[x] >= min(processed, recv[y]); sent[⊤] = infinity
    tm = np.minimum(s.processed.astype(i32)[:, None], recv)
    tm[fail_dst, K + 1] = 0
    sentx = np.empty((E, L), dtype=i32)
    sentx[:, : K + 1] = s.sent
    sentx[:, K + 1] = big
    need2 = _count_below(sentx, tm)
    need2[need2 > topl[s.src].astype(np.uint8)[:, None]] = NONE
    owner = np.concatenate([s.src, s.dst])
    nbr = np.concatenate([s.dst, s.src])
    return FlatCompiled(topl.astype(np.int64), L, owner, nbr, np.concatenate([need1, need2]))


def _arr(x: np.ndarray) -> array:
    a = array("q")
    a.frombytes(np.ascontiguousarray(x, dtype=np.int64).tobytes())
    return a


def run_bulk(fc: FlatCompiled) -> tuple[np.ndarray, int, int]:
    """The worklist in bulk steps, vectorised with numpy.

    Every step examines all processors on the worklist at once (each against its neighbours' current
    levels), lowers them, and puts the watchers of the changed ones on the next worklist: a chaotic
    iteration of the same monotone operator, so it reaches the same greatest fixed point
    (``specs/spans.md#orders``). Returns (levels, examinations, steps).
    """
    lvl = fc.top.copy()
    n = len(lvl)
    L = fc.L
    active = np.ones(n, dtype=bool)
    exams = steps = 0
    while True:
        steps += 1
        exams += int(active.sum())
        csel = np.flatnonzero(active[fc.owner])
        own = fc.owner[csel]
        nl = lvl[fc.nbr[csel]]
        need = fc.need[csel]
        best = np.zeros(n, dtype=np.int64)
        for x in range(1, L):
            bad = own[need[:, x] > nl]
            okx = active & (lvl >= x)
            okx[bad] = False
            best[okx] = x
        new = np.where(active, best, lvl)
        changed = new != lvl
        lvl = new
        if not changed.any():
            break
        active = np.zeros(n, dtype=bool)
        active[fc.owner[changed[fc.nbr]]] = True
    return lvl, exams, steps


def run_flat(fc: FlatCompiled, order: str = "fifo") -> tuple[list[int], int]:
    """The worklist over flat tables; returns (levels, examinations).

    ``order="rounds"`` runs whole-graph rounds instead.

    Parameters
    ----------
    fc : FlatCompiled
        The flat constraint tables.
    order : str, optional
        ``"fifo"``, ``"lifo"`` or ``"rounds"``.
    """
    lvl = fc.top.tolist()
    n = len(lvl)
    L = fc.L
    cs, nb, nd, ws, wl = fc.csr()
    cstart, cnbr, wstart, wlist = _arr(cs), _arr(nb), _arr(ws), _arr(wl)
    need = np.ascontiguousarray(nd).tobytes()
    exams = 0

    def best(p: int) -> int:
        x = lvl[p]
        lo, hi = cstart[p], cstart[p + 1]
        while x > 0:
            for c in range(lo, hi):
                if need[c * L + x] > lvl[cnbr[c]]:
                    break
            else:
                return x
            x -= 1
        return 0

    if order == "rounds":
        changed = True
        while changed:
            changed = False
            for p in range(n):
                exams += 1
                x = best(p)
                if x != lvl[p]:
                    lvl[p] = x
                    changed = True
        return lvl, exams
    dq = deque(range(n))
    inq = bytearray(b"\x01") * n
    pop = dq.popleft if order == "fifo" else dq.pop
    while dq:
        p = pop()
        inq[p] = 0
        exams += 1
        x = best(p)
        if x != lvl[p]:
            lvl[p] = x
            for i in range(wstart[p], wstart[p + 1]):
                r = wlist[i]
                if not inq[r]:
                    inq[r] = 1
                    dq.append(r)
    return lvl, exams


def random_seq_system(n_edges: int, *, cyclic: bool, K: int = 4, degree: int = 4, failed: float = 0.01,
                      logged: float = 0.5, msgs: int = 6, seed: int = 0, n_procs: int | None = None,
                      jitter: float = 0.9) -> SeqSystem:
    """A random sequence-number system whose checkpoints of neighbours overlap as in a real run.

    Processors checkpoint at jittered global times ``k + jitter * u`` (``jitter = 0``: aligned, as
    after coordinated checkpointing); each edge carries ``msgs`` messages sent at uniform times and
    delivered after a random delay.

    >>> s = random_seq_system(40, cyclic=True, seed=1)
    >>> s.sent.shape
    (40, 5)

    Parameters
    ----------
    n_edges : int
        The number of edges.
    cyclic : bool
        Allow edges in both directions (False: from lower to higher processor only).
    K : int, optional
        The checkpoints per processor.
    degree : int, optional
        Edges per processor, when ``n_procs`` is not given.
    failed : float, optional
        The probability that a processor failed.
    logged : float, optional
        The probability that an edge is logged.
    msgs : int, optional
        The messages per edge.
    seed : int, optional
        The seed of the draw.
    n_procs : int, optional
        The number of processors (None: from ``degree``).
    jitter : float, optional
        The spread of the checkpoint times (0: aligned).
    """
    rng = np.random.default_rng(seed)
    n = n_procs or max(2, n_edges // degree)
    if cyclic:
        src = rng.integers(0, n, n_edges)
        dst = rng.integers(0, n, n_edges)
    else:
        a = rng.integers(0, n, n_edges)
        b = rng.integers(0, n, n_edges)
        src, dst = np.minimum(a, b), np.maximum(a, b)
        same = src == dst
        dst = np.where(same & (dst < n - 1), dst + 1, dst)
        src = np.where(same & (src == n - 1), src - 1, src)
    ck = np.arange(1, K + 1)[None, :] + rng.random((n, K)) * jitter  # checkpoint times per processor
    now = K + 1.0
    send = np.sort(rng.random((n_edges, msgs)) * now, axis=1)
    arrive = send + rng.random((n_edges, msgs)) * 0.8
    sent = np.zeros((n_edges, K + 1), dtype=np.int64)
    recv = np.zeros((n_edges, K + 1), dtype=np.int64)
    cs, cd = ck[src], ck[dst]
    for k in range(K):
        sent[:, k + 1] = (send <= cs[:, k:k + 1]).sum(axis=1)
        recv[:, k + 1] = (arrive <= cd[:, k:k + 1]).sum(axis=1)
    # FIFO and "recv only what was sent": a receiver holds a prefix of what arrived by then
    total = (send <= now).sum(axis=1)
    processed = (arrive <= now).sum(axis=1)
    fl = rng.random(n) < failed
    lg = rng.random(n_edges) < logged
    return SeqSystem(n, K, src, dst, lg, sent, recv, total, processed, fl)


def _levels_dict(s: SeqSystem, levels: list[int]) -> dict[str, Any]:
    return {f"p{i}": v for i, v in enumerate(levels)}
