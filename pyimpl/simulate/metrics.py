"""FERDiS metrics of a simulated run and the processing-semantics verdict.

Metrics (FERDiS §9, Tables 4–6): regular and forced checkpoints (initial ones not counted),
rollback distance (intervals lost, summed and maximal over processes, and the time between the
failure and the restored checkpoints), lost messages, useless checkpoints of the recorded pattern
(:func:`rollcheck.pyimpl.zpaths.useless_checkpoints`), and the verdict.

Verdict (``specs/simulate.md#verdict``): the output of a run is the multiset of source-record units
accumulated in the sinks' final states. Compared with the failure-free run of the same seed:
equal → ``exactly-once``; only surplus → ``at-least-once``; only deficit → ``at-most-once``; both
→ ``none``. A deadlocked run has the verdict ``deadlock``.

References
----------
.. [1] FERDiS paper, §9.2–9.3 (checkpoint statistics, rollback distance, lost messages) and §2
   (processing semantics).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from rollcheck.pyimpl.simulate.recovery import lost_from_pattern
from rollcheck.pyimpl.simulate.state import SimResult
from rollcheck.pyimpl.zpaths import useless_checkpoints

__all__ = ["VERDICTS", "semantics", "compute_metrics"]

VERDICTS = ("exactly-once", "at-least-once", "at-most-once", "none", "deadlock")


def semantics(expected: Counter, got: Counter) -> str:
    """Compare output multisets.

    Parameters
    ----------
    expected : Counter
        The outputs of the failure-free run.
    got : Counter
        The outputs of the run with the failure.

    Returns
    -------
    str
        ``"exactly-once"``, ``"at-least-once"``, ``"at-most-once"`` or ``"none"``.

    Examples
    --------
    >>> semantics(Counter("abc"), Counter("abc")), semantics(Counter("abc"), Counter("abcc"))
    ('exactly-once', 'at-least-once')
    >>> semantics(Counter("abc"), Counter("ab")), semantics(Counter("abc"), Counter("abb"))
    ('at-most-once', 'none')
    """
    missing = expected - got
    extra = got - expected
    if not missing and not extra:
        return "exactly-once"
    if not missing:
        return "at-least-once"
    if not extra:
        return "at-most-once"
    return "none"


def compute_metrics(res: SimResult, reference: SimResult | None = None) -> dict[str, Any]:
    """The metrics dictionary of ``res`` (``reference``: the failure-free run of the same seed).

    Parameters
    ----------
    res : SimResult
        The run.
    reference : SimResult, optional
        The failure-free run of the same seed, for the semantics verdict.
    """
    m: dict[str, Any] = {
        "regular_checkpoints": res.checkpoints["regular"],
        "forced_checkpoints": res.checkpoints["forced"],
        "useless_checkpoints": len(useless_checkpoints(res.pattern)),
        "events": res.events,
        "end_time": round(res.end_time, 6),
        "orphans": res.orphans,
        "duplicates": res.duplicates,
        "dropped_by_dedup": res.dropped,
    }
    rec = res.recovery
    if rec is not None:
        line = rec.line
        m["rollback_distance"] = sum(line.distance)
        m["max_rollback_distance"] = max(line.distance)
        times = list(rec.rollback_time.values())
        m["rollback_time"] = round(sum(times) / len(times), 6) if times else 0.0
        m["rolled_back"] = len(line.rolled_back)
        m["lost_messages"] = rec.lost
        m["replayed_messages"] = rec.replayed
        m["cleared_messages"] = rec.cleared
        lost_p = lost_from_pattern(rec.pattern, line, rec.failed) if not res.config.persistent_logs else 0
        m["lost_messages_from_pattern"] = lost_p
        # the domino effect: every non-source instance falls back to its initial state C[i,0]
        # although some had later checkpoints (sources only lose their replayable offsets)
        ops = [i for i in range(res.topology.n)
               if res.topology.operators[res.topology.process_operator[i]].kind != "source"]
        m["domino"] = all(line.line[i] == 0 for i in ops) and any(rec.pattern.last_index(i) > 0 for i in ops)
    if res.deadlock is not None:
        m["verdict"] = "deadlock"
    elif reference is not None:
        m["verdict"] = semantics(reference.outputs, res.outputs)
        m["output_units"] = sum(res.outputs.values())
        m["expected_units"] = sum(reference.outputs.values())
    else:
        m["verdict"] = "exactly-once" if res.orphans == 0 and res.duplicates == 0 else "none"
        m["output_units"] = sum(res.outputs.values())
    return m
