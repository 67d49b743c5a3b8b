"""The Spark matrix's plan: its cells and its options.

Query module × state store provider × failure × kill point.

A *configuration* is a query module with a state store provider (``hdfs``, ``rocksdb``,
``rocksdb-changelog``); a *column* is a failure: ``task``, ``sink``, ``executor`` (an executor JVM of
a standalone cluster SIGKILLed: ``--cluster local-standalone`` or ``--master spark://H:P``),
``retry`` (a task fails after its state store committed and Spark retries it), ``twice`` (the driver
killed after batch K, and again after its restarted driver wrote batch K again), ``during-recovery``
(the driver killed after batch K, and again while the restarted driver restores), or ``kill`` at one of
the kill points of :mod:`rollcheck.spark_replay.faults.killpoints` (``kill:offsets``, ``kill:state``,
``kill:sink``, ``kill:commit``). With ``--engine-version V[,V2...]`` every configuration is run on
each pyspark release, one group of rows per release (``pyspark V · <name> · <provider>``). The
matrix itself is :mod:`rollcheck.spark_replay.matrix.run`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from rollcheck.pyimpl.errors import InvalidInputError
from rollcheck.spark_replay.cluster import on_cluster, validate_cluster
from rollcheck.spark_replay.faults.killpoints import KILL_POINTS, STATE_STORES
from rollcheck.spark_replay.faults.retry import RetrySchedule

__all__ = ["PROVIDERS", "FAILURES", "DEFAULT_FAILURES", "Cell", "columns", "plan_cells", "MatrixOptions", "library_modules",
           "supported_providers", "ROW_HEADER", "RELEASE_ROW_HEADER", "row_header", "parse_versions"]

PROVIDERS = tuple(STATE_STORES)
FAILURES = ("task", "sink", "kill", "executor", "retry", "twice", "during-recovery", "upgrade")
#: The failures the matrix runs when ``--failures`` is not given (``executor`` needs a cluster).
DEFAULT_FAILURES = ("task", "sink", "kill")
#: The header of the table's first column.
ROW_HEADER = "query · state store"
#: The header of the table's first column when the matrix names releases (``--engine-version``).
RELEASE_ROW_HEADER = "release · " + ROW_HEADER


@dataclass(frozen=True)
class Cell:
    """One cell: a query module under a state store provider with one failure.

    A :class:`~rollcheck.infra.matrix.cells.MatrixCell`: ``row``, ``column``, ``ident``.
    """

    module: str
    provider: str
    failure: str
    kill_point: str | None = None
    #: the pyspark release (``--engine-version``); None: the pinned one (the running interpreter's)
    engine_version: str | None = None
    #: the ``retry`` failure's schedule (``--retry-schedules``: ``RetrySchedule.text()``); None: the default
    schedule: str | None = None

    @property
    def name(self) -> str:
        """The module's short name: the file's stem or the module's last component."""
        return Path(self.module).stem if self.module.endswith(".py") else self.module.rsplit(".", 1)[-1]

    @property
    def column(self) -> str:
        """The table column: ``task``, ``sink`` or ``kill:<point>``.

        >>> Cell("q.py", "hdfs", "kill", "commit").column, Cell("a.b", "rocksdb", "task").column
        ('kill:commit', 'task')
        >>> Cell("q.py", "rocksdb", "retry", schedule="tasks=all").column
        'retry:tasks=all'
        """
        if self.failure == "kill":
            return f"kill:{self.kill_point}"
        return f"retry:{self.schedule}" if self.failure == "retry" and self.schedule else self.failure

    @property
    def config_id(self) -> str:
        """The configuration's folder name.

        ``<name>--<provider>`` (``pyspark<V>-<name>--<provider>`` on a release of
        ``--engine-version``).

        >>> Cell("q.py", "hdfs", "task").config_id, Cell("q.py", "hdfs", "task", None, "3.5.9").config_id
        ('q--hdfs', 'pyspark3.5.9-q--hdfs')
        """
        v = f"pyspark{self.engine_version}-" if self.engine_version else ""
        return f"{v}{self.name}--{self.provider}"

    @property
    def row(self) -> str:
        """The table row: ``<name> · <provider>`` (``pyspark <V> · <name> · <provider>``).

        >>> Cell("q.py", "rocksdb", "task", None, "4.3.0").row
        'pyspark 4.3.0 · q · rocksdb'
        """
        v = f"pyspark {self.engine_version} · " if self.engine_version else ""
        return f"{v}{self.name} · {self.provider}"

    @property
    def stem(self) -> str:
        """The cell's file stem inside the output folder."""
        return f"{self.config_id}/{self.column.replace(':', '-')}"

    @property
    def ident(self) -> str:
        """The cell's file stem (:attr:`stem`), the core's name for it."""
        return self.stem


