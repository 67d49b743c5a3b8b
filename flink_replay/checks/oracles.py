"""Oracles of a Flink recording that do not trust the engine's own failure-free run.

``output-exactly-once`` compares the run with an injected failure against the failure-free run of
the same job on the same engine: a bug that shows with and without a failure is invisible to it.
These checks judge the engine by something else:

``recovery-succeeded``
    the restart from the engine's own latest completed checkpoint succeeds and runs the input to
    its end (not applicable without an injected failure).
``batch-equivalent``
    the final output table (per KEY the last row) of both runs equals the same job's in Flink's
    BATCH runtime mode (not applicable: ``BATCH_EQUIVALENT = "reason"``, a job BATCH mode cannot
    run, a rescaled run).
``release-differential``
    with ``--engine-version V``, the failure-free final output table on V equals the one on the
    reference release R (not applicable without ``--engine-version`` or when V is R).

See docs/internals/flink-checks.md#oracles for what each compares and when it is unchecked.

References
----------
Apache Flink documentation, "Execution Mode (Batch/Streaming)" (what BATCH mode guarantees and
where it differs: processing time, no checkpoints, keyed inputs sorted by key), "Task Failure
Recovery" (restart strategies) and "Checkpoints" (restoring from the latest completed checkpoint);
the Spark counterpart, :mod:`rollcheck.spark_replay.oracles`.
"""

from __future__ import annotations

from typing import Any

from rollcheck.pyimpl.verdict import Check

__all__ = ["RECOVERY", "BATCH", "RELEASE", "release_check", "differ_release", "batch_check", "final_table", "batch_table", "drop_last_record", "double_count_last_record",
           "recovery_check", "second_failure_problem", "release_of_trace", "swallow_recovery_exception", "ORACLE_TAMPERS"]

RECOVERY = "recovery-succeeded"
BATCH = "batch-equivalent"
RELEASE = "release-differential"
_SEP = "\x1f"


def release_of_trace(header: dict[str, Any]) -> str:
    """The apache-flink release a trace was recorded on (``engine_version``, else ``flink.pyflink``)."""
    v = header.get("engine_version") or (header.get("flink") or {}).get("pyflink")
    return str(v) if v and v != "?" else "release not recorded"


