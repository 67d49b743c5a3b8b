"""The Spark chaos matrix: query modules × state store providers × failures × kill points.

``rollcheck spark matrix`` (``docs/spark-matrix.md``) runs one recorded and replayed run per
*cell*. A *configuration* is a query module with a state store provider (``hdfs``, ``rocksdb``,
``rocksdb-changelog``); a *column* is a failure: ``task``, ``sink``, or ``kill`` at one of the
kill points of :mod:`rollcheck.spark_replay.killpoints` (``kill:offsets``, ``kill:state``,
``kill:sink``, ``kill:commit``).

Per configuration the matrix first records one failure-free run; its final output and state
(read with Spark's own state reader) are the *shared reference* of every cell of that
configuration (:func:`write_shared_reference`), so each cell runs only its failing recording.
Cells run as child processes (``rollcheck spark record query``), ``jobs`` at a time, each bounded
in time; every trace is replayed by :func:`rollcheck.spark_replay.replay.replay_file` and its
checks decided by the one verdict rule (:func:`rollcheck.pyimpl.verdict.decide`).

A not-conformant cell is *expected by the engine* only where Spark's documentation says so:
duplicates written by a user's own ``foreachBatch`` sink for a batch that Spark ran again after a
failure (the Structured Streaming Programming Guide, "Using Foreach and ForeachBatch":
foreachBatch gives at-least-once writes by default; exactly-once needs the batch id to
deduplicate). Anything else not conformant is a *finding*: it is minimised and gets a standalone
reproducer (:mod:`rollcheck.spark_replay.reproducer`).

References
----------
Spark Structured Streaming Programming Guide ("Fault Tolerance Semantics", "Using Foreach and
ForeachBatch", "State Store"); ``specs/spark.md``; ``specs/verdicts.md``.
"""

from __future__ import annotations

import contextlib
import html
import json
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from rollcheck.pyimpl.errors import InvalidInputError
from rollcheck.pyimpl.patternio import atomic_write_text
from rollcheck.pyimpl.verdict import Check, Report
from rollcheck.spark_replay.checks import FOREACHBATCH_DOC as _FOREACHBATCH_DOC
from rollcheck.spark_replay.killpoints import KILL_POINTS, STATE_STORES
from rollcheck.spark_replay.query import OVERLOAD_SIGNS
from rollcheck.spark_replay.shared_reference import shared_reference, write_shared_reference

__all__ = [
    "PROVIDERS",
    "FAILURES",
    "Cell",
    "MatrixOptions",
    "plan_cells",
    "library_modules",
    "supported_providers",
    "columns",
    "report_of",
    "witness",
    "protocol_step",
    "expected_by_engine",
    "cell_result",
    "summarize",
    "exit_code",
    "render_html",
    "run_matrix",
    "FOREACHBATCH_DOC",
    "overloaded",
    "shared_reference",
    "write_shared_reference",
]

PROVIDERS = tuple(STATE_STORES)
FAILURES = ("task", "sink", "kill")
#: Where Spark documents that a foreachBatch sink may see a batch more than once.
FOREACHBATCH_DOC = _FOREACHBATCH_DOC  # the user-sink check cites it (spark_replay/checks.py)


# ----------------------------------------------------------------------------- the cells
@dataclass(frozen=True)
class Cell:
    """One cell: a query module under a state store provider with one failure."""

    module: str
    provider: str
    failure: str
    kill_point: str | None = None

    @property
    def name(self) -> str:
        """The module's short name: the file's stem or the module's last component."""
        return Path(self.module).stem if self.module.endswith(".py") else self.module.rsplit(".", 1)[-1]

    @property
    def column(self) -> str:
        """The table column: ``task``, ``sink`` or ``kill:<point>``.

        >>> Cell("q.py", "hdfs", "kill", "commit").column, Cell("a.b", "rocksdb", "task").column
        ('kill:commit', 'task')
        """
        return f"kill:{self.kill_point}" if self.failure == "kill" else self.failure

    @property
    def config_id(self) -> str:
        return f"{self.name}--{self.provider}"

    @property
    def stem(self) -> str:
        """The cell's file stem inside the output folder."""
        return f"{self.config_id}/{self.column.replace(':', '-')}"


