"""A Spark hunt finding's standalone reproducer, its runs on other releases, and the newer releases.

- :func:`write_reproducer`: the matrix's reproducer script
  (:func:`rollcheck.spark_replay.matrix.reproducer.reproducer_source`, pyspark only, no rollcheck import)
  for the program and the cell: a fault cell's task, sink or kill failure at its batch; a
  failure-free or differential cell's run with a task failure in the last batch, compared with the
  final table an oracle that does not trust the engine gives (the reference release's run, or the
  batch job), where one is known. Other failures (executor, retry, twice, during-recovery) have no
  standalone script, as in the matrix.
- :func:`run_script`: run it with a release's interpreter, time-bounded: ``reproduced`` (it exited
  1: it showed the rows), ``not reproduced`` (0) or ``could not run: <why>``.
- :func:`newer_releases`: the newest patch of the hunted line and the newest release, from
  ``pip index versions pyspark`` (time-bounded; offline: none).

Examples
--------
>>> _newest(["4.0.1", "3.5.7", "3.5.10", "4.1.0rc1"], "3.5")
'3.5.10'
>>> _newest(["4.0.1", "3.5.7"], None)
'4.0.1'
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from rollcheck.infra.hunt.adapter import CellOutcome, HuntCell, Program

__all__ = ["write_reproducer", "run_script", "newer_releases", "PIP_TIMEOUT"]

#: Seconds ``pip index versions`` may take.
PIP_TIMEOUT = 30.0
_RELEASE = re.compile(r"^\d+\.\d+\.\d+$")


def _batches(program: Program, seed: int) -> list[Any]:
    from rollcheck.spark_replay.query.module import SINGLE_SOURCE
    from rollcheck.spark_replay.query.record import load_query

    with tempfile.TemporaryDirectory(prefix="rollcheck-hunt-") as tmp:
        path = Path(tmp) / f"{program.id}.py"
        path.write_text(program.text, encoding="utf-8")
        uq = load_query(str(path), 60.0)
        data = uq.batches(seed)
        return list(data) if uq.multi else [b.get(SINGLE_SOURCE, []) for b in data]


def write_reproducer(program: Program, cell: HuntCell, outcome: CellOutcome, dest: Path, *, seed: int) -> Path:
    """Write the standalone reproducer of ``program``'s finding in ``cell`` to ``dest``.

    Parameters
    ----------
    program : Program
        The program of the finding.
    cell : HuntCell
        The cell that found it.
    outcome : CellOutcome
        Its outcome.
    dest : Path
        The script file.
    seed : int
        The hunt's seed (the program's input).

    Returns
    -------
    Path
        ``dest``.

    Raises
    ------
    ValueError
        A failure no standalone script strikes (executor, retry, twice, during-recovery).
    """
    from rollcheck.pyimpl.patternio import atomic_write_text
    from rollcheck.spark_replay.matrix.reproducer import expected_table, reproducer_source

    rows = _batches(program, seed)
    p = cell.params
    failure, kill_point = "task", None
    fail_at = max(0, len(rows) - 1)
    if p.get("kind") == "fault":
        failure, kill_point, fail_at = str(p["failure"]), p.get("kill_point"), int(p["batch"])
        if failure not in ("task", "sink", "kill"):
            raise ValueError(f"no standalone reproducer for the {failure} failure: run the cell again with "
                             "spark matrix")
    violated = {n for n, s in outcome.checks.items() if s == "violated"}
    expected = (expected_table(Path(outcome.trace), violated)
                if outcome.trace and Path(outcome.trace).is_file() else None)
    text = reproducer_source(program.text, rows, failure=failure, kill_point=kill_point, fail_at=fail_at,
                             state_store=str(p.get("provider") or "hdfs"),
                             title=f"{program.id} in hunt cell {cell.key}", reason=outcome.detail or "",
                             script=Path(dest).name, shuffle_partitions=int(p.get("shuffle_partitions") or 2),
                             expected=expected)
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(dest, text)
    return dest


def run_script(script: Path, release: str | None, timeout: float) -> str:
    """Run a reproducer with ``release``'s interpreter (None: the pinned one) for at most ``timeout`` s.

    Parameters
    ----------
    script : Path
        The reproducer.
    release : str or None
        The pyspark release; None for the pinned one.
    timeout : float
        The limit (s).

    Returns
    -------
    str
        ``reproduced``, ``not reproduced`` or ``could not run: ...``.
    """
    from rollcheck.spark_replay.matrix.reproducer import reproducer_python

    try:
        python = reproducer_python(release)
    except Exception as e:  # noqa: BLE001 - a release that cannot be made: the run could not happen
        return f"could not run: pyspark {release}: {e}"
    work = Path(tempfile.mkdtemp(prefix="rollcheck-repro-"))
    proc = subprocess.Popen([str(python), "-I", str(script), str(work / "run")], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return f"could not run: no end within {timeout:g} s"
    if proc.returncode == 1:
        return "reproduced"
    if proc.returncode == 0:
        return "not reproduced"
    tail = (err or out or "").strip().splitlines()
    return f"could not run: exit {proc.returncode}" + (f": {tail[-1][:200]}" if tail else "")


def _newest(versions: list[str], line: str | None) -> str | None:
    ok = [v for v in versions if _RELEASE.match(v) and (line is None or v.startswith(line + "."))]
    return max(ok, key=lambda v: tuple(int(x) for x in v.split("."))) if ok else None


def newer_releases(engine_version: str | None) -> list[str]:
    """The newest patch of ``engine_version``'s line and the newest release that rollcheck supports.

    Deduplicated; empty when the package index cannot be asked.
    """
    from rollcheck.pyimpl.errors import InvalidInputError
    from rollcheck.spark_replay.releases import parse_release, pinned_release

    try:
        res = subprocess.run([sys.executable, "-m", "pip", "index", "versions", "pyspark"], capture_output=True,
                             text=True, timeout=PIP_TIMEOUT)
    except (OSError, subprocess.TimeoutExpired):
        return []
    m = re.search(r"Available versions:\s*(.+)", res.stdout or "")
    if res.returncode != 0 or not m:
        return []
    versions = []
    for v in (x.strip() for x in m.group(1).split(",")):
        try:
            parse_release(v)
        except InvalidInputError:
            continue
        versions.append(v)
    line = ".".join((engine_version or pinned_release()).split(".")[:2])
    found = [_newest(versions, line), _newest(versions, None)]
    return list(dict.fromkeys(v for v in found if v))
