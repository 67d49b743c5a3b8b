"""Parameters of one simulation: the job, the protocol, the failure, the mutation switches.

``SimConfig.validate`` checks every parameter up front and names the command-line flag of the
offending one (``specs/simulate.md#engine``).

References
----------
.. [1] FERDiS paper, §7.2.1–7.2.8 (the protocols and the recovery the switches of
   :class:`Variant` turn off) and §8.1 (workloads).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from rollcheck.pyimpl.errors import InvalidInputError
from rollcheck.pyimpl.protocols import Protocol, get_snapshot_protocol, resolve_protocol
from rollcheck.pyimpl.simulate.topology import Topology, workload

__all__ = ["CL_PROTOCOLS", "PROTOCOL_NAMES", "Variant", "SimConfig", "make_protocol"]

CL_PROTOCOLS = ("cl-aligned", "cl-unaligned", "cl-aligned-no-block")
PROTOCOL_NAMES = ("uc", "bcs", "hmnr", "cl-aligned", "cl-unaligned")


def make_protocol(spec: str) -> Protocol:
    """A fresh checkpointing protocol for ``spec``: a built-in name, ``MODULE:CLASS`` or ``FILE.py:CLASS``.

    Coordinated Chandy–Lamport snapshots (:data:`CL_PROTOCOLS`) are not :class:`Protocol` objects
    and are handled by the engine itself. Errors are reported against ``--protocol``.

    Examples
    --------
    >>> make_protocol("hmnr").name
    'hmnr'
    >>> make_protocol("rollcheck.pyimpl.protocols.bcs:BCS").name
    'bcs'
    >>> make_protocol("nope")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    rollcheck.pyimpl.errors.InvalidInputError: ...
    """
    try:
        return resolve_protocol(spec)
    except InvalidInputError as e:
        if e.location in (None, "protocol"):
            raise InvalidInputError(e.reason, source=e.source, location="--protocol") from None
        raise


@dataclass(frozen=True)
class Variant:
    """Switches for the mutation catalogue; the defaults are the reference behaviour.

    Attributes
    ----------
    clear_channels : bool
        Flush a channel when both of its ends roll back (FERDiS §7.2.6, case A).
    dedup : bool
        Receivers accept a message only if its sequence number is the next expected one.
    replay_offset : int
        Replay starts at the restored last-applied sequence number plus this (reference: 1).
    record_channels : bool
        Unaligned Chandy–Lamport records in-flight input messages as channel state.
    timer_restart_on_forced : bool
        The basic-checkpoint timer restarts after a forced checkpoint too.
    detect_deadlock : bool
        Report a run stuck on blocked inputs as a deadlock.
    volatile_logs_of_rolled_back : bool
        With volatile logs, every rolled-back process (not only the failed one) loses its log.
    """

    clear_channels: bool = True
    dedup: bool = True
    replay_offset: int = 1
    record_channels: bool = True
    timer_restart_on_forced: bool = True
    detect_deadlock: bool = True
    volatile_logs_of_rolled_back: bool = False


@dataclass(frozen=True)
class SimConfig:
    """One simulation. Times are in arbitrary units (the sweep uses "seconds").

    ``protocol`` is a built-in name (:data:`PROTOCOL_NAMES`, the Chandy–Lamport variants of
    :data:`CL_PROTOCOLS`, the mutation catalogue's variants) or a user protocol given as
    ``MODULE:CLASS`` or ``path/to/file.py:CLASS`` (see :func:`make_protocol`).
    ``fail`` names the failing operator instance (``"map0"`` = instance 0, or ``"map0.1"``);
    ``fail_at`` is the failure time (both or neither). ``virtual``: virtual checkpoints in the
    recovery line; ``persistent_logs``: message logs survive the failure of their process.
    """

    workload: str = "nexmark"
    protocol: str = "uc"
    interval: float = 10.0
    parallelism: int = 2
    records: int = 60
    gap: float = 1.0
    delay: float = 0.5
    cost: float = 0.05
    fail: str | None = None
    fail_at: float | None = None
    virtual: bool = True
    persistent_logs: bool = True
    seed: int = 0
    variant: Variant = field(default_factory=Variant)

    def validate(self) -> Topology:
        """Check every parameter; return the topology. Raises InvalidInputError naming the flag."""
        topo = workload(self.workload, self.parallelism)
        if not isinstance(self.protocol, str):
            raise InvalidInputError(f"protocol must be a name, got {self.protocol!r}", location="--protocol")
        if self.protocol in CL_PROTOCOLS:
            get_snapshot_protocol(self.protocol)
        else:
            make_protocol(self.protocol)
        for name, v, lo in (("interval", self.interval, 0.0), ("gap", self.gap, 0.0), ("delay", self.delay, 0.0)):
            if not isinstance(v, (int, float)) or not v > lo or v != v or v == float("inf"):
                raise InvalidInputError(f"{name} must be a finite number > {lo}, got {v!r}", location=f"--{name}")
        if not isinstance(self.cost, (int, float)) or not 0 <= self.cost < float("inf"):
            raise InvalidInputError(f"cost must be a finite number >= 0, got {self.cost!r}", location="--cost")
        if type(self.records) is not int or not 1 <= self.records <= 10_000_000:
            raise InvalidInputError(f"records must be an integer in 1..10^7, got {self.records!r}", location="--records")
        if type(self.seed) is not int:
            raise InvalidInputError(f"seed must be an integer, got {self.seed!r}", location="--seed")
        if (self.fail is None) != (self.fail_at is None):
            raise InvalidInputError("--fail and --fail-at go together", location="--fail")
        if self.fail is not None:
            topo.resolve_process(self.fail)
            if not isinstance(self.fail_at, (int, float)) or not 0 < self.fail_at < float("inf"):
                raise InvalidInputError(f"fail-at must be a finite time > 0, got {self.fail_at!r}", location="--fail-at")
        return topo

    def without_failure(self) -> SimConfig:
        """The same configuration without its failure (the failure-free reference run)."""
        return replace(self, fail=None, fail_at=None)