def recovery_check(header: dict[str, Any], events: list[dict[str, Any]]) -> Check:
    """``recovery-succeeded`` (see the module docstring).

    Parameters
    ----------
    header : dict
        The trace's header.
    events : list of dict
        The trace's events.

    Examples
    --------
    >>> h = {"engine_version": "1.20.5", "flink": {"final_state": "FAILED"}}
    >>> ev = [{"seq": 3, "kind": "failure"}, {"seq": 9, "kind": "flink.recovery_failed", "checkpoint": 2,
    ...        "exception": "java.io.FileNotFoundException", "message": "chk-2/x (No such file)",
    ...        "restarts": 4, "final_state": "FAILED"}, {"seq": 10, "kind": "end"}]
    >>> c = recovery_check(h, ev)
    >>> c.status.value, c.detail.split(":")[0]
    ('violated', "the restart from checkpoint 2 failed with the engine's exception java.io.FileNotFoundException")
    """
    failure = next((e for e in events if e.get("kind") == "failure"), None)
    if failure is None:
        return Check.not_applicable(RECOVERY, "no failure in the run: no recovery to check")
    release = release_of_trace(header)
    failed = next((e for e in events if e.get("kind") == "flink.recovery_failed"), None)
    if failed is not None:
        exc = failed.get("exception") or "no exception reported"
        msg = f": {failed['message']}" if failed.get("message") else ""
        how = (f"restarted {failed.get('restarts')} time(s) and ended {failed.get('final_state')}"
               if failed.get("restarts") else f"ended {failed.get('final_state')}")
        return Check.violated(RECOVERY, f"the restart from checkpoint {failed.get('checkpoint')} failed with the "
                              f"engine's exception {exc}{msg} (the job {how}): a finding against apache-flink "
                              f"{release}", offending_seq=int(failed["seq"]))
    ended = bool(events) and events[-1].get("kind") == "end"
    if not ended:
        return Check.unchecked(RECOVERY, "the trace was cut short: whether the restart finished is not known")
    final = (header.get("flink") or {}).get("final_state", "FINISHED")
    restores = [e for e in events if e.get("kind") == "flink.restore" and e.get("attempt", 0) > 0
                and int(e["seq"]) > int(failure["seq"])]
    if not restores:
        return Check.violated(RECOVERY, f"the job was not restarted after the failure at seq {failure['seq']} "
                              f"(job {final}): a finding against apache-flink {release}",
                              offending_seq=int(events[-1]["seq"]))
    last = max(int(e["attempt"]) for e in restores)
    restored = {(e["task"], e["subtask"]) for e in restores if e["attempt"] == last}
    finished = {(e["task"], e["subtask"]) for e in events
                if e.get("kind") == "flink.task_finished" and e.get("attempt", 0) >= last}
    checkpoint = next((e.get("checkpoint") for e in restores if e["attempt"] == last), None)
    if final != "FINISHED":
        cause = (header.get("flink") or {}).get("failure_cause")
        if not cause:  # nothing says the engine failed it (a run cut at the limit, a restore rollcheck could not do)
            return Check.unchecked(RECOVERY, f"the job restarted from checkpoint {checkpoint} and ended {final}, "
                                   "and the recording says of no exception why")
        return Check.violated(RECOVERY, f"the job restarted from checkpoint {checkpoint} and ended {final} with the "
                              f"engine's exception {cause}: a finding against apache-flink {release}",
                              offending_seq=int(events[-1]["seq"]))
    missing = sorted(restored - finished)
    if any(e.get("kind") == "flink.task_finished" for e in events) and missing:
        return Check.violated(RECOVERY, f"the job restarted from checkpoint {checkpoint} (attempt {last}) but "
                              f"{len(missing)} restored subtask(s) never ran to the end of the input "
                              f"({', '.join(f'{t} {s}' for t, s in missing[:4])}): the restart did not succeed "
                              f"though the job reports FINISHED", offending_seq=int(events[-1]["seq"]))
    return Check.held(RECOVERY, f"the job restarted from checkpoint {checkpoint} (attempt {last}); "
                      f"{len(restored)} restored subtask(s) ran to the end and the job finished "
                      f"(apache-flink {release})", examined=max(1, len(restored)))


def final_table(lines: list[str]) -> dict[str, str]:
    """Per KEY the row with the highest number of committed ``N<US>KEY<US>ROW`` lines.

    Examples
    --------
    >>> us = chr(31)
    >>> final_table([us.join(["1", "a", "5"]), us.join(["2", "a", "9"]), us.join(["1", "b", "1"])])
    {'a': '9', 'b': '1'}
    """
    best: dict[str, tuple[int, str]] = {}
    for line in lines:
        n, key, row = str(line).split(_SEP, 2)
        if key not in best or int(n) > best[key][0]:
            best[key] = (int(n), row)
    return {k: v[1] for k, v in best.items()}


def batch_table(subtasks: list[list[str]]) -> tuple[dict[str, str], set[str]]:
    """The batch run's final table (per KEY its last emitted row) and the KEYs several subtasks emitted."""
    last: dict[str, str] = {}
    where: dict[str, set[int]] = {}
    for i, lines in enumerate(subtasks):
        for line in lines:
            key, row = str(line).split(_SEP, 1)
            last[key] = row
            where.setdefault(key, set()).add(i)
    return last, {k for k, s in where.items() if len(s) > 1}


