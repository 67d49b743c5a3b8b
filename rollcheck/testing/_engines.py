"""The chaos matrix from pytest: keep "my query / my job stays exactly-once" in your test suite.

:func:`check_query` (Spark) and :func:`check_job` (Flink) run a slice of the engine's chaos
matrix on one module and return an :class:`EngineReport`; the ``assert_*`` forms raise
:class:`AssertionError` unless every cell is conformant (kept the module's ``SINK_GUARANTEE``).
An explained or undecided cell fails too: docs/internals/testing.md#engine-checks-_engines.

Examples
--------
In the user's test suite (each Spark recording takes 20-60 s; Flink needs ``make flink-setup``)::

    from rollcheck.testing import assert_query_exactly_once

    def test_my_query_survives_a_sink_failure_and_a_driver_kill():
        assert_query_exactly_once("myproject/queries/totals.py", failures=("sink", "kill"),
                                  kill_points=("commit",))
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from rollcheck.infra.matrix import matrix_verdict
from rollcheck.infra.matrix.table import cell_word, summary_line

__all__ = ["EngineReport", "check_query", "assert_query_exactly_once", "check_job", "assert_job_exactly_once"]


@dataclass
class EngineReport:
    """A matrix slice's outcome, as :func:`check_query` and :func:`check_job` return it.

    Attributes
    ----------
    engine, module : str
        ``spark`` or ``flink``, and the module checked.
    verdict : str
        ``conformant``, ``not-conformant`` or ``inconclusive``
        (:func:`rollcheck.pyimpl.verdict.decide` over the cells).
    cells : list of dict
        The cells' entries of ``matrix.json``.
    summary : dict
        Cells per outcome.
    out, index : str
        The slice's folder and its ``index.html``.
    """

    engine: str
    module: str
    verdict: str
    cells: list[dict[str, Any]] = field(default_factory=list)
    summary: dict[str, int] = field(default_factory=dict)
    out: str = ""
    index: str = ""

    @property
    def exit_code(self) -> int:
        """0 every cell conformant, 1 a cell not conformant, 3 a cell undecided (the CLI's)."""
        return matrix_verdict(self.cells).exit_code

    @property
    def failing(self) -> list[dict[str, Any]]:
        """The cells that are not conformant or could not be decided."""
        return [c for c in self.cells if c["verdict"] != "conformant"]

    def message(self) -> str:
        """What an assertion says: the verdict, the summary, and each failing cell with its files."""
        lines = [f"{self.module} on {self.engine}: {self.verdict} ({summary_line(self.summary)}); table {self.index}"]
        for c in self.failing:
            lines.append(f"  {c['row']} · {c['column']}: {cell_word(c)[1]}: {c['reason']}")
            for k in ("trace", "witness", "reproducer"):
                if c.get(k):
                    lines.append(f"    {k}: {c[k]}")
        return "\n".join(lines)


def _module_path(module: str | Path | ModuleType) -> str:
    if isinstance(module, ModuleType):
        path = getattr(module, "__file__", None)
        if not path:
            raise TypeError(f"module {module.__name__!r} has no source file")
        return str(path)
    return str(module)


def _out(out: str | Path | None, module: str, engine: str) -> Path:
    from rollcheck.testing import _config

    base = Path(out) if out is not None else (Path(_config.OUT) if _config.OUT else None)
    stem = Path(module).stem if module.endswith(".py") else module.rsplit(".", 1)[-1]
    if base is not None:
        base.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=f"{stem}-{engine}-", dir=base))


def _report(engine: str, module: str, doc: dict[str, Any], out: Path) -> EngineReport:
    from rollcheck.testing import _config

    report = EngineReport(engine=engine, module=module, verdict=matrix_verdict(doc["cells"]).word("trace"),
                          cells=list(doc["cells"]), summary=dict(doc["summary"]), out=str(out),
                          index=str(doc.get("index") or out / "index.html"))
    _config.record(report)  # for the pytest plugin's end-of-session summary
    return report


