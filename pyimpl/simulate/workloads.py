"""What the operators of the simulated workloads compute: source records and operator functions.

The topologies (:mod:`~rollcheck.pyimpl.simulate.topology`) say who is connected to whom; this
module says what flows. A payload is ``(key, units, value)``: ``key`` routes a record over a
shuffle connection, ``units`` is the source-record lineage a sink accumulates (the output the
processing-semantics verdict compares) and ``value`` is the operator-specific content. Sources
read a replayable input: record ``offset`` of source instance ``k`` is a pure function of
``(k, offset)``, so a rolled-back source re-reads exactly what it read before
(``specs/simulate.md#engine``).

References
----------
.. [1] FERDiS paper, §8.1 (workloads: NEXMark query 2, incremental WordCount, the cyclic n-hop
   query).
"""

from __future__ import annotations

from typing import Any

from rollcheck.pyimpl.errors import InternalError
from rollcheck.pyimpl.simulate.state import Proc
from rollcheck.pyimpl.simulate.topology import SHUFFLE, Topology

__all__ = ["VOCABULARY", "VERTICES", "HOPS", "source_record", "source_payload", "apply_operator"]

VOCABULARY = 12  # wordcount: number of distinct words
VERTICES = 16  # nhop: number of graph vertices
HOPS = 2  # nhop: the n of n-hop


def source_record(instance: int, records: int, offset: int) -> tuple[int, int]:
    """Record ``offset`` of source instance ``instance``: its global id and its key.

    Parameters
    ----------
    instance : int
        The source instance.
    records : int
        The records per instance.
    offset : int
        The record's position in the instance.

    Examples
    --------
    >>> source_record(0, 10, 3), source_record(1, 10, 3)
    ((3, 283), (13, 893))
    """
    gid = instance * records + offset
    return gid, (gid * 2654435761) % 1000


def source_payload(workload: str, gid: int, key: int) -> tuple[int, tuple[Any, ...], Any]:
    """The payload a source of ``workload`` emits for record ``gid`` (see the module notes).

    Parameters
    ----------
    workload : str
        ``"wordcount"``, ``"nhop"`` or ``"nexmark"``.
    gid : int
        The record's global id.
    key : int
        The record's key.

    Returns
    -------
    tuple
        ``(key, units, value)``.

    Examples
    --------
    >>> source_payload("wordcount", 4, 7)
    (7, ((4, 0), (4, 1)), (4, 9))
    >>> source_payload("nhop", 4, 7), source_payload("nexmark", 4, 7)
    ((12, (4,), (12, 15)), (7, (4,), 4))
    """
    if workload == "wordcount":
        nw = 1 + gid % 3
        words = tuple((gid * 31 + j * 17) % VOCABULARY for j in range(nw))
        return key, tuple((gid, j) for j in range(nw)), words
    if workload == "nhop":
        frm, to = (gid * 7) % VERTICES, (gid * 11 + 3) % VERTICES
        return frm, (gid,), (frm, to)
    return key, (gid,), gid


def apply_operator(topo: Topology, pr: Proc, conns: tuple[int, ...], ch: int,
                   payload: Any) -> list[tuple[int, Any]]:
    """Process ``payload`` received on channel ``ch`` by ``pr``: update ``pr.app``, return outputs.

    ``conns`` are the output connections of the operator of ``pr``; the result is a list of
    ``(connection, payload)`` pairs for the engine to route.

    Parameters
    ----------
    topo : Topology
        The topology.
    pr : Proc
        The processing process.
    conns : tuple of int
        The output connections of its operator.
    ch : int
        The channel the payload came on.
    payload : tuple
        ``(key, units, value)``.

    Raises
    ------
    InternalError
        The operator kind has no processing (the topology and this module disagree: a bug).
    """
    kind = pr.kind
    key, units, value = payload
    if kind == "filter":
        return [(conns[0], payload)] if key % 2 == 0 else []
    if kind == "split":
        words = value
        return [(conns[0], (w, (u,), 1)) for w, u in zip(words, units, strict=True)]
    if kind == "count":
        pr.app[key] = pr.app.get(key, 0) + 1
        return [(conns[0], (key, units, pr.app[key]))]
    if kind == "sink":
        pr.app.extend(units)
        return []
    if kind == "hop-match":
        if topo.connections[topo.channels[ch].connection].kind == SHUFFLE:
            # the back edge: remember a (hop-bounded) neighbour; no output (FERDiS §8.1)
            src, hop = value
            known = pr.app.get(key, ())
            pr.app[key] = tuple(sorted(set(known) | {(src, hop)}))[:8]
            return []
        frm, to = value
        matches = len(pr.app.get(frm, ()))
        return [(conns[0], (key, units, (frm, to, 1, matches)))]
    if kind == "hop-expand":
        frm, to, hop, _ = value
        pr.app[to] = pr.app.get(to, 0) + 1
        out = [(c, payload) for c in conns if topo.connections[c].dst == "sink"]
        if hop < HOPS:
            back = [c for c in conns if topo.connections[c].dst != "sink"]
            out += [(c, (to, (), (frm, hop + 1))) for c in back]
        return out
    raise InternalError(f"operator kind {kind!r} has no processing")
