"""A standalone reproducer for a Flink matrix finding: a script that uses only pyflink.

The script carries the job (the user's module source, or a plain keyed count standing for the
built-in word count), runs it once without a failure and once with the failure of the cell (same
state backend, checkpoint mode, parallelism and rescaling), reads both transactional outputs and
prints the rows that were lost or duplicated; it exits 1 when it shows the problem, 0 when the run
was clean. It imports nothing of rollcheck, so it can be attached to a report to the Flink project.

A finding of an oracle that does not trust Flink's own failure-free run (``release-differential``,
``batch-equivalent``; :mod:`rollcheck.flink_replay.checks.oracles`) is wrong with or without the failure,
so the two runs agree and show nothing. Its script also carries the expected final table of its
input (:func:`expected_of`: the failure-free run on the reference release, or the same job in
BATCH mode) and compares the failure-free run with it per KEY; a failure-free run that fails is
shown too (``JOB FAILED``). Run with the affected release's pyflink it exits 1, with the fixed one 0.

A TaskManager kill becomes a task failure in the script (its MiniCluster is one process); the
failure strikes at the same record, after two checkpoint intervals. The script carries the whole
input and by default runs the first N records, N being the fewest with which rollcheck's re-runs
still showed the finding (:func:`rollcheck.flink_replay.matrix.shrink_finding`); ``--records N``
overrides it. A job with several input streams (``SOURCES``) gets every stream's records laid out
in one sequence as rollcheck's recorder lays them out (merged in proportion, the streams the shrink
left out dropped first) and split into one stream per name.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rollcheck.infra.matrix.finding import ExpectedTable
from rollcheck.infra.templates import fill_template, read_template

__all__ = ["write_reproducer", "expected_of", "WORDCOUNT_SOURCE", "SHOWS", "TEMPLATE_PACKAGE", "TEMPLATE_FILE"]

#: How the script's lines that show a finding begin (what the matrix looks for in its output).
SHOWS = ("KEY ", "JOB FAILED")

WORDCOUNT_SOURCE = '''
from pyflink.common import Types
from pyflink.datastream.functions import KeyedProcessFunction
from pyflink.datastream.state import ValueStateDescriptor

KEY = [0]


def records(seed):
    return [(f"w{v % 8}", v) for v in range(1, 1201)]


class Count(KeyedProcessFunction):
    def open(self, ctx):
        self.n = ctx.get_state(ValueStateDescriptor("n", Types.LONG()))

    def process_element(self, value, ctx):
        n = (self.n.value() or 0) + 1
        self.n.update(n)
        yield value[0], n


def job(env, source):
    return source.key_by(lambda r: r[0], key_type=Types.STRING()).process(Count())
'''

#: The reproducer script: a module of its own (``templates/flink_reproducer.py``, linted and
#: type-checked as such) whose placeholder lines :func:`write_reproducer` replaces whole.
TEMPLATE_PACKAGE = "rollcheck.flink_replay.templates"
TEMPLATE_FILE = "flink_reproducer.py"
_FILLED = "  # filled by rollcheck"
_DOC_LINE = '"""Reproducer of a Flink matrix finding (rollcheck writes its account here)."""'


def _docstring(*, title: str, backend: str, checkpoints: str, interval: int, par: int, rescale_text: str,
               failure: str, fail_at: int, finding: str, name: str) -> str:
    """The script's docstring: what it runs and what rollcheck saw."""
    return (f'"""Standalone reproducer (pyflink only): {title}\n\n'
            f"Configuration: state backend {backend}, {checkpoints} checkpoints every {interval} ms, parallelism\n"
            f"{par}{rescale_text}, failure: {failure} at record {fail_at}.\n"
            f"Seen by rollcheck: {finding}\n\n"
            f"Run with the Python of a PyFlink installation:  python {name} [--records N]\n"
            "Exit 1: the output after the failure differs from the failure-free output, or the failure-free\n"
            "output differs from EXPECTED (both printed); 0: neither.\n"
            '"""')


