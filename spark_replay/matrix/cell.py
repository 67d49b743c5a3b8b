"""One matrix cell's recording as a typed, serialised configuration: :class:`CellConfig`.

The matrix (:mod:`rollcheck.spark_replay.matrix.run`) does not turn its options back into command-line
flags: :func:`cell_config` (the one builder) makes a :class:`CellConfig` — the recording's
:class:`~rollcheck.spark_replay.query.config.QueryConfig` and the cell's paths (trace, work folder,
shared reference) — written as JSON, and a fresh child runs it::

    python -m rollcheck.spark_replay.matrix.cell CONFIG.json

(exit 0 when the recording ended done, 3 when it ended otherwise, 2 for bad input — one line
naming the file and the field — 4 for an internal error). A warm driver
(:mod:`rollcheck.spark_replay.matrix.warm`) runs the same configuration in its own Spark session with
:func:`run_cell`.

Examples
--------
>>> from rollcheck.spark_replay.matrix.plan import Cell, MatrixOptions
>>> c = cell_config(Cell("q.py", "rocksdb", "task"), MatrixOptions(["q.py"], seed=3), "t.jsonl", "r.jsonl")
>>> c.query.failure, c.query.state_store, c.query.seed, c.reference_from
('task', 'rocksdb', 3, 'r.jsonl')
>>> CellConfig.from_json(c.to_json()) == c
True
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from rollcheck.pyimpl.errors import InvalidInputError
from rollcheck.spark_replay.query.config import QueryConfig

__all__ = ["CELL_FORMAT", "CellConfig", "cell_config", "cell_argv", "run_cell", "recording_exit", "main"]

#: The ``format`` of a cell configuration file.
CELL_FORMAT = "rollcheck.spark-cell/1"


@dataclass(frozen=True)
class CellConfig:
    """A cell's recording: the query's configuration and where its files go.

    ``trace``: the trace to write; ``workdir``: its input, checkpoint and output folders (default
    ``<trace>.work``); ``reference_from``: a failure-free recording whose output and state serve
    as the reference (the configuration's shared reference), or None.
    """

    query: QueryConfig
    trace: str
    workdir: str | None = None
    reference_from: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The configuration as a JSON object (``format``, ``query``, the paths)."""
        return {"format": CELL_FORMAT, "query": asdict(self.query), "trace": self.trace, "workdir": self.workdir,
                "reference_from": self.reference_from}

    @classmethod
    def from_json(cls, doc: Any, source: str | None = None) -> CellConfig:
        """Read :meth:`to_json`'s object back; a wrong shape is :class:`InvalidInputError` naming the field.

        Parameters
        ----------
        doc : Any
            The parsed JSON.
        source : str, optional
            The file, named by errors.

        Returns
        -------
        CellConfig
            The configuration.
        """
        if not isinstance(doc, dict) or doc.get("format") != CELL_FORMAT:
            raise InvalidInputError(f"not a cell configuration (format {CELL_FORMAT!r})", source=source,
                                    location="format")
        q = doc.get("query")
        if not isinstance(q, dict) or not isinstance(q.get("module"), str):
            raise InvalidInputError("needs the query's configuration with its module", source=source,
                                    location="query.module")
        known = {f.name for f in fields(QueryConfig)}
        extra = sorted(set(q) - known)
        if extra:
            raise InvalidInputError(f"unknown field {extra[0]!r}", source=source, location=f"query.{extra[0]}")
        for key in ("trace", "workdir", "reference_from"):
            v = doc.get(key)
            if not (v is None and key != "trace") and not isinstance(v, str):
                raise InvalidInputError("must be a path", source=source, location=key)
        return cls(QueryConfig(**q), doc["trace"], doc.get("workdir"), doc.get("reference_from"))

    def write(self, path: str | Path) -> Path:
        """Write the configuration to ``path`` (atomically) and return it."""
        from rollcheck.pyimpl.patternio import atomic_write_text

        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, json.dumps(self.to_json(), indent=1) + "\n")
        return path

    @classmethod
    def read(cls, path: str | Path) -> CellConfig:
        """Read a configuration file (bad JSON or shape: :class:`InvalidInputError` naming it)."""
        try:
            doc = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise InvalidInputError(f"cannot read the cell configuration: {e}", source=str(path)) from None
        return cls.from_json(doc, str(path))