def batch_check(header: dict[str, Any], events: list[dict[str, Any]]) -> Check:
    """``batch-equivalent`` (see the module docstring).

    Parameters
    ----------
    header : dict
        The trace's header.
    events : list of dict
        The trace's events.
    """
    batch = next((e for e in events if e.get("kind") == "flink.batch_output"), None)
    if batch is None:
        why = "a rescaled run" if (header.get("config") or {}).get("rescale") else "recorded without one"
        return Check.not_applicable(BATCH, f"the recording has no BATCH-mode run of the job ({why})")
    if batch.get("final_state") == "NOT_RUN":
        return Check.not_applicable(BATCH, f"the module declares no batch meaning: {batch.get('reason')}")
    if batch.get("final_state") != "FINISHED":
        return Check.not_applicable(BATCH, f"Flink did not run the job in BATCH mode ({batch.get('final_state')}): "
                                    f"{batch.get('reason') or 'no reason reported'}")
    ended = bool(events) and events[-1].get("kind") == "end"
    outputs = {e["sink"]: e for e in events if e.get("kind") == "flink.sink_output"}
    want, split = batch_table(batch.get("subtasks") or [])
    finished = (header.get("flink") or {}).get("final_state", "FINISHED") == "FINISHED"
    named = [("failure-free reference", outputs.get("reference"))]
    if finished:
        named.append(("run with the failure", outputs.get("tx")))
    runs = [(what, o) for what, o in named if o is not None]
    if not ended or len(runs) < len(named):
        return Check.unchecked(BATCH, "no complete committed output to compare with the BATCH run's")
    release = release_of_trace(header)
    examined = 0
    for what, out in runs:
        got = final_table(out["lines"])
        keys = sorted((set(got) | set(want)) - split)
        for k in keys:
            if got.get(k) != want.get(k):
                return Check.violated(BATCH, f"KEY {k}: the {what}'s final row is {got.get(k) or 'missing'}, the "
                                      f"same job in BATCH mode gives {want.get(k) or 'no row'} (apache-flink "
                                      f"{release})", offending_seq=int(out["seq"]))
        examined += len(keys)
    note = (f"; {len(split)} KEY(s) unchecked: several subtasks of the batch run emitted their rows, so no row is "
            f"last" if split else "")
    if not want and not split:
        return Check.unchecked(BATCH, "the BATCH run emitted no row: nothing to compare")
    if examined == 0:
        return Check.unchecked(BATCH, f"no KEY comparable{note}")
    done = " and ".join(w for w, _ in runs)
    return Check.held(BATCH, f"{len(want) - len(split)} KEY(s): the final row of every KEY of the {done} equals "
                      f"the BATCH-mode run's (apache-flink {release}){note}", examined=examined)


