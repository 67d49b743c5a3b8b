"""A small dataflow executor: record a run, fail processors, roll back, re-execute, compare.

Processors are deterministic operators on FIFO channels; messages carry logical times in the
receiver's domain (sequence numbers, epochs or loop times) and a seeded scheduler interleaves
them. Checkpoints follow a policy (``"seq"`` every k deliveries, or ``"epoch"`` when an epoch is
complete, selective when later epochs were processed). Recovery builds the span system from the
recording (:func:`build_system`), solves it, restores every processor not at ⊤ to its span and
re-delivers the logged messages its restored state has not processed; the outputs are compared
with a failure-free run (exactly once). See docs/internals/pyimpl-spans.md#executor.

References
----------
.. [1] I. Gog, M. Isard, M. Abadi. "Falkirk Wheel: Rollback Recovery for Dataflow Systems",
   SoCC 2021, §3.1–3.4, §4.1–4.3.

The end-to-end theorem: ``specs/spans.md#exactly-once``.
"""

from rollcheck.pyimpl.spans.executor.examples import EXAMPLES, example
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
from rollcheck.pyimpl.spans.executor.recording import Built, build_system
from rollcheck.pyimpl.spans.executor.recovery import (
    Outcome,
    exactly_once,
    failure_experiment,
    failure_sweep,
    recover,
)
from rollcheck.pyimpl.spans.executor.run import Event, Msg, Run, run_to_end

__all__ = [
    "Op", "Source", "Map", "Counter_", "SumPerTime", "Sink", "BridgeOp", "LoopEntryOp", "LoopBody",
    "LoopExitOp", "Edge", "Dataflow", "Msg", "Event", "Run", "Built", "build_system", "recover",
    "run_to_end", "exactly_once", "Outcome", "failure_experiment", "failure_sweep", "EXAMPLES", "example",
]