def columns(failures: list[str], kill_points: list[str], retry_schedules: Sequence[str] = ()) -> list[str]:
    """The table's columns, in protocol order (``retry``: one column per schedule, if any given).

    Parameters
    ----------
    failures : list of str
        The failures.
    kill_points : list of str
        The kill points of ``kill``.
    retry_schedules : Sequence of str, optional
        The schedules of ``retry``.

    Returns
    -------
    list of str
        The columns.

    Examples
    --------
    >>> columns(["kill", "task"], ["commit", "offsets"])
    ['task', 'kill:offsets', 'kill:commit']
    >>> columns(["retry", "executor", "kill", "sink"], ["state"])
    ['sink', 'kill:state', 'executor', 'retry']
    >>> columns(["retry"], [], ["default", "tasks=all+attempts=2"])
    ['retry', 'retry:tasks=all+attempts=2']
    """
    out: list[str] = [f for f in ("task", "sink") if f in failures]
    if "kill" in failures:
        out += [f"kill:{p}" for p in KILL_POINTS if p in kill_points]
    for f in ("executor", "retry", "twice", "during-recovery", "upgrade"):
        if f in failures and f == "retry" and retry_schedules:
            texts = [RetrySchedule.parse(x).text() for x in retry_schedules]
            out += ["retry" if t == "default" else f"retry:{t}" for t in dict.fromkeys(texts)]
        elif f in failures:
            out.append(f)
    return out


def row_header(planned: Sequence[Cell]) -> str:
    """:data:`RELEASE_ROW_HEADER` when a planned cell names its release, else :data:`ROW_HEADER`."""
    return RELEASE_ROW_HEADER if any(c.engine_version for c in planned) else ROW_HEADER


def parse_versions(text: str | None) -> list[str]:
    """The releases of ``--engine-version V[,V2...]``.

    In order, each once; each checked against the supported range before anything is installed.
    ``[]`` for None.

    >>> parse_versions("3.5.9, 4.3.0,3.5.9"), parse_versions(None)
    (['3.5.9', '4.3.0'], [])
    >>> parse_versions(",")
    Traceback (most recent call last):
    ...
    rollcheck.pyimpl.errors.InvalidInputError: --engine-version: ',': one release or several, separated by commas
    """
    from rollcheck.spark_replay.releases import parse_release

    if text is None:
        return []
    versions = list(dict.fromkeys(x.strip() for x in text.split(",") if x.strip()))
    if not versions:
        raise InvalidInputError(f"{text!r}: one release or several, separated by commas", location="--engine-version")
    for v in versions:
        parse_release(v)
    return versions


