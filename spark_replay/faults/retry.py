"""The ``retry`` failure as a schedule.

Which tasks fail, where in the task, which attempts, in which batch relative to the state stores'
last load, and what follows (:class:`RetrySchedule`).

Details: ``docs/internals/spark-faults.md`` (section ``retry``).

References
----------
Spark configuration ``spark.task.maxFailures``; Structured Streaming Programming Guide, "State
Store", "Recovering from Failures with Checkpointing".
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from rollcheck.pyimpl.errors import InvalidInputError

__all__ = ["MAX_TASK_FAILURES", "RetrySchedule", "SCHEDULE_FLAGS", "RETRY_FAILED", "RETRY_DONE", "RETRY_RESTART",
           "RETRY_PRELOAD", "RETRY_EXHAUSTED", "retry_restart_batch", "retry_task", "retry_input_filter",
           "retry_facts", "ATTEMPT_PREFIX", "strike_armed", "restart_before", "collect_struck"]

#: Spark's default ``spark.task.maxFailures`` (a cluster's, and the ``local[N,4]`` master of a retry).
MAX_TASK_FAILURES = 4
#: The marker of the first failed task attempt (the retry struck).
RETRY_FAILED = "retry-failed"
#: The marker prefix of a task attempt of the retried batch that ran to its end (older recorders).
RETRY_DONE = "retry-done-"
#: The marker by which a ``retry`` recording's driver asks to be restarted (once).
RETRY_RESTART = "retry-restart"
#: The marker of the restart before batch K (schedule ``load=first``).
RETRY_PRELOAD = "retry-preload"
#: The marker of a retried batch whose every attempt failed (``attempts`` >= 4: the batch failed).
RETRY_EXHAUSTED = "retry-exhausted"
#: The marker prefix of each task attempt of the struck stage (``<prefix><stage>-<partition>-<attempt>``).
ATTEMPT_PREFIX = "retry-attempt-"
_CLAIM = "retry-partition"

_CHOICES: dict[str, tuple[str, ...]] = {"tasks": ("one", "all"), "stage": ("stateful", "input"),
                                        "where": ("after-commit", "before-commit"), "load": ("first", "later"),
                                        "then": ("restart", "continue")}
#: The ``spark record query`` flag of each schedule parameter (the header's config key is the flag's name).
SCHEDULE_FLAGS = {"tasks": "--fail-tasks", "stage": "--fail-stage", "where": "--fail-where",
                  "attempts": "--fail-attempts", "load": "--fail-load", "then": "--after-failure"}


@dataclass(frozen=True)
class RetrySchedule:
    """When, where and how often the ``retry`` failure strikes (module docstring).

    ``load`` None: as batch K falls (``first`` for K = 0, else ``later``). The defaults are the
    historical retry: one task of the stateful stage, after its commit, once, then a restart.

    Examples
    --------
    >>> RetrySchedule.parse("tasks=all+attempts=4").text()
    'tasks=all+attempts=4'
    >>> RetrySchedule().text(), RetrySchedule.parse("default") == RetrySchedule()
    ('default', True)
    >>> RetrySchedule(attempts=4).exhausts(), RetrySchedule(attempts=3).exhausts()
    (True, False)
    """

    tasks: str = "one"
    stage: str = "stateful"
    where: str = "after-commit"
    attempts: int = 1
    load: str | None = None
    then: str = "restart"

    def exhausts(self) -> bool:
        """Whether every attempt Spark allows fails (the batch fails, the query restarts)."""
        return self.attempts >= MAX_TASK_FAILURES

    def load_at(self, batch: int) -> str:
        """The ``load`` in force at batch ``batch`` (``first`` for batch 0 unless asked)."""
        return self.load or ("first" if batch == 0 else "later")

    def text(self) -> str:
        """The schedule's non-default parameters, ``key=value`` joined by ``+`` (``default``)."""
        d = RetrySchedule()
        parts = [f"{f.name}={getattr(self, f.name)}" for f in fields(self) if getattr(self, f.name) != getattr(d, f.name)]
        return "+".join(parts) or "default"

    @classmethod
    def parse(cls, text: str, location: str = "--retry-schedules") -> RetrySchedule:
        """A schedule from its text (:meth:`text`); a bad one is exit 2 naming ``location``.

        Parameters
        ----------
        text : str
            ``KEY=VALUE`` items joined by ``+``; empty or ``default`` for the default schedule.
        location : str, optional
            The flag or field a bad schedule's error names.

        Returns
        -------
        RetrySchedule
            The validated schedule.

        Examples
        --------
        >>> RetrySchedule.parse("stage=input+then=continue")
        RetrySchedule(tasks='one', stage='input', where='after-commit', attempts=1, load=None, then='continue')
        >>> RetrySchedule.parse("tasks=some")
        Traceback (most recent call last):
        ...
        rollcheck.pyimpl.errors.InvalidInputError: --retry-schedules: 'tasks=some': tasks is one of one, all
        """
        text = text.strip()
        if text in ("", "default"):
            return cls()
        got: dict[str, Any] = {}
        for item in text.split("+"):
            key, eq, value = item.strip().partition("=")
            if not eq or key not in SCHEDULE_FLAGS:
                raise InvalidInputError(f"{text!r}: {item!r} is not KEY=VALUE with KEY one of "
                                        f"{', '.join(SCHEDULE_FLAGS)}", location=location)
            if key == "attempts":
                try:
                    got[key] = int(value)
                except ValueError:
                    raise InvalidInputError(f"{text!r}: attempts is a whole number", location=location) from None
            elif value not in _CHOICES[key]:
                raise InvalidInputError(f"{text!r}: {key} is one of {', '.join(_CHOICES[key])}", location=location)
            else:
                got[key] = value
        s = cls(**got)
        s.validate(location=location)
        return s

    @classmethod
    def of_config(cls, cfg: dict[str, Any]) -> RetrySchedule:
        """The schedule a header's config (or a :class:`QueryConfig` as a dict) asked for.

        A parameter absent (an older trace) takes its default.
        """
        d = cls()
        got = {f.name: cfg.get(SCHEDULE_FLAGS[f.name][2:].replace("-", "_")) for f in fields(cls)}
        return cls(**{k: (getattr(d, k) if v is None else v) for k, v in got.items()})

    def config(self) -> dict[str, Any]:
        """The config keys of this schedule (the inverse of :meth:`of_config`)."""
        return {SCHEDULE_FLAGS[k][2:].replace("-", "_"): v for k, v in asdict(self).items()}

    def argv(self) -> list[str]:
        """The ``spark record query`` flags of the non-default parameters."""
        d = RetrySchedule()
        out: list[str] = []
        for f in fields(self):
            v = getattr(self, f.name)
            if v != getattr(d, f.name):
                out += [SCHEDULE_FLAGS[f.name], str(v)]
        return out

    def validate(self, batch: int | None = None, location: str | None = None) -> None:
        """Refuse a schedule no run can strike (exit 2 naming the flag, or ``location``).

        Parameters
        ----------
        batch : int, optional
            The batch the schedule strikes (checks ``load=later`` against batch 0); None skips that check.
        location : str, optional
            The flag or field errors name; None names each key's own flag.
        """
        def bad(key: str, why: str) -> InvalidInputError:
            return InvalidInputError(why, location=location or SCHEDULE_FLAGS[key])

        for key, allowed in _CHOICES.items():
            v = getattr(self, key)
            if v is not None and v not in allowed:
                raise bad(key, f"unknown value {v!r}; use one of {', '.join(allowed)}")
        if not isinstance(self.attempts, int) or isinstance(self.attempts, bool) or not \
                1 <= self.attempts <= MAX_TASK_FAILURES:
            raise bad("attempts", f"the failing attempts must be 1..{MAX_TASK_FAILURES} (Spark runs a task at most "
                                  f"{MAX_TASK_FAILURES} times; {MAX_TASK_FAILURES} fails the batch), got {self.attempts}")
        if self.where == "before-commit":
            # measured (RocksDB and HDFS stores, pyspark 4.3.0): Spark drains the stateful operator's
            # output into the Python worker, and so commits the store, before any Python code of the
            # stage runs; a task cannot be failed from Python before the commit. The check still reads it.
            raise bad("where", "before-commit cannot be struck: Spark commits the stateful stage's state store before "
                               "any Python code of that stage runs; use --fail-stage input for a task failing "
                               "before any state of the batch exists")
        if self.exhausts() and self.then == "continue":
            raise bad("then", f"with {self.attempts} failing attempts the batch fails and the query is restarted: "
                              "--after-failure continue cannot follow")
        if batch is not None and self.load == "later" and batch == 0:
            raise bad("load", "batch 0 is the first batch of its driver: --fail-load later needs --fail-at-batch >= 1")


