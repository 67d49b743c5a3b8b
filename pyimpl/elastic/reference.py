"""The failure-free semantics (the oracle) and the queue bound of the elastic model.

``reference_streams`` computes, key by key and straight from the operator definitions (no tasks,
no partitions, no protocol), what every level of the pipeline emits; ``reference_output`` is what
the sink must hold exactly once (``specs/elastic.md#T1``). ``retention_rounds`` and
``queue_bound`` give the bound of ``specs/elastic.md#bound`` (SPATE §5.3.3).
"""

from __future__ import annotations

import math
import random

from rollcheck.pyimpl.elastic.config import Config
from rollcheck.pyimpl.elastic.operators import KINDS
from rollcheck.pyimpl.elastic.slices import Event
from rollcheck.pyimpl.errors import InvalidInputError

__all__ = ["source_events", "reference_streams", "reference_output", "retention_rounds", "queue_bound"]


# --------------------------------------------------------------------------------------------
# Workload and the failure-free semantics (the oracle)
# --------------------------------------------------------------------------------------------


def source_events(cfg: Config) -> list[list[tuple[int, int]]]:
    """The ``(key, value)`` pairs the source emits in rounds ``1..rounds`` (seeded, deterministic).

    Examples
    --------
    >>> source_events(Config(keys=3, rounds=2, max_rate=2, seed=1)) == source_events(
    ...     Config(keys=3, rounds=2, max_rate=2, seed=1))
    True
    """
    rng = random.Random(cfg.seed)
    out = []
    for _ in range(cfg.rounds):
        n = cfg.max_rate if cfg.workload == "constant" else rng.randint(0, cfg.max_rate)
        out.append([(rng.randrange(cfg.keys), rng.randrange(10)) for _ in range(n)])
    return out


def reference_streams(cfg: Config) -> list[dict[int, list[Event]]]:
    """Per level ``0..n``, per key, the events that level emits in a failure-free run.

    Computed key by key straight from the operator definitions: no tasks, no partitions, no
    protocol. Level ``n``'s stream is what the sink must receive exactly once.
    """
    per_key: dict[int, list[Event]] = {}
    counters: dict[int, int] = {}
    for batch in source_events(cfg):
        for key, value in batch:
            counters[key] = counters.get(key, 0) + 1
            per_key.setdefault(key, []).append(Event(key, counters[key], value))
    levels = [per_key]
    for op in cfg.ops:
        kind = KINDS[op]
        nxt: dict[int, list[Event]] = {}
        for key, evs in levels[-1].items():
            state: int | None = None
            outs = []
            for e in evs:
                state, o = kind.step(state, e.value)
                if o is not None:
                    outs.append(Event(key, e.seq, o))
            nxt[key] = outs
        levels.append(nxt)
    return levels


def reference_output(cfg: Config) -> dict[int, list[tuple[int, int]]]:
    """Per key, the ``(seq, value)`` list the sink must hold after a failure-free run."""
    last = reference_streams(cfg)[-1]
    return {k: [(e.seq, e.value) for e in evs] for k, evs in sorted(last.items()) if evs}


def _ceil_to(x: int, m: int) -> int:
    return -(-x // m) * m


def retention_rounds(ack_interval: int, checkpoint_interval: int, successor: str) -> int:
    """The most rounds an event stays in an output queue (counting its emission round).

    ``successor`` is ``"sink"``, ``"stateless"`` or ``"stateful"``: the kind of the task that
    receives the queue's events. An event emitted in round r is processed by the successor v in
    round r+1 and received by v's successor in round r+2; v sends the L1-ACK in the first ack
    round (a multiple of A) that is ≥ r+2 and, when v is stateful, ≥ v's first checkpoint round
    (a multiple of C) ≥ r+1. For the sink (reliable, no successor) the L1 goes out in the first
    ack round ≥ r+1. The value is the maximum of ``trim_round(r) - r + 1`` over one period
    ``lcm(A, C)`` of r; it is at most ``A + 1``, ``A + 2`` and ``A + max(C, 2)`` respectively
    (``specs/elastic.md#bound``).

    Parameters
    ----------
    ack_interval : int
        ``A``, rounds between acknowledgements.
    checkpoint_interval : int
        ``C``, rounds between checkpoints.
    successor : str
        ``"sink"``, ``"stateless"`` or ``"stateful"``.

    Examples
    --------
    >>> retention_rounds(1, 1, "sink"), retention_rounds(2, 1, "stateless")
    (2, 4)
    >>> retention_rounds(2, 4, "stateful"), retention_rounds(3, 3, "stateful")
    (5, 5)
    >>> retention_rounds(10**9, 10**9 - 1, "stateful")  # instant: a closed form, not a loop
    1999999999
    """
    a, c = ack_interval, checkpoint_interval
    if successor == "sink":
        return a + 1
    if a < 1 or c < 1:
        raise InvalidInputError(f"intervals must be at least 1, got A={a}, C={c}", location="ack_interval")
    if successor == "stateless":
        # ceil_A(r+2) - (r+2) takes every value 0..A-1 as r varies: the worst is A - 1 + 3.
        return a + 2
    # Closed form of the maximum over one period lcm(A, C) (a loop over the period takes for ever
    # for intervals of 10^9): with g = gcd(A, C) and s = r mod C, the gap d = ready - r is
    # max(2, C - s) (s ≥ 1) or max(2, C) (s = 0), and ceil_A(r + d) - (r + d) ranges over the
    # residues ≡ -(s + d) (mod g), whose largest is A - g + ((-(s + d)) mod g). The maximum of
    # d + 1 + that over s is C + 1 + A - g (s = 0, C ≥ 2) or A + 2 (s = C - 1); see
    # ``tests/test_elastic_cli.py`` for the check against the loop over the period.
    g = math.gcd(a, c)
    if c == 1:
        return a + 2
    return max(c + 1 + a - g, a + 2)


def queue_bound(cfg: Config, level: int) -> int:
    """The bound on one task's output queue at ``level`` (0 = source) in events, failure-free (§5.3.3).

    With input rate R (``max_rate``, events per round), no task's queue at ``level`` ever holds
    more than ``R · retention_rounds(A, C, kind of level+1)`` events, whatever the scaling history.

    Parameters
    ----------
    cfg : Config
        The configuration.
    level : int
        The operator level (0: source).

    Examples
    --------
    >>> cfg = Config(ops=("affine", "sum"), max_rate=4, ack_interval=2, checkpoint_interval=5)
    >>> queue_bound(cfg, 0), queue_bound(cfg, 1), queue_bound(cfg, 2)
    (16, 28, 12)
    """
    n = len(cfg.ops)
    if level >= n:
        succ = "sink"
    else:
        succ = "stateful" if KINDS[cfg.ops[level]].stateful else "stateless"
    return cfg.max_rate * retention_rounds(cfg.ack_interval, cfg.checkpoint_interval, succ)