def plan_cells(modules: list[str], providers: list[str], failures: list[str],
               kill_points: list[str], engine_versions: Sequence[str | None] = (None,),
               retry_schedules: Sequence[str] = ()) -> list[Cell]:
    """Every cell, release by release (``engine_versions``; None: the pinned release).

    Then configuration by configuration (module-major), columns in protocol order.

    Parameters
    ----------
    modules : list of str
        The query modules.
    providers : list of str
        The state store providers.
    failures : list of str
        The failures.
    kill_points : list of str
        The kill points.
    engine_versions : Sequence of str or None, optional
        The releases; None for the pinned one.
    retry_schedules : Sequence of str, optional
        The retry schedules.

    Returns
    -------
    list of Cell
        The cells.

    Examples
    --------
    >>> [c.column for c in plan_cells(["q.py"], ["hdfs"], ["task", "kill"], ["sink", "state"])]
    ['task', 'kill:state', 'kill:sink']
    >>> [c.row for c in plan_cells(["q.py"], ["hdfs"], ["task"], [], ["3.5.9", "4.3.0"])]
    ['pyspark 3.5.9 · q · hdfs', 'pyspark 4.3.0 · q · hdfs']
    >>> plan_cells(["q.py"], ["mem"], ["task"], [])
    Traceback (most recent call last):
    ...
    rollcheck.pyimpl.errors.InvalidInputError: --providers: unknown state store provider 'mem'; use hdfs, rocksdb, rocksdb-changelog
    """
    if not modules:
        raise InvalidInputError("no query module given", location="--module")
    for p in providers:
        if p not in PROVIDERS:
            raise InvalidInputError(f"unknown state store provider {p!r}; use {', '.join(PROVIDERS)}",
                                    location="--providers")
    for f in failures:
        if f not in FAILURES:
            raise InvalidInputError(f"unknown failure {f!r}; use {', '.join(FAILURES)}", location="--failures")
    for k in kill_points:
        if k not in KILL_POINTS:
            raise InvalidInputError(f"unknown kill point {k!r}; use {', '.join(KILL_POINTS)}",
                                    location="--kill-points")
    if not providers or not failures or ("kill" in failures and not kill_points and failures == ["kill"]):
        raise InvalidInputError("the matrix is empty: give at least one provider and one failure",
                                location="--failures")
    cols = columns(failures, kill_points, retry_schedules)
    cells = []
    for v in engine_versions or (None,):
        for m in modules:
            for p in providers:
                for col in cols:
                    f, _, k = col.partition(":")
                    kp, sched = (k or None, None) if f == "kill" else (None, k or None)
                    cells.append(Cell(m, p, f, kp, v, sched))
    names = Counter(c.config_id for c in cells if c.column == cols[0])
    dup = [n for n, x in names.items() if x > 1]
    if dup:
        raise InvalidInputError(f"two modules share the name {dup[0].split('--')[0]!r}", location="--module")
    return cells


