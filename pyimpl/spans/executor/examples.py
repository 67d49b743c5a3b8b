"""The example dataflows of the executor.

A sequence-number pipeline, an epoch merge with a per-epoch sum, a loop with entry/feedback/exit,
an epoch→sequence-number bridge, and the selective-rollback pipeline of Fig. 4.

References
----------
.. [1] I. Gog, M. Isard, M. Abadi. "Falkirk Wheel: Rollback Recovery for Dataflow Systems",
   SoCC 2021, §3.1–3.2, §3.4 (Fig. 4).
"""

from __future__ import annotations

import random
from collections.abc import Callable

from rollcheck.pyimpl.errors import InvalidInputError
from rollcheck.pyimpl.spans.executor.graph import Dataflow, Edge
from rollcheck.pyimpl.spans.executor.operators import (
    BridgeOp,
    Counter_,
    LoopBody,
    LoopEntryOp,
    LoopExitOp,
    Map,
    Op,
    Sink,
    Source,
    SumPerTime,
)

__all__ = ['EXAMPLES', 'example']

def _batches(seed: int, epochs: int = 3, per: int = 3) -> dict[int, list[int]]:
    rng = random.Random(seed)
    return {t: [rng.randrange(1, 20) for _ in range(per)] for t in range(epochs)}


def _seq_example(seed: int, logged: bool = False) -> Dataflow:
    ops: dict[str, Op] = {"src": Source(_batches(seed), seq_out=True), "a": Counter_(),
                          "b": Counter_(), "sink": Sink(domain="seq")}
    edges = [Edge("e0", "src", "a", logged=True, seq=True, phi="recorded"),
             Edge("e1", "a", "b", logged=logged, seq=True, phi="recorded"),
             Edge("e2", "b", "sink", logged=False, seq=True, phi="recorded")]
    return Dataflow(ops, edges, {"src": ("epoch", 1), "a": ("seq", 2), "b": ("seq", 3), "sink": ("seq", 2)})


def _epoch_example(seed: int) -> Dataflow:
    rng = random.Random(seed)
    ops: dict[str, Op] = {"s1": Source(_batches(seed)), "s2": Source(_batches(seed + 1)),
                          "m1": Map((2, 1)), "m2": Map((1, rng.randrange(5))), "sum": SumPerTime(),
                          "out": Sink()}
    edges = [Edge("a1", "s1", "m1"), Edge("a2", "s2", "m2"), Edge("b1", "m1", "sum"),
             Edge("b2", "m2", "sum", logged=True), Edge("c", "sum", "out")]
    pol = {p: ("epoch", 1) for p in ops}
    return Dataflow(ops, edges, pol)


def _loop_example(seed: int) -> Dataflow:
    ops: dict[str, Op] = {"src": Source(_batches(seed, per=2)), "entry": LoopEntryOp(),
                          "body": LoopBody(), "exit": LoopExitOp(), "out": Sink()}
    edges = [Edge("in", "src", "entry"), Edge("enter", "entry", "body", phi="entry"),
             Edge("fb", "body", "body", phi="feedback"), Edge("leave", "body", "exit"),
             Edge("out", "exit", "out", phi="exit")]
    return Dataflow(ops, edges, {p: ("epoch", 1) for p in ops})


def _bridge_example(seed: int, per_epoch: bool = False) -> Dataflow:
    ops: dict[str, Op] = {"src": Source(_batches(seed)), "map": Map((3, 0)), "bridge": BridgeOp(),
                          "count": Counter_(), "out": Sink(domain="seq")}
    edges = [Edge("a", "src", "map"), Edge("b", "map", "bridge"),
             Edge("c", "bridge", "count", seq=True, phi="bridge-per-epoch" if per_epoch else "bridge"),
             Edge("d", "count", "out", seq=True, phi="recorded")]
    return Dataflow(ops, edges, {"src": ("epoch", 1), "map": ("epoch", 1), "bridge": ("epoch", 1),
                                 "count": ("seq", 2), "out": ("seq", 3)})


def _selective_example(seed: int) -> Dataflow:
    """Fig. 4: Select -> Sum -> Buffer over interleaved epochs."""
    ops: dict[str, Op] = {"src": Source(_batches(seed, epochs=2, per=4)), "select": Map((1, 0)),
                          "sum": SumPerTime(), "buffer": Sink()}
    edges = [Edge("a", "src", "select"), Edge("b", "select", "sum"), Edge("c", "sum", "buffer")]
    return Dataflow(ops, edges, {p: ("epoch", 1) for p in ops})


EXAMPLES: dict[str, Callable[[int], Dataflow]] = {
    "sequence-number": _seq_example,
    "epoch": _epoch_example,
    "loop": _loop_example,
    "bridge": _bridge_example,
    "selective": _selective_example,
}


def example(name: str, seed: int = 0) -> Dataflow:
    """One of the example dataflows (see :data:`EXAMPLES`).

    Parameters
    ----------
    name : str
        The example's name.
    seed : int, optional
        The seed of its input batches.
    """
    if name not in EXAMPLES:
        raise InvalidInputError(f"unknown example {name!r}; known: {sorted(EXAMPLES)}")
    return EXAMPLES[name](seed)
