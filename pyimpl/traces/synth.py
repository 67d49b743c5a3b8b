"""A toy message-passing engine that writes engine-neutral traces (tests, examples, benchmarks).

Processes exchange messages at random under a checkpointing protocol (basic checkpoints at random,
forced ones where the protocol decides), emit outputs, and fail at chosen steps. A recovery
computes its line by rollback propagation on the checkpoint graph
(:func:`~rollcheck.pyimpl.recovery.rollback_propagation` — a different algorithm from the R-graph
search the checker compares with), restores the protocol state of each restored checkpoint,
re-delivers the messages in transit from the senders' logs (``replayed``) and withdraws the
outputs of rolled-back work. The reference outputs are those of the effective execution.

Everything is decided by ``random.Random(seed)``: same seed, same trace.

References
----------
FERDiS paper §5.3 (CIC protocols) and §6.1 (rollback propagation).
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator, Sequence
from typing import Any

from rollcheck.pyimpl.errors import InvalidInputError
from rollcheck.pyimpl.pattern import CHECKPOINT, DELIVER, SEND, Event, Pattern
from rollcheck.pyimpl.protocols.base import checkpoint_function

__all__ = ["synthetic_trace", "write_synthetic_trace"]


def synthetic_trace(processes: int | Sequence[str] = 3, steps: int = 40, seed: int = 0,
                    protocol: str = "hmnr", failures: Sequence[int] = (), source: str = "toy",
                    output_every: int = 5) -> Iterator[dict[str, Any]]:
    """Yield the header, then the events of a seeded run (see the module docstring).

    Parameters
    ----------
    processes : int or sequence of str
        Number of processes (named ``P0``…) or their names.
    steps : int
        Number of random actions (each is one send, delivery, basic checkpoint or output).
    failures : sequence of int
        Steps before which a random process fails (a ``failure`` then a ``recovery``).
    output_every : int
        Roughly one action in ``output_every`` is an output (0: none).

    The last yielded object is ``{"kind": "x-reference", ...}``-free: the reference outputs are
    available as the ``reference`` attribute of the ``end`` event (``end["reference"]``).

    Examples
    --------
    >>> evs = list(synthetic_trace(3, 30, seed=1, failures=[20]))
    >>> evs[0]["format"], evs[-1]["kind"], any(e.get("kind") == "recovery" for e in evs)
    ('rollcheck.trace/1', 'end', True)
    """
    from rollcheck.pyimpl.protocols import resolve_protocol
    from rollcheck.pyimpl.recovery import rollback_propagation

    names = [f"P{i}" for i in range(processes)] if isinstance(processes, int) else list(processes)
    n = len(names)
    if n < 2:
        raise InvalidInputError("need at least 2 processes", location="processes")
    proto = resolve_protocol(protocol)
    rng = random.Random(seed)
    yield {"format": "rollcheck.trace/1", "source": source, "processes": names, "protocol": protocol,
           "seed": seed}
    seq = 0
    st = [proto.initial(i, n) for i in range(n)]
    snaps: list[list[Any]] = [[s] for s in st]
    count = [0] * n
    flight: list[tuple[str, int, int, Any, bool]] = []  # (id, src, dst, piggyback, replayed)
    pbs: dict[str, tuple[int, int, Any]] = {}
    evs: list[Event] = []
    outs: list[tuple[int, int, list[Any]]] = []  # (process, interval, [process, key, value])
    local = [0] * n
    next_id = 0
    fail_at = set(failures)

    def ev(kind: str, **fields: Any) -> dict[str, Any]:
        nonlocal seq
        seq += 1
        return {"seq": seq, "kind": kind, **fields}

    for step in range(steps):
        if step in fail_at:
            f = rng.randrange(n)
            yield ev("failure", processes=[names[f]])
            p = Pattern(tuple(names), tuple(evs))
            line = rollback_propagation(p, [f])
            cut = list(line.line)
            transit = set(line.in_transit)
            yield ev("recovery", line={names[i]: ("volatile" if line.volatile[i] else cut[i]) for i in range(n)},
                     in_transit=sorted(transit))
            # cut the effective execution
            c = [0] * n
            kept_evs: list[Event] = []
            for e in evs:
                i = e.process
                lim = None if line.volatile[i] else cut[i]
                if e.kind == CHECKPOINT:
                    c[i] += 1
                    if lim is not None and c[i] > lim:
                        continue
                elif lim is not None and c[i] >= lim:
                    continue
                kept_evs.append(e)
            evs = kept_evs
            for i in range(n):
                if not line.volatile[i]:
                    count[i] = cut[i]
                    del snaps[i][cut[i] + 1:]
                    st[i] = snaps[i][cut[i]]
            outs = [o for o in outs if line.volatile[o[0]] or o[1] < cut[o[0]]]
            flight = [(m, s, d, pbs[m][2], True) for m in sorted(transit) for s, d in [pbs[m][:2]]]
        r = rng.random()
        out_p = 1.0 / output_every if output_every else 0.0
        if flight and r < 0.4:
            k = rng.randrange(len(flight))
            mid, src, dst, pb, replayed = flight.pop(k)
            if proto.must_force(st[dst], src, pb):
                count[dst] += 1
                st[dst] = checkpoint_function(proto)(st[dst], True)
                snaps[dst].append(st[dst])
                evs.append(Event(dst, CHECKPOINT, None, None, True))
                yield ev("checkpoint", process=names[dst], index=count[dst], forced=True)
            st[dst] = proto.on_deliver(st[dst], src, pb)
            evs.append(Event(dst, DELIVER, mid))
            yield ev("deliver", process=names[dst], message=mid, **({"replayed": True} if replayed else {}))
        elif r < 0.4 + out_p:
            i = rng.randrange(n)
            local[i] += 1
            key, value = f"{names[i]}-{count[i]}-{local[i]}", rng.randrange(100)
            outs.append((i, count[i], [names[i], key, value]))
            yield ev("output", process=names[i], key=key, value=value)
        elif r < 0.85:
            i = rng.randrange(n)
            j = rng.randrange(n - 1)
            j += j >= i
            mid = f"m{next_id}"
            next_id += 1
            st[i], pb = proto.on_send(st[i], j)
            pbs[mid] = (i, j, pb)
            flight.append((mid, i, j, pb, False))
            evs.append(Event(i, SEND, mid, j))
            yield ev("send", process=names[i], message=mid, to=names[j])
        else:
            i = rng.randrange(n)
            count[i] += 1
            st[i] = checkpoint_function(proto)(st[i], False)
            snaps[i].append(st[i])
            evs.append(Event(i, CHECKPOINT))
            yield ev("checkpoint", process=names[i], index=count[i], forced=False)
    # drain: deliver everything still in flight, so that replays complete
    while flight:
        mid, src, dst, pb, replayed = flight.pop(0)
        if proto.must_force(st[dst], src, pb):
            count[dst] += 1
            st[dst] = checkpoint_function(proto)(st[dst], True)
            snaps[dst].append(st[dst])
            evs.append(Event(dst, CHECKPOINT, None, None, True))
            yield ev("checkpoint", process=names[dst], index=count[dst], forced=True)
        st[dst] = proto.on_deliver(st[dst], src, pb)
        evs.append(Event(dst, DELIVER, mid))
        yield ev("deliver", process=names[dst], message=mid, **({"replayed": True} if replayed else {}))
    end = ev("end")
    end["reference"] = [{"process": p, "key": k, "value": v} for _i, _x, (p, k, v) in outs]
    yield end


def write_synthetic_trace(path: str, *args: Any, reference: str | None = None, **kw: Any) -> int:
    """Write :func:`synthetic_trace` to ``path`` (and its reference outputs to ``reference``).

    Returns the number of events. The ``end`` line does not carry the reference in the file.
    """
    n = 0
    with open(path, "w", encoding="utf-8") as fh:
        for obj in synthetic_trace(*args, **kw):
            if obj.get("kind") == "end":
                ref = obj.pop("reference")
                if reference is not None:
                    with open(reference, "w", encoding="utf-8") as rf:
                        json.dump(ref, rf)
            fh.write(json.dumps(obj, separators=(",", ":")) + "\n")
            n += "seq" in obj
    return n
