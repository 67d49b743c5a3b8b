"""Oracles of a Flink recording that do not trust the engine's own failure-free run.

``output-exactly-once`` compares the run with an injected failure against the failure-free run of
the same job on the same engine: a bug that shows with and without a failure is invisible to it.
These checks judge the engine by something else.

``recovery-succeeded``
    After the injected failure Flink restarts the job from its own latest completed checkpoint.
    The restart must succeed: the tasks restore and the restarted job runs its input to the end
    (every subtask that restored also finished, and the job ``FINISHED``). A restart that fails
    with the engine's exception (the recorder's ``flink.recovery_failed``: Flink's root cause and
    the checkpoint it restored from, or the one it would), or that restarts until the restart
    strategy gives up, or a job that is never restarted at all, is a violation naming the
    exception and the checkpoint — a finding against the engine release that ran it. The user's
    code raising during the restart is not recorded as a trace at all (the recorder refuses that
    run as the module's own failure, exit 2). Not applicable without an injected failure.

References
----------
Apache Flink documentation, "Task Failure Recovery" (restart strategies) and "Checkpoints"
(restoring from the latest completed checkpoint); the Spark counterpart,
:mod:`rollcheck.spark_replay.oracles`.
"""

from __future__ import annotations

from typing import Any

from rollcheck.pyimpl.verdict import Check

__all__ = ["RECOVERY", "recovery_check", "release_of_trace", "swallow_recovery_exception", "ORACLE_TAMPERS"]

RECOVERY = "recovery-succeeded"


def release_of_trace(header: dict[str, Any]) -> str:
    """The apache-flink release a trace was recorded on (``engine_version``, else ``flink.pyflink``)."""
    return str(header.get("engine_version") or (header.get("flink") or {}).get("pyflink") or "?")


def recovery_check(header: dict[str, Any], events: list[dict[str, Any]]) -> Check:
    """``recovery-succeeded`` (see the module docstring).

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
        return Check.violated(RECOVERY, f"the job restarted from checkpoint {checkpoint} and ended {final}"
                              + (f" with the engine's exception {cause}" if cause else "")
                              + f": a finding against apache-flink {release}", offending_seq=int(events[-1]["seq"]))
    missing = sorted(restored - finished)
    if any(e.get("kind") == "flink.task_finished" for e in events) and missing:
        return Check.violated(RECOVERY, f"the job restarted from checkpoint {checkpoint} (attempt {last}) but "
                              f"{len(missing)} restored subtask(s) never ran to the end of the input "
                              f"({', '.join(f'{t} {s}' for t, s in missing[:4])}): the restart did not succeed "
                              f"though the job reports FINISHED", offending_seq=int(events[-1]["seq"]))
    return Check.held(RECOVERY, f"the job restarted from checkpoint {checkpoint} (attempt {last}); "
                      f"{len(restored)} restored subtask(s) ran to the end and the job finished "
                      f"(apache-flink {release})", examined=max(1, len(restored)))


# ----------------------------------------------------------------------------- mutants
def swallow_recovery_exception(header: dict[str, Any], events: list[dict[str, Any]]
                               ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A mutant of ``recovery-succeeded``: the restart after the failure died and its exception was
    swallowed — the exception record is gone, everything the restarted job did is gone (its
    restores, snapshots, finished tasks, commits), and the job still reports ``FINISHED``.

    Returns the changed ``(header, events)`` (copies; ``seq`` renumbered).

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


#: The mutants of this module's oracles: name -> (function, the check that must call it a violation).
ORACLE_TAMPERS = {"swallow-recovery-exception": (swallow_recovery_exception, RECOVERY)}
