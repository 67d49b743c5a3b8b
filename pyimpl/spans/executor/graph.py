"""The dataflow graph of the example executor: operators, edges and checkpoint policies.

Edges are logged or not, sequence-numbered or not, each with its transformer; every processor
has a checkpoint policy.

References
----------
.. [1] I. Gog, M. Isard, M. Abadi. "Falkirk Wheel: Rollback Recovery for Dataflow Systems",
   SoCC 2021, §3.1–3.2.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rollcheck.pyimpl.errors import InvalidInputError
from rollcheck.pyimpl.spans.executor.operators import Op

__all__ = ['Edge', 'Dataflow']

@dataclass(frozen=True)
class Edge:
    """An edge of the example dataflow.

    ``seq`` edges number their messages, ``logged`` edges keep L_e, ``phi`` names the transformer:
    identity, entry, feedback, exit, bridge, bridge-per-epoch, recorded, conservative.
    """

    name: str
    src: str
    dst: str
    logged: bool = False
    seq: bool = False
    phi: str = "identity"


@dataclass
class Dataflow:
    """Operators by name, edges, and each processor's checkpoint policy.

    ``policy`` maps a processor to ``("seq" | "epoch" | "none", k)``.
    """

    ops: dict[str, Op]
    edges: list[Edge]
    policy: dict[str, tuple[str, int]] = field(default_factory=dict)  # name -> ("seq"|"epoch"|"none", k)

    def __post_init__(self) -> None:
        for e in self.edges:
            for end in (e.src, e.dst):
                if end not in self.ops:
                    raise InvalidInputError(f"edge {e.name}: unknown processor {end!r}")
        self.outs = {p: [e.name for e in self.edges if e.src == p] for p in self.ops}
        self.ins = {p: [e.name for e in self.edges if e.dst == p] for p in self.ops}
        self.edge = {e.name: e for e in self.edges}

