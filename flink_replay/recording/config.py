"""The settings of a recorded Flink run: the state backends, the failures, a validated config.

:class:`RecordConfig` checks every knob of ``rollcheck flink record`` before anything starts
(exit 2 naming the flag); :func:`parse_rescale` reads ``--rescale P1:P2``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rollcheck.flink_replay.releases import PINNED, parse_release
from rollcheck.pyimpl.errors import InvalidInputError

__all__ = ["RecordConfig", "BACKENDS", "FAILURES", "parse_rescale"]

BACKENDS = ("hashmap", "rocksdb", "changelog")
#: The failures a recording injects: a task fails, the TaskManager process is killed, a second task
#: failure while the restarted job restores its state, a second one right after the first recovery.
FAILURES = ("task", "taskmanager", "during-restore", "twice")


def parse_rescale(text: str) -> tuple[int, int]:
    """``"P1:P2"`` -> (P1, P2): fail at parallelism P1, restore at P2.

    Examples
    --------
    >>> parse_rescale("2:3")
    (2, 3)
    """
    try:
        a, b = (int(x) for x in text.split(":"))
    except ValueError:
        raise InvalidInputError(f"--rescale {text!r}: expected P1:P2, two parallelisms such as 2:3") from None
    if not (1 <= a <= 8 and 1 <= b <= 8) or a == b:
        raise InvalidInputError(f"--rescale {text}: two different parallelisms between 1 and 8")
    return a, b


class RecordConfig(dict):
    """The knobs of a recorded run (a plain dict with validated fields)."""

    @classmethod
    def make(cls, *, checkpoints: str = "aligned", parallelism: int = 2, interval_ms: int = 300,
             records: int = 2000, rate: float = 500.0, keys: int = 8, fail_at_record: int | None = None,
             failure: str | None = None, seed: int = 0, timeout_s: float = 300.0, backend: str = "hashmap",
             rescale: tuple[int, int] | None = None, module: str | None = None,
             call_timeout: float = 300.0, engine_version: str | None = None,
             reference_version: str | None = None, fail_subtask: int | None = None,
             fail_after_checkpoint: int | None = None) -> RecordConfig:
        """A validated config (the CLI's defaults); raises :class:`InvalidInputError` naming the flag."""
        if checkpoints not in ("aligned", "unaligned"):
            raise InvalidInputError(f"--checkpoints must be aligned or unaligned, not {checkpoints!r}")
        if backend not in BACKENDS:
            raise InvalidInputError(f"--backend must be one of {', '.join(BACKENDS)}, not {backend!r}")
        if rescale is not None:
            parallelism = rescale[0]
            if fail_at_record is None:
                raise InvalidInputError("--rescale restores after the injected failure: give --fail-at-record "
                                        "and --failure too")
        elif parallelism < 2:
            raise InvalidInputError("--parallelism must be at least 2 (a keyBy shuffle between subtasks)")
        if interval_ms < 10:
            raise InvalidInputError("--interval must be at least 10 ms")
        if records < 1 or rate <= 0 or keys < 1:
            raise InvalidInputError("--records, --rate and the number of keys must be positive")
        if (fail_at_record is None) != (failure is None):
            raise InvalidInputError("--fail-at-record and --failure go together")
        if failure not in (None, *FAILURES):
            raise InvalidInputError(f"--failure {failure}: one of {', '.join(FAILURES)}")
        if failure in ("during-restore", "twice") and rescale is not None:
            raise InvalidInputError(f"--failure {failure} restarts the job in place: not with --rescale")
        if fail_at_record is not None and module is None and not 1 <= fail_at_record <= records:
            raise InvalidInputError(f"--fail-at-record {fail_at_record} is outside the input (1..{records})")
        if fail_at_record is not None and fail_at_record < 1:
            raise InvalidInputError(f"--fail-at-record {fail_at_record}: records count from 1")
        _check_strike(failure, fail_subtask, fail_after_checkpoint, rescale[0] if rescale else parallelism)
        if call_timeout <= 0:
            raise InvalidInputError("--call-timeout must be positive")
        if engine_version is not None:  # the release's range, before anything is installed or run
            parse_release(engine_version)
            engine_version = engine_version.strip()
        if reference_version is not None:  # release-differential's reference release (release_reference.py)
            if engine_version is None:
                raise InvalidInputError("--reference-version needs --engine-version (the release it is compared "
                                        "with)", location="--reference-version")
            parse_release(reference_version, location="--reference-version")
            reference_version = reference_version.strip()
        if engine_version is not None and reference_version is None:
            reference_version = PINNED
        extra: dict[str, Any] = {}
        if module is not None:
            path = Path(module)
            if not path.is_file():
                raise InvalidInputError("no such job module", source=str(module))
            extra = {"job": "module", "module": str(path.resolve()), "module_arg": str(module)}
            keys = 1  # the source tap counts the user's records in one bucket
        if failure is not None:
            # where and when the failure strikes (job.strike); an unaligned run's failure waits (up to
            # this long) for a completed checkpoint that holds data in flight
            extra.update(fail_subtask=fail_subtask, fail_after_checkpoint=fail_after_checkpoint)
            if checkpoints == "unaligned":
                extra["inflight_wait_s"] = 20.0
        return cls(checkpoints=checkpoints, parallelism=parallelism, interval_ms=interval_ms,
                   records=records, rate=rate, keys=keys, fail_at_record=fail_at_record,
                   failure=failure, seed=seed, timeout_s=timeout_s, backend=backend,
                   rescale=list(rescale) if rescale else None, max_parallelism=128,
                   call_timeout=call_timeout, engine_version=engine_version,
                   reference_version=reference_version, **extra)


def _check_strike(failure: str | None, subtask: int | None, after: int | None, parallelism: int) -> None:
    """Refuse a failure point no run can reach: a subtask beyond the parallelism, a checkpoint before 1."""
    if (subtask is not None or after is not None) and failure is None:
        raise InvalidInputError("--fail-subtask and --fail-after-checkpoint place the injected failure: give "
                                "--fail-at-record and --failure too", location="--fail-subtask")
    if subtask is not None and not 0 <= subtask < parallelism:
        raise InvalidInputError(f"--fail-subtask {subtask}: the failing job runs {parallelism} subtasks "
                                f"(0..{parallelism - 1})", location="--fail-subtask")
    if after is not None and after < 1:
        raise InvalidInputError(f"--fail-after-checkpoint {after}: checkpoints count from 1",
                                location="--fail-after-checkpoint")