def release_check(header: dict[str, Any], events: list[dict[str, Any]]) -> Check:
    """``release-differential`` (see the module docstring).

    Parameters
    ----------
    header : dict
        The trace's header.
    events : list of dict
        The trace's events.

    Examples
    --------
    >>> us = chr(31)
    >>> h = {"engine_version": "2.2.1", "config": {"engine_version": "2.2.1", "reference_version": "2.3.0"}}
    >>> ref = {"seq": 5, "kind": "flink.sink_output", "sink": "reference", "lines": [us.join(["1", "a", "[1]"])]}
    >>> rr = {"seq": 6, "kind": "flink.release_reference", "engine_version": "2.3.0", "final_state": "FINISHED",
    ...       "lines": [us.join(["1", "a", "[2]"])]}
    >>> c = release_check(h, [ref, rr, {"seq": 7, "kind": "end"}])
    >>> c.status.value, c.detail.split(":")[0]
    ('violated', 'apache-flink 2.2.1 and 2.3.0 give different final tables')
    """
    cfg = header.get("config") or {}
    mine = str(cfg.get("engine_version") or release_of_trace(header))
    want = cfg.get("reference_version")
    rel = next((e for e in events if e.get("kind") == "flink.release_reference"), None)
    if rel is None:
        if want and str(want) != mine:
            return Check.unchecked(RELEASE, f"no failure-free run on the reference release apache-flink {want} in "
                                   "the trace")
        if want:
            return Check.not_applicable(RELEASE, f"apache-flink {mine} is the reference release itself: one release")
        return Check.not_applicable(RELEASE, f"one release (apache-flink {mine}): recorded without --engine-version")
    other = str(rel.get("engine_version") or want or "the reference release")
    seq = int(rel["seq"])
    built = next((e for e in events if e.get("kind") == "flink.reference_failed"), None)
    if built is not None and rel.get("final_state") == "FINISHED":
        n = len(final_table(rel.get("lines") or []))
        return Check.violated(RELEASE, f"on apache-flink {mine} Flink raised {built.get('exception')} inside the "
                              f"module's {built.get('phase') or 'job()'} ({str(built.get('message'))[:300]}); on "
                              f"{other} the same job was built and ran to its end ({n} KEY(s)): the engine's "
                              f"exception, not the module's", offending_seq=int(built["seq"]))
    ended = bool(events) and events[-1].get("kind") == "end"
    ref = next((e for e in events if e.get("kind") == "flink.sink_output" and e.get("sink") == "reference"), None)
    if not ended or ref is None:
        return Check.unchecked(RELEASE, f"no complete failure-free run on apache-flink {mine} to compare with {other}'s")
    if rel.get("user_error"):
        return Check.unchecked(RELEASE, f"the job module did not run on apache-flink {other}: {rel['user_error']} "
                               "(the module's own failure there; nothing compared)")
    if rel.get("final_state") != "FINISHED":
        cause = rel.get("failure_cause")
        if not cause:
            why = f": {rel['reason']}" if rel.get("reason") else " and the recording says of no exception why"
            return Check.unchecked(RELEASE, f"the failure-free run on apache-flink {other} ended "
                                   f"{rel.get('final_state')}{why}")
        got = final_table(ref["lines"])
        return Check.violated(RELEASE, f"the failure-free run on apache-flink {other} ended {rel.get('final_state')} "
                              f"with the engine's exception {cause}; on {mine} the same run ran to its end "
                              f"({len(got)} KEY(s))", offending_seq=seq)
    a, b = final_table(ref["lines"]), final_table(rel.get("lines") or [])
    if a == b:
        if not a:
            return Check.unchecked(RELEASE, f"the failure-free runs on apache-flink {mine} and {other} emitted no "
                                   "row: nothing to compare")
        return Check.held(RELEASE, f"the failure-free final table on apache-flink {mine} equals the one on {other} "
                          f"({len(a)} KEY(s))", examined=len(a))
    differ = sorted((set(a) ^ set(b)) | {k for k in a if k in b and a[k] != b[k]})
    shown = "; ".join(f"KEY {k}: {a.get(k) or 'missing'} on {mine}, {b.get(k) or 'missing'} on {other}"
                      for k in differ[:3])
    more = f" (and {len(differ) - 3} more)" if len(differ) > 3 else ""
    which = ""
    batch = next((e for e in events if e.get("kind") == "flink.batch_output"), None)
    if batch is not None and batch.get("final_state") == "FINISHED":
        table, split = batch_table(batch.get("subtasks") or [])
        if differ[0] not in split:
            w = table.get(differ[0])
            agrees = (f"{mine} agrees" if a.get(differ[0]) == w else f"{other} agrees" if b.get(differ[0]) == w
                      else "neither agrees")
            which = f"; the same job in BATCH mode on {mine} gives {w or 'no row'} for KEY {differ[0]}: {agrees}"
    return Check.violated(RELEASE, f"apache-flink {mine} and {other} give different final tables: {len(differ)} "
                          f"KEY(s) differ: {shown}{more}{which}", offending_seq=seq)


