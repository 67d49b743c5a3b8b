"""``task-retried``: the replay's proof, from the trace alone.

That the ``retry`` failure struck as its schedule asked
(:class:`~rollcheck.spark_replay.faults.retry.RetrySchedule`).

The ``failure`` event (``mode: "retry"``) carries every task attempt of the struck stage that
reached the injection (``failed_attempts``, ``succeeded_attempts``: partition, stage, attempt, the
state files of version K+1 of its partition and of the whole checkpoint when it raised or ended),
``stage_partitions`` (the struck stateful stage's partitions), ``batch_failed`` (every attempt
failed: the batch failed) and ``schedule``. Each parameter is compared with what the attempts and
the trace's other events show; one that does not match makes the check *unchecked* (the replay is
inconclusive: the run did not exercise what was asked).
"""

from __future__ import annotations

from typing import Any

from rollcheck.pyimpl.verdict import Check
from rollcheck.spark_replay.faults.retry import RetrySchedule

__all__ = ["retry_struck", "schedule_mismatch"]

_NAME = "task-retried"


def _base(kind: str) -> str:
    return kind.split(".", 1)[1] if kind.startswith("spark.") else kind


def _attempts(f: dict[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]] | None:
    """The failed and succeeded attempts (an older trace records only the first failed one)."""
    failed = f.get("failed_attempts")
    if failed is None:
        one = f.get("failed_attempt")
        failed = [one] if isinstance(one, dict) else []
    ok = [a for a in f.get("succeeded_attempts") or [] if isinstance(a, dict)]
    good = [a for a in failed if isinstance(a, dict) and all(isinstance(a.get(k), int) and not isinstance(a.get(k), bool)
                                                                for k in ("partition", "stage", "attempt"))]
    return (good, ok) if good else None


def _tasks_and_attempts(s: RetrySchedule, f: dict[str, Any], failed: list[dict[str, Any]],
                        ok: list[dict[str, Any]]) -> str | None:
    stage = failed[0]["stage"]
    parts = sorted({a["partition"] for a in failed})
    if s.tasks == "one" and len(parts) != 1:
        return f"partitions {parts} of stage {stage} failed: the schedule asked for one task"
    if s.tasks == "all":
        n = f.get("stage_partitions")
        ran = set(parts) | {a["partition"] for a in ok if a.get("stage") == stage}
        want = set(range(n)) if isinstance(n, int) and not isinstance(n, bool) and n > 0 else ran
        if want - set(parts):
            return (f"partition(s) {sorted(want - set(parts))} of stage {stage} never failed: the schedule asked for "
                    "every task of the stage")
    for p in parts:
        atts = sorted(a["attempt"] for a in failed if a["partition"] == p)
        if atts != list(range(s.attempts)):
            return (f"partition {p} of stage {stage} failed in attempt(s) {atts}: the schedule asked for the first "
                    f"{s.attempts}")
        if not s.exhausts() and not any(a.get("partition") == p and a.get("stage") == stage
                                        and a.get("attempt") == s.attempts for a in ok):
            return (f"partition {p} of stage {stage} failed in attempt {atts[-1]} (seq {f['seq']}) but no later attempt "
                    "of it ran to its end: Spark did not retry it")
    if s.exhausts() and not f.get("batch_failed"):
        return f"every allowed attempt was to fail but batch {f.get('batch')} did not fail (seq {f['seq']})"
    return None


def _where(s: RetrySchedule, f: dict[str, Any], failed: list[dict[str, Any]], ok: list[dict[str, Any]]) -> str | None:
    k = f.get("batch")
    v = k + 1 if isinstance(k, int) else "K+1"  # the version the batch commits
    stage = failed[0]["stage"]
    if s.stage == "input":
        hit = [a for a in failed if a.get("state_files_any")]
        if hit or any(a.get("where") not in (None, "input") for a in failed):
            return (f"a failed attempt of stage {stage} saw state files of version {v}"
                    " (or was injected in the stateful stage): not the input stage, which runs before any state")
        return None
    if any(a.get("where") == "input" for a in failed):
        return f"the failed attempts of stage {stage} were injected in the input stage, not the stateful stage"
    if not f.get("stateful"):
        return None  # the query keeps no state: where in the task has no commit to be before or after
    if s.where == "after-commit":
        bad = [a["partition"] for a in failed if not a.get("state_files")]
        if bad:
            return (f"the failed attempt of partition {bad[0]} saw no state file of version {v}: it did not fail "
                    "after its state store committed")
        return None
    bad = [a["partition"] for a in failed if a.get("state_files")]
    if bad:
        return (f"the failed attempt of partition {bad[0]} saw its state file(s) of version {v}: its state store "
                "had committed, not before-commit")
    if not any(a.get("stage") == stage and a.get("state_files") for a in ok):
        return (f"no attempt of stage {stage} ever showed a state file of version {v}: the stage was not shown "
                "to hold a state store")
    return None


