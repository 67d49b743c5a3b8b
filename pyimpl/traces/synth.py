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

    names = [f"P{i}" for i in range(processes)] if isinstance(processes, int) else list(processes)
    n = len(names)
    if n < 2:
        raise InvalidInputError("need at least 2 processes", location="processes")
    proto = resolve_protocol(protocol)
    rng = random.Random(seed)
    yield {"format": "rollcheck.trace/1", "source": source, "processes": names, "protocol": protocol,
           "seed": seed}
    run = _ToyRun(names, proto, rng)
    fail_at = set(failures)
    for step in range(steps):
        if step in fail_at:
            yield from run.fail()
        r = rng.random()
        out_p = 1.0 / output_every if output_every else 0.0
        if run.flight and r < 0.4:
            yield from run.deliver(rng.randrange(len(run.flight)))
        elif r < 0.4 + out_p:
            yield run.output()
        elif r < 0.85:
            yield run.send()
        else:
            yield run.checkpoint()
    # drain: deliver everything still in flight, so that replays complete
    while run.flight:
        yield from run.deliver(0)
    end = run.ev("end")
    end["reference"] = [{"process": p, "key": k, "value": v} for _i, _x, (p, k, v) in run.outs]
    yield end


class _ToyRun:
    """The state of a toy run; each action returns (or yields) its trace events.

    Each process's protocol state and checkpoints, the messages in flight, the pattern so far and
    the outputs of the effective execution.
    """

    def __init__(self, names: list[str], proto: Any, rng: random.Random):
        n = len(names)
        self.names, self.proto, self.rng, self.n = names, proto, rng, n
        self.seq = 0
        self.st = [proto.initial(i, n) for i in range(n)]
        self.snaps: list[list[Any]] = [[s] for s in self.st]
        self.count = [0] * n
        self.flight: list[tuple[str, int, int, Any, bool]] = []  # (id, src, dst, piggyback, replayed)
        self.pbs: dict[str, tuple[int, int, Any]] = {}
        self.evs: list[Event] = []
        self.outs: list[tuple[int, int, list[Any]]] = []  # (process, interval, [process, key, value])
        self.local = [0] * n
        self.next_id = 0

    def ev(self, kind: str, **fields: Any) -> dict[str, Any]:
        self.seq += 1
        return {"seq": self.seq, "kind": kind, **fields}

    def fail(self) -> Iterator[dict[str, Any]]:
        """A random process fails and the run recovers.

        The recovery line comes from rollback propagation, the effective execution is cut to it,
        and the messages in transit are re-sent from the logs.
        """
        from rollcheck.pyimpl.recovery import rollback_propagation

        names, n, rng = self.names, self.n, self.rng
        f = rng.randrange(n)
        yield self.ev("failure", processes=[names[f]])
        p = Pattern(tuple(names), tuple(self.evs))
        line = rollback_propagation(p, [f])
        cut = list(line.line)
        transit = set(line.in_transit)
        yield self.ev("recovery", line={names[i]: ("volatile" if line.volatile[i] else cut[i]) for i in range(n)},
                      in_transit=sorted(transit))
        # cut the effective execution
        c = [0] * n
        kept_evs: list[Event] = []
        for e in self.evs:
            i = e.process
            lim = None if line.volatile[i] else cut[i]
            if e.kind == CHECKPOINT:
                c[i] += 1
                if lim is not None and c[i] > lim:
                    continue
            elif lim is not None and c[i] >= lim:
                continue
            kept_evs.append(e)
        self.evs = kept_evs
        for i in range(n):
            if not line.volatile[i]:
                self.count[i] = cut[i]
                del self.snaps[i][cut[i] + 1:]
                self.st[i] = self.snaps[i][cut[i]]
        self.outs = [o for o in self.outs if line.volatile[o[0]] or o[1] < cut[o[0]]]
        pbs = self.pbs
        self.flight = [(m, s, d, pbs[m][2], True) for m in sorted(transit) for s, d in [pbs[m][:2]]]

    def deliver(self, k: int) -> Iterator[dict[str, Any]]:
        """Deliver the ``k``-th message in flight, after a forced checkpoint if the protocol says so."""
        proto, names = self.proto, self.names
        mid, src, dst, pb, replayed = self.flight.pop(k)
        if proto.must_force(self.st[dst], src, pb):
            self.count[dst] += 1
            self.st[dst] = checkpoint_function(proto)(self.st[dst], True)
            self.snaps[dst].append(self.st[dst])
            self.evs.append(Event(dst, CHECKPOINT, None, None, True))
            yield self.ev("checkpoint", process=names[dst], index=self.count[dst], forced=True)
        self.st[dst] = proto.on_deliver(self.st[dst], src, pb)
        self.evs.append(Event(dst, DELIVER, mid))
        yield self.ev("deliver", process=names[dst], message=mid, **({"replayed": True} if replayed else {}))

    def output(self) -> dict[str, Any]:
        """A random process emits an output."""
        names, rng = self.names, self.rng
        i = rng.randrange(self.n)
        self.local[i] += 1
        key, value = f"{names[i]}-{self.count[i]}-{self.local[i]}", rng.randrange(100)
        self.outs.append((i, self.count[i], [names[i], key, value]))
        return self.ev("output", process=names[i], key=key, value=value)

    def send(self) -> dict[str, Any]:
        """A random process sends to another (the piggyback kept for a replay)."""
        rng = self.rng
        i = rng.randrange(self.n)
        j = rng.randrange(self.n - 1)
        j += j >= i
        mid = f"m{self.next_id}"
        self.next_id += 1
        self.st[i], pb = self.proto.on_send(self.st[i], j)
        self.pbs[mid] = (i, j, pb)
        self.flight.append((mid, i, j, pb, False))
        self.evs.append(Event(i, SEND, mid, j))
        return self.ev("send", process=self.names[i], message=mid, to=self.names[j])

    def checkpoint(self) -> dict[str, Any]:
        """A random process takes a basic checkpoint."""
        i = self.rng.randrange(self.n)
        self.count[i] += 1
        self.st[i] = checkpoint_function(self.proto)(self.st[i], False)
        self.snaps[i].append(self.st[i])
        self.evs.append(Event(i, CHECKPOINT))
        return self.ev("checkpoint", process=self.names[i], index=self.count[i], forced=False)


def write_synthetic_trace(path: str, *args: Any, reference: str | None = None, **kw: Any) -> int:
    """Write :func:`synthetic_trace` to ``path`` (and its reference outputs to ``reference``).

    Returns the number of events. The ``end`` line does not carry the reference in the file.

    Parameters
    ----------
    path : str
        The trace file.
    *args, **kw
        Passed to :func:`synthetic_trace`.
    reference : str, optional
        The file for the reference outputs (None: not written).

    Returns
    -------
    int
        The number of events written.
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