def second_failure_problem(events: list[dict[str, Any]]) -> str | None:
    """Why the trace does not prove the second failure where meant (None: proven, or none to prove).

    - ``during-restore``: the second failure was raised in attempt ``a >= 1`` of the restarted job
      (the attempt Flink gave the task), after the first failure, while that attempt was still
      restoring: some task of attempt ``a`` logged its restore (``flink.restore_interrupted``: the
      recorder relabels the restores of the attempt that failure interrupted), and no task of
      attempt ``a`` had taken a snapshot or finished before the failure;
    - ``twice``: the job had recovered from the first failure (restores of attempt ``a`` between
      the two failures) and the second failure was raised by attempt ``a``;
    - both: the job restored again after the second failure (an attempt after ``a``).

    Examples
    --------
    >>> ev = [{"seq": 1, "kind": "failure"}, {"seq": 2, "kind": "flink.restore", "attempt": 1},
    ...       {"seq": 3, "kind": "failure", "second": "twice", "in_attempt": 1},
    ...       {"seq": 4, "kind": "flink.restore", "attempt": 2}]
    >>> second_failure_problem(ev) is None
    True
    >>> second_failure_problem(ev[:3])
    'the job never restored after the second failure (seq 3)'
    """
    fails = [e for e in events if e.get("kind") in ("failure", "flink.failure_during_restore")]
    second = next((e for e in fails if e.get("second")), None)
    if second is None:
        return None
    first = next((e for e in fails if not e.get("second")), None)
    if first is None or int(first["seq"]) > int(second["seq"]):
        return f"the second failure (seq {second['seq']}) came before the first"
    a = int(second.get("in_attempt") or 0)
    s1, s2 = int(first["seq"]), int(second["seq"])
    if a < 1:
        return f"the second failure (seq {s2}) was not raised by a restarted attempt (attempt {a})"
    after = [e for e in events if e.get("kind") == "flink.restore" and int(e["seq"]) > s2 and e.get("attempt", 0) > a]
    if not after:
        return f"the job never restored after the second failure (seq {s2})"
    mine = [e for e in events if e.get("attempt") == a and e.get("kind") in (
        "flink.restore", "flink.restore_interrupted", "flink.snapshot", "flink.task_finished")]
    if second["second"] == "during-restore":
        if not any(e["kind"] in ("flink.restore", "flink.restore_interrupted") and s1 < int(e["seq"]) for e in mine):
            return f"no task of attempt {a} logged a restore: the second failure is not shown to strike while it restored"
        busy = [e for e in mine if e["kind"] in ("flink.snapshot", "flink.task_finished") and int(e["seq"]) < s2]
        if busy:
            return (f"attempt {a} had already {busy[0]['kind'].split('.')[-1].replace('_', ' ')} (seq {busy[0]['seq']}) "
                    f"before the second failure (seq {s2}): it was not restoring any more")
    elif not any(e["kind"] == "flink.restore" and s1 < int(e["seq"]) < s2 for e in mine):
        return f"the job had not recovered (no restore of attempt {a}) before the second failure (seq {s2})"
    return None