def cell_config(cell: Any, opts: Any, trace: str | Path, reference: str | Path | None, *,
                module: str | None = None, provider: str | None = None,
                engine_version: str | None = None) -> CellConfig:
    """The one builder of a matrix recording's configuration.

    Parameters
    ----------
    cell : Cell or None
        The matrix cell (:class:`~rollcheck.spark_replay.matrix.plan.Cell`); None: the
        configuration's failure-free reference recording (no failure, no reference of its own).
    opts : MatrixOptions
        The matrix's options (seed, batches, master, call timeout, releases, failure batch).
    trace : path
        The trace to write.
    reference : path or None
        The configuration's shared reference (with a cell).
    module, provider, engine_version
        For the reference (no cell): what it records; with a cell they default to the cell's.
    """
    from rollcheck.spark_replay.faults.retry import RetrySchedule
    from rollcheck.spark_replay.releases import pinned_release

    release = cell.engine_version if cell is not None else engine_version
    q: dict[str, Any] = {
        "module": module or cell.module, "batches": opts.batches, "seed": opts.seed, "master": opts.master,
        "call_timeout": float(opts.call_timeout), "state_store": provider or cell.provider,
        "engine_version": release or None,
        # named, not left to the recorder: a warm driver on release V would take V for the pinned one
        "reference_version": (opts.reference_version or pinned_release()) if release else None}
    if cell is None:
        return CellConfig(QueryConfig(**q, reference=False), str(trace))
    q.update(failure=cell.failure, fail_at_batch=opts.fail_at_batch, kill_point=cell.kill_point)
    if cell.schedule:  # the retry's schedule (faults_retry.RetrySchedule): its fields
        q.update({k: v for k, v in RetrySchedule.parse(cell.schedule).config().items() if v is not None})
    return CellConfig(QueryConfig(**q), str(trace), reference_from=None if reference is None else str(reference))


def cell_argv(config: str | Path) -> list[str]:
    """The command of a fresh child that records the configuration file ``config``."""
    return [sys.executable, "-m", "rollcheck.spark_replay.matrix.cell", str(config)]


def run_cell(cfg: CellConfig, spark: Any = None) -> dict[str, Any]:
    """Record the cell; return :func:`~rollcheck.spark_replay.query.record.record_query`'s result.

    In ``spark``, a session of the caller's, when given; task and sink failures and failure-free
    runs only.

    Parameters
    ----------
    cfg : CellConfig
        The cell's configuration.
    spark : SparkSession, optional
        A session of the caller's; None starts one.

    Returns
    -------
    dict
        The recording's result.
    """
    from rollcheck.spark_replay.query.record import record_query

    cfg.query.validate()
    out = Path(cfg.trace)
    if not out.parent.is_dir():
        raise InvalidInputError("the output folder does not exist", source=str(out.parent), location="trace")
    return record_query(cfg.query, out, workdir=cfg.workdir, spark=spark, reference_from=cfg.reference_from)


def _say(kind: str, message: str) -> None:
    print(f"rollcheck: {kind}: {message}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    """Record the configuration file named by ``argv[0]``; print the result as JSON on stdout."""
    from rollcheck.pyimpl.errors import EnvironmentFault, InconclusiveError, environment_fault

    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        _say("error", "usage: python -m rollcheck.spark_replay.matrix.cell CONFIG.json")
        return 2
    try:
        cfg = CellConfig.read(args[0])
        print(f"rollcheck spark cell: module={cfg.query.module} seed={cfg.query.seed} failure={cfg.query.failure}",
              file=sys.stderr)
        res = run_cell(cfg)
    except EnvironmentFault as e:
        _say("environment error", str(e))
        return 2
    except InvalidInputError as e:
        _say("error", str(e))
        return 2
    except InconclusiveError as e:
        _say("inconclusive", str(e))
        return 3
    except Exception as e:  # noqa: BLE001 - the machine's fault (a full disk) is exit 2, anything else 4
        fault = environment_fault(e, args[0])
        if fault is not None:
            _say("environment error", str(fault))
            return 2
        _say("internal error", f"{type(e).__name__}: {e} (a bug in rollcheck)")
        return 4
    print(json.dumps(res, default=str))
    return recording_exit(str(res.get("status")))


def recording_exit(status: str) -> int:
    """0 for a recording that ended done, else 3 (a recording judges nothing), as ``spark record query``."""
    from rollcheck.pyimpl.verdict import Status, exit_code, recording_check

    check = recording_check(status)
    if check.status is not Status.HELD:
        _say("inconclusive", str(check.detail))
    return exit_code([check])


if __name__ == "__main__":
    sys.exit(main())
