"""The Spark matrix on several pyspark releases.

The environments made before any cell runs (:func:`prepare_releases`) and a finding's reproducer run
on the cell's release and on the reference release (:func:`reproducer_on_releases`);
:mod:`rollcheck.spark_replay.matrix.run` uses both.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from rollcheck.spark_replay.matrix.plan import Cell, MatrixOptions

__all__ = ["prepare_releases", "reproducer_on_releases"]


def _pinned() -> str:
    from rollcheck.spark_replay.releases import pinned_release

    return pinned_release()


def reproducer_on_releases(cell: Cell, opts: MatrixOptions, script: Path,
                           run: Callable[[list[str], float, Path], tuple[int | None, str]]) -> dict[str, Any]:
    """Run a finding's reproducer once on the cell's release V and once on the reference release R.

    ``--reference-version``, default the pinned one. Each with its own environment's interpreter
    (made before the cells ran); return ``{V: run, R: run}`` (the core's
    :func:`~rollcheck.infra.matrix.reproducer.run_on_releases`).
    """
    from rollcheck.infra.matrix import run_on_releases
    from rollcheck.spark_replay.matrix.reproducer import SHOWS, reproducer_python

    work = opts.out / f"{cell.stem}.min"
    work.mkdir(parents=True, exist_ok=True)
    releases = [str(cell.engine_version), opts.reference_version or _pinned()]
    return run_on_releases(lambda r: [str(reproducer_python(r)), "-I", str(script), str(work / f"reproducer-run-{r}")],
                           releases, run, opts.cell_timeout, lambda r: work / f"reproducer.{r}.log",
                           shows=SHOWS)



def prepare_releases(opts: MatrixOptions) -> dict[str, Path]:
    """Make (or reuse) the environment of every release of the matrix, once, before any cell runs.

    The releases are ``opts.engine_versions`` and ``opts.reference_version``; returns
    ``{release: python}``.

    Raises
    ------
    InvalidInputError
        A release outside the range (all are checked before anything is installed) or one pip
        cannot install (one line: the release and pip's reason; exit 2, no cell run).
    """
    from rollcheck.spark_replay.releases import parse_release, spark_environment

    if not opts.engine_versions:
        return {}
    wanted = list(dict.fromkeys([*opts.engine_versions, *([opts.reference_version] if opts.reference_version
                                                           else [])]))
    for v in wanted:
        parse_release(v)
    return {v: spark_environment(v) for v in wanted}
