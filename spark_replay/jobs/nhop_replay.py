"""Conformance checks of recorded message-passing runs: the engine-neutral checker, plus Spark's own.

The message-passing job records the engine-neutral core vocabulary (``specs/formats.md#trace``:
``send``, ``deliver`` with ``replayed``, ``checkpoint``, ``failure``, ``recovery``, ``output``,
``end``; its own kinds are prefixed with its source, ``spark-nhop.``), so its trace is checked by
the same one-pass checker as any engine's (:mod:`rollcheck.pyimpl.traces`): ``pattern-valid``,
``forced-checkpoints`` (the protocol of the header), ``no-useless-checkpoints`` (BCS, HMNR),
``recovery-line``, ``log-replay`` and ``outputs-exactly-once`` (reference: the failure-free run
:func:`rollcheck.spark_replay.jobs.nhop.simulate`). One implementation serves every engine.

Spark-specific plug-ins (``specs/spark.md#message-passing-conformance``):

- ``failure-observed`` (:class:`~rollcheck.spark_replay.stream.checks.FailureObservedNhop`);
- ``outputs-failure-free`` (:class:`OutputsFailureFree`): the ``end`` record's per-process
  (count, sum) equals the failure-free run *and* the count and payload sum of the deliveries of
  the effective execution (a delivery deleted from the recording, or one the application state
  does not reflect, is caught here);
- ``end-of-run``: a recording that stopped before its ``end`` leaves the end checks unchecked.

TLC trace validation of the executions (the TLA+ model) is the generic ``tlc-trace`` plug-in,
bound by :mod:`rollcheck.spark_replay.replay.tlc`; :func:`derive_patterns` and :func:`tlc_pattern`
give other tools the executions.
"""

from __future__ import annotations

from typing import Any

from rollcheck.pyimpl.errors import InvalidInputError
from rollcheck.pyimpl.pattern import CHECKPOINT, Event, Pattern
from rollcheck.pyimpl.traces.plugin import TraceCheck
from rollcheck.pyimpl.verdict import Check
from rollcheck.spark_replay.stream.checks import FailureObservedNhop
from rollcheck.spark_replay.trace import Trace

__all__ = ["nhop_setup", "OutputsFailureFree", "EndOfRun", "derive_patterns", "DerivedPatterns",
           "tlc_pattern"]


class DerivedPatterns:
    """Patterns of a message-passing trace and the trace ``seq`` of each of their events."""

    def __init__(self) -> None:
        self.pre: Pattern | None = None
        self.pre_seqs: list[int] = []
        self.effective: Pattern | None = None
        self.effective_seqs: list[int] = []
        self.recovery: dict[str, Any] | None = None
        self.failure: dict[str, Any] | None = None
        self.end: dict[str, Any] | None = None
        self.invalid: Check | None = None
        #: Positions in ``effective`` of the checkpoints that rolled-back processes restored.
        self.restored_positions: set[int] = set()
        self.checker: Any = None


def derive_patterns(trace: Trace) -> DerivedPatterns:
    """The pattern before the first failure and the effective execution, from the generic checker."""
    from rollcheck.pyimpl.traces import TraceChecker

    checker = TraceChecker(trace.header, trace.source, keep_segments=True, keep_first=True)
    checker.run((e.get("_line", 0), e) for e in trace.events)
    report = checker.finish(trace.truncated, trace.truncated_after_seq)
    d = DerivedPatterns()
    d.checker = checker
    final = checker.segments[-1]
    d.effective, d.effective_seqs, d.restored_positions = final.pattern, final.seqs, set(final.given)
    if checker.first_pattern is not None:
        d.pre, d.pre_seqs = checker.first_pattern[0], checker.first_pattern[1]
    else:
        d.pre, d.pre_seqs = d.effective, d.effective_seqs
    for e in trace.events:
        k = e["kind"]
        if k == "failure" and d.failure is None:
            d.failure = e
        elif k == "recovery" and d.recovery is None:
            d.recovery = e
        elif k == "end":
            d.end = e
    bad = report.check("pattern-valid")
    if bad is not None and bad.ok is False:
        d.invalid = bad
    return d