@dataclass
class MatrixOptions:
    """The matrix's parameters (the CLI's flags)."""

    modules: list[str]
    providers: list[str] = field(default_factory=lambda: list(PROVIDERS))
    failures: list[str] = field(default_factory=lambda: list(DEFAULT_FAILURES))
    kill_points: list[str] = field(default_factory=lambda: list(KILL_POINTS))
    batches: int | None = None
    seed: int = 0
    fail_at_batch: int = 2
    out: Path = Path("spark-matrix")
    jobs: int = 1
    master: str | None = None
    cell_timeout: float = 900.0
    #: seconds each call into a query module may take (passed to ``spark record query --call-timeout``)
    call_timeout: float = 300.0
    retries: int = 1
    #: minimise a finding and write its reproducer
    minimise: bool = True
    #: re-recordings the minimiser may spend (0: the reproducer carries the cell's whole input)
    shrink_runs: int = 6
    #: run the reproducer once and record whether it showed the finding
    run_reproducer: bool = True
    #: a cluster the matrix starts for its cells (``local-standalone``; ``cluster.CLUSTERS``)
    cluster: str | None = None
    #: the pyspark releases to run every configuration on (``--engine-version``; one group of rows
    #: per release); empty: the pinned release only
    engine_versions: list[str] = field(default_factory=list)
    #: with ``engine_versions``: the release the ``release-differential`` check compares with
    #: (``--reference-version``; None: the pinned release)
    reference_version: str | None = None
    #: the ``retry`` failure's schedules, one column each (``--retry-schedules``; empty: the default)
    retry_schedules: list[str] = field(default_factory=list)
    #: run the cells that need no new process (task, sink, the reference) in one warm Spark driver per
    #: worker (:mod:`rollcheck.spark_replay.matrix.warm`); False: every recording in a fresh child
    warm: bool = True
    #: take a configuration's failure-free reference from rollcheck's cache when an earlier run
    #: recorded it (same module bytes, configuration, release, recorder), and keep new ones there
    #: (:mod:`rollcheck.spark_replay.shared_reference`)
    reuse_reference: bool = True

    def validate(self) -> None:
        """Refuse options no matrix can run (exit 2 naming the flag)."""
        from rollcheck.spark_replay.releases import parse_release

        if self.retry_schedules and "retry" not in self.failures:
            raise InvalidInputError("retry schedules need the retry failure in --failures", location="--retry-schedules")
        for text in self.retry_schedules:
            try:
                RetrySchedule.parse(text).validate(self.fail_at_batch)
            except InvalidInputError as e:
                raise InvalidInputError(f"{text!r}: {e.reason}", location="--retry-schedules") from None

        for v in self.engine_versions:
            parse_release(v)
        if self.reference_version is not None:
            if not self.engine_versions:
                raise InvalidInputError("--reference-version needs --engine-version (the releases it is "
                                        "compared with)", location="--reference-version")
            parse_release(self.reference_version, location="--reference-version")
        if self.jobs < 1 or self.jobs > 16:
            raise InvalidInputError(f"--jobs must be 1..16, got {self.jobs}", location="--jobs")
        validate_cluster(self.cluster, self.master)
        clustered = self.cluster is not None or on_cluster(self.master)
        if "executor" in self.failures and not clustered:
            raise InvalidInputError("the executor failure needs a cluster whose executors run on this machine: give "
                                    "--cluster local-standalone (or --master spark://HOST:PORT)", location="--cluster")
        if clustered and self.jobs > 1:
            raise InvalidInputError(f"--jobs {self.jobs} on a two-worker cluster: the cells' applications would wait "
                                    "for each other's cores; use --jobs 1", location="--jobs")
        if self.batches is not None and self.batches < 1:
            raise InvalidInputError(f"--batches must be >= 1, got {self.batches}", location="--batches")
        if self.fail_at_batch < 0:
            raise InvalidInputError("--fail-at-batch must be >= 0", location="--fail-at-batch")
        if self.batches is not None and self.fail_at_batch >= self.batches:
            raise InvalidInputError(f"--fail-at-batch {self.fail_at_batch} is not below --batches "
                                    f"{self.batches}: the failure would strike no data batch",
                                    location="--fail-at-batch")
        if self.cell_timeout <= 0:
            raise InvalidInputError("the cell timeout must be positive", location="--cell-timeout")
        if self.call_timeout <= 0:
            raise InvalidInputError("the call timeout must be positive", location="--call-timeout")
        if self.shrink_runs < 0:
            raise InvalidInputError("the minimiser's re-recordings must be >= 0", location="--shrink-runs")
        if self.call_timeout >= self.cell_timeout:
            raise InvalidInputError(f"--call-timeout {self.call_timeout:g} is not below --cell-timeout "
                                    f"{self.cell_timeout:g}: a slow call would be cut as the cell's timeout, "
                                    "not named as the module's", location="--call-timeout")


def library_modules() -> list[str]:
    """The query library shipped with the source tree (``examples/queries/*.py``)."""
    root = Path(__file__).resolve().parents[2] / "examples" / "queries"
    mods = sorted(str(p) for p in root.glob("*.py") if not p.name.startswith("_"))
    if not mods:
        raise InvalidInputError("no query module given and the query library (examples/queries) is not "
                                "here; give --module FILE.py", location="--module")
    return mods


def supported_providers(module: str) -> list[str] | None:
    """The providers a query module declares it runs on (its optional ``STATE_STORES``), or None."""
    from rollcheck.spark_replay.query.record import load_query

    declared = getattr(load_query(module).module, "STATE_STORES", None)
    if declared is None:
        return None
    if not isinstance(declared, list | tuple) or not all(d in PROVIDERS for d in declared):
        raise InvalidInputError(f"STATE_STORES must list providers among {', '.join(PROVIDERS)}",
                                source=module, location="STATE_STORES")
    return list(declared)
