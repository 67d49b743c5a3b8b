"""Chandy–Lamport snapshots for dataflow operator graphs: aligned (blocking) and unaligned barriers.

Each operator is a pure state machine driven by the simulator over FIFO channels; a snapshot has an
id (1, 2, ...), is started at the source operators with :meth:`SnapshotProtocol.start`, and its
markers flow along every channel, one snapshot at a time per operator.

- ``cl-aligned`` (FERDiS §5.1/§7.2.2) blocks an input once its marker arrived, checkpoints when
  markers arrived on every input, and records no channel state; on a cycle it deadlocks, and the
  simulator must report it.
- ``cl-unaligned`` (classic Chandy–Lamport) checkpoints and forwards on the first marker, never
  blocks, and records the messages still arriving on unmarked inputs (the channel state).
- ``cl-aligned-no-block`` (broken, from the mutation catalogue) aligns but never blocks, so
  post-snapshot messages change the state before the checkpoint (orphans).

References
----------
FERDiS paper §5.1, §7.2.2–7.2.3; Chandy and Lamport, "Distributed snapshots" (1985);
``specs/protocols.md#chandy-lamport``.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import NamedTuple

from typing_extensions import override

from rollcheck.pyimpl.errors import InvalidInputError

__all__ = [
    "CHECKPOINT",
    "FORWARD",
    "COMPLETE",
    "CLAction",
    "CLState",
    "SnapshotProtocol",
    "AlignedSnapshot",
    "UnalignedSnapshot",
    "AlignedNoBlock",
    "SNAPSHOT_PROTOCOLS",
    "get_snapshot_protocol",
]

CHECKPOINT = "checkpoint"  # save the operator state now, as part of snapshot `snapshot`
FORWARD = "forward"  # send a marker of snapshot `snapshot` on every output channel
COMPLETE = "complete"  # the operator's part of snapshot `snapshot` is done (markers on all inputs)


class CLAction(NamedTuple):
    """One thing the simulator must do for an operator: ``kind`` (see above) for ``snapshot``."""

    kind: str
    snapshot: int


class CLState(NamedTuple):
    """Immutable per-operator snapshot state.

    ``snapshot`` is the id of the snapshot in progress (``active``) or of the latest completed one;
    ``marked`` holds the inputs whose marker of that snapshot has arrived; ``taken`` whether the
    operator already checkpointed for it.
    """

    op: Hashable
    inputs: tuple[Hashable, ...]
    outputs: tuple[Hashable, ...]
    snapshot: int = 0
    active: bool = False
    marked: frozenset = frozenset()
    taken: bool = False


class SnapshotProtocol:
    """Common part of the snapshot state machines."""

    name = "?"
    aligned = True
    blocks = True

    def initial(self, op: Hashable, inputs: Sequence[Hashable], outputs: Sequence[Hashable]) -> CLState:
        """State of operator ``op`` with the given input and output channel ids.

        Parameters
        ----------
        op : hashable
            The operator.
        inputs, outputs : sequence of hashable
            Its input and output channel ids (inputs distinct).
        """
        ins = tuple(inputs)
        if len(set(ins)) != len(ins):
            raise InvalidInputError(f"operator {op!r}: duplicate input channel")
        return CLState(op, ins, tuple(outputs))

    def start(self, st: CLState, snapshot: int) -> tuple[CLState, tuple[CLAction, ...]]:
        """Initiate ``snapshot`` at a source operator (one without inputs).

        Parameters
        ----------
        st : CLState
            The source operator's state.
        snapshot : int
            The new snapshot's id (above every earlier one).

        Returns
        -------
        tuple
            The new state and the actions (checkpoint, forward the marker, complete).
        """
        if st.inputs:
            raise InvalidInputError(f"operator {st.op!r} has inputs; snapshots start at sources")
        self._check_new(st, snapshot)
        acts = (CLAction(CHECKPOINT, snapshot), CLAction(FORWARD, snapshot), CLAction(COMPLETE, snapshot))
        return st._replace(snapshot=snapshot, active=False, marked=frozenset(), taken=True), acts

    def _check_new(self, st: CLState, snapshot: int) -> None:
        if snapshot <= st.snapshot:
            raise InvalidInputError(f"operator {st.op!r}: marker of old snapshot {snapshot} (at {st.snapshot})")
        if st.active:
            raise InvalidInputError(
                f"operator {st.op!r}: marker of snapshot {snapshot} while snapshot {st.snapshot} is in progress"
            )

    def on_marker(self, st: CLState, channel: Hashable, snapshot: int) -> tuple[CLState, tuple[CLAction, ...]]:
        """A marker of ``snapshot`` arrived on input ``channel``: the new state and the actions.

        Parameters
        ----------
        st : CLState
            The operator's state.
        channel : hashable
            The input channel the marker came on.
        snapshot : int
            The marker's snapshot id.

        Returns
        -------
        tuple
            The new state and the tuple of :class:`CLAction` to take.
        """
        if channel not in st.inputs:
            raise InvalidInputError(f"operator {st.op!r}: marker on unknown input {channel!r}")
        if st.active and snapshot == st.snapshot:
            if channel in st.marked:
                raise InvalidInputError(f"operator {st.op!r}: second marker of snapshot {snapshot} on {channel!r}")
            marked = st.marked | {channel}
            taken = st.taken
        else:
            self._check_new(st, snapshot)
            marked = frozenset([channel])
            taken = False
        acts: list[CLAction] = []
        if not taken and (not self.aligned or len(marked) == len(st.inputs)):
            acts += [CLAction(CHECKPOINT, snapshot), CLAction(FORWARD, snapshot)]
            taken = True
        if len(marked) == len(st.inputs):
            acts.append(CLAction(COMPLETE, snapshot))
            return st._replace(snapshot=snapshot, active=False, marked=frozenset(), taken=taken), tuple(acts)
        return st._replace(snapshot=snapshot, active=True, marked=marked, taken=taken), tuple(acts)

    def is_blocked(self, st: CLState, channel: Hashable) -> bool:
        """Whether the simulator must hold back data (and markers) arriving on ``channel``.

        Parameters
        ----------
        st : CLState
            The operator's state.
        channel : hashable
            An input channel.
        """
        return self.blocks and st.active and channel in st.marked

    def blocked_inputs(self, st: CLState) -> frozenset:
        """The inputs whose data the simulator must hold back now."""
        return st.marked if (self.blocks and st.active) else frozenset()

    def records(self, st: CLState, channel: Hashable) -> bool:
        """Whether a data message arriving now on ``channel`` belongs to the recorded channel state.

        Parameters
        ----------
        st : CLState
            The operator's state.
        channel : hashable
            An input channel.
        """
        return False


class AlignedSnapshot(SnapshotProtocol):
    """Aligned barriers (block each marked input until every input delivered its marker).

    Examples
    --------
    >>> cl = AlignedSnapshot()
    >>> st = cl.initial("join", ["a", "b"], ["out"])
    >>> st, acts = cl.on_marker(st, "a", 1)
    >>> acts, cl.is_blocked(st, "a"), cl.is_blocked(st, "b")
    ((), True, False)
    >>> st, acts = cl.on_marker(st, "b", 1)
    >>> [a.kind for a in acts], cl.is_blocked(st, "a")
    (['checkpoint', 'forward', 'complete'], False)
    """

    name = "cl-aligned"
    aligned = True
    blocks = True


class UnalignedSnapshot(SnapshotProtocol):
    """Unaligned barriers: checkpoint on the first marker, record in-flight input messages.

    Examples
    --------
    >>> cl = UnalignedSnapshot()
    >>> st = cl.initial("join", ["a", "b"], ["out"])
    >>> st, acts = cl.on_marker(st, "a", 1)
    >>> [a.kind for a in acts], cl.is_blocked(st, "a"), cl.records(st, "b"), cl.records(st, "a")
    (['checkpoint', 'forward'], False, True, False)
    >>> st, acts = cl.on_marker(st, "b", 1)
    >>> [a.kind for a in acts], cl.records(st, "b")
    (['complete'], False)
    """

    name = "cl-unaligned"
    aligned = False
    blocks = False

    @override
    def records(self, st: CLState, channel: Hashable) -> bool:
        return st.active and st.taken and channel not in st.marked


class AlignedNoBlock(AlignedSnapshot):
    """Broken variant: aligns markers but keeps delivering data on marked inputs."""

    name = "cl-aligned-no-block"
    blocks = False


SNAPSHOT_PROTOCOLS: tuple[str, ...] = ("cl-aligned", "cl-unaligned")
_SNAP = {c.name: c for c in (AlignedSnapshot, UnalignedSnapshot, AlignedNoBlock)}


def get_snapshot_protocol(name: str) -> SnapshotProtocol:
    """``cl-aligned``, ``cl-unaligned`` (or the variant ``cl-aligned-no-block``)."""
    cls = _SNAP.get(name) if isinstance(name, str) else None
    if cls is None:
        raise InvalidInputError(f"unknown snapshot protocol {name!r} (known: {', '.join(_SNAP)})")
    return cls()