def columns(failures: list[str], kill_points: list[str]) -> list[str]:
    """The table's columns, in protocol order.

    >>> columns(["kill", "task"], ["commit", "offsets"])
    ['task', 'kill:offsets', 'kill:commit']
    """
    out = [f for f in FAILURES if f in failures and f != "kill"]
    if "kill" in failures:
        out += [f"kill:{p}" for p in KILL_POINTS if p in kill_points]
    return out


def plan_cells(modules: list[str], providers: list[str], failures: list[str],
               kill_points: list[str]) -> list[Cell]:
    """Every cell, configuration by configuration (module-major), columns in protocol order.

    Examples
    --------
    >>> [c.column for c in plan_cells(["q.py"], ["hdfs"], ["task", "kill"], ["sink", "state"])]
    ['task', 'kill:state', 'kill:sink']
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
    cols = columns(failures, kill_points)
    cells = []
    for m in modules:
        for p in providers:
            for col in cols:
                f, _, k = col.partition(":")
                cells.append(Cell(m, p, f, k or None))
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
    failures: list[str] = field(default_factory=lambda: list(FAILURES))
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
    minimise: bool = True

    def validate(self) -> None:
        if self.jobs < 1 or self.jobs > 16:
            raise InvalidInputError(f"--jobs must be 1..16, got {self.jobs}", location="--jobs")
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
        if self.call_timeout >= self.cell_timeout:
            raise InvalidInputError(f"--call-timeout {self.call_timeout:g} is not below --cell-timeout "
                                    f"{self.cell_timeout:g}: a slow call would be cut as the cell's timeout, "
                                    "not named as the module's", location="--call-timeout")


def library_modules() -> list[str]:
    """The query library shipped with the source tree (``examples/queries/*.py``)."""
    root = Path(__file__).resolve().parent.parent / "examples" / "queries"
    mods = sorted(str(p) for p in root.glob("*.py") if not p.name.startswith("_"))
    if not mods:
        raise InvalidInputError("no query module given and the query library (examples/queries) is not "
                                "here; give --module FILE.py", location="--module")
    return mods


def supported_providers(module: str) -> list[str] | None:
    """The providers a query module declares it runs on (its optional ``STATE_STORES``), or None."""
    from rollcheck.spark_replay.query import load_query

    declared = getattr(load_query(module).module, "STATE_STORES", None)
    if declared is None:
        return None
    if not isinstance(declared, list | tuple) or not all(d in PROVIDERS for d in declared):
        raise InvalidInputError(f"STATE_STORES must list providers among {', '.join(PROVIDERS)}",
                                source=module, location="STATE_STORES")
    return list(declared)


# ----------------------------------------------------------------------------- one cell's verdict
def report_of(replay: Any) -> Report:
    """The replay's result in the one verdict model (a :class:`Report`), whatever check type the
    replay returns (the verdict model's own, or the older ``ok`` / ``detail`` triple)."""
    if isinstance(replay, Report):
        return replay
    checks = []
    for c in replay.checks:
        if isinstance(c, Check):
            checks.append(c)
        else:
            checks.append(Check.from_ok(c.name, c.ok, c.detail, offending_seq=getattr(c, "offending_seq", None)))
    extra = {"truncated": getattr(replay, "truncated", False), "events": getattr(replay, "events", None)}
    return Report(checks, subject="spark-query", extra=extra)


def _canon(row: Any) -> str:
    return json.dumps(row, sort_keys=True, separators=(",", ":"), default=str)


def protocol_step(failure: dict[str, Any]) -> str:
    """Where in the micro-batch protocol a ``failure`` event struck, in words.

    >>> protocol_step({"mode": "kill", "batch": 2, "kill_point": "state"})
    'driver killed after the state stores committed batch 2, before the sink (offsets/2 written, commits/2 not)'
    """
    b = failure.get("batch")
    mode, point = failure.get("mode"), failure.get("kill_point")
    if mode == "task":
        return f"a task of batch {b} failed, before the sink (offsets/{b} written, commits/{b} not)"
    if mode == "sink":
        return f"the sink raised after it wrote batch {b}, before commits/{b}"
    where = {"offsets": f"right after offsets/{b} was written, before the batch ran",
             "state": f"after the state stores committed batch {b}, before the sink",
             "commit": f"after the sink wrote batch {b}, as commits/{b} was being written"}.get(
        str(point), f"after the sink wrote batch {b}, before commits/{b}")
    return f"driver killed {where} (offsets/{b} written, commits/{b} not)" if point == "state" or point == "offsets" \
        else f"driver killed {where}"


def witness(header: dict[str, Any], events: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The lost or duplicated rows of a recording against its reference, each with the batch whose
    rows handed to the sink hold it (None: never handed to the sink as such), the attempts in which
    the sink was handed it, and the failure (the step of the commit protocol where it struck). None
    when the output equals the reference.

    Examples
    --------
    >>> ev = [{"seq": 1, "kind": "spark.reference", "output": [{"k": 1}]},
    ...       {"seq": 2, "kind": "spark.sink_written", "batch": 0, "attempt": 1, "rows": [{"k": 1}]},
    ...       {"seq": 3, "kind": "failure", "mode": "kill", "batch": 0, "kill_point": "sink"},
    ...       {"seq": 4, "kind": "spark.sink_written", "batch": 0, "attempt": 2, "rows": [{"k": 1}]},
    ...       {"seq": 5, "kind": "spark.output_final", "rows": [{"k": 1}, {"k": 1}]}]
    >>> w = witness({}, ev); w["duplicated"][0]["batch"], w["duplicated"][0]["written_in_attempts"]
    (0, [1, 2])
    """
    from rollcheck.spark_replay.watcher import base_kind

    ends = {base_kind(e["kind"]): e for e in events}
    ref, fin = ends.get("reference"), ends.get("output_final")
    if ref is None or fin is None:
        return None
    want, got = Counter(map(_canon, ref.get("output", []))), Counter(map(_canon, fin.get("rows", [])))
    extra, missing = got - want, want - got
    if not extra and not missing:
        return None
    writes = [e for e in events if base_kind(e["kind"]) == "sink_written"]
    fails = [{**{k: e.get(k) for k in ("seq", "mode", "batch", "kill_point", "checkpoint_logs") if k in e},
              "step": protocol_step(e)} for e in events if e["kind"] == "failure"]

    def where(row: str) -> dict[str, Any]:
        hits = [e for e in writes if row in set(map(_canon, e.get("rows", [])))]
        batches = sorted({e["batch"] for e in hits})
        b = batches[0] if batches else None
        return {"row": json.loads(row), "batch": b,
                "written_in_attempts": [e.get("attempt") for e in hits if e["batch"] == b],
                "sink_written_seqs": [e["seq"] for e in hits]}

    return {"duplicated": [{**where(r), "extra_copies": n} for r, n in sorted(extra.items())],
            "lost": [{**where(r), "missing_copies": n} for r, n in sorted(missing.items())],
            "failures": fails, "config": (header.get("config") or {})}


def expected_by_engine(report: Report, header: dict[str, Any], wit: dict[str, Any] | None) -> str | None:
    """The documentation that explains this not-conformant cell, or None (a finding, or a cell that
    cannot be attributed): :func:`~rollcheck.pyimpl.attribution.classify_cell`'s attribution,
    counted from the trace's sink handings (``header`` and ``wit`` are not needed any more)."""
    from rollcheck.pyimpl.attribution import classify_cell

    c = classify_cell(report)
    return c["reason"] if c["expected_by_engine"] else None


def cell_result(cell: Cell, opts: MatrixOptions, trace: Path, *, error: str | None = None) -> dict[str, Any]:
    """Replay one recorded cell and build its entry of the matrix's JSON (the contract's keys,
    plus ``column``, ``checks`` and ``seconds``)."""
    from rollcheck.spark_replay.replay import replay_file
    from rollcheck.spark_replay.trace import read_trace

    out = opts.out
    base = {"engine": "spark", "module": cell.module, "name": cell.name, "column": cell.column,
            "config": {"state_store": cell.provider, "batches": opts.batches, "seed": opts.seed},
            "failure": {"mode": cell.failure, "batch": opts.fail_at_batch,
                        **({"kill_point": cell.kill_point} if cell.kill_point else {})},
            "trace": str(trace) if trace.exists() else None, "witness": None, "reproducer": None,
            "checks": None, "expected_by_engine": False, "attributed_to": None}
    if error is not None:
        return {**base, "verdict": "inconclusive", "reason": error}
    try:
        tr = read_trace(trace)
        rep = report_of(replay_file(trace))
    except InvalidInputError as e:
        return {**base, "verdict": "inconclusive", "reason": f"the recording could not be replayed: {e}"}
    checks_path = out / f"{cell.stem}.checks.json"
    atomic_write_text(checks_path, json.dumps(rep.to_json("trace"), indent=1) + "\n")
    base["checks"] = str(checks_path)
    verdict = rep.verdict.word("trace")
    wit = witness(tr.header, tr.events) if verdict == "not-conformant" else None
    if wit is not None or verdict == "not-conformant":
        rc = rep.root_cause
        doc = {"cell": base["column"], "module": cell.module, "state_store": cell.provider,
               "root_cause": rc.to_json() if rc else None, **(wit or {})}
        wpath = out / f"{cell.stem}.witness.json"
        atomic_write_text(wpath, json.dumps(doc, indent=1, default=str) + "\n")
        base["witness"] = str(wpath)
    from rollcheck.pyimpl.attribution import classify_cell

    return {**base, **classify_cell(rep)}


def summarize(cells: list[dict[str, Any]]) -> dict[str, int]:
    """The contract's ``summary`` (plus ``expected_by_engine`` and ``findings``).

    >>> summarize([{"verdict": "conformant"}, {"verdict": "not-conformant", "expected_by_engine": True}])
    {'conformant': 1, 'not_conformant': 1, 'inconclusive': 0, 'expected_by_engine': 1, 'findings': 0}
    """
    n = Counter(c["verdict"] for c in cells)
    exp = sum(1 for c in cells if c["verdict"] == "not-conformant" and c.get("expected_by_engine"))
    return {"conformant": n["conformant"], "not_conformant": n["not-conformant"],
            "inconclusive": n["inconclusive"], "expected_by_engine": exp,
            "findings": n["not-conformant"] - exp}


def exit_code(cells: list[dict[str, Any]]) -> int:
    """0 every cell conformant, 1 a cell not conformant (a finding, or a cell the engine's documentation
    explains: the pipeline is still not what its module declared), 3 a cell undecided (and none
    not conformant); an empty matrix is 3.

    >>> exit_code([{"verdict": "conformant"}, {"verdict": "inconclusive"}])
    3
    >>> exit_code([{"verdict": "inconclusive"}, {"verdict": "not-conformant", "expected_by_engine": False}])
    1
    >>> exit_code([]), exit_code([{"verdict": "not-conformant", "expected_by_engine": True}])
    (3, 1)
    """
    s = summarize(cells)
    if s["not_conformant"]:
        return 1
    if s["inconclusive"] or not cells:
        return 3
    return 0


# ----------------------------------------------------------------------------- the HTML table
_COLORS = {"conformant": "#2e7d32", "not-conformant": "#c62828", "inconclusive": "#9e9e9e",
           "expected": "#ef6c00", "running": "#1565c0", "pending": "#e0e0e0"}


def render_html(cells: list[dict[str, Any]], planned: list[Cell], out: Path, *, done: bool,
                meta: dict[str, Any], running: set[tuple[str, str]] | None = None) -> str:
    """The table: one row per configuration (module × provider), one column per failure; each cell
    shows its verdict and links its trace, checks, witness and reproducer (relative links)."""
    cols: list[str] = []
    for c in planned:
        if c.column not in cols:
            cols.append(c.column)
    rows: list[str] = []
    for c in planned:
        if c.config_id not in rows:
            rows.append(c.config_id)
    by = {(r["name"] + "--" + r["config"]["state_store"], r["column"]): r for r in cells}

    def rel(p: str | None) -> str | None:
        if not p:
            return None
        with contextlib.suppress(ValueError):
            return os.path.relpath(p, out)
        return p

    def td(cfg: str, col: str) -> str:
        r = by.get((cfg, col))
        if r is None:
            known = any(c.config_id == cfg and c.column == col for c in planned)
            if (cfg, col) in (running or set()):
                return f'<td class="cell v-running" style="background:{_COLORS["running"]}">running…</td>'
            word = "pending" if known else "not run"
            return f'<td class="cell v-pending" style="background:{_COLORS["pending"]}">{word}</td>'
        v = r["verdict"]
        key = "expected" if v == "not-conformant" and r.get("expected_by_engine") else v
        label = {"expected": "expected (engine's contract)", "not-conformant": "FINDING"}.get(key, v)
        links = []
        for k, name in (("trace", "trace"), ("checks", "checks"), ("witness", "witness"),
                        ("reproducer", "reproducer")):
            if r.get(k):
                links.append(f'<a href="{html.escape(rel(r[k]) or "")}">{name}</a>')
        run = r.get("reproducer_run")
        if run and r.get("reproducer"):
            m = r.get("minimised") or {}
            links[-1] += (f' ({"shows it" if run.get("reproduced") else "did NOT show it"} in {run.get("seconds")} s; '
                          f'{m.get("batches")} batch(es), {m.get("rows")} row(s))')
        return (f'<td class="cell v-{key}" style="background:{_COLORS[key]}" title="{html.escape(r["reason"])}">'
                f'<b>{html.escape(label)}</b><br><small>{" · ".join(links)}</small>'
                f'<div class="why">{html.escape(r["reason"][:300])}</div></td>')

    s = summarize(cells)
    head = "".join(f"<th>{html.escape(c)}</th>" for c in cols)
    body = "".join(f"<tr><th>{html.escape(cfg.replace('--', ' · '))}</th>{''.join(td(cfg, c) for c in cols)}</tr>"
                   for cfg in rows)
    status = "finished" if done else f"running: {len(cells)} of {len(planned)} cells done"
    skipped = "".join(f"<li>{html.escape(x['name'])} · {html.escape(x['state_store'])}: {html.escape(x['reason'])}</li>"
                      for x in meta.get("skipped") or [])
    skipped = f"<p>Not run:</p><ul id=\"skipped\">{skipped}</ul>" if skipped else ""
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>rollcheck spark matrix</title>
{'' if done else '<meta http-equiv="refresh" content="10">'}
<style>
body {{ font-family: system-ui, sans-serif; margin: 1.5em; }}
table {{ border-collapse: collapse; }}
th, td {{ border: 1px solid #bbb; padding: .4em .6em; vertical-align: top; }}
td.cell {{ color: white; min-width: 9em; max-width: 16em; }}
td.cell a {{ color: white; }}
td.v-pending {{ color: #666; }}
td.cell .why {{ font-size: 70%; opacity: .9; }}
.legend span {{ display: inline-block; padding: .2em .5em; color: white; margin-right: .5em; }}
</style></head><body>
<h1>Spark chaos matrix</h1>
<p id="status">{html.escape(status)} — {s['conformant']} conformant, {s['not_conformant']} not conformant
({s['expected_by_engine']} expected by the engine's contract, {s['findings']} finding(s)),
{s['inconclusive']} inconclusive. Seed {meta.get('seed')}, failure at batch {meta.get('fail_at_batch')}.</p>
<p class="legend"><span style="background:{_COLORS['conformant']}">conformant</span>
<span style="background:{_COLORS['expected']}">not conformant, expected by the engine's contract</span>
<span style="background:{_COLORS['not-conformant']}">finding</span>
<span style="background:{_COLORS['inconclusive']}">inconclusive</span></p>
<table id="matrix"><thead><tr><th>query · state store</th>{head}</tr></thead>
<tbody>{body}</tbody></table>
{skipped}
<p>Columns: <b>task</b> a task of the batch raises; <b>sink</b> the sink raises after it wrote;
<b>kill:P</b> the driver is SIGKILLed at kill point P (offsets: after the offset log entry; state: after
the state store commit; sink: after the sink wrote; commit: just before the commit log entry).</p>
</body></html>
"""


# ----------------------------------------------------------------------------- running
class _Runner:
    """Runs cell recordings as child process groups (:mod:`rollcheck.pyimpl.children`: they die
    with rollcheck however it dies); :meth:`stop` kills every one still running."""

    def __init__(self) -> None:
        self.procs: set[Any] = set()
        self.lock = threading.Lock()
        self.stopping = False

    def run(self, argv: list[str], timeout: float, log: Path) -> tuple[int | None, str]:
        from rollcheck.pyimpl import children

        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "wb") as err:
            with self.lock:
                if self.stopping:
                    return None, "the matrix was stopped"
                p = children.spawn(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err)
                self.procs.add(p)
            try:
                out, _ = p.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                p.kill_group()
                p.communicate()
                return None, f"timed out after {timeout:.0f} s"
            finally:
                p.kill_group()  # stragglers of an ended recording die with its group
                with self.lock:
                    self.procs.discard(p)
        return p.returncode, out.decode(errors="replace")

    def stop(self) -> None:
        with self.lock:
            self.stopping = True
            for p in list(self.procs):
                with contextlib.suppress(Exception):
                    p.kill_group()


def _last_line(path: Path) -> str:
    try:
        lines = [ln for ln in path.read_text(errors="replace").splitlines() if ln.strip()
                 and not ln.startswith(("Picked up", "WARNING", "Setting default", "To adjust"))]
    except OSError:
        return ""
    return lines[-1][:400] if lines else ""


def _record_argv(cell: Cell | None, module: str, provider: str, opts: MatrixOptions, trace: Path,
                 reference: Path | None) -> list[str]:
    argv = [sys.executable, "-m", "rollcheck.cli.main", "spark", "record", "query", "--module", module,
            "--out", str(trace), "--seed", str(opts.seed), "--state-store", provider,
            "--call-timeout", f"{opts.call_timeout:g}", "--json"]
    if opts.batches is not None:
        argv += ["--batches", str(opts.batches)]
    if opts.master:
        argv += ["--master", opts.master]
    if cell is None:
        argv += ["--no-reference"]
    else:
        argv += ["--fail-at-batch", str(opts.fail_at_batch), "--failure", cell.failure]
        if cell.kill_point:
            argv += ["--kill-point", cell.kill_point]
        if reference is not None:
            argv += ["--reference-from", str(reference)]
    return argv


def _shrink_argv(cell: Cell, module: str, opts: MatrixOptions, trace: Path, fail_at: int) -> list[str]:
    """A minimiser's re-recording of ``cell`` on another module file (its shrunk input), the
    failure at batch ``fail_at``: the matrix's own settings otherwise (seed, master, call timeout),
    all of the module's batches, no shared reference."""
    return _record_argv(cell, module, cell.provider, replace(opts, batches=None, fail_at_batch=fail_at), trace, None)


def overloaded(log: Path) -> bool:
    """Whether a recording's log shows a Python worker that did not connect back in time
    (:data:`rollcheck.spark_replay.query.OVERLOAD_SIGNS`): the machine's fault, not the query's;
    the matrix records such a cell once more, and if it happens again the cell is inconclusive."""
    try:
        text = log.read_text(errors="replace")
    except OSError:
        return False
    return any(s in text for s in OVERLOAD_SIGNS)


_OVERLOAD_WHY = ("the machine was too loaded for Spark: a Python worker it started did not connect back "
                 "within Spark's fixed 10 s (\"Python worker failed to connect back\") on every try; the query did "
                 "not fail on its own")


def _missed_kill(result: dict[str, Any]) -> bool:
    try:
        doc = json.loads(Path(result["checks"]).read_text())
    except (OSError, TypeError, ValueError):
        return False
    return any(c.get("name") == "kill-point" and c.get("status") == "unchecked" for c in doc.get("checks", []))


def run_matrix(opts: MatrixOptions, *, on_update: Callable[[list[dict[str, Any]], list[Cell], dict[str, str]], None]
               | None = None, cells: list[Cell] | None = None) -> dict[str, Any]:
    """Run every cell (module docstring); return the contract's JSON document.

    ``on_update(results, planned, running)`` is called whenever a cell starts or ends (the CLI's
    live table); ``DIR/index.html`` and ``DIR/matrix.json`` are rewritten after every cell.
    ``cells`` runs a chosen slice instead of the whole product of the options. A configuration
    with a single cell records its reference inside that cell's run (one driver fewer).
    """
    from rollcheck.spark_replay.query import load_query

    opts.validate()
    planned = (list(cells) if cells is not None
               else plan_cells(opts.modules, opts.providers, opts.failures, opts.kill_points))
    skipped: list[dict[str, Any]] = []
    for m in sorted({c.module for c in planned}):  # refuse a broken module before any Spark run
        uq = load_query(m)
        n = len(uq.batches(opts.seed)) if opts.batches is None else opts.batches
        if opts.fail_at_batch >= n:
            raise InvalidInputError(f"--fail-at-batch {opts.fail_at_batch} is beyond the {n} input batches of "
                                    f"this module", source=m, location="--fail-at-batch")
        ok = supported_providers(m)
        if ok is not None:
            for c in [c for c in planned if c.module == m and c.provider not in ok]:
                planned.remove(c)
                if c.column == columns(opts.failures, opts.kill_points)[0]:
                    skipped.append({"module": m, "name": c.name, "state_store": c.provider,
                                    "reason": f"the module declares STATE_STORES = {ok}: it does not run on "
                                              f"{c.provider}"})
    if not planned:
        raise InvalidInputError("no cell left to run (every provider is excluded by the modules' "
                                "STATE_STORES)", location="--providers")
    out = opts.out
    out.mkdir(parents=True, exist_ok=True)
    meta = {"seed": opts.seed, "fail_at_batch": opts.fail_at_batch, "batches": opts.batches, "skipped": skipped}
    results: list[dict[str, Any]] = []
    running: dict[str, str] = {}
    lock = threading.Lock()
    runner = _Runner()
    t_start = time.perf_counter()

    def publish(done: bool = False) -> None:
        with lock:
            order = {(c.config_id, c.column): i for i, c in enumerate(planned)}
            results.sort(key=lambda r: order.get((r["name"] + "--" + r["config"]["state_store"], r["column"]), 0))
            doc = {"cells": list(results), "summary": summarize(results), **meta,
                   "seconds": round(time.perf_counter() - t_start, 1), "finished": done}
            atomic_write_text(out / "matrix.json", json.dumps(doc, indent=1) + "\n")
            busy = {(c.config_id, c.column) for c in planned if running.get(c.stem)}
            atomic_write_text(out / "index.html", render_html(results, planned, out, done=done, meta=meta,
                                                              running=busy))
            if on_update is not None:
                on_update(list(results), planned, dict(running))

    configs: dict[str, list[Cell]] = {}
    for c in planned:
        configs.setdefault(c.config_id, []).append(c)
    refs: dict[str, tuple[Path | None, str | None]] = {}
    ref_events = {k: threading.Event() for k in configs}
    # work items: (config id, cell or None for the reference)
    # configuration by configuration (its reference, then its cells), so that results come in early;
    # a worker takes the first item whose reference is ready
    queue: list[tuple[str, Cell | None]] = []
    for k, v in configs.items():
        if len(v) == 1:  # its own reference run, inside the cell's recording
            refs[k] = (None, None)
            ref_events[k].set()
        else:
            queue.append((k, None))
        queue += [(k, c) for c in v]
    qlock = threading.Condition()

    def next_item() -> tuple[str, Cell | None] | None:
        with qlock:
            while True:
                if not queue:
                    return None
                for i, (k, c) in enumerate(queue):
                    if c is None or ref_events[k].is_set():
                        return queue.pop(i)
                qlock.wait(1.0)

    def do_reference(k: str) -> None:
        c0 = configs[k][0]
        trace = out / c0.config_id / "reference.jsonl"
        trace.parent.mkdir(parents=True, exist_ok=True)
        running[k + " reference"] = "reference"
        publish()
        for attempt in range(1 + opts.retries):
            rc, _ = runner.run(_record_argv(None, c0.module, c0.provider, opts, trace, None), opts.cell_timeout,
                               out / c0.config_id / "reference.log")
            if rc == 0 or not overloaded(out / c0.config_id / "reference.log") or attempt == opts.retries:
                break
        running.pop(k + " reference", None)
        if rc == 0 and trace.exists():
            refs[k] = (trace, None)
        else:
            why = (_OVERLOAD_WHY if overloaded(out / c0.config_id / "reference.log")
                   else _last_line(out / c0.config_id / "reference.log") or f"exit {rc}")
            refs[k] = (None, f"the failure-free reference run of this configuration did not finish: {why}")
        with qlock:
            ref_events[k].set()
            qlock.notify_all()

    def do_cell(cell: Cell) -> None:
        ref, why = refs[cell.config_id]
        trace = out / f"{cell.stem}.jsonl"
        res: dict[str, Any]
        if ref is None and why is not None:
            res = cell_result(cell, opts, trace, error=f"inconclusive: {why}")
        else:
            tries = 0
            while True:
                tries += 1
                running[cell.stem] = cell.column
                publish()
                t0 = time.perf_counter()
                rc, stdout = runner.run(_record_argv(cell, cell.module, cell.provider, opts, trace, ref),
                                        opts.cell_timeout, out / f"{cell.stem}.log")
                secs = round(time.perf_counter() - t0, 1)
                running.pop(cell.stem, None)
                if rc is None or rc not in (0, 1):
                    why = stdout.strip() if rc is None else (_last_line(out / f"{cell.stem}.log") or f"exit {rc}")
                    res = cell_result(cell, opts, trace, error=f"inconclusive: the recording did not finish: "
                                                               f"{why}")
                else:
                    res = cell_result(cell, opts, trace)
                res["seconds"] = secs
                res["tries"] = tries
                if tries <= opts.retries and res["verdict"] == "inconclusive" and (
                        _missed_kill(res) or overloaded(out / f"{cell.stem}.log")):
                    continue  # the kill struck off its point (a race with Spark), or the machine was overloaded
                if res["verdict"] == "inconclusive" and overloaded(out / f"{cell.stem}.log"):
                    res["reason"] = f"inconclusive: {_OVERLOAD_WHY}"
                break
            if res["verdict"] == "not-conformant" and not res["expected_by_engine"] and opts.minimise:
                from rollcheck.spark_replay.reproducer import minimise_and_write

                def argv_for(module: str, trace: Path, fail_at: int, c: Cell = cell) -> list[str]:
                    return _shrink_argv(c, module, opts, trace, fail_at)

                def root_cause(trace: Path) -> str | None:
                    from rollcheck.spark_replay.replay import replay_file

                    rc_ = report_of(replay_file(trace)).root_cause
                    return rc_.name if rc_ is not None else None

                try:
                    res.update(minimise_and_write(cell, opts, res, runner.run, argv_for, root_cause))
                except Exception as e:  # the finding stands; say why there is no reproducer
                    res["reproducer_error"] = f"{type(e).__name__}: {e}"
        with lock:
            results.append(res)
        publish()

    def worker() -> None:
        while True:
            item = next_item()
            if item is None:
                return
            k, c = item
            if c is None:
                do_reference(k)
            else:
                do_cell(c)

    threads = [threading.Thread(target=worker, name=f"matrix-{i}", daemon=True) for i in range(opts.jobs)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            while t.is_alive():
                t.join(0.5)
    finally:
        runner.stop()
    publish(done=True)
    doc = json.loads((out / "matrix.json").read_text())
    return {"cells": doc["cells"], "summary": doc["summary"], "index": str(out / "index.html"),
            "seconds": doc["seconds"], **meta}
