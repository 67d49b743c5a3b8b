"""A ``rollcheck.spans/1`` document straight into flat need tables (the command path at scale).

Building frozensets of times per chain element (:func:`system_from_dict`) is far too slow for
10^6 edges; here the document is validated in one pass and compiled directly into the flat form
the bulk worklist runs on (:class:`~rollcheck.pyimpl.spans.frontier.FlatCompiled`): a rank map
per processor (the least level whose span holds a time) turns C1 and C2 into maxima over ranks.
The rules checked are those of :func:`system_from_dict` plus ``specs/spans.md#validity``; every
error names the JSON path. See docs/internals/pyimpl-spans.md#tables.

References
----------
.. [1] I. Gog, M. Isard, M. Abadi. "Falkirk Wheel: Rollback Recovery for Dataflow Systems",
   SoCC 2021, §3.3 (constraints, the fixed point), §4.1 (⊤ of live processors), §4.3 (the low
   watermark), §5.5 (scalability of the monitor).
"""

from __future__ import annotations

from array import array
from collections.abc import Hashable
from dataclasses import dataclass
from itertools import repeat
from typing import Any

import numpy as np

from rollcheck.pyimpl.errors import InvalidInputError
from rollcheck.pyimpl.spans.frontier import FlatCompiled, run_bulk
from rollcheck.pyimpl.spans.system import FORMAT, TOP

__all__ = ["Tables", "compile_document", "solve_tables", "watermark_tables", "MAX_TIME_DEPTH"]

MAX_TIME_DEPTH = 32  # nesting of a time written as an array (loop counters inside loops)
_MISSING = 1 << 40  # "in no span of the processor"
_FAST = frozenset({str, int})
_PROC_FIELDS = frozenset({"chain", "top"})
_EDGE_FIELDS = frozenset({"name", "src", "dst", "discarded", "discarded_top", "processed", "phi", "comment"})
_TOP_FIELDS = frozenset({"format", "processors", "edges", "comment", "meta"})


@dataclass
class Tables:
    """Compiled constraints of a span system.

    ``names``: processors in document order; ``chain_len[i]``: chain length; ``live[i]``: has ⊤;
    ``flat``: the need tables (levels ``0..chain_len-1`` for the chain, ``chain_len`` = ⊤).
    """

    names: list[str]
    chain_len: np.ndarray
    live: np.ndarray
    flat: FlatCompiled

    def label(self, i: int, level: int) -> int | str:
        """Output label of ``level`` of processor ``i``: chain index or ``"top"``.

        Parameters
        ----------
        i : int
            The processor.
        level : int
            The level.
        """
        return TOP if self.live[i] and level == self.chain_len[i] else int(level)


def _key(t: Any, loc: str, depth: int = 0) -> Hashable:
    tt = type(t)
    if tt is str or tt is int:
        return t
    if tt is list:
        if depth >= MAX_TIME_DEPTH:
            raise InvalidInputError(f"a time is nested more than {MAX_TIME_DEPTH} arrays deep", location=loc)
        return tuple(_key(x, loc, depth + 1) for x in t)
    raise InvalidInputError(f"a time must be a string, an integer or an array, got {t!r}"[:200], location=loc)


def _times(v: Any, loc: str) -> set:
    """The set of hashable keys of a JSON array of times.

    Hashed directly when it holds only strings and integers (the common case, checked at C speed).
    """
    if type(v) is not list:
        raise InvalidInputError(f"expected an array of times, got {type(v).__name__}", location=loc)
    if set(map(type, v)) <= _FAST:
        return set(v)
    return {_key(t, f"{loc}[{i}]") for i, t in enumerate(v)}


def _times_plain(v: Any, loc: str) -> set:
    """:func:`_times` for a document known to hold no ``true``, ``false``, ``null`` or float.

    See ``plain`` of :func:`compile_document`: every scalar is a string or an integer, so hashing
    the array is the whole check; an array of arrays (unhashable) takes the slow path.
    """
    if type(v) is not list:
        raise InvalidInputError(f"expected an array of times, got {type(v).__name__}", location=loc)
    try:
        return set(v)
    except TypeError:
        return _times(v, loc)


def _lists(v: Any, loc: str) -> list:
    if type(v) is not list:
        raise InvalidInputError(f"expected an array of arrays of times, got {type(v).__name__}", location=loc)
    return v


def _c2_need(ranks: Any, phi_ranks: Any, top_b: int) -> list[int]:
    """C2 need per receiver level ``y = 0..top_b``, a running maximum of φ-ranks.

    The largest φ-rank among the processed times whose rank at the receiver is ``<= y`` (0 when
    there is none).

    >>> _c2_need([0, 1, 2], [3, 1, 2], 2)   # a time of rank 0 needs the sender at 3 from y = 0 on
    [3, 3, 3]
    """
    best = [0] * (top_b + 1)
    for r, f in zip(ranks, phi_ranks, strict=True):
        if r <= top_b and f > best[r]:
            best[r] = f
    run = 0
    for y in range(top_b + 1):
        if best[y] > run:
            run = best[y]
        best[y] = run
    return best


