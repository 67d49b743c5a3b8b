"""Spark's side of the hunt: :class:`SparkHuntAdapter`.

For one generated program (an ordinary query module) the adapter runs

1. the **failure-free cells**, one per state store provider (``hdfs/none``, ...): a recording
   without failure on the hunted release, replayed (``batch-equivalent``, ``plan-stable``,
   ``complete-key-unique``, ...; with a reference release, ``release-differential`` against that
   release's failure-free output, recorded once per program). A program Spark refuses at analysis
   makes every cell ``rejected`` and nothing more runs; a failure-free run that fails on the hunted
   release is recorded once more with the reference release's run first, so that the recorder
   names the exception and ``release-differential`` judges it (``spark.reference_failed``); the
   fault cells are then not run. Each finished failure-free recording is kept as the matrix's
   shared reference of its configuration, so the fault cells reuse it;
2. the **fault cells** drawn from :mod:`rollcheck.spark_replay.hunt.faults`: matrix cells run
   through :func:`rollcheck.spark_replay.matrix.run.run_matrix` (one call per failure batch), each
   entry read back as an outcome (:mod:`rollcheck.spark_replay.hunt.outcomes`);
3. the **differentials** (:mod:`rollcheck.spark_replay.hunt.oracles`): ``providers``
   (``provider-differential`` over the failure-free cells) and ``<provider>/partitions=1`` (a
   failure-free recording with one shuffle partition, its own checks and
   ``partitioning-differential``).

``confirm`` runs a cell again through the ordinary matrix in a fresh folder; ``reproducer`` writes
the matrix's standalone script (:func:`rollcheck.spark_replay.matrix.reproducer.reproducer_source`).
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from rollcheck.infra.hunt.adapter import CellOutcome, HuntAdapter, HuntCell, Program
from rollcheck.infra.matrix import ChildRunner
from rollcheck.spark_replay.hunt.faults import BatchShape, FaultSchedule, draw_schedules
from rollcheck.spark_replay.hunt.outcomes import (
    outcome_of_entry,
    outcome_of_free,
    refusal,
    trace_exception,
)
from rollcheck.spark_replay.matrix.plan import DEFAULT_FAILURES, MatrixOptions
from rollcheck.spark_replay.matrix.warm import WarmPool

__all__ = ["SparkHuntAdapter", "FREE", "FAULT", "PROVIDERS_DIFF", "PARTITIONS"]

#: The kinds of hunt cell (``HuntCell.params["kind"]``).
FREE, FAULT, PROVIDERS_DIFF, PARTITIONS = "failure-free", "fault", "provider-differential", "partitioning"
_DEFAULT_PROVIDERS = ("hdfs", "rocksdb")


def _last_line(log: Path) -> str:
    try:
        lines = [ln for ln in log.read_text(errors="replace").splitlines() if ln.strip().startswith("rollcheck:")]
    except OSError:
        return ""
    return lines[-1][:600] if lines else ""


class SparkHuntAdapter(HuntAdapter):
    """The hunt on Spark (module docstring).

    Parameters
    ----------
    engine_version, reference_version : str or None
        The release hunted (None: the pinned one) and the release-differential's other release.
    failures, providers : sequence of str
        The failure kinds and state store providers the fault schedules draw from.
    seed : int
        The hunt's seed (the programs' ``batches(seed)`` and the schedules' draws).
    out : Path
        The hunt's folder (this adapter's files go under ``out/spark``).
    jobs : int
        Matrix cells at a time.
    faults : int
        Fault schedules per program (default 1: a program's failure-free cells and its differentials
        are cheap next to a fault cell — a driver kill costs 1-4 minutes —, and the next programs
        draw the other kinds; the first blind hunt on 3.5.3 spent most of its time in its second
        fault cells).
    cell_timeout : float
        Seconds one recording may take.
    """

    engine = "spark"

    def __init__(self, *, engine_version: str | None = None, reference_version: str | None = None,
                 failures: Sequence[str] = DEFAULT_FAILURES, providers: Sequence[str] = _DEFAULT_PROVIDERS,
                 seed: int = 0, out: Path, jobs: int = 1, faults: int = 1, cell_timeout: float = 900.0) -> None:
        from rollcheck.spark_replay.releases import pinned_release

        self.engine_version = engine_version
        pinned = pinned_release()
        self.reference_version = reference_version or (pinned if engine_version and engine_version != pinned else None)
        self.failures = list(failures)
        self.providers = list(providers)
        self.seed = seed
        self.out = Path(out)
        self.jobs = jobs
        self.faults = faults
        self.cell_timeout = cell_timeout
        self._runner = ChildRunner()
        #: warm Spark drivers shared by the failure-free recordings and every matrix of the hunt: one
        #: for the hunted release and one for the reference release per program run at a time
        self._warm = WarmPool(self.out / "spark-warm", limit=2 * max(1, int(jobs)))
        self._newer: list[str] | None = None

    # ------------------------------------------------------------------ programs
    def vocabulary(self) -> list[str]:
        """The grammar's vocabulary on the hunted release (what coverage counts)."""
        from rollcheck.spark_replay.hunt import grammar

        return list(grammar.vocabulary(self._release()))

    def _release(self) -> str:
        from rollcheck.spark_replay.releases import pinned_release

        return self.engine_version or pinned_release()

    def release(self) -> str:
        """The hunted pyspark release by its number (the pinned one when none was asked)."""
        return self._release()

    def generate(self, seed: int, index: int, coverage: Mapping[str, int]) -> Program:
        """The program ``index`` of the seeded draw ``seed``, steered by ``coverage``.

        Parameters
        ----------
        seed : int
            The hunt's seed.
        index : int
            The program's index in the draw.
        coverage : Mapping
            Operator kind or pair -> its count over earlier programs.

        Returns
        -------
        Program
            The drawn query program.
        """
        from rollcheck.spark_replay.hunt import grammar

        p: Program = grammar.program(seed, index, coverage, self._release())
        return p

    def shrink(self, program: Program) -> Iterator[Program]:
        """Smaller variants of ``program``, biggest reductions first."""
        from rollcheck.spark_replay.hunt.shrink import shrink

        yield from shrink(program, self.engine_version)

    # ------------------------------------------------------------------ cells
    def shape(self, program: Program) -> BatchShape:
        """The program's input (:class:`BatchShape`) from its module's ``batches(seed)``."""
        from rollcheck.spark_replay.query.record import load_query

        with tempfile.TemporaryDirectory(prefix="rollcheck-hunt-") as tmp:
            path = Path(tmp) / f"{program.id}.py"
            path.write_text(program.text, encoding="utf-8")
            uq = load_query(str(path), 60.0)
            data = uq.batches(self.seed)
            return BatchShape.of(data, tuple(uq.sources) if uq.multi else ())

    def cells(self, program: Program, seed: int) -> list[HuntCell]:
        """The cells of ``program``: the failure-free runs, the fault cells and the differentials.

        Parameters
        ----------
        program : Program
            The drawn program.
        seed : int
            The hunt's seed (draws the fault schedules).

        Returns
        -------
        list of HuntCell
            Failure-free, fault, providers and ``partitions=1`` cells.
        """
        out = [HuntCell(f"{p}/none", {"kind": FREE, "provider": p}) for p in self.providers]
        for s in draw_schedules(self.shape(program), self.failures, self.providers, seed=seed, salt=program.id,
                                count=self.faults):
            out.append(HuntCell(s.key, {"kind": FAULT, **s.params()}))
        if len(self.providers) > 1:
            out.append(HuntCell("providers", {"kind": PROVIDERS_DIFF, "providers": list(self.providers)}))
        out.append(HuntCell(f"{self.providers[0]}/partitions=1", {"kind": PARTITIONS, "provider": self.providers[0],
                                                                  "shuffle_partitions": 1}))
        return out

    # ------------------------------------------------------------------ recordings
    def _options(self, module: Path, out: Path, batch: int = 0, **more: Any) -> MatrixOptions:
        return MatrixOptions(modules=[str(module)], providers=list(self.providers), failures=list(self.failures),
                             engine_versions=[self.engine_version] if self.engine_version else [],
                             reference_version=self.reference_version if self.engine_version else None,
                             out=out, minimise=False, run_reproducer=False, jobs=self.jobs, seed=self.seed,
                             fail_at_batch=batch, cell_timeout=self.cell_timeout, **more)

    def _record_free(self, module: Path, provider: str, trace: Path, *, release: str | None,
                     partitions: int | None = None, with_release: str | None = None) -> tuple[int | None, Path]:
        """Record ``module`` failure-free (a fresh child); return (exit, log)."""
        from rollcheck.spark_replay.matrix.cell import cell_argv, cell_config

        trace.parent.mkdir(parents=True, exist_ok=True)
        opts = self._options(module, trace.parent)
        opts = replace(opts, reference_version=with_release or (self.reference_version if release else None))
        cfg = cell_config(None, opts, trace, None, module=str(module), provider=provider, engine_version=release)
        if partitions is not None:
            cfg = replace(cfg, query=replace(cfg.query, shuffle_partitions=partitions))
        if with_release is not None:  # the reference release's run first, then this release's (reference_failed)
            cfg = replace(cfg, query=replace(cfg.query, reference=True))
        log = trace.with_suffix(".log")
        path = cfg.write(trace.with_name(trace.stem + ".cell.json"))
        done = self._warm.run(path, self._runner, log, self.cell_timeout, release=release)
        rc, reply = done if done is not None else self._runner.run(cell_argv(path), self.cell_timeout, log)
        if rc != 0 and not _last_line(log):  # the warm driver's account of a failed recording
            with log.open("a", encoding="utf-8") as f:
                f.write(f"\n{reply.strip()}\n" if reply.strip().startswith("rollcheck:") else f"\nrollcheck: {reply}\n")
        if rc == 0 and partitions is None and with_release is None:
            from rollcheck.spark_replay.shared_reference import reference_key, store_reference

            store_reference(reference_key(cfg.query), trace)  # the matrix's cells of this configuration reuse it
        return rc, log

    def _release_output(self, module: Path, work: Path) -> dict[str, Any] | None:
        """The reference release's failure-free output (first provider).

        Or None (no other release, or it did not finish).
        """
        if not self.engine_version or not self.reference_version or self.reference_version == self.engine_version:
            return None
        trace = work / f"ref-{self.reference_version}" / "free.jsonl"
        rc, _ = self._record_free(module, self.providers[0], trace, release=self.reference_version)
        if rc != 0:
            return None
        from rollcheck.spark_replay.hunt.oracles import final_output

        got = final_output(trace)
        return None if got is None else {"engine_version": self.reference_version, "output": got[1]}

    def _failed_free(self, module: Path, provider: str, work: Path, log: Path) -> CellOutcome:
        """The outcome of a failure-free recording that did not finish (module docstring)."""
        line = _last_line(log)
        why = refusal(line)
        if why == "rejected":
            return CellOutcome("rejected", {}, detail=line, attributed_to="user")
        if why != "failed":
            return CellOutcome("inconclusive", {}, detail=line or "the failure-free recording did not finish",
                               attributed_to="environment")
        if not self.engine_version or not self.reference_version:
            return CellOutcome("error", {}, detail=f"the failure-free run failed (no other release to compare "
                                                   f"with): {line}", attributed_to="user")
        trace = work / f"{provider}-against-{self.reference_version}.jsonl"
        rc, log2 = self._record_free(module, provider, trace, release=self.engine_version,
                                     with_release=self.reference_version)
        if rc in (0, 1, 3) and trace.is_file():
            got = outcome_of_free(trace)
            got.exception = trace_exception(trace)
            return got
        return CellOutcome("error", {}, detail=f"the failure-free run fails on {self.engine_version} and on "
                                               f"{self.reference_version}: {_last_line(log2) or line}",
                           attributed_to="user")

    # ------------------------------------------------------------------ run
    def run(self, program: Program, module: Path, cells: Sequence[HuntCell], workdir: Path,
            jobs: int = 1) -> Iterator[tuple[HuntCell, CellOutcome]]:
        """Record and judge ``cells`` of ``program`` (its query module ``module``) under ``workdir``.

        Parameters
        ----------
        program : Program
            The drawn program.
        module : Path
            Its rendered query module.
        cells : Sequence of HuntCell
            The cells to run.
        workdir : Path
            The folder the recordings go to.
        jobs : int, optional
            Parallel recordings.

        Returns
        -------
        iterator of (HuntCell, CellOutcome)
            Each cell with its outcome, as it ends.
        """
        self.jobs = max(1, jobs)
        work = Path(workdir)
        free = [c for c in cells if c.params.get("kind") == FREE]
        rest = [c for c in cells if c.params.get("kind") != FREE]
        from rollcheck.infra.matrix.cost import Usage

        # what every failure-free cell shares: the reference release's run (charged to the first)
        shared_usage, t0 = Usage(), time.monotonic()
        with self._runner.metering(shared_usage):
            release_out = self._release_output(module, work) if free else None
        shared_usage.wall_seconds = time.monotonic() - t0
        traces: dict[str, Path | None] = {}
        stop: CellOutcome | None = None
        for c in free:
            if stop is not None:
                yield c, stop
                continue
            prov = str(c.params["provider"])
            trace = work / "free" / f"{prov}.jsonl"
            usage, t0 = shared_usage, time.monotonic()
            shared_usage = Usage()
            with self._runner.metering(usage):
                rc, log = self._record_free(module, prov, trace, release=self.engine_version)
            usage.wall_seconds += time.monotonic() - t0
            if rc == 0:
                got = outcome_of_free(trace, release_out)
                if self.engine_version and self.reference_version and release_out is None:
                    got.checks["release-differential"] = "unchecked"
                    got.verdict = "violated" if got.verdict == "violated" else "inconclusive"
                traces[prov] = trace
            else:
                got = self._failed_free(module, prov, work / "free", log)
                traces[prov] = None
                if got.verdict in ("rejected", "violated", "error") or c is free[0]:
                    stop = got if got.verdict == "rejected" else CellOutcome(
                        "inconclusive", {}, detail=f"not run: the failure-free run on {prov} did not finish")
            got.seconds, got.cpu_seconds = round(usage.wall_seconds, 1), round(usage.cpu_seconds, 1)
            got.shared = {**got.shared, **usage.notes}
            yield c, got
        if stop is not None and stop.verdict == "rejected":
            for c in rest:
                yield c, stop
            return
        yield from self._run_faults(module, [c for c in rest if c.params.get("kind") == FAULT], work, traces)
        yield from self._differentials(program, module, [c for c in rest if c.params.get("kind") != FAULT],
                                       work, traces)

    def _run_faults(self, module: Path, cells: Sequence[HuntCell], work: Path,
                    traces: Mapping[str, Path | None]) -> Iterator[tuple[HuntCell, CellOutcome]]:
        from rollcheck.spark_replay.matrix.run import run_matrix

        groups: dict[int, list[tuple[HuntCell, FaultSchedule]]] = {}
        for c in cells:
            s = FaultSchedule.from_params(c.params)
            if traces.get(s.provider) is None:
                yield c, CellOutcome("inconclusive", {}, detail=f"not run: the failure-free run on {s.provider} "
                                                                "did not finish")
                continue
            groups.setdefault(s.batch, []).append((c, s))
        for batch, group in sorted(groups.items()):
            planned = [s.cell(str(module), self.engine_version) for _, s in group]
            opts = self._options(module, work / f"matrix-b{batch}", batch,
                                 kill_points=sorted({s.kill_point for _, s in group if s.kill_point}),
                                 retry_schedules=sorted({s.schedule for _, s in group if s.schedule}),
                                 cluster="local-standalone" if any(s.failure == "executor" for _, s in group) else None)
            opts = replace(opts, providers=sorted({s.provider for _, s in group}),
                           failures=sorted({s.failure for _, s in group}))
            doc = run_matrix(opts, cells=planned, warm_pool=self._warm)
            by_id = {str(e.get("id")): e for e in doc.get("cells") or []}
            for (c, _s), cell in zip(group, planned, strict=True):
                entry = by_id.get(cell.ident)
                yield c, (outcome_of_entry(entry) if entry is not None
                          else CellOutcome("inconclusive", {}, detail="the matrix returned no entry for the cell"))

    def _differentials(self, program: Program, module: Path, cells: Sequence[HuntCell], work: Path,
                       traces: Mapping[str, Path | None]) -> Iterator[tuple[HuntCell, CellOutcome]]:
        from rollcheck.spark_replay.hunt.oracles import (
            partitioning_differential,
            provider_differential,
        )
        from rollcheck.spark_replay.hunt.outcomes import verdict_of

        for c in cells:
            if c.params.get("kind") == PROVIDERS_DIFF:
                runs = {p: traces.get(p) for p in c.params.get("providers") or self.providers}
                check = provider_differential(runs, program.operators, program.text)
                st = check.status.value.replace("-", "_")
                yield c, CellOutcome(verdict_of({check.name: st}), {check.name: st}, detail=check.detail[:400],
                                     attributed_to="engine" if st == "violated" else None)
                continue
            prov = str(c.params.get("provider") or self.providers[0])
            n = int(c.params.get("shuffle_partitions") or 1)
            trace = work / "partitions" / f"{prov}-{n}.jsonl"
            if traces.get(prov) is None:
                yield c, CellOutcome("inconclusive", {}, detail=f"not run: no failure-free run on {prov}")
                continue
            from rollcheck.infra.matrix.cost import Usage

            usage, t0 = Usage(), time.monotonic()
            with self._runner.metering(usage):
                rc, log = self._record_free(module, prov, trace, release=self.engine_version, partitions=n)
            check = partitioning_differential(traces[prov], trace if rc == 0 else None, program.operators,
                                              program.text)
            st = check.status.value.replace("-", "_")
            got = (CellOutcome("inconclusive", {check.name: st}, detail=_last_line(log)[:400]) if rc != 0
                   else outcome_of_free(trace, None, {check.name: st}))
            got.seconds, got.cpu_seconds = round(time.monotonic() - t0, 1), round(usage.cpu_seconds, 1)
            got.shared = {**got.shared, **usage.notes}
            yield c, got

    # ------------------------------------------------------------------ findings
    def confirm(self, module: Path, cell: HuntCell, workdir: Path) -> CellOutcome:
        """Run ``cell`` once more on ``module`` (the minimiser's confirmation) and read its outcome.

        Parameters
        ----------
        module : Path
            The (minimised) query module.
        cell : HuntCell
            The cell to run again.
        workdir : Path
            A folder emptied and used for the run.

        Returns
        -------
        CellOutcome
            The cell's outcome (inconclusive when it did not run).
        """
        work = Path(workdir)
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
        program = Program(id=Path(module).stem, text=Path(module).read_text(encoding="utf-8"), operators=(), spec={})
        kind = cell.params.get("kind")
        needs = (list(cell.params.get("providers") or self.providers) if kind == PROVIDERS_DIFF
                 else [] if kind == FREE else [str(cell.params.get("provider") or self.providers[0])])
        run = [HuntCell(f"{p}/none", {"kind": FREE, "provider": p}) for p in needs] + [cell]
        got = [o for c, o in self.run(program, Path(module), run, work, self.jobs) if c.key == cell.key]
        return got[-1] if got else CellOutcome("inconclusive", {}, detail="the cell was not run")

    def reproducer(self, program: Program, cell: HuntCell, outcome: CellOutcome, dest: Path) -> Path:
        """Write the standalone reproducer of a finding to ``dest``.

        Parameters
        ----------
        program : Program
            The program of the finding.
        cell : HuntCell
            The cell that found it.
        outcome : CellOutcome
            Its outcome.
        dest : Path
            The script file to write.

        Returns
        -------
        Path
            ``dest``.
        """
        from rollcheck.spark_replay.hunt.reproduce import write_reproducer

        return write_reproducer(program, cell, outcome, dest, seed=self.seed)

    def run_reproducer(self, script: Path, release: str | None) -> str:
        """Run a reproducer script on ``release`` (None: the hunted one) and name what it showed.

        Parameters
        ----------
        script : Path
            The reproducer script.
        release : str or None
            The pyspark release to run it on; None for the hunted one.

        Returns
        -------
        str
            ``reproduced``, ``not reproduced`` or ``could not run: ...``.
        """
        from rollcheck.spark_replay.hunt.reproduce import run_script

        return run_script(script, release, self.cell_timeout)

    def newer_releases(self) -> list[str]:
        """The newer releases a finding's reproducer is run on (asked once)."""
        from rollcheck.spark_replay.hunt.reproduce import newer_releases

        if self._newer is None:
            self._newer = newer_releases(self.engine_version)
        return list(self._newer)

    def close(self) -> None:
        """Stop the warm drivers."""
        self._runner.stop()
        self._warm.close()

