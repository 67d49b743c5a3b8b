"""Fast decision kernels for BCS and HMNR over a whole pattern (mutable arrays, no state objects).

The state machines of :mod:`rollcheck.pyimpl.protocols.hmnr` and :mod:`rollcheck.pyimpl.protocols.bcs` are the
reference; these kernels apply exactly the same rules with in-place lists (``python`` backend) or
numpy vectors (``numpy`` backend, which pays only for many processes) and return the ids of the
messages whose delivery is preceded by a forced checkpoint. ``tests/test_protocols_fast.py`` and
the property ``protocol-fast-path-agrees`` check that every backend decides identically.

References
----------
``specs/protocols.md#fast``.
"""

from __future__ import annotations

from typing import Any

from rollcheck.pyimpl.errors import InvalidInputError
from rollcheck.pyimpl.pattern import CHECKPOINT, DELIVER, SEND, Pattern

__all__ = ["BACKENDS", "NUMPY_THRESHOLD", "forced_deliveries"]

BACKENDS = ("auto", "python", "numpy")
#: From this many processes on, ``auto`` picks numpy for HMNR (measured in benchmarks/bench_protocols.py).
NUMPY_THRESHOLD = 64


def forced_deliveries(protocol: str, pattern: Pattern, backend: str = "auto") -> tuple[str, ...]:
    """Ids of the messages whose delivery ``protocol`` precedes by a forced checkpoint.

    Parameters
    ----------
    protocol : str
        ``uc``, ``bcs`` or ``hmnr``.
    pattern : Pattern
        The schedule; every one of its checkpoints is taken as a basic one.
    backend : str
        ``python``, ``numpy``, or ``auto`` (numpy from :data:`NUMPY_THRESHOLD` processes on).

    Returns
    -------
    tuple of str
        The message ids, in delivery order.

    Raises
    ------
    InvalidInputError
        An unknown protocol or backend.

    Examples
    --------
    >>> from rollcheck.pyimpl.pattern import PatternBuilder
    >>> b = PatternBuilder(2)
    >>> b.deliver(0, b.send(1, 0)); _ = b.checkpoint(0); b.deliver(1, b.send(0, 1))
    >>> forced_deliveries("hmnr", b.build()), forced_deliveries("hmnr", b.build(), "numpy")
    (('m1',), ('m1',))
    >>> forced_deliveries("bcs", b.build())
    ('m1',)
    """
    if backend not in BACKENDS:
        raise InvalidInputError(f"unknown backend {backend!r} (known: {', '.join(BACKENDS)})")
    if protocol == "uc":
        return ()
    if protocol == "bcs":
        return _bcs(pattern)
    if protocol == "hmnr":
        if backend == "numpy" or (backend == "auto" and pattern.n >= NUMPY_THRESHOLD):
            return _hmnr_numpy(pattern)
        return _hmnr_python(pattern)
    raise InvalidInputError(f"no fast kernel for protocol {protocol!r} (known: uc, bcs, hmnr)")


def _bcs(p: Pattern) -> tuple[str, ...]:
    lc = [0] * p.n
    sender_lc: dict[str, int] = {}
    forced: list[str] = []
    for ev in p.events:
        kind = ev.kind
        i = ev.process
        if kind == SEND:
            sender_lc[ev.message] = lc[i]  # type: ignore[index]
        elif kind == DELIVER:
            m = sender_lc[ev.message]  # type: ignore[index]
            if m > lc[i]:
                forced.append(ev.message)  # type: ignore[arg-type]
                lc[i] = m
        else:
            lc[i] += 1
    return tuple(forced)


