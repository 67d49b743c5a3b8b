"""A small dataflow executor: record a run, fail processors, roll back to the computed spans,
re-execute from logs, and compare with a failure-free run (exactly once).

Processors are deterministic operators; messages carry logical times in the receiver's domain
(§3.1): sequence numbers ``(edge, n)`` assigned by the sender on *seq* edges, epochs, or loop
times ``(epoch, counter)``. Channels are FIFO; a seeded scheduler picks the next channel to
deliver from, so messages of different times interleave (selective rollback, §3.4).

Checkpoints (each joins the processor's chain of restorable spans):

* ``policy="seq", every=k``: after every ``k`` deliveries, the processed prefix of each input edge
  (a :class:`~rollcheck.pyimpl.spans.times.SeqFrontier`);
* ``policy="epoch"``: whenever epoch ``E`` is complete everywhere (no message of an epoch
  ``<= E`` is pending anywhere), the span of epochs ``<= E`` (an
  :class:`~rollcheck.pyimpl.spans.times.EpochFrontier`, or a :class:`~rollcheck.pyimpl.spans.times.LoopFrontier` with
  whole epochs for loop processors). A processor that already processed later epochs takes a
  *selective* checkpoint: its state restricted to the span.

On a time domain where one time is shared by many messages (epochs, loop times), a checkpoint
of ``p`` joins the chain only once every *unlogged* message its events sent has been processed by
the receiver: the "times are complete at the receiver" rule of §3.3 (no transmitted message is
lost). On sequence-number edges every message has its own time and the concrete ⊤ of the
receiver already protects in-flight unlogged messages (C1).

Recovery (§3.3, §4.1): the span system is built from the recording (:func:`build_system`), solved,
and every processor not at ⊤ is restored to the events of its span (a selective replay of its
history); for an edge not kept at ⊤ on both ends, the queue becomes the *logged* messages sent by
kept events that the receiver's restored state has not processed; unlogged such messages are
lost (the executor records them; C1 forbids them). The sources' external producer keeps every
input batch until it is acknowledged (when the low watermark passes it, §4.3).

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
