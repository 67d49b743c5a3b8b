"""The user's declared sink guarantee, and who a not-conformant matrix cell is attributed to.

A module may declare ``SINK_GUARANTEE = "exactly-once"`` (default) or ``"at-least-once"``;
:func:`judge_sink` compares its output per KEY with the failure-free run's, knowing the rows the
trace shows re-delivered after a failure; :func:`classify_cell` turns a cell's replay report into
its matrix entry, never a pass for a not-conformant cell.
See docs/internals/pyimpl-core.md#attribution.

Examples
--------
>>> from rollcheck.pyimpl.verdict import Check, Report
>>> j = judge_sink("exactly-once", {"k": {"r": 1}}, {"k": {"r": 2}}, redelivered={"k": 1},
...                documentation="the engine's guide")
>>> j["ok"], j["data"]["extra_copies"]
(False, {'k': 1})
>>> cell = classify_cell(Report([Check.held("commit", "ok", examined=3),
...                             Check.violated("sink", j["detail"], **j["data"])]))
>>> cell["verdict"], cell["expected_by_engine"], cell["attributed_to"]
('not-conformant', True, 'module')

References
----------
Spark Structured Streaming Programming Guide, "Using Foreach and ForeachBatch" (foreachBatch is
at-least-once); Apache Flink documentation, "Fault Tolerance Guarantees of Data Sources and Sinks".
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from rollcheck.pyimpl.verdict import Check, Report, Status, Verdict

__all__ = ["GUARANTEES", "DEFAULT_GUARANTEE", "check_guarantee", "judge_sink", "classify_cell",
           "sink_check_of"]

#: The guarantees a module may declare in ``SINK_GUARANTEE``.
GUARANTEES = ("exactly-once", "at-least-once")
#: The guarantee of a module that declares none.
DEFAULT_GUARANTEE = "exactly-once"


def check_guarantee(value: Any) -> str:
    """The declared guarantee, or :class:`ValueError` naming the allowed values.

    >>> check_guarantee(None), check_guarantee("at-least-once")
    ('exactly-once', 'at-least-once')
    >>> check_guarantee("at-most-once")
    Traceback (most recent call last):
    ...
    ValueError: SINK_GUARANTEE must be "exactly-once" or "at-least-once", got 'at-most-once'
    """
    if value is None:
        return DEFAULT_GUARANTEE
    if not isinstance(value, str) or value not in GUARANTEES:
        raise ValueError(f'SINK_GUARANTEE must be "exactly-once" or "at-least-once", got {value!r:.60}')
    return value


def _positive(d: Mapping[str, int] | None) -> dict[str, int]:
    return {str(k): int(v) for k, v in sorted((d or {}).items()) if int(v) > 0}


def judge_sink(guarantee: str, want: Mapping[str, Mapping[str, int]], got: Mapping[str, Mapping[str, int]], *,
               redelivered: Mapping[str, int] | None = None, within_attempt: Mapping[str, int] | None = None,
               again_without_failure: Mapping[str, int] | None = None, handed_keys: set[str] | None = None,
               documentation: str = "") -> dict[str, Any]:
    """Judge the module's sink output against its declared guarantee.

    Parameters
    ----------
    guarantee : str
        ``"exactly-once"`` or ``"at-least-once"``.
    want, got : mapping
        Per KEY (a canonical string), the rows (canonical strings) with their counts: the
        failure-free run's and the recorded run's output as the module reads it back.
    redelivered : mapping, optional
        Per KEY, how many rows of that KEY the engine handed to the sink again *after a failure*,
        counted from the trace (Spark: the rows of a batch handed again in a later attempt after
        a ``failure``; Flink: the rows handed since the restored checkpoint). None: the trace does
        not record the sink's handings (nothing is explained; ``classify_cell`` attributes nothing).
    within_attempt : mapping, optional
        Per KEY, rows handed to the sink twice within one attempt (no failure explains them).
    again_without_failure : mapping, optional
        Per KEY, rows handed again in a later attempt with no failure recorded in between.
    handed_keys : set of str, optional
        The KEYs of the rows the trace shows handed to the sink at all: a lost KEY among them was
        delivered by the engine and lost by the module's sink (``loss_owner: "module"``).
    documentation : str
        The engine's documentation of its re-deliveries after a failure (cited by
        :func:`classify_cell`).

    Returns
    -------
    dict
        ``ok`` (bool), ``detail`` (one line) and ``data``: ``sink_guarantee``, ``lost``,
        ``extra_copies``, ``changed``, ``redelivered_after_failure``, ``handed_within_attempt``,
        ``handed_again_without_failure`` (each ``{KEY: n}``, only the non-zero ones),
        ``loss_owner`` and ``documentation``.

    Notes
    -----
    Per KEY: ``lost`` is the number of rows fewer than the failure-free run's, ``extra_copies``
    the number more, ``changed`` the rows that differ in value beyond that (an aggregating
    ``read_output`` — balances from a ledger — turns a copy into a changed value). Exactly-once
    holds when nothing differs. At-least-once holds when nothing is lost, no KEY has more extra
    copies than re-deliveries after a failure, and changed values occur only at KEYs that were
    re-delivered after a failure.

    Examples
    --------
    Three extra copies of rows handed again once after the failure: at-least-once does not hold.

    >>> r = judge_sink("at-least-once", {"u": {"a": 1}}, {"u": {"a": 4}}, redelivered={"u": 1})
    >>> r["ok"], r["data"]["extra_copies"], r["data"]["redelivered_after_failure"]
    (False, {'u': 3}, {'u': 1})
    >>> judge_sink("at-least-once", {"u": {"a": 1}}, {"u": {"a": 2}}, redelivered={"u": 1})["ok"]
    True
    >>> judge_sink("at-least-once", {"u": {"a": 1}, "v": {"b": 1}}, {"u": {"a": 2}},
    ...            redelivered={"u": 1})["data"]["lost"]
    {'v': 1}
    """
    check_guarantee(guarantee)
    redel = _positive(redelivered)
    known = redelivered is not None
    lost, extra, changed = _differences(want, got)
    within, again = _positive(within_attempt), _positive(again_without_failure)
    owner = "module" if lost and handed_keys is not None and set(lost) <= set(handed_keys) else None
    data: dict[str, Any] = {"sink_guarantee": guarantee, "lost": lost, "extra_copies": extra, "changed": changed,
                            "redelivered_after_failure": redel if known else None, "handed_within_attempt": within,
                            "handed_again_without_failure": again, "loss_owner": owner,
                            "documentation": documentation}
    unexplained = {k: n - redel.get(k, 0) for k, n in extra.items() if n > redel.get(k, 0)}
    changed_bad = sorted(k for k in changed if k not in redel)
    n_extra = sum(extra.values())
    if guarantee == "exactly-once":
        ok = not (lost or extra or changed)
    else:
        ok = not lost and not unexplained and not changed_bad
    if ok and not extra and not changed:
        detail = f"per KEY the same rows as the failure-free run ({len(want)} KEY(s)): no duplicate, none lost"
    elif ok:
        detail = (f"as declared at-least-once: {n_extra} extra cop{'y' if n_extra == 1 else 'ies'}"
                  + (f" and {len(changed)} KEY(s) with changed values" if changed else "")
                  + f", none beyond the {sum(redel.values())} row(s) handed again after the failure; none lost")
    else:
        detail = f"{guarantee} declared; " + "; ".join(_failed_parts(guarantee, lost, extra, changed, redel,
                                                                     unexplained, changed_bad))
    return {"ok": ok, "detail": detail, "data": data}


def _differences(want: Mapping[str, Mapping[str, int]], got: Mapping[str, Mapping[str, int]],
                 ) -> tuple[dict[str, int], dict[str, int], dict[str, int]]:
    """Per KEY, the rows lost, the extra copies and the changed rows of ``got`` against ``want``."""
    lost: dict[str, int] = {}
    extra: dict[str, int] = {}
    changed: dict[str, int] = {}
    for k in sorted(set(want) | set(got)):
        w, g = Counter(want.get(k) or {}), Counter(got.get(k) or {})
        nw, ng = sum(w.values()), sum(g.values())
        if ng > nw:
            extra[k] = ng - nw
            diff = sum((w - g).values())  # rows of the reference not in the output: replaced
        else:
            if nw > ng:
                lost[k] = nw - ng
            diff = sum((g - w).values())  # rows of the output not in the reference
        if diff:
            changed[k] = diff
    return lost, extra, changed


def _failed_parts(guarantee: str, lost: dict[str, int], extra: dict[str, int], changed: dict[str, int],
                  redel: dict[str, int], unexplained: dict[str, int], changed_bad: list[str]) -> list[str]:
    """What broke the declared guarantee, one clause each (a KEY named as the example)."""
    n_extra, n_lost = sum(extra.values()), sum(lost.values())
    parts = []
    if lost:
        k0 = next(iter(lost))
        parts.append(f"lost: {n_lost} row(s) over {len(lost)} KEY(s) (KEY {k0}: {lost[k0]})")
    if extra:
        k0 = next(iter(extra))
        parts.append(f"duplicated: {n_extra} extra cop{'y' if n_extra == 1 else 'ies'} over {len(extra)} KEY(s) "
                     f"(KEY {k0}: {extra[k0]} extra, {redel.get(k0, 0)} handed again after the failure)")
    if changed:
        k0 = next(iter(changed))
        parts.append(f"changed values at {len(changed)} KEY(s) (KEY {k0})")
    if guarantee == "at-least-once":
        if unexplained:
            k0 = next(iter(unexplained))
            parts.append(f"beyond at-least-once: KEY {k0} has {unexplained[k0]} more extra cop(ies) than "
                         f"re-deliveries after the failure")
        if changed_bad:
            parts.append(f"beyond at-least-once: KEY {changed_bad[0]} changed with no re-delivery after the failure")
    return parts


def sink_check_of(report: Report) -> Check | None:
    """The user-sink check of a report: the check whose data carries ``sink_guarantee``."""
    return next((c for c in report.checks if "sink_guarantee" in c.data), None)


def classify_cell(report: Report) -> dict[str, Any]:
    """A matrix cell's ``verdict``, ``expected_by_engine``, ``attributed_to`` and ``reason``.

    Parameters
    ----------
    report : Report
        The cell's replay report; the user-sink check (if any) carries the ``data`` of
        :func:`judge_sink`.

    Returns
    -------
    dict
        See the module docstring. The verdict is :func:`~rollcheck.pyimpl.verdict.decide`'s.

    Examples
    --------
    A lost KEY next to a duplicated one is never expected by the engine:

    >>> from rollcheck.pyimpl.verdict import Check, Report
    >>> j = judge_sink("exactly-once", {"a": {"x": 1}, "b": {"y": 1}}, {"a": {"x": 2}},
    ...                redelivered={"a": 1}, documentation="doc")
    >>> c = classify_cell(Report([Check.violated("user-sink", j["detail"], **j["data"])]))
    >>> c["expected_by_engine"], c["attributed_to"]
    (False, 'engine')

    An unchecked check leaves the violation unattributed:

    >>> j = judge_sink("exactly-once", {"a": {"x": 1}}, {"a": {"x": 2}}, redelivered={"a": 1})
    >>> c = classify_cell(Report([Check.violated("user-sink", j["detail"], **j["data"]),
    ...                           Check.unchecked("kill-point", "no checkpoint logs")]))
    >>> c["verdict"], c["expected_by_engine"], c["attributed_to"]
    ('not-conformant', False, None)
    """
    v = report.verdict
    verdict = v.word("trace")
    sink = sink_check_of(report)
    if v is Verdict.CONFORMANT:
        reason = report.summary("trace")
        if sink is not None and (sink.data.get("extra_copies") or sink.data.get("changed")):
            doc = sink.data.get("documentation") or ""
            reason += f"; {sink.name}: {sink.detail}" + (f" — the engine documents this: {doc}" if doc else "")
        return {"verdict": verdict, "expected_by_engine": False, "attributed_to": None, "reason": reason}
    if v is Verdict.INCONCLUSIVE:
        return {"verdict": verdict, "expected_by_engine": False, "attributed_to": None,
                "reason": f"inconclusive: {report.why_inconclusive}"}
    rc = report.root_cause
    assert rc is not None
    head = f"{rc.name}: {rc.detail}"
    unchecked = [c for c in report.checks if c.status is Status.UNCHECKED]
    if unchecked:
        names = ", ".join(f"{c.name} ({c.detail})" for c in unchecked)
        return {"verdict": verdict, "expected_by_engine": False, "attributed_to": None,
                "reason": f"finding: {head} — not attributed: check(s) unchecked: {names}"}
    bad = [c for c in report.checks if c.status is Status.VIOLATED]
    if sink is None or any(c is not sink for c in bad):
        return {"verdict": verdict, "expected_by_engine": False, "attributed_to": "engine",
                "reason": f"finding: {head}"}
    d = sink.data
    if d.get("redelivered_after_failure") is None:
        return {"verdict": verdict, "expected_by_engine": False, "attributed_to": None,
                "reason": f"finding: {head} — not attributed: the trace does not record which rows the sink was "
                          f"handed"}
    redel = d.get("redelivered_after_failure") or {}
    extra, changed, lost = d.get("extra_copies") or {}, d.get("changed") or {}, d.get("lost") or {}
    within, again = d.get("handed_within_attempt") or {}, d.get("handed_again_without_failure") or {}
    if within or again:
        what = "handed twice within one attempt" if within else "handed again with no failure in between"
        return {"verdict": verdict, "expected_by_engine": False, "attributed_to": "engine",
                "reason": f"finding: {head} — rows were {what} (not a documented re-delivery after a failure)"}
    if lost:
        owner = d.get("loss_owner")
        why = ("the engine handed the lost KEYs' rows to the sink: the module's sink lost them" if owner == "module"
               else "a lost row is never expected")
        return {"verdict": verdict, "expected_by_engine": False, "attributed_to": owner or "engine",
                "reason": f"finding: {head} — {why}"}
    if not (extra or changed):  # the same rows per KEY in another order (the last row per KEY differs)
        return {"verdict": verdict, "expected_by_engine": False, "attributed_to": None,
                "reason": f"finding: {head} — not attributed: the same rows per KEY, in another order"}
    envelope = d.get("envelope") or {}
    explained = (all(n <= int(redel.get(k, 0)) for k, n in extra.items())
                 and all(k in redel for k in changed)
                 and not (envelope and envelope.get("matched") is None))  # outside the at-least-once envelope
    if not explained:
        return {"verdict": verdict, "expected_by_engine": False, "attributed_to": "module",
                "reason": f"finding: {head} — more copies than the engine handed the sink (or values changed at KEYs "
                          f"it did not hand again): the module's sink made them"}
    doc = d.get("documentation") or "the engine's documentation"
    n = sum(int(x) for x in redel.values())
    return {"verdict": verdict, "expected_by_engine": True, "attributed_to": "module",
            "reason": (f"{head} — the sink is declared {d.get('sink_guarantee')}, but every extra copy is a "
                       f"re-delivery after the failure ({n} row(s) handed again), as the engine documents: {doc}")}