def retry_restart_batch(fail_at: int, n_input: int) -> int:
    """The batch after whose sink a ``retry`` recording restarts its driver.

    The next data batch, or the retried batch itself when it is the last one.

    Parameters
    ----------
    fail_at : int
        The retried batch.
    n_input : int
        The number of input batches.

    Returns
    -------
    int
        The batch after whose sink the driver restarts.

    Examples
    --------
    >>> retry_restart_batch(2, 6), retry_restart_batch(5, 6)
    (3, 5)
    """
    return fail_at + 1 if fail_at + 1 < n_input else fail_at


def _strike(markers: str, checkpoint: str, batch: int, tasks: str, attempts: int, where: str) -> Any:
    """The shared body of the two injections.

    A function ``(rows|None) -> None`` that, in a task, decides whether this attempt fails, records
    the attempt and raises. Self-contained: it runs in Spark's Python workers (only the standard
    library and pyspark are imported there).
    """
    version = batch + 1

    def strike(drained: int | None) -> bool:
        import json as _json
        import os as _os

        from pyspark import TaskContext

        tc = TaskContext.get()
        if tc is None:  # not in a task (Spark always gives one): nothing to strike
            return True
        part, att, stage = tc.partitionId(), tc.attemptNumber(), tc.stageId()
        root = _os.path.join(checkpoint, "state")
        mine, every = [], 0
        for dirpath, _dirs, names in _os.walk(root):
            rel = _os.path.relpath(dirpath, root).split(_os.sep)  # op/partition[/store]
            if "_metadata" in rel:
                continue
            hits = [n for n in names if n.split(".")[0].split("_")[0] == str(version) and not n.endswith(".crc")
                    and n.split(".")[-1] in ("delta", "snapshot", "zip", "changelog")]
            every += len(hits)
            if len(rel) >= 2 and rel[1] == str(part):
                mine += hits
        # the first attempt to get here claims the stage (and its partition): only that stage's
        # tasks fail (all of them, or that partition), in their first ``attempts`` attempts
        claim = _os.path.join(markers, "retry-partition")
        try:
            fd = _os.open(claim, _os.O_CREAT | _os.O_EXCL | _os.O_WRONLY)
            _os.write(fd, f"{stage}:{part}".encode())
            _os.close(fd)
            c_stage, c_part = str(stage), str(part)
        except FileExistsError:
            with open(claim, encoding="utf-8") as fh:
                c_stage, _, c_part = fh.read().partition(":")
        if c_stage != str(stage):
            return True  # another stage (a second reading of the batch): not struck, not recorded
        fails = att < attempts and (tasks == "all" or c_part == str(part))
        facts = {"partition": part, "attempt": att, "stage": stage, "batch": batch, "rows": drained,
                 "failed": fails, "where": where, "state_files": sorted(mine), "state_files_any": every,
                 "pid": _os.getpid()}
        with open(_os.path.join(markers, f"retry-attempt-{stage}-{part}-{att}"), "w", encoding="utf-8") as fh:
            fh.write(_json.dumps(facts))
        if fails:
            try:
                fd = _os.open(_os.path.join(markers, "retry-failed"), _os.O_CREAT | _os.O_EXCL | _os.O_WRONLY)
                _os.write(fd, _json.dumps(facts).encode())
                _os.close(fd)
            except FileExistsError:
                pass
            raise RuntimeError(f"rollcheck: injected task failure in batch {batch} ({where}; partition {part}, "
                               f"attempt {att})")
        return True

    return strike