def check_query(module: str | Path | ModuleType, *, providers: Sequence[str] = ("hdfs",),
                failures: Sequence[str] = ("sink",), kill_points: Sequence[str] = ("commit",),
                batches: int | None = None, fail_at_batch: int = 2, seed: int = 0, out: str | Path | None = None,
                jobs: int = 1, master: str | None = None, cell_timeout: float = 900.0, call_timeout: float = 300.0,
                shrink_runs: int = 0, run_reproducer: bool = False) -> EngineReport:
    """Run a slice of the Spark chaos matrix on one query module (``docs/spark-matrix.md``).

    Parameters
    ----------
    module
        The query module: a file, an importable name, or the imported module.
    providers, failures, kill_points
        The slice: state store providers (``hdfs``, ``rocksdb``, ``rocksdb-changelog``), failures
        (``task``, ``sink``, ``kill``) and the kill points of ``kill`` (``offsets``, ``state``,
        ``sink``, ``commit``). Default: one sink failure on the HDFS-backed store.
    batches, fail_at_batch, seed, master, cell_timeout, call_timeout, jobs
        As ``rollcheck spark matrix``'s options.
    out
        The folder (default: ``--rollcheck-out``, then a temporary folder); the slice's files go into
        a new subfolder.
    shrink_runs, run_reproducer
        A finding's reproducer is always written; ``shrink_runs`` re-recordings may minimise its
        input first (each a Spark run), and ``run_reproducer`` runs it once.

    Returns
    -------
    EngineReport
    """
    from rollcheck.spark_replay.matrix.run import MatrixOptions, run_matrix

    mod = _module_path(module)
    where = _out(out, mod, "spark")
    opts = MatrixOptions(modules=[mod], providers=list(providers), failures=list(failures),
                         kill_points=list(kill_points), batches=batches, seed=seed, fail_at_batch=fail_at_batch,
                         out=where, jobs=jobs, master=master, cell_timeout=cell_timeout, call_timeout=call_timeout,
                         minimise=True, shrink_runs=shrink_runs, run_reproducer=run_reproducer)
    return _report("spark", mod, run_matrix(opts), where)


def check_job(module: str | Path | ModuleType, *, backends: Sequence[str] = ("hashmap",),
              checkpoints: Sequence[str] = ("aligned",), failures: Sequence[str] = ("task",),
              rescale: Sequence[tuple[int, int]] = (), records: int = 1200, rate: float = 400.0,
              interval_ms: int = 300, seed: int = 0, out: str | Path | None = None, jobs: int = 1,
              timeout_s: float = 600.0, shrink_runs: int = 0) -> EngineReport:
    """Run a slice of the Flink chaos matrix on one job module (``docs/flink.md``).

    Parameters
    ----------
    module
        The job module file (or the imported module), or ``"wordcount"``.
    backends, checkpoints, failures, rescale
        The slice: state backends (``hashmap``, ``rocksdb``, ``changelog``), checkpoint modes
        (``aligned``, ``unaligned``), failures (``task``, ``taskmanager``) and rescalings ``(P1,
        P2)`` besides the unrescaled cells. Default: a task failure, hashmap, aligned.
    records, rate, interval_ms, seed, timeout_s, jobs
        As ``rollcheck flink matrix``'s options.
    out
        The folder (default: ``--rollcheck-out``, then a temporary folder).
    shrink_runs
        Re-runs that shrink a finding's input before its reproducer is written.

    Returns
    -------
    EngineReport
    """
    from rollcheck.flink_replay.matrix import cells, run_matrix
    from rollcheck.pyimpl.errors import InvalidInputError

    mod = _module_path(module)
    if mod != "wordcount" and not Path(mod).is_file():
        raise InvalidInputError("no such job module", source=mod)
    where = _out(out, mod, "flink")
    try:
        planned = cells([mod], list(backends), list(checkpoints), list(failures), [None, *rescale])
    except ValueError as e:
        raise InvalidInputError(str(e), location="backends") from None
    doc = run_matrix(planned, where, jobs=jobs, records=records, rate=rate, interval_ms=interval_ms, seed=seed,
                     timeout_s=timeout_s, shrink_runs=shrink_runs)
    return _report("flink", mod, doc, where)


def _assert(report: EngineReport) -> EngineReport:
    __tracebackhide__ = True
    if report.verdict != "conformant":
        raise AssertionError(report.message())
    return report


def assert_query_exactly_once(module: str | Path | ModuleType, **kw: Any) -> EngineReport:
    """Run :func:`check_query` and raise :class:`AssertionError` unless every cell is conformant.

    Parameters
    ----------
    module : str, Path or module
        The query module, as :func:`check_query`.
    **kw
        The keyword arguments of :func:`check_query`.

    Returns
    -------
    EngineReport

    Raises
    ------
    AssertionError
        A cell is not conformant or undecided; the message names each such cell, its reason,
        trace, witness and reproducer.
    """
    __tracebackhide__ = True
    return _assert(check_query(module, **kw))


def assert_job_exactly_once(module: str | Path | ModuleType, **kw: Any) -> EngineReport:
    """Run :func:`check_job` and raise :class:`AssertionError` unless every cell is conformant.

    Parameters
    ----------
    module : str, Path or module
        The job module, as :func:`check_job`.
    **kw
        The keyword arguments of :func:`check_job`.

    Returns
    -------
    EngineReport

    Raises
    ------
    AssertionError
        A cell is not conformant or undecided (the message names each such cell and its files).
    """
    __tracebackhide__ = True
    return _assert(check_job(module, **kw))
