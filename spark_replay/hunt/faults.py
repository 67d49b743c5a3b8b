"""The hunt's fault schedules for Spark: which failure, at which batch, on which state store.

A schedule (:class:`FaultSchedule`) is one matrix cell (:class:`~rollcheck.spark_replay.matrix.plan.Cell`)
with the batch it strikes, so that a hunt cell is re-run as it is by the ordinary ``spark matrix``.
:func:`fault_schedules` is the grammar (a Hypothesis strategy over the failure, a second failure,
the batch and the state store provider); :func:`draw_schedules` draws a program's schedules.

Details: ``docs/internals/spark-hunt.md`` (section ``faults``).

Examples
--------
>>> shape = BatchShape(n=4, data=(0, 1, 3), idle=(2,))
>>> s = draw_schedules(shape, ["task", "kill"], ["hdfs"], seed=1, salt="P0001", count=2)
>>> len(s), all(x.batch in shape.data for x in s)
(2, True)
>>> BatchShape(n=4, data=(0, 1, 2), idle=(3,)).anchors()["last"]
[2]
>>> s == draw_schedules(shape, ["task", "kill"], ["hdfs"], seed=1, salt="P0001", count=2)
True
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from hypothesis import strategies as st

from rollcheck.infra.hunt.draw import draw
from rollcheck.pyimpl.errors import InvalidInputError
from rollcheck.spark_replay.faults.killpoints import KILL_POINTS
from rollcheck.spark_replay.faults.retry import MAX_TASK_FAILURES, RetrySchedule
from rollcheck.spark_replay.matrix.plan import FAILURES, PROVIDERS, Cell

__all__ = ["BatchShape", "FaultSchedule", "ANCHORS", "SECOND_FAILURES", "fault_schedules", "draw_schedules",
           "retry_schedules"]

T = TypeVar("T")

#: Where a schedule's batch lies in the program's input.
ANCHORS = ("first-data", "last", "after-idle", "partly-idle")
#: The failures that are a driver kill followed by a second failure.
SECOND_FAILURES = ("twice", "during-recovery")


@dataclass(frozen=True)
class BatchShape:
    """What the schedules need of a program's input.

    ``n`` micro-batches, the batches with new rows (``data``) and those where a source (or every
    source) has none (``idle``).

    >>> BatchShape.of([[1], [], [2]]).idle, BatchShape.of([{"a": [1]}, {"a": [2], "b": []}], ("a", "b")).idle
    ((1,), (0, 1))
    """

    n: int
    data: tuple[int, ...]
    idle: tuple[int, ...]

    @classmethod
    def of(cls, batches: list[Any], sources: tuple[str, ...] = ()) -> BatchShape:
        """The shape of ``batches(seed)``.

        Lists of rows, or dicts ``{source: rows}`` (``sources``: every source's name, so that a
        source missing from a batch counts as idle).

        Parameters
        ----------
        batches : list
            The module's batches.
        sources : tuple of str, optional
            Every source's name.

        Returns
        -------
        BatchShape
            The batches with data and the idle ones.
        """
        data, idle = [], []
        for b, batch in enumerate(batches):
            if isinstance(batch, dict):
                names = set(sources) | set(batch)
                counts = [len(batch.get(s) or []) for s in names]
            else:
                counts = [len(batch or [])]
            if any(counts):
                data.append(b)
            if not all(counts):
                idle.append(b)
        return cls(len(batches), tuple(data), tuple(idle))

    def anchors(self) -> dict[str, list[int]]:
        """The batches of each anchor (an anchor with none is absent)."""
        # a failure strikes a batch that runs tasks: one with data (an empty batch may run none, and
        # a requested failure that did not happen is an inconclusive cell)
        # partly-idle: one input has rows, another none; a failure there replans (and a restart
        # re-runs) a batch with an idle input, where Spark plans that input as an empty relation
        out = {"first-data": [self.data[0]] if self.data else [], "last": [self.data[-1]] if self.data else [],
               "after-idle": [b + 1 for b in self.idle if b + 1 in self.data],
               "partly-idle": [b for b in self.data if b in self.idle]}
        return {k: v for k, v in out.items() if v}


@dataclass(frozen=True)
class FaultSchedule:
    """One fault schedule: a matrix failure at ``batch`` on the state store ``provider``.

    ``failure``, its ``kill_point`` or retry ``schedule``. Found by ``anchor``.
    """

    failure: str
    provider: str
    batch: int
    anchor: str = "first-data"
    kill_point: str | None = None
    schedule: str | None = None

    def cell(self, module: str, engine_version: str | None = None) -> Cell:
        """The matrix cell of this schedule for ``module`` on ``engine_version``.

        Parameters
        ----------
        module : str
            The query module.
        engine_version : str, optional
            The pyspark release; None for this environment's.

        Returns
        -------
        Cell
            The matrix cell.
        """
        return Cell(module, self.provider, self.failure, self.kill_point, engine_version, self.schedule)

    @property
    def key(self) -> str:
        """The hunt cell's key: ``<provider>/<matrix column>@b<batch>``.

        >>> FaultSchedule("kill", "rocksdb", 1, kill_point="commit").key
        'rocksdb/kill:commit@b1'
        """
        return f"{self.provider}/{self.cell('q.py').column}@b{self.batch}"

    def params(self) -> dict[str, Any]:
        """JSON-able parameters (:meth:`from_params` reads them back)."""
        return {"failure": self.failure, "provider": self.provider, "batch": self.batch, "anchor": self.anchor,
                "kill_point": self.kill_point, "schedule": self.schedule}

    @classmethod
    def from_params(cls, p: dict[str, Any]) -> FaultSchedule:
        """A schedule from :meth:`params` (a bad one: :class:`InvalidInputError` naming the field)."""
        if p.get("failure") not in FAILURES:
            raise InvalidInputError(f"unknown failure {p.get('failure')!r}", location="params.failure")
        if p.get("provider") not in PROVIDERS:
            raise InvalidInputError(f"unknown provider {p.get('provider')!r}", location="params.provider")
        if not isinstance(p.get("batch"), int) or p["batch"] < 0:
            raise InvalidInputError("the batch must be a whole number >= 0", location="params.batch")
        return cls(p["failure"], p["provider"], p["batch"], str(p.get("anchor") or "first-data"),
                   p.get("kill_point"), p.get("schedule"))


def _pick(dr: Any, options: Sequence[T]) -> T:
    """One of ``options``, about evenly.

    ``sampled_from`` as the seeded draw uses it almost never gives its first option. Shrinking
    towards the first.
    """
    return options[dr(st.integers(0, 2**20)) % len(options)]


def retry_schedules(batch: int) -> st.SearchStrategy[str]:
    """The retry schedules that can strike at ``batch`` (as :meth:`RetrySchedule.text`)."""
    def valid(s: RetrySchedule) -> bool:
        try:
            s.validate(batch)
        except InvalidInputError:
            return False
        return True

    @st.composite
    def one(dr: Any) -> RetrySchedule:
        return RetrySchedule(tasks=_pick(dr, ("one", "all")), stage=_pick(dr, ("stateful", "input")),
                             attempts=_pick(dr, range(1, MAX_TASK_FAILURES + 1)),
                             load=_pick(dr, (None, "first", "later")), then=_pick(dr, ("restart", "continue")))

    return one().filter(valid).map(RetrySchedule.text)


def fault_schedules(shape: BatchShape, failures: list[str], providers: list[str],
                    kill_points: tuple[str, ...] = KILL_POINTS) -> st.SearchStrategy[FaultSchedule]:
    """The grammar of fault schedules (module docstring) for a program of ``shape``.

    Parameters
    ----------
    shape : BatchShape
        The program's input.
    failures : list of str
        The kinds asked for (matrix failures).
    providers : list of str
        The state store providers asked for.
    kill_points : tuple of str
        The kill points a ``kill`` may strike at.

    Returns
    -------
    SearchStrategy of FaultSchedule
    """
    firsts = [f for f in failures if f not in SECOND_FAILURES]
    seconds = [f for f in failures if f in SECOND_FAILURES]
    if not shape.n or not providers or not failures:
        raise InvalidInputError("no fault schedule: the program has no batch, or no failure or provider was asked "
                                "for", location="--failures")
    anchors = shape.anchors()

    @st.composite
    def one(dr: Any) -> FaultSchedule:
        kind = _pick(dr, firsts or seconds)
        anchor = _pick(dr, sorted(anchors))
        batch = _pick(dr, anchors[anchor])
        provider = _pick(dr, providers)
        if kind == "kill" and seconds and _pick(dr, [False, True]):  # a second failure after the kill
            kind = _pick(dr, seconds)
        if kind == "kill":
            return FaultSchedule("kill", provider, batch, anchor, kill_point=_pick(dr, kill_points))
        if kind == "retry":
            text = dr(retry_schedules(batch))
            return FaultSchedule("retry", provider, batch, anchor, schedule=None if text == "default" else text)
        return FaultSchedule(kind, provider, batch, anchor)

    return one()


def draw_schedules(shape: BatchShape, failures: list[str], providers: list[str], *, seed: int, salt: str,
                   count: int = 2, tries: int = 12) -> list[FaultSchedule]:
    """``count`` different schedules (fewer when the grammar has fewer).

    Drawn in order with :func:`rollcheck.infra.hunt.draw.draw` from ``seed`` and ``salt`` (the
    program's id).

    Parameters
    ----------
    shape : BatchShape
        The program's batches.
    failures : list of str
        The failures drawn from.
    providers : list of str
        The state store providers drawn from.
    seed : int
        The hunt's seed.
    salt : str
        The program's id.
    count : int, optional
        How many schedules.
    tries : int, optional
        Draws before giving up.

    Returns
    -------
    list of FaultSchedule
        Different schedules.
    """
    strategy = fault_schedules(shape, failures, providers)
    out: list[FaultSchedule] = []
    for i in range(tries):
        s = draw(strategy, seed, i, salt=f"faults/{salt}")
        if s.key not in {x.key for x in out}:
            out.append(s)
        if len(out) >= count:
            break
    return out