# ----------------------------------------------------------------------------- mutants
def swallow_recovery_exception(header: dict[str, Any], events: list[dict[str, Any]]
                               ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A mutant of ``recovery-succeeded``: the restart died and its exception was swallowed.

    The exception record is gone, everything the restarted job did is gone (its restores, snapshots,
    finished tasks, commits), and the job still reports ``FINISHED``.

    Parameters
    ----------
    header : dict
        The trace's header.
    events : list of dict
        The trace's events (left unchanged: the mutant is a copy).

    Returns
    -------
    tuple
        The changed ``(header, events)`` (copies; ``seq`` renumbered).

    Raises
    ------
    ValueError
        The trace has no failure (no recovery to tamper with).
    """
    import copy

    failure = next((e for e in events if e.get("kind") == "failure"), None)
    if failure is None:
        raise ValueError("the trace has no failure, so no recovery to tamper with")
    keep = ("flink.sink_output", "end")
    out = [copy.deepcopy(e) for e in events
           if int(e["seq"]) <= int(failure["seq"]) or e.get("kind") in keep]
    for i, e in enumerate(out, start=1):
        e["seq"] = i
    h = copy.deepcopy(header)
    h.setdefault("flink", {})["final_state"] = "FINISHED"
    h["flink"].pop("failure_cause", None)
    return h, out


def _key_rows(lines: list[str], key: str) -> list[tuple[int, int, str]]:
    """``(N, index, row)`` of ``key``'s committed lines, by N."""
    out = []
    for i, line in enumerate(lines):
        n, k, row = str(line).split(_SEP, 2)
        if k == key:
            out.append((int(n), i, row))
    return sorted(out)


def _retell(header: dict[str, Any], events: list[dict[str, Any]], final: Any, extra: int
            ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Make the KEY with the most rows end on ``final(reference rows)`` after ``extra`` more rows.

    Both in the committed output *and* the failure-free reference (-1: one fewer row): the same wrong
    final table in every run, so the runs agree with each other.
    """
    import copy
    import json

    out = copy.deepcopy(events)
    sinks = {e.get("sink"): e for e in out if e.get("kind") == "flink.sink_output"}
    ref = sinks["reference"]["lines"]
    counts: dict[str, int] = {}
    for line in ref:
        k = str(line).split(_SEP, 2)[1]
        counts[k] = counts.get(k, 0) + 1
    key = max(counts, key=lambda k: (counts[k], k))
    rows = [json.loads(r) for _, _, r in _key_rows(ref, key)]
    row = json.dumps(final(rows))
    for name in ("tx", "reference"):
        lines = list(sinks[name]["lines"])
        mine = _key_rows(lines, key)
        n_last, i_last, _ = mine[-1]
        if extra < 0:  # one row fewer: the last is gone, the one before it ends with ``row``
            _, i_prev, _ = mine[-2]
            lines[i_prev] = _SEP.join([str(mine[-2][0]), key, row])
            del lines[i_last]
        else:
            lines.append(_SEP.join([str(n_last + 1), key, row]))
        sinks[name]["lines"] = lines
    return header, out


def drop_last_record(header: dict[str, Any], events: list[dict[str, Any]]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A mutant of ``batch-equivalent``: the engine dropped one input record of a KEY in *every* run.

    The failure-free run included, so ``output-exactly-once`` (which compares the runs) sees nothing:
    that KEY has one row fewer and ends with the reference's row before its last.

    Parameters
    ----------
    header : dict
        The trace's header.
    events : list of dict
        The trace's events (left unchanged: the mutant is a copy).
    """
    return _retell(header, events, lambda rows: rows[-2], -1)


def double_count_last_record(header: dict[str, Any], events: list[dict[str, Any]]
                             ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A mutant of ``batch-equivalent``: the engine counted a KEY's last record twice in every run.

    One row more, whose numeric fields grew once more by what that record added (last row minus the
    row before it).

    Parameters
    ----------
    header : dict
        The trace's header.
    events : list of dict
        The trace's events (left unchanged: the mutant is a copy).
    """
    def final(rows: list[Any]) -> Any:
        last, prev = rows[-1], rows[-2]
        return [c + (c - p) if isinstance(c, (int, float)) and not isinstance(c, bool)
                and isinstance(p, (int, float)) else c for c, p in zip(last, prev, strict=False)]
    return _retell(header, events, final, 1)


def differ_release(header: dict[str, Any], events: list[dict[str, Any]]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A mutant of ``release-differential``: the reference release's failure-free run lost a KEY's last row.

    The KEY is the first whose last row differs from the one before it, or that has one row: it ends
    with another row, or is missing, on R only.

    Parameters
    ----------
    header : dict
        The trace's header.
    events : list of dict
        The trace's events (left unchanged: the mutant is a copy).

    Raises
    ------
    ValueError
        The trace has no failure-free run on a reference release, or no KEY whose final row a lost
        last row would change.
    """
    import copy

    out = copy.deepcopy(events)
    rel = next((e for e in out if e.get("kind") == "flink.release_reference"), None)
    if rel is None or not rel.get("lines"):
        raise ValueError("the trace has no failure-free run on a reference release (record with --engine-version)")
    lines = list(rel["lines"])
    for key in sorted({str(x).split(_SEP, 2)[1] for x in lines}):
        mine = _key_rows(lines, key)
        if len(mine) == 1 or mine[-1][2] != mine[-2][2]:
            del lines[mine[-1][1]]
            rel["lines"] = lines
            return copy.deepcopy(header), out
    raise ValueError("no KEY of the reference release's run whose final row a lost last row would change")


#: The mutants of this module's oracles: name -> (function, the check that must call it a violation).
ORACLE_TAMPERS = {"swallow-recovery-exception": (swallow_recovery_exception, RECOVERY),
                  "drop-last-record": (drop_last_record, BATCH),
                  "double-count-last-record": (double_count_last_record, BATCH),
                  "differ-release": (differ_release, RELEASE)}