def _load_and_then(s: RetrySchedule, f: dict[str, Any], cfg: dict[str, Any],
                   events: list[dict[str, Any]]) -> tuple[str | None, str]:
    k, att = f.get("batch"), f.get("attempt")
    before = sorted({int(e["batch"]) for e in events if _base(e.get("kind", "")) == "sink_written"
                     and e.get("attempt") == att and e["seq"] < f["seq"] and isinstance(e.get("batch"), int)
                     and e["batch"] != k})
    seen = "first" if not before else "later"
    asked = cfg.get("fail_load")
    if asked is not None and asked != seen:
        return (f"batch {k} was {'the first batch' if seen == 'first' else f'run after batch(es) {before}'} of its "
                f"driver (attempt {att}): the schedule asked for load={asked}"), seen
    later = [e for e in events if e["seq"] > f["seq"]]
    restart = [e for e in later if _base(e.get("kind", "")) == "restart"]
    if s.then == "restart" and not restart:
        return (f"the retried batch {k} (seq {f['seq']}) was never followed by a restart from the checkpoint: the "
                "retried state was not reloaded"), seen
    if s.then == "continue":
        if restart or any(_base(e.get("kind", "")) == "attempt_start" for e in later):
            return f"a driver restarted after the retried batch {k}: the schedule asked the query to go on", seen
        if not any(e.get("kind") == "end" and e.get("status") == "done" for e in later):
            return f"the query did not go on to its end after the retried batch {k} (no end 'done')", seen
    return None, seen


def schedule_mismatch(header: dict[str, Any], events: list[dict[str, Any]]) -> tuple[dict[str, Any] | None, str]:
    """The retry ``failure`` event and why it did not strike as scheduled (``""``: it did).

    None and the reason when there is no such event.
    """
    cfg = header.get("config") or {}
    k = cfg.get("fail_at_batch")
    hit = [e for e in events if _base(e.get("kind", "")) == "failure" and e.get("mode") == "retry"
           and e.get("batch") == k]
    if not hit:
        return None, f"no task of batch {k} failed: the retry was not exercised"
    f = hit[0]
    got = _attempts(f)
    if got is None:
        return f, f"the retry failure (seq {f['seq']}) does not record the failed task attempt"
    failed, ok = got
    if len({a["stage"] for a in failed}) != 1:
        return f, f"the failed attempts (seq {f['seq']}) belong to several stages {sorted({a['stage'] for a in failed})}"
    s = RetrySchedule.of_config(cfg)
    why = _tasks_and_attempts(s, f, failed, ok) or _where(s, f, failed, ok) or _load_and_then(s, f, cfg, events)[0]
    return f, why or ""


def retry_struck(header: dict[str, Any], events: list[dict[str, Any]]) -> Check:
    """``task-retried``: the retry failure struck batch K as its schedule asked (module docstring).

    The tasks (one partition or all of the stage), the stage (stateful or input), where in the task
    (after or before the state store's commit, from the state files each failed attempt saw), the
    attempts (exactly the first N of each failing partition; for N < 4 attempt N ran to its end, for
    N >= 4 the batch failed), the load (batch K the first batch of its driver, or not, when asked)
    and what followed (a restart from the checkpoint, or the query going on to its end in the same
    driver). Anything else is *unchecked*.

    Examples
    --------
    >>> h = {"config": {"failure": "retry", "fail_at_batch": 1}}
    >>> f = {"seq": 5, "kind": "failure", "mode": "retry", "batch": 1, "stateful": True,
    ...      "failed_attempt": {"partition": 0, "stage": 7, "attempt": 0, "state_files": ["2.delta"]},
    ...      "succeeded_attempts": [{"partition": 0, "stage": 7, "attempt": 1, "state_files": ["2.delta"]}]}
    >>> r = {"seq": 9, "kind": "spark.restart", "resume_batch": 2}
    >>> retry_struck(h, [f, r]).status.value
    'held'
    >>> retry_struck(h, [{**f, "succeeded_attempts": []}, r]).status.value
    'unchecked'
    >>> retry_struck({"config": {**h["config"], "fail_where": "before-commit"}}, [f, r]).detail[:52]
    'the failed attempt of partition 0 saw its state file'
    """
    cfg = header.get("config") or {}
    if cfg.get("failure") != "retry":
        return Check.not_applicable(_NAME, "no retry failure requested")
    k = cfg.get("fail_at_batch")
    if not isinstance(k, int) or isinstance(k, bool):
        return Check.unchecked(_NAME, f"the header's fail_at_batch is {k!r}, not a batch id")
    f, why = schedule_mismatch(header, events)
    if f is None or why:
        return Check.unchecked(_NAME, why)
    s = RetrySchedule.of_config(cfg)
    got = _attempts(f)
    assert got is not None
    failed, _ok = got
    _why, load = _load_and_then(s, f, cfg, events)
    a0 = failed[0]
    parts = sorted({a["partition"] for a in failed})
    where = ("in the input stage" if s.stage == "input" else
             ("after committing " + str(a0.get("state_files")) if s.where == "after-commit" else
              "before its state store committed") if f.get("stateful") else "(stateless query)")
    after = ("the batch failed and the query was restarted" if s.exhausts() else
             f"succeeded in attempt {s.attempts}")
    then = "the driver was restarted from the checkpoint" if s.then == "restart" else "the query went on to its end"
    return Check.held(_NAME, f"partition(s) {parts} of stage {a0['stage']} failed in attempt(s) 0..{s.attempts - 1} "
                             f"{where} and {after}; batch {k} was the {load} batch of its driver; {then} "
                             f"(schedule {s.text()}; first failed in attempt {a0['attempt']})", examined=len(failed))