def _first_missing(sub: set, sup: set) -> Any:
    return next(iter(sub - sup))


def _show(t: Any) -> str:
    return repr(list(t) if isinstance(t, tuple) else t)[:80]


def compile_document(doc: Any, *, phi: str = "reject", source: str | None = None, plain: bool = False) -> Tables:
    """Validate a ``rollcheck.spans/1`` document and compile its need tables.

    Parameters
    ----------
    doc : dict
        The parsed JSON document.
    phi : {"reject", "normalise"}
        Reject φ that is not monotone along the source's chain, or take running unions.
    source : str, optional
        File name, for error messages.
    plain : bool
        The caller guarantees that no scalar in ``doc`` is a boolean, ``null`` or a float (e.g. the
        file's text holds none of ``true``, ``false``, ``null`` and floats were refused while
        parsing): the per-time type checks are then skipped.

    Returns
    -------
    Tables

    Raises
    ------
    InvalidInputError
        Naming the JSON path (``processors.p.chain[2]``, ``edges[3].phi[1]``) and the reason.

    Examples
    --------
    >>> t = compile_document({"format": "rollcheck.spans/1", "processors": {
    ...   "p": {"chain": [[], ["e1:1"], ["e1:1", "e1:2"]], "top": ["e1:1", "e1:2", "e1:3"]},
    ...   "q": {"chain": [[], ["e2:1"]]}},
    ...   "edges": [{"name": "e2", "src": "p", "dst": "q",
    ...     "discarded": [[], ["e2:1"], ["e2:1", "e2:2"]], "discarded_top": ["e2:1", "e2:2", "e2:3"],
    ...     "processed": ["e2:1", "e2:2"], "phi": [[], ["e2:1"], ["e2:1", "e2:2"]]}]})
    >>> solve_tables(t)[0]
    {'p': 1, 'q': 1}

    References
    ----------
    Falkirk Wheel paper §3.3; ``specs/spans.md#validity``.
    """
    if phi not in ("reject", "normalise"):
        raise InvalidInputError(f"phi must be reject or normalise, not {phi!r}", location="phi")
    try:
        return _compile(doc, phi == "normalise", _times_plain if plain else _times)
    except InvalidInputError as e:
        raise (e.with_source(source) if source else e) from None


def _compile(doc: Any, normalise: bool, _times: Any) -> Tables:
    if type(doc) is not dict:
        raise InvalidInputError("a span system must be a JSON object", location="$")
    if doc.get("format") != FORMAT:
        raise InvalidInputError(f"format must be {FORMAT!r}, got {doc.get('format')!r}"[:200], location="format")
    unknown = set(doc) - _TOP_FIELDS
    if unknown:
        raise InvalidInputError(f"unknown field(s) {sorted(unknown)}"[:200], location="$")
    procs = doc.get("processors")
    if type(procs) is not dict or not procs:
        raise InvalidInputError("processors must be a non-empty object", location="processors")
    names = list(procs)
    index = {n: i for i, n in enumerate(names)}
    n = len(names)
    chain_len = [0] * n
    live = [False] * n
    ranks: list[dict] = []
    for i, name in enumerate(names):
        chain_len[i], live[i], rank = _processor(name, procs[name], _times)
        ranks.append(rank)
    edges = doc.get("edges", [])
    if type(edges) is not list:
        raise InvalidInputError("edges must be an array", location="edges")
    top = [k if lv else k - 1 for k, lv in zip(chain_len, live, strict=True)]
    L = max(top) + 1
    code, dtype = ("B", np.uint8) if L < 250 else ("H", np.uint16) if L < 65000 else ("I", np.uint32)
    none = int(np.iinfo(dtype).max)
    E = len(edges)
    need = array(code, bytes(array(code).itemsize * 2 * E * L))  # row c at [c*L, (c+1)*L)
    src_i = [0] * E
    dst_i = [0] * E
    seen: set[str] = set()
    for j, ed in enumerate(edges):
        loc = f"edges[{j}]"
        ename, a, b = _edge_ends(ed, j, loc, index, seen)
        src_i[j], dst_i[j] = a, b
        ka = chain_len[a]
        rb = ranks[b]
        disc = _lists(ed["discarded"], f"{loc}.discarded")
        phis = _lists(ed["phi"], f"{loc}.phi")
        for f, lst in (("discarded", disc), ("phi", phis)):
            if len(lst) != ka:
                raise InvalidInputError(f"edge {ename}: {f} has {len(lst)} entries but source "
                                        f"{names[a]}'s chain has {ka}", location=f"{loc}.{f}")
        # C1, owned by a: need1[x] = max rank_b over T_D(s_x(a))
        for x, v in enumerate(_c1_need(ed, ename, loc, disc, rb, chain_len[b], live[a], live[b], names[a],
                                       _times)):
            need[j * L + x] = v if v <= top[b] else none
        # C2, owned by b: need2[y] = max φrank over T_M ∩ s_y(b)
        for y, v in enumerate(_c2_edge(ed, ename, loc, phis, rb, ka, live[a], live[b], top[b], names, a, b,
                                       normalise, _times)):
            need[(E + j) * L + y] = v if v <= top[a] else none
    owner = np.array(src_i + dst_i, dtype=np.int64)
    nbr = np.array(dst_i + src_i, dtype=np.int64)
    need_np = np.frombuffer(need, dtype=dtype).reshape(2 * E, L)
    flat = FlatCompiled(np.array(top, dtype=np.int64), L, owner, nbr, need_np)
    return Tables(names, np.array(chain_len, dtype=np.int64), np.array(live, dtype=bool), flat)