def _hmnr_python(p: Pattern) -> tuple[str, ...]:
    # ckpt and taken are packed into one integer per entry, key = 2 * ckpt + taken: the merge rule
    # (a larger ckpt replaces both, an equal one ORs taken) is then exactly max(key, m.key).
    n = p.n
    inf = 1 << 62
    clock = [[0] * n for _ in range(n)]
    key = [[1] * n for _ in range(n)]  # ckpt 0 (unknown), taken True
    sent: list[list[int]] = [[] for _ in range(n)]  # targets sent to in the current interval
    min_to = [[inf] * n for _ in range(n)]
    for i in range(n):
        clock[i][i] = 1
        key[i][i] = 2  # ckpt 1, taken False
    pb: dict[str, tuple[int, list[int], list[int]]] = {}
    forced: list[str] = []
    for ev in p.events:
        kind = ev.kind
        i = ev.process
        if kind == SEND:
            k = ev.to
            ci = clock[i]
            mt = min_to[i]
            if mt[k] == inf:  # type: ignore[index]
                sent[i].append(k)  # type: ignore[arg-type]
                mt[k] = ci[i]  # type: ignore[index]
            pb[ev.message] = (i, ci, key[i])  # type: ignore[index]  # lists are replaced, never mutated
        elif kind == DELIVER:
            j, mclock, mkey = pb.pop(ev.message)  # type: ignore[arg-type]
            ci = clock[i]
            own_k = key[i][i]
            force = mkey[i] == own_k + 1
            if not force:
                mj = mclock[j]
                mt = min_to[i]
                for k in sent[i]:
                    if mj > mt[k] and mj > ci[k] and mj > mclock[k]:
                        force = True
                        break
            own_c = ci[i]
            if force:
                forced.append(ev.message)  # type: ignore[arg-type]
                _checkpoint_py(i, clock, key, sent, min_to, inf)
                own_c += 1
                own_k += 2
            merged = list(map(max, clock[i], mclock))
            mj = mclock[j]
            merged[i] = mj if mj > own_c else own_c
            clock[i] = merged
            mk = list(map(max, key[i], mkey))
            mk[i] = own_k
            key[i] = mk
        else:
            _checkpoint_py(i, clock, key, sent, min_to, inf)
    return tuple(forced)


def _checkpoint_py(i: int, clock: list[list[int]], key: list[list[int]],
                   sent: list[list[int]], min_to: list[list[int]], inf: int) -> None:
    mt = min_to[i]
    for k in sent[i]:
        mt[k] = inf
    sent[i] = []
    ci = clock[i][:]
    ci[i] += 1
    clock[i] = ci
    kk = [x | 1 for x in key[i]]  # taken[k] = True for every k != i
    kk[i] = key[i][i] + 2  # ckpt[i] += 1, taken[i] = False
    key[i] = kk


def _hmnr_numpy(p: Pattern) -> tuple[str, ...]:
    import numpy as np

    n = p.n
    inf = np.int64(1 << 62)
    clock = np.zeros((n, n), dtype=np.int64)
    key = np.ones((n, n), dtype=np.int64)  # 2 * ckpt + taken, as in the python backend
    min_to = np.full((n, n), inf, dtype=np.int64)
    sent: list[list[int]] = [[] for _ in range(n)]
    idx = np.arange(n)
    clock[idx, idx] = 1
    key[idx, idx] = 2
    pb: dict[str, tuple[int, Any, Any]] = {}
    forced: list[str] = []
    maximum = np.maximum
    for ev in p.events:
        kind = ev.kind
        i = ev.process
        if kind == SEND:
            k = ev.to
            ci = clock[i]
            if min_to[i, k] == inf:
                sent[i].append(k)  # type: ignore[arg-type]
                min_to[i, k] = ci[i]
            pb[ev.message] = (i, ci.copy(), key[i].copy())  # type: ignore[index]
        elif kind == DELIVER:
            j, mclock, mkey = pb.pop(ev.message)  # type: ignore[arg-type]
            ci = clock[i]
            kk = key[i]
            own_k = int(kk[i])
            own_c = int(ci[i])
            force = int(mkey[i]) == own_k + 1  # type: ignore[index]
            if not force and sent[i]:
                mj = mclock[j]  # type: ignore[index]
                ks = sent[i]
                cond = (mj > min_to[i, ks]) & (mj > ci[ks]) & (mj > mclock[ks])  # type: ignore[index]
                force = bool(cond.any())
            if force:
                forced.append(ev.message)  # type: ignore[arg-type]
                min_to[i, sent[i]] = inf
                sent[i] = []
                kk |= 1  # the forced checkpoint: taken[k] = True for k != i (i is reset below)
                own_c += 1
                own_k += 2
            mj = int(mclock[j])  # type: ignore[index]
            maximum(ci, mclock, out=ci)
            maximum(key[i], mkey, out=key[i])
            ci[i] = mj if mj > own_c else own_c
            key[i, i] = own_k
        elif kind == CHECKPOINT:
            min_to[i, sent[i]] = inf
            sent[i] = []
            key[i] |= 1
            key[i, i] += 1  # was 2c|1 after the OR: 2c + 2 = 2(c + 1), taken False
            clock[i, i] += 1
    return tuple(forced)