def retry_task(markers: str | Path, checkpoint: str | Path, batch: int,
               schedule: RetrySchedule | None = None) -> Any:
    """The ``mapPartitions`` function through which the ``retry`` failure collects batch ``batch``.

    It runs in the driver's ``foreachBatch``, in the same task as the batch's last (stateful)
    stage. ``after-commit``: it drains its input first (the state store commits version ``batch
    + 1`` when the stateful operator's iterator is exhausted), then the scheduled attempts
    raise; ``before-commit`` (refused by :meth:`RetrySchedule.validate`): they raise before
    reading a row, which on the releases measured is still after the commit. Every attempt
    records itself (:data:`ATTEMPT_PREFIX`): partition, stage, attempt, whether it failed, and
    the state files of version ``batch + 1`` of its partition (and of all) that existed when it
    raised or ended.

    Parameters
    ----------
    markers : str or Path
        The recording's markers folder (each attempt's record goes there).
    checkpoint : str or Path
        The query's checkpoint folder (its state files are listed).
    batch : int
        The batch struck.
    schedule : RetrySchedule, optional
        Which tasks and attempts fail; None for the default.

    Returns
    -------
    callable
        ``run(rows) -> iterator`` for ``RDD.mapPartitions``.
    """
    s = schedule or RetrySchedule()
    strike = _strike(str(markers), str(checkpoint), batch, s.tasks, s.attempts, s.where)
    before = s.where == "before-commit"

    def run(rows):  # no type hints: PySpark 4 would read them as a pandas UDF
        if before:
            strike(None)  # raises in the scheduled attempts, before the stateful operator's commit
        out = list(rows)  # drained: the stateful operator's iterator ended, its store committed
        strike(len(out))
        return iter(out)

    return run


