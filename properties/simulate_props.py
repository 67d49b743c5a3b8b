"""Properties of the dataflow simulator (``specs/simulate.md``), on random simulated runs.

Each property draws a workload, a parallelism, a seed, a basic-checkpoint interval and (where it
matters) a failing operator instance and a failure time (a fraction of the failure-free run's
length), runs the simulator and checks one theorem of ``specs/simulate.md``. The part under test
is a keyword argument with the reference as default, so the mutation catalogue
(``properties/mutants_simulate.py``) substitutes a broken variant. A failure raises
:class:`~rollcheck.pyimpl.errors.PropertyViolation` carrying the run's pattern as counterexample.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, NamedTuple, NoReturn

from hypothesis import assume, given
from hypothesis import strategies as st

from rollcheck.properties.registry import prop
from rollcheck.pyimpl.consistency import in_transit, orphans
from rollcheck.pyimpl.errors import InvalidInputError, PropertyViolation
from rollcheck.pyimpl.pattern import Pattern
from rollcheck.pyimpl.simulate import SimConfig, SimResult, Variant, run_engine, simulate, workload
from rollcheck.pyimpl.zpaths import useless_checkpoints

__all__ = ["SimCase", "sim_cases", "run_case"]

SPEC = "specs/simulate.md"
#: The reference recovery behaviour (every switch of :class:`Variant` at its default).
REFERENCE = Variant()


class SimCase(NamedTuple):
    """A drawn simulation: the failure-free configuration, the failing instance and when.

    When it fails is a fraction of the failure-free run's end time.
    """

    config: SimConfig
    fail: str
    fraction: float


@st.composite
def sim_cases(draw: Any, protocols: tuple[str, ...] = ("uc", "bcs", "hmnr", "cl-unaligned"),
              workloads: tuple[str, ...] = ("nexmark", "wordcount", "nhop"), min_records: int = 4,
              max_records: int = 24, intervals: tuple[float, ...] = (1.0, 2.0, 3.5, 6.0),
              delays: tuple[float, ...] = (0.2, 0.6, 1.5), fail_prefix: str = "",
              fractions: tuple[float, float] = (0.05, 0.9)) -> SimCase:
    """Random small simulations.

    1–3 instances per operator, ``min_records``–``max_records`` records per source; the failing
    instance's name starts with ``fail_prefix``.

    Parameters
    ----------
    draw : callable
        Hypothesis's draw function (supplied by ``@composite``).
    protocols : tuple of str, optional
        Protocols drawn from.
    workloads : tuple of str, optional
        Workloads drawn from.
    min_records, max_records : int, optional
        Bounds of the records per source.
    intervals : tuple of float, optional
        Basic-checkpoint intervals drawn from.
    delays : tuple of float, optional
        Channel delays drawn from.
    fail_prefix : str, optional
        Prefix of the failing instance's name.
    fractions : tuple of (float, float), optional
        Bounds of the failure time as a fraction of the run.

    Returns
    -------
    SimCase
        The drawn case.
    """
    wl = draw(st.sampled_from(workloads))
    proto = draw(st.sampled_from(protocols))
    par = draw(st.integers(1, 3))
    cfg = SimConfig(
        workload=wl, protocol=proto, parallelism=par,
        records=draw(st.integers(min_records, max_records)),
        interval=draw(st.sampled_from(intervals)),
        delay=draw(st.sampled_from(delays)),
        seed=draw(st.integers(0, 2**20)),
    )
    topo = workload(wl, par)
    fail = draw(st.sampled_from([n for n in topo.process_names if n.startswith(fail_prefix)]))
    return SimCase(cfg, fail, draw(st.floats(*fractions)))


def run_case(case: SimCase, **overrides: Any) -> tuple[SimResult, SimResult]:
    """(failure-free run, run with the drawn failure), ``overrides`` applied to both configs.

    Parameters
    ----------
    case : SimCase
        The drawn simulation.
    **overrides : object
        ``SimConfig`` fields replaced.

    Returns
    -------
    tuple of (SimResult, SimResult)
        Both the same run when the failure-free one deadlocked.
    """
    cfg = replace(case.config, **overrides)
    ref = run_engine(cfg)
    if ref.deadlock is not None:
        return ref, ref
    at = round(case.fraction * ref.end_time, 6)
    assume(at > 0)
    try:
        res = simulate(replace(cfg, fail=case.fail, fail_at=at), reference=ref)
    except InvalidInputError:  # the failure time fell after the last event
        assume(False)
        raise
    return ref, res


def _fail(message: str, p: Pattern) -> NoReturn:
    raise PropertyViolation(message, counterexample=p)


def _describe(res: SimResult) -> str:
    c = res.config
    return (f"{c.workload}/{c.protocol} p={c.parallelism} records={c.records} interval={c.interval} "
            f"seed={c.seed} fail={c.fail}@{c.fail_at} virtual={c.virtual} persistent={c.persistent_logs}")


# --------------------------------------------------------------------------- CIC on dataflows
@prop("sim-cic-no-useless", target="simulate", theorem=f"{SPEC}#t-cic")
@given(case=sim_cases(protocols=("bcs", "hmnr")))
def sim_cic_no_useless(case: SimCase, protocol: str | None = None, variant: Variant = REFERENCE) -> None:
    """BCS and HMNR runs on simulated topologies never contain a useless checkpoint.

    Parameters
    ----------
    case : SimCase
        The drawn simulation.
    protocol : str, optional
        Replaces the drawn protocol (None: keep it).
    variant : Variant, optional
        The recovery behaviour checked (a mutant's replaces the reference).
    """
    cfg = replace(case.config, variant=variant)
    cfg = cfg if protocol is None else replace(cfg, protocol=protocol)
    res = run_engine(cfg)
    bad = useless_checkpoints(res.pattern)
    if bad:
        names = ", ".join(res.pattern.checkpoint_name(c) for c in bad)
        _fail(f"{_describe(res)}: useless checkpoint(s) {names}", res.pattern)


@prop("sim-cic-no-domino", target="simulate", theorem=f"{SPEC}#t-no-domino")
@given(case=sim_cases(protocols=("bcs", "hmnr"), workloads=("nhop",), min_records=8, intervals=(3.0, 6.0),
                      delays=(0.2, 1.0), fail_prefix="map", fractions=(0.3, 0.9)))
def sim_cic_no_domino(case: SimCase, protocol: str | None = None) -> None:
    """With virtual checkpoints, a CIC run restores the failed process to its last checkpoint.

    Parameters
    ----------
    case : SimCase
        The drawn simulation.
    protocol : str, optional
        Replaces the drawn protocol (None: keep it).
    """
    over = {} if protocol is None else {"protocol": protocol}
    _, res = run_case(case, **over)
    rec = res.recovery
    f = rec.failed
    if rec.line.line[f] != rec.pattern.last_index(f):
        _fail(f"{_describe(res)}: the failed process restores C[{f},{rec.line.line[f]}], "
              f"not its last checkpoint {rec.pattern.last_index(f)} (line {rec.line.line})", rec.pattern)


# --------------------------------------------------------------------------- Chandy–Lamport
@prop("sim-cl-aligned-consistent", target="simulate", theorem=f"{SPEC}#t-cl-aligned")
@given(case=sim_cases(protocols=("cl-aligned",), workloads=("nexmark", "wordcount")))
def sim_cl_aligned_consistent(case: SimCase, protocol: str = "cl-aligned") -> None:
    """Aligned snapshots on acyclic graphs are consistent with empty channels.

    Parameters
    ----------
    case : SimCase
        The drawn simulation.
    protocol : str, optional
        The snapshot protocol run.
    """
    res = run_engine(replace(case.config, protocol=protocol))
    assume(res.snapshots)
    for s in res.snapshots:
        o = orphans(res.pattern, s.cut)
        t = in_transit(res.pattern, s.cut)
        if o or t:
            _fail(f"{_describe(res)}: snapshot {s.snapshot} cut {s.cut} has orphans "
                  f"{[m.id for m in o]} and channel state {[m.id for m in t]}", res.pattern)


@prop("sim-cl-unaligned-recorded", target="simulate", theorem=f"{SPEC}#t-cl-unaligned")
@given(case=sim_cases(protocols=("cl-unaligned",)))
def sim_cl_unaligned_recorded(case: SimCase, variant: Variant = REFERENCE) -> None:
    """Unaligned snapshots are consistent and record exactly the cut's in-transit messages.

    Parameters
    ----------
    case : SimCase
        The drawn simulation.
    variant : Variant, optional
        The recovery behaviour checked (a mutant's replaces the reference).
    """
    res = run_engine(replace(case.config, variant=variant))
    assume(res.snapshots)
    for s in res.snapshots:
        o = orphans(res.pattern, s.cut)
        want = sorted(m.id for m in in_transit(res.pattern, s.cut))
        got = sorted(x for ids in s.recorded.values() for x in ids)
        if o or want != got:
            _fail(f"{_describe(res)}: snapshot {s.snapshot} cut {s.cut}: orphans {[m.id for m in o]}, "
                  f"recorded {got} != in transit {want}", res.pattern)


@prop("sim-cl-aligned-cycle-deadlock", target="simulate", theorem=f"{SPEC}#t-deadlock")
@given(case=sim_cases(protocols=("cl-aligned",), workloads=("nhop",)))
def sim_cl_aligned_cycle_deadlock(case: SimCase, variant: Variant = REFERENCE) -> None:
    """Aligned barriers on the cyclic query are reported as a deadlock; the run terminates.

    The report names the operators on the cycle that wait for the back-channel's marker.

    Parameters
    ----------
    case : SimCase
        The drawn simulation.
    variant : Variant, optional
        The recovery behaviour checked (a mutant's replaces the reference).
    """
    res = run_engine(replace(case.config, variant=variant, interval=min(case.config.interval, 1.0)))
    assume(res.checkpoints["regular"] > 0)  # a snapshot was started before the input ran out
    if res.snapshots:
        _fail(f"{_describe(res)}: a snapshot completed on a cycle under aligned barriers", res.pattern)
    if res.deadlock is None:
        _fail(f"{_describe(res)}: no deadlock reported", res.pattern)
    map0 = tuple(f"map0.{k}" for k in range(case.config.parallelism))
    sources = {f"map0.{k}": (f"source.{k}->map0.{k}",) for k in range(case.config.parallelism)}
    if res.deadlock.stuck != map0 or res.deadlock.waiting != sources:
        _fail(f"{_describe(res)}: stuck {res.deadlock.stuck} waiting on {res.deadlock.waiting}, expected "
              f"{map0} blocked on their sources", res.pattern)


# --------------------------------------------------------------------------- recovery
@prop("sim-exactly-once", target="simulate", theorem=f"{SPEC}#t-exactly-once")
@given(case=sim_cases())
def sim_exactly_once(case: SimCase, variant: Variant = REFERENCE) -> None:
    """Persistent logs + deduplication + no virtual checkpoints: exactly-once output.

    The orphan check finds no delivery of an undone send.

    Parameters
    ----------
    case : SimCase
        The drawn simulation.
    variant : Variant, optional
        The recovery behaviour checked (a mutant's replaces the reference).
    """
    _, res = run_case(case, virtual=False, persistent_logs=True, variant=variant)
    m = res.metrics
    if res.orphans or res.duplicates or m["verdict"] != "exactly-once":
        _fail(f"{_describe(res)}: verdict {m['verdict']}, orphans {res.orphans}, duplicates "
              f"{res.duplicates} (output {m.get('output_units')} of {m.get('expected_units')} units)",
              res.recovery.pattern)


@prop("sim-dedup-once", target="simulate", theorem=f"{SPEC}#t-dedup")
@given(case=sim_cases(), virtual=st.booleans())
def sim_dedup_once(case: SimCase, virtual: bool, variant: Variant = REFERENCE) -> None:
    """With persistent logs and deduplication no input is applied twice and nothing is lost.

    Virtual checkpoints on or off: every receiver's final state applied each sequence number of
    each input channel at most once.

    Parameters
    ----------
    case : SimCase
        The drawn simulation.
    virtual : bool
        Whether virtual checkpoints are on.
    variant : Variant, optional
        The recovery behaviour checked (a mutant's replaces the reference).
    """
    _, res = run_case(case, virtual=virtual, persistent_logs=True, variant=variant)
    if res.duplicates or res.metrics["lost_messages"]:
        _fail(f"{_describe(res)}: {res.duplicates} duplicate deliveries, "
              f"{res.metrics['lost_messages']} lost messages", res.recovery.pattern)


@prop("sim-volatile-at-most-once", target="simulate", theorem=f"{SPEC}#t-at-most-once")
@given(case=sim_cases(protocols=("uc", "bcs", "hmnr")), virtual=st.booleans())
def sim_volatile_at_most_once(case: SimCase, virtual: bool, variant: Variant = REFERENCE) -> None:
    """Volatile logs: the lost-message count from sequence numbers matches the pattern's.

    The pattern's count is the in-transit messages of the line sent by the failed process.
    Without virtual checkpoints the output is at-most-once, and exactly-once when nothing was
    lost.

    Parameters
    ----------
    case : SimCase
        The drawn simulation.
    virtual : bool
        Whether virtual checkpoints are on.
    variant : Variant, optional
        The recovery behaviour checked (a mutant's replaces the reference).
    """
    _, res = run_case(case, virtual=virtual, persistent_logs=False, variant=variant)
    m = res.metrics
    if m["lost_messages"] != m["lost_messages_from_pattern"]:
        _fail(f"{_describe(res)}: {m['lost_messages']} lost by sequence numbers, "
              f"{m['lost_messages_from_pattern']} by the pattern", res.recovery.pattern)
    if not virtual:
        ok = ("exactly-once",) if m["lost_messages"] == 0 else ("exactly-once", "at-most-once")
        if m["verdict"] not in ok:
            _fail(f"{_describe(res)}: verdict {m['verdict']} with {m['lost_messages']} lost messages",
                  res.recovery.pattern)


def _register_measures() -> None:
    from rollcheck.properties.registry import PROPERTIES, measure

    late = "the failure strikes in the second half of the run"
    for name in [n for n, p in PROPERTIES.items() if p.area == "simulate" and not p.interesting]:
        measure(name, late, lambda case, **_: case.fraction >= 0.5)


_register_measures()
