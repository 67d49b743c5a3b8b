"""Configuration of the elastic simulator: pipeline, workload, protocol intervals, scaling, failure.

Source: SPATE (Wei et al., Cluster Computing 2019) §3.1 (topology, parallelism γ, scale-up and
scale-down), §3.4 (single failure). Conventions and rules: ``specs/elastic.md#model``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from rollcheck.pyimpl.elastic.operators import KINDS
from rollcheck.pyimpl.errors import InvalidInputError

__all__ = ["ScaleEvent", "Failure", "Config", "random_config", "LIMITS"]

LIMITS = {
    "keys": 10_000,
    "ops": 8,
    "rounds": 200,
    "max_rate": 1_000,
    "events": 10_000,  # rounds · max_rate: the most source events a run may emit
    "ack_interval": 1_000,
    "checkpoint_interval": 1_000,
    "scaling": 100,
    "seed": 2**63 - 1,
}
"""Upper bounds of a configuration run from the CLI (``specs/elastic.md``, ``specs/cli.md``).

The simulator's work grows faster than linearly in the number of rounds and events (about 3 s for
100 rounds × 100 events, 23 s for 200 × 100, 33 s for 1,000 × 10 on one core); these bounds keep
one run within seconds. ``rollcheck elastic simulate --allow-large`` lifts them.
"""


# --------------------------------------------------------------------------------------------
# Configuration
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ScaleEvent:
    """At the start of round ``round``, operator level ``op`` (1-based) gets ``parallelism`` tasks."""

    round: int
    op: int
    parallelism: int


@dataclass(frozen=True)
class Failure:
    """Just before step ``step``, the task of operator level ``op`` that owns ``key`` crashes.

    With ``parallel > 1`` the task is recovered by that many new tasks that split its keys
    (SPATE's parallel recovery, Algorithm 1 lines 12–14); 1 is the plain restart.
    """

    step: int
    op: int
    key: int
    parallel: int = 1


@dataclass(frozen=True)
class Config:
    """A pipeline, its workload and its protocol parameters.

    ``max_rate`` bounds the number of events the source emits per round (the input rate); with
    ``workload="constant"`` the source emits exactly ``max_rate`` events every round (random keys
    and values), with ``"uniform"`` a uniformly random number in ``0..max_rate``;
    ``ack_interval`` (A) and ``checkpoint_interval`` (C) are in rounds: L0/L1 acknowledgements
    are exchanged in rounds divisible by A, stateful tasks checkpoint in rounds divisible by C.
    """

    keys: int = 6
    ops: tuple[str, ...] = ("affine", "sum")
    parallelism: tuple[int, ...] = ()  # empty: one task per operator
    rounds: int = 10
    max_rate: int = 4
    ack_interval: int = 1
    checkpoint_interval: int = 3
    seed: int = 0
    scaling: tuple[ScaleEvent, ...] = ()
    workload: str = "uniform"  # "uniform": 0..max_rate events per round; "constant": max_rate

    def __post_init__(self) -> None:
        if not self.parallelism:
            object.__setattr__(self, "parallelism", tuple(1 for _ in self.ops))

    def validate(self) -> None:
        """Raise :class:`InvalidInputError` naming the offending field."""
        if self.keys < 1:
            raise InvalidInputError(f"must be at least 1, got {self.keys}", location="keys")
        if not self.ops:
            raise InvalidInputError("at least one operator is needed", location="ops")
        for i, op in enumerate(self.ops):
            if op not in KINDS:
                raise InvalidInputError(f"unknown operator {op!r}; known: {sorted(KINDS)}", location=f"ops[{i}]")
        if len(self.parallelism) != len(self.ops):
            raise InvalidInputError(
                f"{len(self.parallelism)} entries for {len(self.ops)} operators", location="parallelism")
        for i, g in enumerate(self.parallelism):
            if not 1 <= g <= self.keys:
                raise InvalidInputError(f"must be in 1..{self.keys}, got {g}", location=f"parallelism[{i}]")
        for name in ("rounds", "ack_interval", "checkpoint_interval"):
            if getattr(self, name) < 1:
                raise InvalidInputError(f"must be at least 1, got {getattr(self, name)}", location=name)
        if self.workload not in ("uniform", "constant"):
            raise InvalidInputError(f"must be 'uniform' or 'constant', got {self.workload!r}", location="workload")
        if self.max_rate < 0:
            raise InvalidInputError(f"must be at least 0, got {self.max_rate}", location="max_rate")
        for j, s in enumerate(self.scaling):
            if not 1 <= s.op <= len(self.ops):
                raise InvalidInputError(f"operator level must be in 1..{len(self.ops)}, got {s.op}",
                                        location=f"scaling[{j}].op")
            if not 1 <= s.parallelism <= self.keys:
                raise InvalidInputError(f"must be in 1..{self.keys}, got {s.parallelism}",
                                        location=f"scaling[{j}].parallelism")
            if s.round < 1:
                raise InvalidInputError(f"must be at least 1, got {s.round}", location=f"scaling[{j}].round")

    def check_bounds(self, allow_large: bool = False) -> None:
        """Raise :class:`InvalidInputError` naming the field that is above :data:`LIMITS`.

        ``seed`` is always bounded (``|seed| < 2**63``); the others only without ``allow_large``.

        Examples
        --------
        >>> Config(rounds=10**6).check_bounds()
        Traceback (most recent call last):
        ...
        rollcheck.pyimpl.errors.InvalidInputError: rounds: 1000000 is above the limit of 200 (allow_large lifts the limits)
        """
        if abs(self.seed) > LIMITS["seed"]:
            raise InvalidInputError(f"must be within ±{LIMITS['seed']}, got a number of {len(str(self.seed))} digits",
                                    location="seed")
        if allow_large:
            return
        values = {"keys": self.keys, "ops": len(self.ops), "rounds": self.rounds, "max_rate": self.max_rate,
                  "events": self.rounds * self.max_rate, "ack_interval": self.ack_interval,
                  "checkpoint_interval": self.checkpoint_interval, "scaling": len(self.scaling)}
        for name, v in values.items():
            if v > LIMITS[name]:
                what = {"events": "rounds × max_rate", "ops": "number of operators",
                        "scaling": "number of scaling events"}.get(name)
                loc = {"events": "rounds", "scaling": "scaling"}.get(name, name)
                raise InvalidInputError(f"{what + ' = ' if what else ''}{v} is above the limit of "
                                        f"{LIMITS[name]} (allow_large lifts the limits)", location=loc)


def random_config(seed: int, *, max_keys: int = 6, max_ops: int = 3, max_rounds: int = 10,
                  max_scalings: int = 3) -> Config:
    """A seeded random pipeline with scaling events (the same seed gives the same config).

    Parameters
    ----------
    seed : int
        The seed.
    max_keys, max_ops, max_rounds, max_scalings : int, optional
        Upper bounds of the keys, operators, input rounds and scaling events drawn.

    Examples
    --------
    >>> random_config(5) == random_config(5)
    True
    >>> random_config(5).validate()
    """
    rng = random.Random(seed)
    keys = rng.randint(1, max_keys)
    n = rng.randint(1, max_ops)
    ops = tuple(rng.choice(sorted(KINDS)) for _ in range(n))
    rounds = rng.randint(3, max_rounds)
    scaling = tuple(ScaleEvent(rng.randint(1, rounds + 2), rng.randint(1, n), rng.randint(1, keys))
                    for _ in range(rng.randint(0, max_scalings)))
    return Config(keys=keys, ops=ops, parallelism=tuple(rng.randint(1, keys) for _ in range(n)),
                  rounds=rounds, max_rate=rng.randint(1, 5), ack_interval=rng.randint(1, 3),
                  checkpoint_interval=rng.randint(1, 4), seed=rng.randrange(2**16), scaling=scaling)