def retry_input_filter(markers: str | Path, checkpoint: str | Path, batch: int,
                       schedule: RetrySchedule | None = None) -> Any:
    """The filter function through which the ``retry`` failure with ``stage=input`` reads the input.

    In the tasks that read batch ``batch``'s file (the stage before the shuffle, which holds no
    state store) the scheduled attempts raise at their first row.

    Parameters
    ----------
    markers : str or Path
        The recording's markers folder.
    checkpoint : str or Path
        The query's checkpoint folder.
    batch : int
        The batch whose input file is struck.
    schedule : RetrySchedule, optional
        Which tasks and attempts fail; None for the default.

    Returns
    -------
    callable
        ``keep(path) -> bool`` (always True once it has not raised).
    """
    s = schedule or RetrySchedule()
    strike = _strike(str(markers), str(checkpoint), batch, s.tasks, s.attempts, "input")
    target = f"batch-{batch:05d}.json"

    def keep(path):  # no type hints: PySpark 4 would read them as a pandas UDF
        if path and path.endswith(target):
            strike(None)
        return True

    return keep


def retry_facts(markers: str | Path) -> dict[str, Any]:
    """What the task attempts of the struck stage recorded.

    ``failed_attempt`` (the first to fail, or None), ``failed_attempts`` and ``succeeded_attempts``
    (every attempt that went past the injection), each ordered by stage, partition, attempt.
    """
    m = Path(markers)
    failed = None
    with contextlib.suppress(OSError, ValueError):
        failed = json.loads((m / RETRY_FAILED).read_text(encoding="utf-8"))
    seen: list[dict[str, Any]] = []
    for p in [*m.glob(ATTEMPT_PREFIX + "*"), *m.glob(RETRY_DONE + "*")]:
        with contextlib.suppress(OSError, ValueError):
            seen.append(json.loads(p.read_text(encoding="utf-8")))
    seen.sort(key=lambda a: (a.get("stage", 0), a.get("partition", 0), a.get("attempt", 0)))
    return {"failed_attempt": failed, "failed_attempts": [a for a in seen if a.get("failed")],
            "succeeded_attempts": [a for a in seen if not a.get("failed")]}


