"""Oracles that do not trust the engine's own failure-free run (``docs/your-query.md``, section 4).

Details: ``docs/internals/spark-oracles.md`` (section ``checks``).
"""

from __future__ import annotations

from typing import Any

from rollcheck.pyimpl.traces.plugin import TraceCheck
from rollcheck.pyimpl.verdict import Check
from rollcheck.spark_replay.oracles.batch_eval import (
    ARBITRARY_STATEFUL,
    analyse_plan,
    evaluate_batch,
    event_time_ms,
)
from rollcheck.spark_replay.oracles.batch_judge import _judge, canon_row, final_table
from rollcheck.spark_replay.stream.plugins import EventListCheck

__all__ = [
    "ORACLE_CHECKS",
    "ARBITRARY_STATEFUL",
    "analyse_plan",
    "event_time_ms",
    "evaluate_batch",
    "canon_row",
    "final_table",
    "batch_equivalent",
    "release_differential",
    "recovery_succeeded",
    "oracle_plugins",
]

#: The check names this module adds to every query replay.
ORACLE_CHECKS = ("batch-equivalent", "release-differential", "recovery-succeeded")


# ----------------------------------------------------------------------------- replay side
def _events(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [e for e in events if e.get("kind") in (kind, "spark." + kind)]


def batch_equivalent(header: dict[str, Any], events: list[dict[str, Any]]) -> Check | None:
    """``batch-equivalent`` (module docstring).

    None when the recording has no batch evaluation (a trace from before this oracle).

    Parameters
    ----------
    header : dict
        The trace's header.
    events : list of dict
        The trace's recorded events.

    Returns
    -------
    Check or None
        The oracle's verdict.
    """
    name = "batch-equivalent"
    if (header.get("config") or {}).get("failure") == "upgrade":  # each row by the query that read it
        from rollcheck.spark_replay.oracles.upgrade_eval import judge_upgrade

        return judge_upgrade(header, events)
    evals = _events(events, "batch_evaluation")
    if not evals:
        return None
    ref = next(iter(_events(events, "reference")), None)
    fin = next(iter(_events(events, "output_final")), None)
    outputs = {"reference": None if ref is None else (ref.get("output"), int(ref["seq"])),
               "final": None if fin is None else (fin.get("rows"), int(fin["seq"]))}
    judged: list[str] = []
    seen: set[str] = set()
    own_sink = bool((header.get("config") or {}).get("user_sink"))
    for ev in evals:
        run = str(ev.get("run"))
        if not ev.get("applicable"):
            return Check.not_applicable(name, str(ev.get("reason")))
        if ev.get("undecided"):
            return Check.unchecked(name, f"{run} run: {ev['undecided']}")
        got = outputs.get(run)
        if got is None or got[0] is None:
            continue
        if own_sink and run == "final" and "reference" in seen:
            # what the user's sink made of the failure is the sink checks' (its declared guarantee)
            continue
        seen.add(run)
        output = list(got[0])
        bad = _judge(name, run, ev, output, header, got[1])
        if bad is not None:
            return bad
        judged.append(f"{run} ({len(output)} row(s); {ev.get('on_time_rows')} input row(s) kept, "
                      f"{ev.get('dropped_rows', len(ev.get('late') or []))} dropped as late"
                      + (f", {ev['partly_counted_rows']} counted in some windows only"
                         if ev.get("partly_counted_rows") else "") + ")")
    if not judged:
        return Check.unchecked(name, "batch evaluations recorded but no output of the same run to judge")
    rule = next((str(e["rule"]) for e in evals if e.get("rule")), "")
    return Check.held(name, "equal to the query run as a batch job over the input rows Spark's lateness rule keeps"
                      + (f" ({rule})" if rule else "") + ": " + "; ".join(judged), examined=len(judged))


def release_differential(header: dict[str, Any], events: list[dict[str, Any]]) -> Check | None:
    """``release-differential`` (module docstring).

    Parameters
    ----------
    header : dict
        The trace's header.
    events : list of dict
        The trace's recorded events.

    Returns
    -------
    Check
        Held, violated, unchecked or not applicable (one release only).
    """
    name = "release-differential"
    rel = _events(events, "release_reference")
    mine = header.get("engine_version") or "the recording's release"
    if not rel:
        want = (header.get("config") or {}).get("reference_version")
        if want and want != mine:
            return Check.unchecked(name, f"no failure-free run on the reference release {want} in the trace")
        return Check.not_applicable(name, f"one release ({mine}): no --engine-version other than the reference")
    r = rel[0]
    other = r.get("engine_version")
    failed = next(iter(_events(events, "reference_failed")), None)
    if failed is not None:  # fails on the release under test, ran to its end on the reference release
        cause = f" (caused by {failed['cause']})" if failed.get("cause") else ""
        return Check.violated(name, f"the failure-free run on pyspark {failed.get('engine_version') or mine} failed "
                                    f"with the engine's exception {failed.get('exception')}: {failed.get('message')}"
                                    f"{cause} (checkpoint {failed.get('checkpoint')}, batches committed "
                                    f"{failed.get('batches')}); on {other} the same run ran to its end "
                                    f"({len(r.get('output') or [])} output row(s))",
                              offending_seq=int(failed["seq"]))
    ref = next((e for e in _events(events, "reference")), None)
    if ref is None:
        return Check.unchecked(name, f"no failure-free run on {mine} to compare with {other}'s")
    key = [str(k) for k in (header.get("config") or {}).get("key") or []]
    ev = next((e for e in _events(events, "batch_evaluation") if e.get("run") == "reference"
               and e.get("applicable") and e.get("variants")), None)
    cols = None if ev is None else [f["name"] for f in ev.get("fields") or []]
    a, b = final_table(ref.get("output") or [], key, cols), final_table(r.get("output") or [], key, cols)
    if a == b:
        return Check.held(name, f"the failure-free final table on pyspark {mine} equals the one on {other} "
                                f"({len(a)} key(s))", examined=max(1, len(a)))
    differ = sorted((set(a) ^ set(b)) | {x for x in a if x in b and a[x] != b[x]})
    if ev is not None and (header.get("config") or {}).get("output_mode") in ("update", "complete"):
        tables = [final_table(v["rows"], key, cols) for v in ev["variants"]]
        allowed = [k for k in differ if a.get(k) in {t.get(k) for t in tables} and b.get(k) in {t.get(k) for t in tables}]
        if len(allowed) == len(differ) and ev.get("late"):
            return Check.held(name, f"pyspark {mine} and {other} differ only at {len(differ)} key(s) where late "
                                    f"rows count on one and not the other (e.g. {differ[0]}): both agree with the "
                                    "batch job with or without those late rows (the watermark's guarantee holds in "
                                    "one direction only)", examined=max(1, len(a)))
    k = differ[0]
    which = ""
    if ev is not None:
        want = final_table(ev["variants"][0]["rows"], key, cols).get(k)
        which = (f"; the batch job over the on-time rows gives {want or 'no row'}: "
                 + (f"{mine} agrees" if a.get(k) == want else f"{other} agrees" if b.get(k) == want
                    else "neither agrees"))
    return Check.violated(name, f"pyspark {mine} and {other} give different final tables: key {k} is "
                                f"{a.get(k) or 'missing'} on {mine} and {b.get(k) or 'missing'} on {other}{which}",
                          offending_seq=int(ref["seq"]))


def recovery_succeeded(header: dict[str, Any], events: list[dict[str, Any]]) -> Check | None:
    """``recovery-succeeded`` (module docstring).

    Parameters
    ----------
    header : dict
        The trace's header.
    events : list of dict
        The trace's recorded events.

    Returns
    -------
    Check or None
        The oracle's verdict; None when the recording has no ``end`` (``end-of-run`` reports it).
    """
    name = "recovery-succeeded"
    failed = _events(events, "recovery_failed")
    if failed:
        f = failed[0]
        who = "the user's code" if f.get("user_code") else "the engine"
        cause = f" (caused by {f['cause']})" if f.get("cause") else ""
        check = Check.violated(name, f"the restart from checkpoint {f.get('checkpoint')} failed with {who}'s "
                                     f"exception: {f.get('exception')}: {f.get('message')}{cause}",
                               offending_seq=int(f["seq"]))
        return check
    unreadable = next(iter(_events(events, "state_read_failed")), None)
    if unreadable is not None:  # the engine's own reader could not reload the engine's own checkpoint
        cause = f" (caused by {unreadable['cause']})" if unreadable.get("cause") else ""
        return Check.violated(name, f"Spark's own state reader failed on the engine's checkpoint "
                                    f"{unreadable.get('checkpoint')} ({unreadable.get('run')} run, pyspark "
                                    f"{unreadable.get('engine_version') or header.get('engine_version')}) with the "
                                    f"engine's exception {unreadable.get('exception')}: {unreadable.get('message')}"
                                    f"{cause}: state the engine wrote cannot be reloaded",
                              offending_seq=int(unreadable["seq"]))
    failures = [e for e in events if e.get("kind") == "failure"]
    if not failures:
        return Check.not_applicable(name, "no failure in the run: no recovery to check")
    end = next((e for e in events if e.get("kind") == "end"), None)
    if end is None:
        return None  # end-of-run says the recording stopped
    last_fail = max(int(e["seq"]) for e in failures)
    starts = [e for e in _events(events, "attempt_start") if int(e["seq"]) > last_fail]
    if not starts:
        return Check.violated(name, "the query was not restarted after the failure", offending_seq=int(end["seq"]))
    planned = {int(e["batch"]) for e in _events(events, "batch_planned")}
    committed_after = {int(e["batch"]) for e in _events(events, "batch_committed") if int(e["seq"]) > last_fail}
    committed = {int(e["batch"]) for e in _events(events, "batch_committed")}
    left = sorted(planned - committed)
    if end.get("status") != "done" or left:
        return Check.violated(name, f"the restart from the checkpoint did not finish: batches {left} never "
                                    f"committed (end status {end.get('status')!r})", offending_seq=int(end["seq"]))
    return Check.held(name, f"{len(starts)} restart(s) from the checkpoint; {len(committed_after)} batch(es) "
                            "committed after the last failure and the run finished", examined=len(starts))


def oracle_plugins(header: dict[str, Any], source: str | None) -> list[TraceCheck]:
    """The three oracles as trace plug-ins (each reads the trace's own events).

    Parameters
    ----------
    header : dict
        The trace's header.
    source : str or None
        The trace file, named by a malformed-record error.

    Returns
    -------
    list of TraceCheck
        The ``batch-equivalent``, ``release-differential`` and ``recovery-succeeded`` plug-ins.
    """
    return [EventListCheck("batch-equivalent", header, batch_equivalent, source),
            EventListCheck("release-differential", header, release_differential, source),
            EventListCheck("recovery-succeeded", header, recovery_succeeded, source)]