def _processor(name: str, pd: Any, _times: Any) -> tuple[int, bool, dict]:
    """Processor ``name``'s chain length, whether it is live (has a top) and the ranks of its times.

    The rank of a time is the first chain element holding it (the chain's length for the top's own).
    """
    loc = f"processors.{name}"
    if type(pd) is not dict:
        raise InvalidInputError("expected an object with 'chain' (and 'top' when live)", location=loc)
    if not pd.keys() <= _PROC_FIELDS:
        raise InvalidInputError(f"unknown field(s) {sorted(set(pd) - _PROC_FIELDS)}"[:200], location=loc)
    if "chain" not in pd:
        raise InvalidInputError("missing 'chain'", location=loc)
    chain = _lists(pd["chain"], f"{loc}.chain")
    if not chain:
        raise InvalidInputError("the chain must start with the empty span c_0", location=f"{loc}.chain")
    rank: dict = {}
    prev_len = 0
    for k, c in enumerate(chain):
        cs = _times(c, f"{loc}.chain[{k}]")
        if k == 0:
            if cs:
                raise InvalidInputError("c_0 must be the empty span", location=f"{loc}.chain[0]")
            continue
        kept = len(cs) - len(cs.difference(rank))  # |c_k ∩ c_{k-1}|
        if kept != prev_len or len(cs) == prev_len:
            why = (f"c_{k} misses time {_show(_first_missing(set(rank), cs))} of c_{k - 1}"
                   if kept != prev_len else f"c_{k} equals c_{k - 1}")
            raise InvalidInputError(f"processor {name}: chain is not strictly increasing ({why})",
                                    location=f"{loc}.chain[{k}]")
        rank.update(dict.fromkeys(cs.difference(rank), k))
        prev_len = len(cs)
    live = False
    top = pd.get("top")
    if top is not None:
        ts = _times(top, f"{loc}.top")
        if len(ts) - len(ts.difference(rank)) != prev_len:
            raise InvalidInputError(f"processor {name}: top must contain the last chain element",
                                    location=f"{loc}.top")
        rank.update(dict.fromkeys(ts.difference(rank), len(chain)))
        live = True
    return len(chain), live, rank


def _edge_ends(ed: Any, j: int, loc: str, index: dict[str, int], seen: set[str]) -> tuple[str, int, int]:
    """Edge ``j``'s name and the indices of its source and destination (the edge object checked)."""
    if type(ed) is not dict:
        raise InvalidInputError("expected an edge object", location=loc)
    if not ed.keys() <= _EDGE_FIELDS:
        raise InvalidInputError(f"unknown field(s) {sorted(set(ed) - _EDGE_FIELDS)}"[:200], location=loc)
    ename = ed.get("name", f"e{j}")
    if type(ename) is not str:
        raise InvalidInputError("edge name must be a string", location=f"{loc}.name")
    if ename in seen:
        raise InvalidInputError(f"duplicate edge name {ename!r}", location=f"{loc}.name")
    seen.add(ename)
    for f in ("src", "dst", "discarded", "processed", "phi"):
        if f not in ed:
            raise InvalidInputError(f"edge {ename}: missing {f!r}", location=loc)
    ends = []
    for f in ("src", "dst"):
        v = ed[f]
        if type(v) is not str:
            raise InvalidInputError(f"edge {ename}: {f} must be a processor name (a string), got {v!r}"[:200],
                                    location=f"{loc}.{f}")
        if v not in index:
            raise InvalidInputError(f"edge {ename}: unknown processor {v!r}"[:200], location=f"{loc}.{f}")
        ends.append(index[v])
    return ename, ends[0], ends[1]