def strike_armed(markers: str | Path, schedule: RetrySchedule, fail_at: int) -> bool:
    """Whether this driver strikes batch ``fail_at``.

    The retry has not struck yet, and with ``load=first`` (K > 0) the driver was restarted at batch
    K's start (:func:`restart_before`).

    Parameters
    ----------
    markers : str or Path
        The recording's markers folder.
    schedule : RetrySchedule
        The retry schedule.
    fail_at : int
        The batch to strike.

    Returns
    -------
    bool
        True when this driver strikes the batch.
    """
    m = Path(markers)
    if (m / RETRY_FAILED).exists():
        return False
    return schedule.load_at(fail_at) != "first" or fail_at == 0 or (m / RETRY_PRELOAD).exists()


def restart_before(markers: str | Path, schedule: RetrySchedule, batch: int, fail_at: int) -> None:
    """``load=first`` at K > 0: in the sink of batch K, before any of its tasks ran.

    Ask the supervising parent (once) to SIGKILL this driver; the new driver's first batch is K, its
    state stores load version K from the checkpoint. The request names the batch and the point
    (``before-retry``) for the ``failure`` event the parent records.

    Parameters
    ----------
    markers : str or Path
        The recording's markers folder.
    schedule : RetrySchedule
        The retry schedule.
    batch : int
        The batch whose sink runs now.
    fail_at : int
        The batch to strike.
    """
    import os
    import time

    m = Path(markers)
    if batch != fail_at or fail_at == 0 or schedule.load_at(fail_at) != "first":
        return
    try:
        fd = os.open(m / RETRY_PRELOAD, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return
    os.close(fd)
    (m / "kill-requested").write_text(json.dumps({"pid": os.getpid(), "batch": batch, "kill_point": "before-retry"}),
                                      encoding="utf-8")
    time.sleep(600)
    raise RuntimeError("the supervisor did not kill this driver within 600 s")


def collect_struck(bdf: Any, markers: str | Path, checkpoint: str | Path, batch: int, schedule: RetrySchedule,
                   convert: Any, emit: Any) -> list[Any]:
    """Collect batch ``batch`` under the retry failure (in the driver's ``foreachBatch``).

    Through :func:`retry_task` for the stateful stage, plainly for the input stage (its filter
    strikes); then ``emit(**facts)`` the ``failure`` event's facts (:func:`retry_facts`,
    ``schedule``, ``stage_partitions``, ``stateful``, ``batch_failed``). A batch whose every attempt
    failed is marked (:data:`RETRY_EXHAUSTED`) and its exception raised again: the query fails.

    Parameters
    ----------
    bdf : DataFrame
        The micro-batch's DataFrame.
    markers : str or Path
        The recording's markers folder.
    checkpoint : str or Path
        The query's checkpoint folder.
    batch : int
        The batch id.
    schedule : RetrySchedule
        The retry schedule.
    convert : callable
        ``convert(row)``: one collected Spark ``Row`` to the recorded row.
    emit : callable
        ``emit(**facts)``: receives the ``failure`` event's facts.

    Returns
    -------
    list
        The batch's rows, converted.
    """
    m = Path(markers)
    facts: dict[str, Any] = {"schedule": asdict(schedule), "stage_partitions": None}
    try:
        if schedule.stage == "stateful":
            rdd = bdf.rdd
            facts["stage_partitions"] = rdd.getNumPartitions()
            rows = [convert(r) for r in rdd.mapPartitions(retry_task(m, checkpoint, batch, schedule)).collect()]
        else:
            rows = [convert(r) for r in bdf.collect()]
    except Exception:
        if not (m / RETRY_FAILED).exists():
            raise
        (m / RETRY_EXHAUSTED).write_text(str(batch), encoding="utf-8")
        emit(**facts, stateful=(Path(checkpoint) / "state").is_dir(), batch_failed=True, **retry_facts(m))
        raise
    emit(**facts, stateful=(Path(checkpoint) / "state").is_dir(), batch_failed=False, **retry_facts(m))
    return rows
