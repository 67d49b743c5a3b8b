"""Properties of SPATE's elastic upstream backup (``specs/elastic.md#theorems``).

Every property takes the implementation under test as a keyword argument with the reference as
default (``rules=REFERENCE_RULES`` for the protocol, ``split=split_slice`` for slice splitting),
so :mod:`rollcheck.properties.mutants_elastic` can substitute broken variants. A violation raises
:class:`rollcheck.pyimpl.errors.PropertyViolation` whose ``counterexample`` is a ``rollcheck.elastic/1``
document that ``rollcheck elastic simulate FILE`` replays.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from rollcheck.properties.registry import interesting, prop
from rollcheck.pyimpl.elastic import (
    KINDS,
    REFERENCE_RULES,
    Config,
    Event,
    Failure,
    Rules,
    ScaleEvent,
    Slice,
    config_to_dict,
    merge_slices,
    queue_bound,
    reference_output,
    simulate,
    split_slice,
)
from rollcheck.pyimpl.errors import PropertyViolation

__all__ = [
    "configs",
    "failure_cases",
    "failure_steps",
    "exactly_once_after_failure",
    "scaling_preserves_output",
    "trim_never_discards_needed",
    "queue_within_bound",
    "slice_split_is_a_partition",
]

OP_NAMES = tuple(sorted(KINDS))
SPEC = "specs/elastic.md"


@st.composite
def configs(draw: Any, *, max_keys: int = 6, max_rounds: int = 12, min_scaling: int = 0,
            max_scaling: int = 3) -> Config:
    """Small pipelines (1–3 operators, 1–6 keys), any parallelism, a few scaling events.

    Parameters
    ----------
    draw : callable
        Hypothesis's draw function (supplied by ``@composite``).
    max_keys : int, optional
        Most keys.
    max_rounds : int, optional
        Most rounds of input (at least 4).
    min_scaling : int, optional
        Fewest scaling events.
    max_scaling : int, optional
        Most scaling events.

    Returns
    -------
    Config
        The drawn configuration.
    """
    keys = draw(st.integers(1, max_keys))
    n = draw(st.integers(1, 3))
    ops = tuple(draw(st.lists(st.sampled_from(OP_NAMES), min_size=n, max_size=n)))
    par = tuple(draw(st.lists(st.integers(1, keys), min_size=n, max_size=n)))
    rounds = draw(st.integers(4, max_rounds))
    events = tuple(draw(st.lists(
        st.builds(ScaleEvent, st.integers(1, rounds + 2), st.integers(1, n), st.integers(1, keys)),
        min_size=min_scaling, max_size=max_scaling)))
    return Config(
        keys=keys, ops=ops, parallelism=par, rounds=rounds,
        max_rate=draw(st.integers(1, 5)),
        ack_interval=draw(st.integers(1, 3)),
        checkpoint_interval=draw(st.integers(1, 4)),
        seed=draw(st.integers(0, 2**16)),
        scaling=events,
    )


@st.composite
def failure_cases(draw: Any) -> tuple[Config, int, int, int, int]:
    """A configuration, a failure and a number of recovering tasks.

    The failure is an operator level and key, with a phase for the failure steps; 1 task recovers
    the failed one, or 2–3 for parallel recovery.

    The property fails that task, in separate runs with exactly one failure each, at every
    ``stride``-th step of the failure-free run starting at ``phase`` (``stride`` keeps the
    number of runs per example at most :data:`RUNS_PER_EXAMPLE`), so every step of the run —
    before, during and after every scaling event — is a possible failure point.
    """
    cfg = draw(configs(max_rounds=9))
    op = draw(st.integers(1, len(cfg.ops)))
    key = draw(st.integers(0, cfg.keys - 1))
    phase = draw(st.integers(0, 10_000))
    parallel = draw(st.sampled_from([1, 1, 2, 3]))
    return cfg, op, key, phase, parallel


RUNS_PER_EXAMPLE = 24


def _violation(msg: str, cfg: Config, failure: Failure | None = None) -> PropertyViolation:
    return PropertyViolation(msg, counterexample=config_to_dict(cfg, failure))


def _first_diff(got: dict[int, list[tuple[int, int]]], want: dict[int, list[tuple[int, int]]]) -> str:
    for k in sorted(set(got) | set(want)):
        if got.get(k, []) != want.get(k, []):
            return f"key {k}: got {got.get(k, [])[:6]}, want {want.get(k, [])[:6]}"
    return "equal"


def failure_steps(total: int, phase: int, runs: int = RUNS_PER_EXAMPLE) -> range:
    """Every ``stride``-th step of ``1..total`` from an offset given by ``phase`` (≤ ``runs`` steps).

    Parameters
    ----------
    total : int
        Steps of the failure-free run.
    phase : int
        Chooses the offset (``phase`` modulo the stride).
    runs : int, optional
        Most steps returned.

    Returns
    -------
    range
        The steps at which one failure is injected.

    Examples
    --------
    >>> list(failure_steps(10, 3, runs=4)), list(failure_steps(10, 4, runs=4))
    ([1, 4, 7, 10], [2, 5, 8])
    >>> len(failure_steps(7, 0)), failure_steps(7, 0)[0]
    (7, 1)
    """
    stride = max(1, -(-total // runs))
    return range(1 + phase % stride, total + 1, stride)


REPLAY_AFTER_SCALING = "a recovery replays events"
SCALED = "a scaling event happens during the run"


@prop("elastic-exactly-once", target="elastic", theorem=f"{SPEC}#T1", area="elastic",
      interesting=REPLAY_AFTER_SCALING, floor=0.3)
@given(case=failure_cases())
def exactly_once_after_failure(case: tuple[Config, int, int, int, int], rules: Rules = REFERENCE_RULES) -> None:
    """T1: one failure at any step, after any scaling history, gives exactly the failure-free output.

    Parameters
    ----------
    case : tuple
        ``(cfg, op, key, phase, parallel)`` from :func:`failure_cases`.
    rules : Rules, optional
        The protocol's rules checked (a mutant's replace the reference).
    """
    cfg, op, key, phase, parallel = case
    want = reference_output(cfg)
    clean = simulate(cfg, rules=rules)
    if clean.output_by_key() != want:
        raise _violation(f"failure-free output differs from the reference: "
                         f"{_first_diff(clean.output_by_key(), want)}", cfg)
    replayed = False
    for step in failure_steps(clean.steps, phase):
        failure = Failure(step, op, key, parallel)
        res = simulate(cfg, failure=failure, rules=rules)
        replayed = replayed or any(r.get("replayed_events", 0) for r in res.recoveries)
        got = res.output_by_key()
        if got != want:
            raise _violation(f"output after failure {failure} differs from the failure-free output: "
                             f"{_first_diff(got, want)}", cfg, failure)
    interesting(replayed, REPLAY_AFTER_SCALING)


@prop("elastic-scaling-preserves-output", target="elastic", theorem=f"{SPEC}#T2", area="elastic",
      interesting=SCALED, floor=0.5)
@given(cfg=configs(min_scaling=1, max_scaling=4))
def scaling_preserves_output(cfg: Config, rules: Rules = REFERENCE_RULES) -> None:
    """T2: with any scaling history and no failure, the sink holds exactly the reference output.

    Parameters
    ----------
    cfg : Config
        A pipeline with its scaling events (drawn by Hypothesis).
    rules : Rules, optional
        The protocol's rules checked (a mutant's replace the reference).
    """
    res = simulate(cfg, rules=rules)
    interesting(bool(res.scalings), SCALED)
    got = res.output_by_key()
    want = reference_output(cfg)
    if got != want:
        raise _violation(f"failure-free output differs from the reference: {_first_diff(got, want)}", cfg)


@prop("elastic-trim-safety", target="elastic", theorem=f"{SPEC}#T3", area="elastic",
      interesting=SCALED, floor=0.15)
@given(cfg=configs(max_rounds=10))
def trim_never_discards_needed(cfg: Config, rules: Rules = REFERENCE_RULES) -> None:
    """T3: at every step, every event a recovery of any operator task would replay is still queued.

    Parameters
    ----------
    cfg : Config
        A pipeline with its scaling events (drawn by Hypothesis).
    rules : Rules, optional
        The protocol's rules checked (a mutant's replace the reference).
    """
    res = simulate(cfg, rules=rules, check_trim=True)
    interesting(bool(res.scalings), SCALED)
    if res.violations:
        raise _violation(f"trimming discarded a needed slice: {res.violations[0]}", cfg)


QUEUE_FULL = "some queue reaches at least half its bound"


@prop("elastic-queue-bound", target="elastic", theorem=f"{SPEC}#T4", area="elastic",
      interesting=QUEUE_FULL, floor=0.3)
@given(cfg=configs())
def queue_within_bound(cfg: Config, rules: Rules = REFERENCE_RULES) -> None:
    """T4: without failures, each task's queue holds at most R·W events (W from A, C, successor).

    Parameters
    ----------
    cfg : Config
        A pipeline with its scaling events (drawn by Hypothesis).
    rules : Rules, optional
        The protocol's rules checked (a mutant's replace the reference).
    """
    res = simulate(cfg, rules=rules)
    interesting(any(2 * got >= queue_bound(cfg, lv) > 0 for lv, got in res.max_queue.items()), QUEUE_FULL)
    for lv, got in sorted(res.max_queue.items()):
        bound = queue_bound(cfg, lv)
        if got > bound:
            raise _violation(f"queue at level {lv} reached {got} events, bound {bound}", cfg)


@st.composite
def slices_and_owners(draw: Any) -> tuple[Slice, dict[int, str]]:
    keys = draw(st.integers(1, 8))
    tasks = draw(st.integers(1, keys))
    if draw(st.integers(0, 3)) < 3:  # mostly contiguous key ranges, as the partitioner makes them
        owner = {k: f"t{k * tasks // keys}" for k in range(keys)}
    else:
        owner = {k: f"t{draw(st.integers(0, tasks - 1))}" for k in range(keys)}
    pairs = draw(st.lists(st.tuples(st.integers(0, keys - 1), st.integers(0, 9)), min_size=keys, max_size=20))
    counters: dict[int, int] = {}
    evs = []
    for k, v in pairs:
        counters[k] = counters.get(k, 0) + 1
        evs.append(Event(k, counters[k], v))
    return Slice(draw(st.integers(1, 50)), tuple(evs)), owner


@prop("elastic-slice-split", target="elastic", theorem=f"{SPEC}#T5", area="elastic",
      interesting="the slice splits into two or more non-empty parts", floor=0.3)
@given(case=slices_and_owners())
def slice_split_is_a_partition(case: tuple[Slice, dict[int, str]], split: Any = split_slice,
                               merge: Any = merge_slices) -> None:
    """T5: slice split (Eq. 1) and merge (Eq. 2) lose, duplicate and reorder nothing.

    Parameters
    ----------
    case : tuple of (Slice, dict of int to str)
        A slice and the task owning each key.
    split : callable, optional
        ``split(slice, owner) -> dict of task to Slice``, the split checked.
    merge : callable, optional
        ``merge(slices) -> list of Slice``, the merge checked.
    """
    s, owner = case
    parts = split(s, owner)
    interesting(sum(1 for t in parts.values() if t.events) >= 2, "the slice splits into two or more non-empty parts")
    for t, part in parts.items():
        if part.k != s.k:
            raise PropertyViolation(f"part for {t} has k={part.k}, slice has k={s.k}")
        wrong = [e for e in part.events if owner[e.key] != t]
        if wrong:
            raise PropertyViolation(f"{t} got events of keys it does not own: {wrong[:3]}")
    for k in {e.key for e in s.events}:
        want = [e for e in s.events if e.key == k]
        got = [e for part in parts.values() for e in part.events if e.key == k]
        if got != want:
            raise PropertyViolation(f"key {k}: split gives {got}, slice has {want}")
    merged = merge(list(parts.values()))
    if s.events and [m.k for m in merged] != [s.k]:
        raise PropertyViolation(f"merging the parts of slice k={s.k} gives slices {[m.k for m in merged]}")
    for k in {e.key for e in s.events}:
        want = [e for e in s.events if e.key == k]
        got = [e for m in merged for e in m.events if e.key == k]
        if got != want:
            raise PropertyViolation(f"key {k}: merge of the split gives {got}, slice has {want}")
