"""The checks every Spark streaming trace gets, word count and user queries alike.

- :func:`failure_observed`: the requested failure happened at the requested batch and the query
  restarted and finished; a requested failure that did not happen is *unchecked* (exit 3);
  :class:`FailureObservedNhop` is the same for a message-passing trace;
- :func:`commit_protocol`: batch N+1 is planned only after N committed; a batch commits after its
  sink write of the same attempt, in order; at the end every batch is committed;
- :func:`resume_prediction`: at every restart the span model
  (:mod:`rollcheck.spark_replay.stream.spans`) predicts the resume batch and each state store's
  restored version; Spark's observed values must match;
- :func:`end_of_run`: a recording that stopped before its end records leaves the end-of-run checks
  *unchecked*, never passed.
"""

from __future__ import annotations

from typing import Any

from rollcheck.pyimpl.traces.plugin import TraceCheck
from rollcheck.pyimpl.verdict import Check
from rollcheck.spark_replay.stream.view import StreamView, check_verdict

__all__ = ["failure_observed", "FailureObservedNhop", "commit_protocol", "resume_prediction", "end_of_run",
           "requested_failure"]


def failure_observed(v: StreamView) -> Check:
    """The requested failure happened (mode and batch) and the query restarted and finished.

    Not applicable when no failure was requested; *unchecked* when the requested failure did not
    happen or the trace ends before the restart or the end of the run: nothing about recovery was
    checked, so the replay must not pass.
    """
    name = "failure-observed"
    if v.requested is None:
        return Check.not_applicable(name, "no failure requested (a failure-free run)")
    mode, batch = v.requested
    hit = [f for f in v.failures if f.get("mode") == mode and f.get("batch") == batch]
    if not hit:
        seen = [(f.get("mode"), f.get("batch")) for f in v.failures]
        return Check.unchecked(name, f"the requested {mode} failure at batch {batch} did not happen (failures "
                                     f"seen: {seen or 'none'}); recovery was not exercised")
    after = [r for r in v.restarts if r["seq"] > hit[0]["seq"]]
    if mode == "executor" and v.ended:  # an executor lost: the same driver goes on (killpoints.executor_struck)
        return Check.held(name, f"executor failure at batch {batch} (seq {hit[0]['seq']}: executor "
                                f"{hit[0].get('executor_id')}, pid {hit[0].get('pid')}); the query went on in the "
                                "same driver and finished")
    if mode == "retry" and str(hit[0].get("kind")).startswith("spark.") and v.ended:  # retried, the driver went on
        return Check.held(name, f"retry failure at batch {batch} (seq {hit[0]['seq']}): Spark retried the failed "
                                "task attempts and the query went on in the same driver and finished")
    failed = [r for r in v.failed_restarts if r["seq"] > hit[0]["seq"]]
    if not after and failed and v.ended:  # recovery was exercised; recovery-succeeded judges the restart
        return Check.held(name, f"{mode} failure at batch {batch} (seq {hit[0]['seq']}); the query was restarted "
                                f"(seq {failed[0]['seq']}) and the restart failed with the engine's exception "
                                f"{failed[0].get('exception')}")
    if not after:
        return Check.unchecked(name, f"the {mode} failure at batch {batch} (seq {hit[0]['seq']}) happened but "
                                     "the trace has no restart after it")
    if not v.ended:
        return Check.unchecked(name, f"the {mode} failure at batch {batch} happened and the query restarted, "
                                     f"but the run did not end (trace stops at seq {v.last_seq})")
    return Check.held(name, f"{mode} failure at batch {batch} (seq {hit[0]['seq']}); the query restarted "
                            f"(seq {after[0]['seq']}) and finished")


class FailureObservedNhop(TraceCheck):
    """``failure-observed`` for a message-passing trace.

    The header's requested process failure has a ``failure`` and a ``recovery`` event and the run
    ended (else unchecked).
    """

    name = "failure-observed"
    needs = ("config.fail_process", "failure", "recovery", "end")

    def __init__(self, header: dict[str, Any]):
        cfg = header.get("config") or {}
        self.proc, self.rnd = cfg.get("fail_process"), cfg.get("fail_round")
        self.fail: int | None = None
        self.rec: int | None = None

    def on_event(self, v: Any, line: int, obj: dict[str, Any]) -> None:
        """Note the first failure and the recovery after it.

        Parameters
        ----------
        v : RunView
            The checker's view (unused).
        line : int
            The event's line number (unused).
        obj : dict
            The event as read.
        """
        if obj["kind"] == "failure" and self.fail is None:
            self.fail = obj["seq"]
        elif obj["kind"] == "recovery" and self.fail is not None and self.rec is None:
            self.rec = obj["seq"]

    def finish(self, v: Any, results: dict[str, Check]) -> Check:
        """Whether the requested failure happened and was recovered from.

        Parameters
        ----------
        v : RunView
            The checker's view of the run.
        results : dict
            The finished checks' results by name (unused).

        Returns
        -------
        Check
            Held, unchecked, or not applicable without a requested failure.
        """
        name, proc, rnd = self.name, self.proc, self.rnd
        if proc is None:
            return Check.not_applicable(name, "no failure requested (a failure-free run)")
        if self.fail is None:
            return Check.unchecked(name, f"the requested failure of P{proc} in round {rnd} did not happen; "
                                         "recovery was not exercised")
        if self.rec is None or not v.ended:
            return Check.unchecked(name, f"P{proc} failed (seq {self.fail}) but the trace has "
                                         f"{'no recovery after it' if self.rec is None else 'no end of run'}")
        return Check.held(name, f"P{proc} failed in round {rnd} (seq {self.fail}); recovery at seq {self.rec}; "
                                "the run finished")


def commit_protocol(v: StreamView) -> Check:
    """Batches planned and committed in order, each commit after its sink write (same attempt)."""
    bad = v.commit_bad
    return check_verdict("commit-protocol", bad is None,
                 bad[1] if bad else f"{len(v.planned)} batches planned, {len(v.committed)} committed in "
                 f"order; each commit after its sink write", bad[0] if bad else None)


def resume_prediction(v: StreamView) -> Check:
    """Every restart resumed at the batch and state versions the span model predicts."""
    bad = v.resume_bad
    unjudged = (f" ({len(v.failed_restarts)} failed restart(s) not judged: nothing was restored)"
                if v.failed_restarts else "")
    return check_verdict("resume-prediction", bad is None,
                 bad[1] if bad else f"{len(v.restarts)} restart(s); resume batch and restored state "
                 f"versions equal the span model's{unjudged}", bad[0] if bad else None)


def end_of_run(v: StreamView) -> Check | None:
    """``end-of-run``: unchecked when the recording stopped before the run's end records.

    The checks of the run's end records could not run then (*unchecked*, never a pass); nothing
    to report when the run ended.
    """
    if v.ended:
        return None
    return Check.unchecked("end-of-run", f"not reached: the recording stopped after seq {v.last_seq}; the "
                                         "prefix was checked, the end-of-run checks could not run")


def requested_failure(cfg: dict[str, Any]) -> tuple[str, int] | None:
    """The header config's requested failure: ``(mode, batch)``, or None for a failure-free run."""
    if cfg.get("failure") is None or cfg.get("fail_at_batch") is None:
        return None
    return str(cfg["failure"]), int(cfg["fail_at_batch"])
