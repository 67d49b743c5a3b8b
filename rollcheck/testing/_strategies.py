"""Hypothesis strategies for users' own tests: patterns, schedules, span systems, elastic pipelines.

Each is a function returning a strategy, as in :mod:`hypothesis.strategies`.

References
----------
FERDiS paper §5.3 (patterns, Z-cycles); ``specs/protocols.md#your-protocol``.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from rollcheck.pyimpl.pattern import Pattern

__all__ = ["patterns", "schedules", "zigzag_schedules", "basic_schedules", "span_systems", "elastic_configs"]


def patterns(min_processes: int = 2, max_processes: int = 4, max_actions: int = 14, *,
             fifo: bool = False, topology: str | None = "complete", forced: bool = False
             ) -> st.SearchStrategy[Pattern]:
    """Checkpoint-and-communication patterns (in-transit messages allowed).

    Parameters
    ----------
    min_processes, max_processes : int
        Bounds on the number of processes.
    max_actions : int
        Bound on the number of send / deliver / checkpoint actions drawn.
    fifo : bool
        Deliver in FIFO order per channel.
    topology : {"complete", "pipeline", "scatter", "cyclic"} or None
        The channels used; None draws one.
    forced : bool
        Mark some checkpoints as forced.

    Examples
    --------
    >>> from hypothesis import find
    >>> find(patterns(), lambda p: p.num_messages >= 2).num_messages
    2
    """
    from rollcheck.properties.strategies import patterns as _patterns

    _check_bounds(min_processes, max_processes, 1)
    return _patterns(min_processes, max_processes, max_actions, fifo=fifo, topology=topology,
                     forced=forced)


def schedules(min_processes: int = 2, max_processes: int = 4, max_events: int = 30
              ) -> st.SearchStrategy[Pattern]:
    """Basic schedules (no forced checkpoints) for protocol tests: Z-cycle-prone on purpose.

    Three draws in four are zig-zag schedules (:func:`zigzag_schedules`), the rest uniform random
    traffic. These are the schedules :func:`rollcheck.testing.check_protocol` uses.

    Parameters
    ----------
    min_processes, max_processes : int
        Bounds on the number of processes (at least 2).
    max_events : int
        Bound on the number of events.

    Returns
    -------
    SearchStrategy of Pattern
        The schedules.

    Examples
    --------
    >>> from hypothesis import find
    >>> from rollcheck.pyimpl import run_protocol, useless_checkpoints
    >>> p = find(schedules(), lambda p: bool(useless_checkpoints(run_protocol("uc", p).pattern)))
    >>> any(e.forced for e in p.events)
    False
    """
    from rollcheck.properties.protocol_strategies import protocol_schedules

    _check_bounds(min_processes, max_processes, 2)
    return protocol_schedules(min_processes, max_processes, max_events)


def zigzag_schedules(min_processes: int = 2, max_processes: int = 4, max_events: int = 30,
                     max_motifs: int = 4) -> st.SearchStrategy[Pattern]:
    """Basic schedules built around zig-zag message cycles with a non-causal hop.

    Under UC almost every one leaves a useless checkpoint.

    Parameters
    ----------
    min_processes, max_processes : int
        Bounds on the number of processes (at least 2).
    max_events : int
        Bound on the number of events.
    max_motifs : int
        Most zig-zag motifs in one schedule.

    Returns
    -------
    SearchStrategy of Pattern
        The schedules.

    Examples
    --------
    >>> from hypothesis import find
    >>> find(zigzag_schedules(), lambda p: True).n
    2
    """
    from rollcheck.properties.protocol_strategies import zigzag_schedules as _zz

    _check_bounds(min_processes, max_processes, 2)
    return _zz(min_processes, max_processes, max_events, max_motifs)


def basic_schedules(min_processes: int = 2, max_processes: int = 5, max_actions: int = 48, *,
                    topology: str | None = "complete", fifo: bool = False
                    ) -> st.SearchStrategy[Pattern]:
    """Uniform random basic schedules (send / deliver / checkpoint actions, weights 3 : 3 : 1).

    Parameters
    ----------
    min_processes, max_processes : int
        Bounds on the number of processes (at least 2).
    max_actions : int
        Bound on the number of actions drawn.
    topology : {"complete", "pipeline", "scatter", "cyclic"} or None
        The channels used; None draws one.
    fifo : bool
        Deliver in FIFO order per channel.

    Returns
    -------
    SearchStrategy of Pattern
        The schedules.

    Examples
    --------
    >>> from hypothesis import find
    >>> find(basic_schedules(), lambda p: p.num_messages >= 1).num_messages
    1
    """
    from rollcheck.properties.protocol_strategies import basic_schedules as _basic

    _check_bounds(min_processes, max_processes, 2)
    return _basic(min_processes, max_processes, max_actions, topology=topology, fifo=fifo)


def span_systems(max_procs: int = 4, max_chain: int = 3, max_edges: int = 6, *,
                 monotone: bool = True) -> st.SearchStrategy[dict[str, Any]]:
    """Span systems as ``rollcheck.spans/1`` documents (processors, chains of checkpoints, edges).

    Parameters
    ----------
    max_procs : int
        Most processors.
    max_chain : int
        Most checkpoints per processor.
    max_edges : int
        Most edges.
    monotone : bool
        Draw nested φ sets (a monotone φ).

    Returns
    -------
    SearchStrategy of dict
        The documents.

    Examples
    --------
    >>> from hypothesis import find
    >>> doc = find(span_systems(), lambda d: True)
    >>> sorted(doc)[:1]
    ['edges']
    """
    from rollcheck.properties.spans_strategies import span_docs

    return span_docs(max_procs=max_procs, max_chain=max_chain, max_edges=max_edges, monotone=monotone)


def elastic_configs(max_keys: int = 6, max_rounds: int = 12, max_scaling: int = 3) -> st.SearchStrategy[Any]:
    """Small elastic pipelines (1-3 operators, a few keys, scaling events) for the elastic model.

    Parameters
    ----------
    max_keys : int
        Most keys.
    max_rounds : int
        Most rounds of input (at least 4).
    max_scaling : int
        Most scaling events.

    Returns
    -------
    SearchStrategy of Config
        The pipelines.

    Examples
    --------
    >>> from hypothesis import find
    >>> find(elastic_configs(), lambda c: True).keys
    1
    """
    from rollcheck.properties.elastic_props import configs

    return configs(max_keys=max_keys, max_rounds=max_rounds, max_scaling=max_scaling)


def _check_bounds(lo: int, hi: int, least: int) -> None:
    from rollcheck.pyimpl.errors import InvalidInputError

    if lo < least or hi < lo:
        raise InvalidInputError(f"need {least} <= min_processes <= max_processes, got {lo}, {hi}",
                                location="processes")