class EndOfRun(TraceCheck):
    """``end-of-run``: unchecked when the recording stopped before its ``end`` (else nothing)."""

    name = "end-of-run"
    needs = ("end",)

    def finish(self, v: Any, results: dict[str, Check]) -> Check | None:
        """Unchecked when the recording stopped before its end; None when the run ended.

        Parameters
        ----------
        v : RunView
            The checker's view of the run.
        results : dict
            The finished checks' results by name (unused).
        """
        if v.ended:
            return None
        return Check.unchecked(self.name, f"not reached: the recording stopped after seq {v.last_seq}; the prefix "
                                          "was checked, the end-of-run checks could not run")


class OutputsFailureFree(TraceCheck):
    """The ``end`` record's per-process (count, sum) against the failure-free run.

    Also against the deliveries of the effective execution (module docstring).
    """

    name = "outputs-failure-free"
    needs = ("send.payload", "deliver", "end.outputs")

    def __init__(self, reference: dict[str, Any]):
        self.ref = reference
        self.payload: dict[str, Any] = {}
        self.end: dict[str, Any] | None = None

    def on_event(self, v: Any, line: int, obj: dict[str, Any]) -> None:
        """Collect the sends' payloads and the end record.

        Parameters
        ----------
        v : RunView
            The checker's view (unused).
        line : int
            The event's line number (unused).
        obj : dict
            The event as read.
        """
        k = obj["kind"]
        if k == "send":
            self.payload[str(obj.get("message"))] = obj.get("payload", 0)
        elif k == "end":
            self.end = obj

    def finish(self, v: Any, results: dict[str, Check]) -> Check | None:
        """Compare the outputs with the failure-free run and the effective execution.

        Parameters
        ----------
        v : RunView
            The checker's view of the run (its effective execution).
        results : dict
            The finished checks' results by name (unused).

        Returns
        -------
        Check or None
            Held, violated, or None when no ``end`` was recorded.
        """
        end = self.end
        if end is None:
            return None  # end-of-run says the end was not recorded
        eff = v.pattern()
        got_del: dict[str, list[int]] = {p: [0, 0] for p in eff.processes}
        for m in eff.messages:
            if m.delivered:
                row = got_del[eff.processes[m.receiver]]
                row[0] += 1
                row[1] += int(self.payload.get(m.id, 0))
        got_out = end.get("outputs")
        problems = []
        if got_out != self.ref:
            problems.append(f"outputs {got_out} differ from the failure-free {self.ref}")
        if got_out != got_del:
            problems.append(f"the deliveries of the effective execution give {got_del}, the end record "
                            f"says {got_out}")
        if problems:
            return Check.violated(self.name, "; ".join(problems), offending_seq=end["seq"])
        return Check.held(self.name, "per-process (count, sum) of delivered payloads equal the failure-free run "
                          "and the recorded deliveries", examined=len(got_del))


def nhop_setup(header: dict[str, Any], source: str | None) -> tuple[str, list[dict[str, Any]], list[TraceCheck]]:
    """For a message-passing trace: (protocol name, reference outputs, Spark's plug-ins).

    Parameters
    ----------
    header : dict
        The trace's header.
    source : str or None
        The trace file, named by errors.

    Returns
    -------
    tuple of (str, list of dict, list of TraceCheck)
        The protocol's name, the reference outputs, the plug-ins.
    """
    from rollcheck.spark_replay.jobs.nhop import NhopConfig, simulate

    cfg_doc = dict(header.get("config") or {})
    try:
        cfg = NhopConfig(**{k: v for k, v in cfg_doc.items() if k in NhopConfig.__dataclass_fields__})
        cfg.validate()
    except (TypeError, InvalidInputError) as err:
        raise InvalidInputError(f"header config is not an nhop configuration: {err}",
                                source=source, location="line 1") from None
    ref = simulate(cfg)["outputs"]
    reference = [{"process": p, "key": "count_sum", "value": v} for p, v in ref.items()]
    return cfg.protocol, reference, [FailureObservedNhop(header), OutputsFailureFree(ref), EndOfRun()]


def tlc_pattern(d: DerivedPatterns) -> Pattern | None:
    """The effective execution for TLC trace validation: restored forced checkpoints made basic.

    A rolled-back process resumes from its restored checkpoint; if that checkpoint was forced, the
    delivery it preceded was undone, so in the effective execution it is a given checkpoint.
    """
    if d.effective is None:
        return None
    evs = tuple(Event(ev.process, CHECKPOINT) if (ev.kind == CHECKPOINT and k in d.restored_positions) else ev
                for k, ev in enumerate(d.effective.events))
    return Pattern(d.effective.processes, evs)
