"""Dataflow topologies: operators with parallelism, pipeline and shuffle connections, workloads.

An *operator* (``source``, ``filter``, ``split``, ...) is materialised as ``parallelism``
instances; every instance is one process of the resulting pattern, named ``"<operator>.<k>"``.
A *connection* between two operators is materialised as channels (FERDiS Fig. 9):

- ``pipeline``: instance k of the upstream operator feeds instance k of the downstream one (both
  operators must have the same parallelism);
- ``shuffle``: every upstream instance feeds every downstream instance; a record goes to the
  instance ``key % parallelism`` of the downstream operator.

A channel is a FIFO link between two processes. Index conventions: processes are numbered in
operator order then instance order; channels are numbered in connection order, then upstream
instance, then downstream instance. Definitions: ``specs/simulate.md#topology``.

References
----------
.. [1] M. Zwart, M. Fragkoulis, A. Katsifodimos, "Benchmarking checkpoint-based fault tolerance
   algorithms in stateful stream processing" (FERDiS), §6 (Fig. 9: pipeline and shuffle
   connections) and §8.1 (workloads: NEXMark 2, incremental WordCount, the cyclic n-hop query).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import networkx as nx

from rollcheck.pyimpl.errors import InvalidInputError

__all__ = [
    "PIPELINE",
    "SHUFFLE",
    "OPERATOR_KINDS",
    "Operator",
    "Connection",
    "Channel",
    "Topology",
    "WORKLOADS",
    "workload",
    "nexmark",
    "wordcount",
    "nhop",
]

PIPELINE = "pipeline"
SHUFFLE = "shuffle"
#: The operator kinds the engine knows how to run (``rollcheck.pyimpl.simulate.engine``).
OPERATOR_KINDS = ("source", "filter", "split", "count", "sink", "hop-match", "hop-expand")


@dataclass(frozen=True)
class Operator:
    """A logical operator with ``parallelism`` instances; ``kind`` selects its processing."""

    name: str
    kind: str
    parallelism: int = 1


@dataclass(frozen=True)
class Connection:
    """A logical edge ``src -> dst`` materialised as ``pipeline`` or ``shuffle`` channels."""

    src: str
    dst: str
    kind: str = PIPELINE


@dataclass(frozen=True)
class Channel:
    """A FIFO link between two processes; ``connection`` indexes ``Topology.connections``."""

    index: int
    src: int
    dst: int
    connection: int


@dataclass(frozen=True, eq=False)
class Topology:
    """A validated operator graph and its materialisation into processes and channels.

    Parameters
    ----------
    name : str
    operators : tuple of Operator
    connections : tuple of Connection

    Raises
    ------
    InvalidInputError
        Unknown operator kinds or names, duplicate names, parallelism below 1, a pipeline
        between operators of different parallelism, a source with inputs, a self-loop.

    Examples
    --------
    >>> t = nexmark(2)
    >>> t.process_names
    ('source.0', 'source.1', 'filter.0', 'filter.1', 'sink.0', 'sink.1')
    >>> [(c.src, c.dst) for c in t.channels]
    [(0, 2), (1, 3), (2, 4), (3, 5)]
    >>> t.is_cyclic, nhop(2).is_cyclic
    (False, True)
    """

    name: str
    operators: tuple[Operator, ...]
    connections: tuple[Connection, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "operators", tuple(self.operators))
        object.__setattr__(self, "connections", tuple(self.connections))
        names = [o.name for o in self.operators]
        if not names:
            raise InvalidInputError("a topology needs at least one operator", location="operators")
        if len(set(names)) != len(names):
            raise InvalidInputError("operator names must be unique", location="operators")
        for k, o in enumerate(self.operators):
            if o.kind not in OPERATOR_KINDS:
                raise InvalidInputError(
                    f"unknown operator kind {o.kind!r} (known: {', '.join(OPERATOR_KINDS)})",
                    location=f"operators[{k}]",
                )
            if type(o.parallelism) is not int or o.parallelism < 1:
                raise InvalidInputError(
                    f"parallelism of {o.name!r} must be an integer >= 1, got {o.parallelism!r}",
                    location=f"operators[{k}]",
                )
        by_name = {o.name: o for o in self.operators}
        for k, c in enumerate(self.connections):
            loc = f"connections[{k}]"
            if c.src not in by_name or c.dst not in by_name:
                raise InvalidInputError(f"connection {c.src!r} -> {c.dst!r} names an unknown operator", location=loc)
            if c.src == c.dst:
                raise InvalidInputError(f"self-loop on {c.src!r}", location=loc)
            if c.kind not in (PIPELINE, SHUFFLE):
                raise InvalidInputError(f"connection kind must be pipeline or shuffle, got {c.kind!r}", location=loc)
            if c.kind == PIPELINE and by_name[c.src].parallelism != by_name[c.dst].parallelism:
                raise InvalidInputError(
                    f"pipeline {c.src!r} -> {c.dst!r} needs equal parallelism "
                    f"({by_name[c.src].parallelism} != {by_name[c.dst].parallelism})",
                    location=loc,
                )
            if by_name[c.dst].kind == "source":
                raise InvalidInputError(f"source {c.dst!r} cannot have inputs", location=loc)
        if not any(o.kind == "source" for o in self.operators):
            raise InvalidInputError("a topology needs a source operator", location="operators")

    # ------------------------------------------------------------------ materialisation
    @cached_property
    def operator_index(self) -> dict[str, int]:
        """The position of each operator by name."""
        return {o.name: k for k, o in enumerate(self.operators)}

    @cached_property
    def first_process(self) -> tuple[int, ...]:
        """Process index of instance 0 of each operator."""
        out, acc = [], 0
        for o in self.operators:
            out.append(acc)
            acc += o.parallelism
        return tuple(out)

    @property
    def n(self) -> int:
        """Number of processes (operator instances)."""
        return sum(o.parallelism for o in self.operators)

    def process(self, operator: str, instance: int) -> int:
        """Process index of ``operator``'s instance ``instance``.

        Parameters
        ----------
        operator : str
            The operator.
        instance : int
            The instance number.
        """
        k = self.operator_index[operator]
        return self.first_process[k] + instance

    @cached_property
    def process_operator(self) -> tuple[int, ...]:
        """Operator index of every process."""
        return tuple(k for k, o in enumerate(self.operators) for _ in range(o.parallelism))

    @cached_property
    def process_instance(self) -> tuple[int, ...]:
        """The instance number (within its operator) of each process."""
        return tuple(j for o in self.operators for j in range(o.parallelism))

    @cached_property
    def process_names(self) -> tuple[str, ...]:
        """The name ``op.k`` of each process."""
        return tuple(f"{o.name}.{j}" for o in self.operators for j in range(o.parallelism))

    @cached_property
    def channels(self) -> tuple[Channel, ...]:
        """Every FIFO channel between processes, connection by connection."""
        out: list[Channel] = []
        for ci, c in enumerate(self.connections):
            src_op = self.operators[self.operator_index[c.src]]
            dst_op = self.operators[self.operator_index[c.dst]]
            for a in range(src_op.parallelism):
                targets = [a] if c.kind == PIPELINE else range(dst_op.parallelism)
                for b in targets:
                    out.append(Channel(len(out), self.process(c.src, a), self.process(c.dst, b), ci))
        return tuple(out)

    @cached_property
    def route(self) -> dict[tuple[int, int], tuple[int, ...]]:
        """(process, connection) -> channel indices.

        Indexed by the downstream instance (shuffle), or a single channel (pipeline).
        """
        out: dict[tuple[int, int], list[int]] = {}
        for ch in self.channels:
            out.setdefault((ch.src, ch.connection), []).append(ch.index)
        return {k: tuple(v) for k, v in out.items()}

    @cached_property
    def inputs(self) -> tuple[tuple[int, ...], ...]:
        """Input channel indices of every process."""
        ins: list[list[int]] = [[] for _ in range(self.n)]
        for ch in self.channels:
            ins[ch.dst].append(ch.index)
        return tuple(tuple(x) for x in ins)

    @cached_property
    def outputs(self) -> tuple[tuple[int, ...], ...]:
        """The output channel indices of each process."""
        outs: list[list[int]] = [[] for _ in range(self.n)]
        for ch in self.channels:
            outs[ch.src].append(ch.index)
        return tuple(tuple(x) for x in outs)

    def out_connections(self, operator: int) -> tuple[int, ...]:
        """Indices of the connections leaving operator number ``operator``."""
        name = self.operators[operator].name
        return tuple(k for k, c in enumerate(self.connections) if c.src == name)

    @cached_property
    def is_cyclic(self) -> bool:
        """Whether the operator graph has a cycle."""
        g = nx.DiGraph()
        g.add_nodes_from(o.name for o in self.operators)
        g.add_edges_from((c.src, c.dst) for c in self.connections)
        return not nx.is_directed_acyclic_graph(g)

    def resolve_process(self, ref: str) -> int:
        """``"op"`` (instance 0) or ``"op.k"`` to a process index (``InvalidInputError`` if unknown)."""
        if ref in self.process_names:
            return self.process_names.index(ref)
        if ref in self.operator_index:
            return self.process(ref, 0)
        raise InvalidInputError(
            f"unknown operator instance {ref!r} (known: {', '.join(self.process_names)})", location="--fail"
        )


# ---------------------------------------------------------------------- workloads (FERDiS §8.1)
def _check_parallelism(parallelism: int) -> int:
    if type(parallelism) is not int or not 1 <= parallelism <= 64:
        raise InvalidInputError(f"parallelism must be an integer in 1..64, got {parallelism!r}", location="--parallelism")
    return parallelism


def nexmark(parallelism: int = 2) -> Topology:
    """NEXMark query 2 (selection) as in FERDiS §8.1: source -> filter -> sink, all pipeline.

    The filter keeps records with an even key (about half of them), like FERDiS's variant.
    """
    p = _check_parallelism(parallelism)
    return Topology(
        "nexmark",
        (Operator("source", "source", p), Operator("filter", "filter", p), Operator("sink", "sink", p)),
        (Connection("source", "filter"), Connection("filter", "sink")),
    )


def wordcount(parallelism: int = 2) -> Topology:
    """Incremental WordCount (FERDiS §8.1).

    source -> split (pipeline) -> count (shuffle by word, the scatter) -> one stateful sink
    (shuffle into a single instance, the gather).
    """
    p = _check_parallelism(parallelism)
    return Topology(
        "wordcount",
        (
            Operator("source", "source", p),
            Operator("split", "split", p),
            Operator("count", "count", p),
            Operator("sink", "sink", 1),
        ),
        (
            Connection("source", "split", PIPELINE),
            Connection("split", "count", SHUFFLE),
            Connection("count", "sink", SHUFFLE),
        ),
    )


def nhop(parallelism: int = 2) -> Topology:
    """The cyclic n-hop query (FERDiS §8.1, Fig. 19f).

    source -> map0 -> map1 -> sink as a full pipeline, plus a shuffle back-channel map1 -> map0
    keyed by the edge's target vertex.
    """
    p = _check_parallelism(parallelism)
    return Topology(
        "nhop",
        (
            Operator("source", "source", p),
            Operator("map0", "hop-match", p),
            Operator("map1", "hop-expand", p),
            Operator("sink", "sink", p),
        ),
        (
            Connection("source", "map0", PIPELINE),
            Connection("map0", "map1", PIPELINE),
            Connection("map1", "sink", PIPELINE),
            Connection("map1", "map0", SHUFFLE),
        ),
    )


WORKLOADS = {"nexmark": nexmark, "wordcount": wordcount, "nhop": nhop}


def workload(name: str, parallelism: int = 2) -> Topology:
    """The topology of workload ``name`` (``nexmark``, ``wordcount`` or ``nhop``).

    Parameters
    ----------
    name : str
        The workload.
    parallelism : int, optional
        The instances per operator.
    """
    if name not in WORKLOADS:
        raise InvalidInputError(f"unknown workload {name!r} (known: {', '.join(WORKLOADS)})", location="--workload")
    return WORKLOADS[name](parallelism)