def _c1_need(ed: dict, ename: str, loc: str, disc: list, rb: dict, kb: int, live_a: bool, live_b: bool,
             src_name: str, _times: Any) -> list[int]:
    """C1 of an edge, owned by its source: per source span x, a rank at the destination.

    The greatest rank at the destination of a time the span's events sent (``discarded``;
    ``discarded_top`` for a live source's top).
    """
    out: list[int] = []
    prev: set = set()
    for x, d in enumerate(disc):
        ds = _times(d, f"{loc}.discarded[{x}]")
        if x == 0 and ds:
            raise InvalidInputError(f"edge {ename}: T_D(c_0) must be empty (nothing is sent before any "
                                    "event)", location=f"{loc}.discarded[0]")
        if not prev <= ds:
            raise InvalidInputError(
                f"edge {ename}: discarded[{x}] misses time {_show(_first_missing(prev, ds))} of "
                f"discarded[{x - 1}] (the events of a larger span send at least as much)",
                location=f"{loc}.discarded[{x}]")
        out.append(max(map(rb.get, ds, repeat(_MISSING)), default=0))
        prev = ds
    dt = ed.get("discarded_top")
    if dt is not None:
        ds = _times(dt, f"{loc}.discarded_top")
        if not prev <= ds:
            raise InvalidInputError(
                f"edge {ename}: discarded_top misses time {_show(_first_missing(prev, ds))} of the last "
                "discarded entry", location=f"{loc}.discarded_top")
        if live_a:
            m = max(map(rb.get, ds, repeat(_MISSING)), default=0)
            if live_b:
                m = min(m, kb)  # both at ⊤: C1 holds
            out.append(m)
    elif live_a:
        raise InvalidInputError(f"edge {ename}: discarded_top is required because source {src_name} is live",
                                location=f"{loc}.discarded_top")
    return out


def _c2_edge(ed: dict, ename: str, loc: str, phis: list, rb: dict, ka: int, live_a: bool, live_b: bool,
             top_b: int, names: list[str], a: int, b: int, normalise: bool, _times: Any) -> list[int]:
    """C2 of an edge, owned by its destination: per destination span y, its greatest φ-rank.

    The φ-rank of a processed time the span holds; empty when the destination processed nothing on
    the edge.
    """
    phr: dict = {}
    plen = 0
    for x, f in enumerate(phis):
        fs = _times(f, f"{loc}.phi[{x}]")
        if not normalise and x > 0:
            kept = len(fs) - len(fs.difference(phr))
            if kept != plen:
                raise InvalidInputError(
                    f"edge {ename}: phi is not monotone along {names[a]}'s chain (phi[{x - 1}] ⊄ "
                    f"phi[{x}]); use --normalise-phi to take running unions", location=f"{loc}.phi[{x}]")
        phr.update(dict.fromkeys(fs.difference(phr), x))
        plen = len(phr)
    tm = _times(ed["processed"], f"{loc}.processed")
    if not tm:
        return []
    if live_b:
        miss = tm.difference(rb)
        if miss:
            raise InvalidInputError(
                f"edge {ename}: {names[b]} processed time {_show(next(iter(miss)))} but its top does not "
                "hold it (a live processor's top holds every time it processed)",
                location=f"{loc}.processed")
    phi_top = ka if live_a else _MISSING  # φ(⊤) is all times; a failed source has no ⊤
    return list(_c2_need(map(rb.get, tm, repeat(_MISSING)), map(phr.get, tm, repeat(phi_top)), top_b))


def solve_tables(t: Tables) -> tuple[dict[str, int | str], int, int]:
    """The greatest consistent spans (labels), examinations and bulk steps.

    The bulk worklist (:func:`~rollcheck.pyimpl.spans.frontier.run_bulk`) is a fair chaotic
    iteration of the fixed-point operator, so it returns the same greatest assignment as every
    other order (``specs/spans.md#orders``).
    """
    levels, exams, steps = run_bulk(t.flat)
    lv = levels.tolist()
    return {name: t.label(i, lv[i]) for i, name in enumerate(t.names)}, exams, steps


def watermark_tables(t: Tables) -> dict[str, int]:
    """The low watermark: the greatest assignment over checkpoints only (no ⊤ anywhere).

    Levels below ⊤ see the same constraints with or without ⊤, so the tables are reused: every
    processor starts at its last chain index, and a need that asks for a neighbour's ⊤ cannot be met.

    References
    ----------
    Falkirk Wheel paper §4.3; ``specs/spans.md#watermark``.
    """
    f = t.flat
    ctop = (t.chain_len - 1).astype(np.int64)
    none = np.iinfo(f.need.dtype).max
    need = f.need.copy()
    need[need > ctop[f.nbr][:, None]] = none
    wm = FlatCompiled(ctop, f.L, f.owner, f.nbr, need)
    levels, _e, _s = run_bulk(wm)
    return {name: int(v) for name, v in zip(t.names, levels.tolist(), strict=True)}
