"""Exhaustive single-failure sweeps: every operator task failed at every step, one failure per run.

The exhaustive form of theorem T1 (``specs/elastic.md#T1``), used by ``rollcheck elastic sweep``,
the verify section and the benchmark.
"""

from __future__ import annotations

from dataclasses import dataclass

from rollcheck.pyimpl.elastic.config import Config, Failure
from rollcheck.pyimpl.elastic.partition import contiguous_ranges
from rollcheck.pyimpl.elastic.reference import reference_output
from rollcheck.pyimpl.elastic.rules import REFERENCE_RULES, Rules
from rollcheck.pyimpl.elastic.simulator import simulate

__all__ = ["SweepResult", "representative_keys", "failure_sweep"]


@dataclass
class SweepResult:
    """Outcome of :func:`failure_sweep`: how many single-failure runs, and the ones that differ."""

    runs: int
    failure_free_steps: int
    mismatches: list[Failure]
    first_difference: str | None = None


def representative_keys(cfg: Config, level: int) -> list[int]:
    """One key per task of every key partition operator ``level`` ever has (first key of each range).

    Failing the owner of each of these keys at a step fails, over all of them, every task that
    exists at that step.

    Parameters
    ----------
    cfg : Config
        The configuration.
    level : int
        The operator level (1..number of operators).

    Examples
    --------
    >>> from rollcheck.pyimpl.elastic import ScaleEvent
    >>> representative_keys(Config(keys=6, ops=("sum",), parallelism=(2,),
    ...                            scaling=(ScaleEvent(3, 1, 3),)), 1)
    [0, 2, 3, 4]
    """
    gammas = {cfg.parallelism[level - 1]} | {s.parallelism for s in cfg.scaling if s.op == level}
    return sorted({r.start for g in gammas for r in contiguous_ranges(cfg.keys, g)})


def failure_sweep(cfg: Config, *, rules: Rules = REFERENCE_RULES, stride: int = 1,
                  stop_at_first: bool = False, parallel: int = 1) -> SweepResult:
    """Fail every operator task at every ``stride``-th step (one failure per run) and compare.

    ``parallel`` is passed to every :class:`Failure` (parallel recovery when > 1).

    Each run's sink output must equal :func:`reference_output` (theorem T1 of
    ``specs/elastic.md``); the failure-free run is checked too.

    Parameters
    ----------
    cfg : Config
        The configuration.
    rules : Rules, optional
        The protocol's replaceable rules.
    stride : int, optional
        Fail at every ``stride``-th step.
    stop_at_first : bool, optional
        Stop at the first differing run.
    parallel : int, optional
        The ``parallel`` of every :class:`Failure`.

    Returns
    -------
    SweepResult
        The runs made, the steps and the failures whose output differs.
    """
    want = reference_output(cfg)
    clean = simulate(cfg, rules=rules)
    bad: list[Failure] = []
    first = None
    runs = 1
    if clean.output_by_key() != want:
        bad.append(Failure(0, 0, 0))
        first = "failure-free run differs from the reference"
        if stop_at_first:
            return SweepResult(runs, clean.steps, bad, first)
    for step in range(1, clean.steps + 1, max(1, stride)):
        for lv in range(1, len(cfg.ops) + 1):
            for key in representative_keys(cfg, lv):
                f = Failure(step, lv, key, parallel)
                runs += 1
                got = simulate(cfg, failure=f, rules=rules).output_by_key()
                if got != want:
                    bad.append(f)
                    if first is None:
                        k = next(k for k in sorted(set(got) | set(want)) if got.get(k) != want.get(k))
                        first = f"{f}: key {k}: got {got.get(k, [])[:6]}, want {want.get(k, [])[:6]}"
                    if stop_at_first:
                        return SweepResult(runs, clean.steps, bad, first)
    return SweepResult(runs, clean.steps, bad, first)