def expected_of(trace: Path | str | None, violated: set[str] | frozenset[str]) -> dict[str, Any] | None:
    """The final table the failure-free run in ``trace`` should have given, from an oracle that does not trust it.

    For a finding whose violated checks are ``violated``; None when the finding shows in the run
    with the failure (or the trace tells no such table).

    ``release-differential``: the failure-free run on the reference release
    (``flink.release_reference``, when it finished); else ``batch-equivalent``: the same job in
    BATCH mode (``flink.batch_output``), unless several of its subtasks emitted rows of one KEY.

    Returns
    -------
    dict or None
        The core's :class:`~rollcheck.infra.matrix.finding.ExpectedTable` as JSON: ``{"from": words,
        "key": the KEY's positions in a row (the trace header's ``key``), "columns": None, "rows":
        [row]}``, a row per KEY (the output tuple as the recorder writes it, a JSON list).
    """
    from rollcheck.flink_replay.checks.oracles import batch_table, final_table
    from rollcheck.pyimpl.traces.reader import read_events

    if trace is None or not Path(trace).is_file():
        return None
    lines, events = read_events(trace)
    key = lines.header.get("key")
    if not isinstance(key, list):  # a user's job's trace names its KEY's positions
        return None

    def table(source: str, rows: dict[str, str]) -> dict[str, Any]:
        return ExpectedTable(source, tuple(int(i) for i in key), None,
                             tuple(tuple(json.loads(r)) for r in rows.values())).to_json()

    kinds = {str(e.get("kind")): e for e in events if e.get("kind") in ("flink.release_reference", "flink.batch_output")}
    rel = kinds.get("flink.release_reference")
    if "release-differential" in violated and rel is not None and rel.get("final_state") == "FINISHED":
        return table(f"the failure-free run on apache-flink {rel.get('engine_version')}",
                     final_table(list(rel.get("lines") or [])))
    batch = kinds.get("flink.batch_output")
    if "batch-equivalent" in violated and batch is not None and batch.get("final_state") == "FINISHED":
        rows, split = batch_table(batch.get("subtasks") or [])
        if not split:
            return table("the same job in Flink's BATCH mode", rows)
    return None


def write_reproducer(cell: Any, cfg: dict[str, Any], path: Path, report: Any, *, records: int | None = None,
                     fail_at: int | None = None, expected: dict[str, Any] | None = None,
                     drop: list[str] | None = None) -> Path:
    """Write the standalone script for ``cell`` (a :class:`rollcheck.flink_replay.matrix.Cell`).

    ``records`` the first records it runs by default (None: all), ``fail_at`` the record the
    failure strikes at (default: the configuration's), ``expected`` the final table its failure-free
    run must give (:func:`expected_of`: the core's ``ExpectedTable`` as JSON), ``drop`` the sources
    of a job with several input streams it leaves out (a finding shrunk without them).
    """
    source = WORDCOUNT_SOURCE if cell.module == "wordcount" else Path(cell.module).read_text()
    table = None if expected is None else ExpectedTable.from_json(expected)
    rc = report.root_cause
    finding = f"{rc.name}: {rc.detail}" if rc is not None else "not conformant"
    rescale = tuple(cfg["rescale"]) if cfg.get("rescale") else None
    interval, par = int(cfg["interval_ms"]), int(cfg["parallelism"])
    fail_at = int(fail_at or cfg.get("fail_at_record") or 1)
    doc = _docstring(title=f"{cell.job} under a {cell.failure} failure", backend=cell.backend,
                     checkpoints=cell.checkpoints, interval=interval, par=par,
                     rescale_text=f" (restored at {rescale[1]})" if rescale else "", failure=cell.failure,
                     fail_at=fail_at, finding=finding.replace('"""', "'''")[:400], name=path.name)
    records_text = f"shrunk by rollcheck's re-runs to the first {records} records" if records else "all records"
    drop_text = ("left out by rollcheck's re-runs, which still showed the finding without them" if drop
                 else "none")
    expected_from = table.source if table is not None else "nowhere: the finding shows in the run with the failure"
    text = fill_template(read_template(TEMPLATE_PACKAGE, TEMPLATE_FILE), {
        _DOC_LINE: doc,
        "JOB = None" + _FILLED: f"JOB = {source!r}",
        "BACKEND, CHECKPOINTS, INTERVAL_MS, PAR, RESCALE = None, None, None, None, None" + _FILLED:
            f"BACKEND, CHECKPOINTS, INTERVAL_MS, PAR, RESCALE = {cell.backend!r}, {cell.checkpoints!r}, {interval}, "
            f"{par}, {rescale!r}",
        "FAIL_AT, SEED, RATE = None, None, None" + _FILLED:
            f"FAIL_AT, SEED, RATE = {fail_at}, {int(cfg.get('seed', 0))}, {float(cfg.get('rate', 400.0))}",
        "RECORDS = None" + _FILLED: f"RECORDS = {records!r}  # {records_text}",
        "# (None: only the two runs are compared), from EXPECTED_FROM (filled by rollcheck).":
            f"# (None: only the two runs are compared), from {expected_from}.",
        "EXPECTED = None" + _FILLED: "EXPECTED = " + (table.to_python() if table is not None else "None"),
        "DROP = None" + _FILLED: f"DROP = {list(drop or [])!r}  # {drop_text}",
    })
    tmp = path.with_name(path.name + ".partial")
    tmp.write_text(text)
    tmp.replace(path)
    return path
