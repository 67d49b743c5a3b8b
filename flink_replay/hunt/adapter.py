"""Flink's side of the hunt: :class:`FlinkHuntAdapter` (``rollcheck flink hunt``).

Programs come from :mod:`rollcheck.flink_replay.hunt.grammar` (DataStream and Table/SQL jobs of
the job-module contract), cells from :mod:`rollcheck.flink_replay.hunt.cells` (planning, drawn
fault schedules over the backends, a rescaled restore, the provider and partitioning
differentials). A fault cell is recorded and replayed by the ordinary Flink matrix (its adapter
and the matrix core's :func:`~rollcheck.infra.matrix.run.decide_cell`), so every check of a
``flink matrix`` cell is an oracle here too (exactly-once against the failure-free run, recovery,
state restored once, ``batch-equivalent``, and with ``engine_version`` ``release-differential``).

Examples
--------
>>> a = FlinkHuntAdapter(failures=["task"], backends=["hashmap"], checkpoints=["aligned"])
>>> p = a.generate(1, 0, {})
>>> [c.key for c in a.cells(p, 1)][0]
'plan'
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Any

from typing_extensions import override

from rollcheck.flink_replay.hunt.cells import (
    FAILURE_KINDS,
    PlacedAdapter,
    differential,
    hunt_cells,
    matrix_cell,
    outcome_of_entry,
    reference_table,
)
from rollcheck.flink_replay.hunt.grammar import program as draw_program
from rollcheck.flink_replay.hunt.grammar import vocabulary as grammar_vocabulary
from rollcheck.flink_replay.hunt.repro import write_differential_reproducer
from rollcheck.flink_replay.hunt.shrink import shrink as shrink_program
from rollcheck.infra.hunt.adapter import CellOutcome, HuntAdapter, HuntCell, Program
from rollcheck.infra.matrix import ChildRunner
from rollcheck.infra.matrix.reproducer import run_reproducer as run_script
from rollcheck.infra.matrix.run import decide_cell
from rollcheck.pyimpl.errors import InconclusiveError, InvalidInputError

__all__ = ["FlinkHuntAdapter", "newest_releases", "PLAN_TIMEOUT_S"]

#: The most seconds planning one program may take (a JVM start included).
PLAN_TIMEOUT_S = 300.0
_PIP_TIMEOUT_S = 30.0


def _digest(module: Path) -> str:
    import hashlib

    return hashlib.sha256(Path(module).read_bytes()).hexdigest()


def newest_releases(versions: Sequence[str], line_of: str | None) -> list[str]:
    """[the newest patch of ``line_of``'s X.Y line, the newest release], deduplicated.

    Parameters
    ----------
    versions : sequence of str
        The releases available (``X.Y.Z``).
    line_of : str or None
        The release whose X.Y line is asked for; None: none.

    Returns
    -------
    list of str
        At most two releases; empty without any.

    Examples
    --------
    >>> newest_releases(["2.3.0", "2.2.1", "2.2.0", "1.20.3"], "2.2.0")
    ['2.2.1', '2.3.0']
    >>> newest_releases([], "2.2.0")
    []
    """
    def parse(v: str) -> tuple[int, ...] | None:
        try:
            return tuple(int(x) for x in v.strip().split("."))
        except ValueError:
            return None

    known = sorted((p, v.strip()) for v in versions if (p := parse(v)) is not None)
    if not known:
        return []
    out = []
    line = parse(line_of) if line_of else None
    if line is not None:
        same = [v for p, v in known if p[:2] == line[:2]]
        if same:
            out.append(same[-1])
    out.append(known[-1][1])
    return list(dict.fromkeys(out))


class FlinkHuntAdapter(HuntAdapter):
    """The hunt on PyFlink (module docstring).

    Parameters
    ----------
    engine_version, reference_version : str, optional
        The apache-flink release hunted and the release-differential's reference (None: the pinned).
    failures, backends, checkpoints : sequence of str, optional
        What fault schedules draw from (default: every failure kind, hashmap and rocksdb, both modes).
    seed : int
        The seed handed to the modules' ``records(seed)``.
    out : path, optional
        The hunt's folder (unused here: every run gets its own ``workdir``).
    jobs : int
        Cells recorded at a time.
    rate, timeout_s : float
        The source's records per second and the limit of one recording.
    """

    engine = "flink"

    def __init__(self, *, engine_version: str | None = None, reference_version: str | None = None,
                 failures: Sequence[str] | None = None, backends: Sequence[str] | None = None,
                 checkpoints: Sequence[str] | None = None, seed: int = 0, out: str | Path | None = None,
                 jobs: int = 1, rate: float = 150.0, timeout_s: float = 600.0) -> None:
        self.engine_version = engine_version
        self.reference_version = reference_version
        self.failures = list(failures or FAILURE_KINDS)
        self.backends = list(backends or ("hashmap", "rocksdb"))
        self.checkpoints = list(checkpoints or ("aligned", "unaligned"))
        self.seed, self.out, self.jobs = seed, out, max(1, int(jobs))
        self.rate, self.timeout_s = rate, timeout_s
        self.runner = ChildRunner()

    def release(self) -> str:
        """The hunted apache-flink release by its number (the pinned one when none was asked).

        So that a newer release equal to it is not run twice.
        """
        from rollcheck.flink_replay.releases import PINNED

        return self.engine_version or PINNED

    # -- programs ------------------------------------------------------------------------------
    @override
    def vocabulary(self) -> list[str]:
        return grammar_vocabulary()

    @override
    def generate(self, seed: int, index: int, coverage: Mapping[str, int]) -> Program:
        return draw_program(seed, index, coverage, self.engine_version)

    @override
    def cells(self, program: Program, seed: int) -> list[HuntCell]:
        return hunt_cells(program.id, seed, self.failures, self.backends, self.checkpoints)

    @override
    def shrink(self, program: Program) -> Iterator[Program]:
        return shrink_program(program)

    # -- running -------------------------------------------------------------------------------
    def _matrix_adapter(self) -> PlacedAdapter:
        return PlacedAdapter(rate=self.rate, seed=self.seed, timeout_s=self.timeout_s, shrink_runs=0, minimise=False,
                             reference_version=self.reference_version if self.engine_version else None)

    def plan(self, module: Path, workdir: Path) -> CellOutcome:
        """Plan ``module`` with Flink without running it (:mod:`rollcheck.flink_replay.hunt.plan`).

        Parameters
        ----------
        module : Path
            The program's module.
        workdir : Path
            A folder for the plan's files.

        Returns
        -------
        CellOutcome
            The ``plan`` cell's outcome.
        """
        from rollcheck.flink_replay.environment import find_flink

        t0 = time.perf_counter()
        try:
            python = find_flink(self.engine_version).python
        except (InconclusiveError, InvalidInputError) as e:
            return CellOutcome("inconclusive", {"planned": "unchecked"}, attributed_to="environment", detail=str(e))
        workdir.mkdir(parents=True, exist_ok=True)
        result = workdir / f"{module.stem}.plan.jsonl"
        result.unlink(missing_ok=True)
        script = Path(__file__).with_name("plan.py")
        rc, _ = self.runner.run([str(python), "-I", str(script), str(result), str(module.resolve())], PLAN_TIMEOUT_S,
                                workdir / f"{module.stem}.plan.log")
        seconds = round(time.perf_counter() - t0, 1)
        try:
            line = json.loads(result.read_text().splitlines()[0])
        except (OSError, IndexError, ValueError):
            return CellOutcome("inconclusive", {"planned": "unchecked"}, attributed_to="environment", seconds=seconds,
                               detail=f"planning ended without a result (exit {rc}; log {result.with_suffix('.log')})")
        status, exc, detail = line["status"], line.get("exception"), str(line.get("detail") or "")
        if status == "planned":
            return CellOutcome("conformant", {"planned": "held"}, seconds=seconds, detail="Flink planned the job")
        if status == "rejected":
            return CellOutcome("rejected", {"planned": "not_applicable"}, exception=exc, seconds=seconds,
                               detail=f"Flink refused the program: {detail}"[:300])
        if status == "error":  # Flink failed on a program it did not refuse: its own exception
            return CellOutcome("violated", {"planned": "violated"}, exception=exc, attributed_to="engine",
                               seconds=seconds, detail=f"Flink failed while planning the job: {detail}"[:300])
        return CellOutcome("error", {"planned": "unchecked"}, exception=exc, attributed_to="user", seconds=seconds,
                           detail=f"the generated module failed: {detail}"[:300])

    def _fault(self, module: Path, params: Mapping[str, Any], workdir: Path) -> CellOutcome:
        cell = matrix_cell(str(module), params, self.engine_version)
        t0 = time.perf_counter()
        try:
            entry = decide_cell(self._matrix_adapter(), cell, None, self.runner, workdir)
        except InvalidInputError as e:  # the generated module failed inside Flink: the program's fault
            return CellOutcome("error", {}, attributed_to="user", detail=str(e).splitlines()[0][:300],
                               seconds=round(time.perf_counter() - t0, 1))
        trace = self._trace_of(module, params, workdir)
        if trace.is_file():  # which program's run it is: a differential reuses it only for the same text
            trace.with_name(trace.name + ".program").write_text(_digest(module))
        return outcome_of_entry(entry)

    def _trace_of(self, module: Path, params: Mapping[str, Any], workdir: Path) -> Path:
        return workdir / f"{matrix_cell(str(module), params, self.engine_version).ident}.jsonl"

    def _diff(self, cell: HuntCell, module: Path, workdir: Path, done: Mapping[str, CellOutcome]) -> CellOutcome:
        """A differential cell: the failure-free final tables of the fault cells it names, compared.

        A fault cell not run here, nor in an earlier hunt in ``workdir``, is run first.
        """
        tables: dict[str, dict[str, Any] | None] = {}
        for name, part in (cell.params.get("compare") or {}).items():
            trace = self._trace_of(module, part["params"], workdir)
            mark = trace.with_name(trace.name + ".program")
            fresh = trace.is_file() and mark.is_file() and mark.read_text() == _digest(module)
            if part["key"] not in done and not fresh:  # not run here, nor for this program text before
                self._fault(module, part["params"], workdir)
            tables[name] = reference_table(trace)
        return differential(str(cell.params["check"]), tables)

    @override
    def run(self, program: Program, module: Path, cells: Sequence[HuntCell], workdir: Path,
            jobs: int = 1) -> Iterator[tuple[HuntCell, CellOutcome]]:
        workdir.mkdir(parents=True, exist_ok=True)
        module = Path(module)
        planned = self.plan(module, workdir)
        plan_cells = [c for c in cells if c.params.get("kind") == "plan"]
        for c in plan_cells:
            yield c, planned
        rest = [c for c in cells if c.params.get("kind") != "plan"]
        if planned.verdict != "conformant":
            verdict = "error" if planned.verdict == "violated" else planned.verdict  # the plan cell is the finding
            for c in rest:  # nothing more can run: every cell says why
                yield c, CellOutcome(verdict, {}, exception=planned.exception,
                                     attributed_to=planned.attributed_to, detail=f"not run: {planned.detail}"[:300])
            return
        done: dict[str, CellOutcome] = {}
        faults = [c for c in rest if c.params.get("kind") == "fault"]
        with ThreadPoolExecutor(max_workers=max(1, min(jobs, len(faults) or 1))) as pool:
            futures = {pool.submit(self._fault, module, c.params, workdir): c for c in faults}
            for fut in as_completed(futures):
                c = futures[fut]
                done[c.key] = fut.result()
                yield c, done[c.key]
        for c in rest:
            if c.params.get("kind") == "diff":
                yield c, self._diff(c, module, workdir, done)

    def confirm(self, module: Path, cell: HuntCell, workdir: Path) -> CellOutcome:
        """The cell again, from scratch, through the Flink matrix's adapter and the matrix core.

        Parameters
        ----------
        module : Path
            The minimised program's module.
        cell : HuntCell
            The cell whose configuration it runs in.
        workdir : Path
            A folder for the run's files.

        Returns
        -------
        CellOutcome
            The outcome of that matrix cell.
        """
        from rollcheck.infra.matrix import run_matrix

        workdir.mkdir(parents=True, exist_ok=True)
        kind = cell.params.get("kind")
        if kind == "plan":
            return self.plan(Path(module), workdir)
        if kind == "fault":
            mcell = matrix_cell(str(module), cell.params, self.engine_version)
            doc = run_matrix(self._matrix_adapter(), [mcell], workdir)
            return outcome_of_entry(doc["cells"][0])
        return self._diff(cell, Path(module), workdir, {})

    # -- findings ------------------------------------------------------------------------------
    @override
    def reproducer(self, program: Program, cell: HuntCell, outcome: CellOutcome, dest: Path) -> Path:
        import tempfile

        from rollcheck.flink_replay.checks.user_replay import replay_job
        from rollcheck.flink_replay.reproducer import expected_of, write_reproducer

        dest.parent.mkdir(parents=True, exist_ok=True)
        if cell.params.get("kind") != "fault" or not outcome.trace:
            return write_differential_reproducer(program, cell, dest)
        with tempfile.TemporaryDirectory() as tmp:  # the script carries the job's text: no file beside it
            job = Path(tmp) / f"{program.id}.py"
            job.write_text(program.text)
            mcell = matrix_cell(str(job), cell.params, self.engine_version)
            cfg = self._matrix_adapter()._config(mcell)
            report = replay_job(outcome.trace)
            with open(outcome.trace) as f:
                header = json.loads(f.readline())
            fail_at = int((header.get("config") or {}).get("fail_at_record") or cfg.get("fail_at_record") or 1)
            violated = {name for name, state in outcome.checks.items() if state == "violated"}
            return write_reproducer(mcell, cfg, dest, report, fail_at=fail_at,
                                    expected=expected_of(outcome.trace, violated))

    @override
    def run_reproducer(self, script: Path, release: str | None) -> str:
        from rollcheck.flink_replay.environment import find_flink
        from rollcheck.flink_replay.reproducer import SHOWS

        try:
            python = find_flink(release).python
        except (InconclusiveError, InvalidInputError) as e:
            return f"could not run: {e}"
        log = script.with_name(script.stem + f".{release or 'pinned'}.log")
        res = run_script([str(python), "-I", str(script)], self.runner.run, self.timeout_s, log, shows=SHOWS)
        if res["exit"] is None:
            return f"could not run: no exit within {self.timeout_s:g} s (log {log})"
        if res["reproduced"]:
            return "reproduced"
        return "not reproduced" if res["exit"] in (0, 1) else f"could not run: exit {res['exit']} (log {log})"

    def newer_releases(self) -> list[str]:
        """From ``pip index versions apache-flink`` (time-bounded; offline: [])."""
        from rollcheck.flink_replay.releases import PINNED

        try:
            p = subprocess.run([sys.executable, "-m", "pip", "index", "versions", "apache-flink",
                                "--disable-pip-version-check"], capture_output=True, text=True,
                               timeout=_PIP_TIMEOUT_S, check=False)
        except (OSError, subprocess.TimeoutExpired):
            return []
        line = next((x for x in p.stdout.splitlines() if x.strip().startswith("Available versions:")), "")
        versions = [v for v in line.split(":", 1)[-1].split(",") if v.strip()]
        return newest_releases(versions, self.engine_version or PINNED)

    @override
    def close(self) -> None:
        self.runner.stop()
