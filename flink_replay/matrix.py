"""A chaos matrix on Flink: one recorded, replayed run per configuration and failure.

A user wants to know whether *their* job, with *their* engine configuration, stays exactly-once
under every failure Flink promises to survive. The matrix crosses jobs × state backends ×
checkpoint modes × failures × rescalings on restore; every cell is a real recording
(:func:`rollcheck.flink_replay.record.record`) replayed through the same checks as a single
``flink replay`` and decided under the one verdict rule (:func:`rollcheck.pyimpl.verdict.decide`).

A cell that is not conformant is a *finding* unless Flink's own documentation says the engine does
not promise it (``expected_by_engine``, with the page cited in ``reason``): a sink of the user's
own that does not take part in checkpointing sees duplicates after a restore.

References
----------
Apache Flink documentation: "Fault Tolerance Guarantees of Data Sources and Sinks"
(docs/connectors/datastream/guarantees/), "Checkpointing" (aligned and unaligned checkpoints),
"State Backends", "Task Failure Recovery".
"""

from __future__ import annotations

import html
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import product
from pathlib import Path
from typing import Any

from rollcheck.flink_replay.record import BACKENDS, RecordConfig, record
from rollcheck.flink_replay.user_replay import GUARANTEES_DOC as _GUARANTEES_DOC
from rollcheck.pyimpl.errors import InconclusiveError
from rollcheck.pyimpl.verdict import Report, Status

__all__ = ["Cell", "cells", "classify", "run_cell", "run_matrix", "shrink_finding", "write_html", "GUARANTEES_DOC",
           "summarise"]

GUARANTEES_DOC = _GUARANTEES_DOC  # the user-sink check cites it (user_replay.py)

#: violated checks that Flink's documentation says are not promised, and where it says so
EXPECTED = {"user-sink-exactly-once": GUARANTEES_DOC}


@dataclass(frozen=True)
class Cell:
    """One configuration and failure of the matrix."""

    module: str  # "wordcount" or a job file
    backend: str
    checkpoints: str
    failure: str
    rescale: tuple[int, int] | None

    @property
    def job(self) -> str:
        return "wordcount" if self.module == "wordcount" else Path(self.module).stem

    @property
    def ident(self) -> str:
        r = f"rescale{self.rescale[0]}-{self.rescale[1]}" if self.rescale else "same"
        return f"{self.job}-{self.backend}-{self.checkpoints}-{self.failure}-{r}"

    @property
    def row(self) -> str:
        """The table row (everything but the failure)."""
        r = f"{self.rescale[0]}:{self.rescale[1]}" if self.rescale else "-"
        return f"{self.job} | {self.backend} | {self.checkpoints} | rescale {r}"

    def config(self) -> dict[str, Any]:
        return {"backend": self.backend, "checkpoints": self.checkpoints,
                "rescale": list(self.rescale) if self.rescale else None}


def cells(modules: Sequence[str], backends: Sequence[str], checkpoints: Sequence[str],
          failures: Sequence[str], rescales: Sequence[tuple[int, int] | None]) -> list[Cell]:
    """Every combination, in table order.

    Examples
    --------
    >>> [c.ident for c in cells(["wordcount"], ["hashmap"], ["aligned"], ["task"], [None, (2, 1)])]
    ['wordcount-hashmap-aligned-task-same', 'wordcount-hashmap-aligned-task-rescale2-1']
    """
    for b in backends:
        if b not in BACKENDS:
            raise ValueError(f"unknown backend {b!r}")
    return [Cell(m, b, c, f, r) for m, b, c, r, f in product(modules, backends, checkpoints, rescales, failures)]


def _report(trace: Path, module: str) -> Report:
    from rollcheck.flink_replay.user_replay import replay_job, word_count_report

    return word_count_report(trace) if module == "wordcount" else replay_job(trace)


def _violated(rep: Report) -> set[str]:
    return {c.name for c in rep.checks if c.status is Status.VIOLATED}


def shrink_finding(cell: Cell, cfg: dict[str, Any], out: Path, check: str, full: int, *, runs: int = 4,
                   run: Callable[[Path, dict[str, Any]], Report] | None = None) -> dict[str, Any]:
    """Minimise a finding by re-running: the fewest first records of the job's input that still
    violate ``check``.

    A bisection between 1 (never tried: a run needs records to fail in) and ``full`` (the cell's
    input, which showed the finding), halving first; at most ``runs`` re-runs, each a real
    recording decided by the same replay. A re-run that cannot be decided counts as not showing it.

    Parameters
    ----------
    cell, cfg
        The cell and the recorder configuration that showed the finding.
    out
        Where the re-runs' traces go (``CELL.shrink-N.jsonl``).
    check
        The violated check (the root cause) that a smaller input must still violate.
    full
        The number of records of the run that showed it.
    runs
        The most re-runs.
    run
        ``run(trace, config) -> Report`` (default: record with Flink, then replay).

    Returns
    -------
    dict
        ``{"check", "from", "records", "trace", "runs": [{"records", "verdict", "violated"}]}``;
        ``records`` is the smallest input that showed the finding (``full`` if none smaller did).

    Examples
    --------
    >>> from rollcheck.pyimpl.verdict import Check
    >>> fake = lambda trace, c: Report([Check.violated("x", "lost") if c["max_records"] >= 7
    ...                                 else Check.held("x", "ok", examined=1)])
    >>> r = shrink_finding(Cell("j.py", "hashmap", "aligned", "task", None), {}, Path("."), "x", 100, runs=6,
    ...                    run=fake)
    >>> r["records"], [x["records"] for x in r["runs"]]
    (7, [50, 25, 12, 6, 9, 7])
    """
    if run is None:
        def run(trace: Path, c: dict[str, Any]) -> Report:
            record(trace, RecordConfig(c))
            return _report(trace, cell.module)
    best, lo = full, 0
    best_trace: str | None = None
    tries: list[dict[str, Any]] = []
    cand = full // 2
    while len(tries) < runs and lo < cand < best and cand >= 1:
        trace = out / f"{cell.ident}.shrink-{cand}.jsonl"
        try:
            rep = run(trace, dict(cfg, max_records=cand))
            bad = _violated(rep)
            verdict = classify(rep)["verdict"] if rep.checks else "inconclusive"
        except InconclusiveError as e:
            bad, verdict = set(), f"inconclusive ({e})"
        tries.append({"records": cand, "verdict": verdict, "violated": sorted(bad)})
        if check in bad:
            best, best_trace = cand, str(trace)
            cand = max(lo + 1, cand // 2) if lo == 0 else (lo + cand) // 2
        else:
            lo = cand
            cand = (lo + best) // 2
    return {"check": check, "from": full, "records": best, "trace": best_trace, "runs": tries}


def run_cell(cell: Cell, out: Path, *, records: int = 1200, rate: float = 400.0, interval_ms: int = 300,
             seed: int = 0, timeout_s: float = 600.0, shrink_runs: int = 4) -> dict[str, Any]:
    """Record and replay one cell; the contract's cell object (a finding of a user's job is shrunk
    by up to ``shrink_runs`` re-runs, :func:`shrink_finding`)."""
    trace = out / f"{cell.ident}.jsonl"
    res: dict[str, Any] = {"engine": "flink", "module": cell.module, "config": cell.config(),
                           "failure": {"kind": cell.failure}, "trace": str(trace), "witness": None,
                           "reproducer": None, "expected_by_engine": False, "id": cell.ident}
    user = cell.module != "wordcount"
    par = cell.rescale[0] if cell.rescale else 2
    fail_at = max(2, records // 2) if not user else 1
    t0 = time.time()
    try:
        cfg = RecordConfig.make(checkpoints=cell.checkpoints, parallelism=par, interval_ms=interval_ms,
                                records=records, rate=rate, fail_at_record=fail_at, failure=cell.failure,
                                seed=seed, timeout_s=timeout_s, backend=cell.backend, rescale=cell.rescale,
                                module=cell.module if user else None)
        if user:
            cfg["fail_at_fraction"] = 0.5  # half way through the module's own input
        rec = record(trace, cfg)
    except InconclusiveError as e:
        res.update(verdict="inconclusive", reason=f"not recorded: {e}", seconds=round(time.time() - t0, 1))
        return res
    res["failure"]["record"] = _header(trace).get("config", {}).get("fail_at_record", fail_at)
    rep = _report(trace, cell.module)
    res.update(classify(rep))
    res["checks"] = [{"name": c.name, "status": c.status.value} for c in rep.checks]
    res["seconds"] = round(time.time() - t0, 1)
    res["restored_checkpoint"] = rec.get("restored_checkpoint")
    if res["verdict"] == "not-conformant":
        witness = out / f"{cell.ident}.witness.json"
        witness.write_text(json.dumps({"cell": cell.ident, "report": rep.to_json()}, indent=1))
        res["witness"] = str(witness)
        if not res["expected_by_engine"]:
            from rollcheck.flink_replay.reproducer import write_reproducer

            hdr = _header(trace).get("config", {})
            full = int(hdr.get("records") or records)
            fail_at = int(hdr.get("fail_at_record") or fail_at)
            few: int | None = None
            if user and shrink_runs > 0 and rep.root_cause is not None:
                res["shrink"] = shrink_finding(cell, cfg, out, rep.root_cause.name, full, runs=shrink_runs)
                if res["shrink"]["records"] < full:
                    few = res["shrink"]["records"]
                    fail_at = max(1, int(few * float(cfg.get("fail_at_fraction", 0.5))))
            res["reproducer"] = str(write_reproducer(cell, cfg, out / f"{cell.ident}.repro.py", rep,
                                                     records=few, fail_at=fail_at))
    return res


def classify(rep: Report) -> dict[str, Any]:
    """A cell's ``verdict``, ``expected_by_engine``, ``attributed_to`` and ``reason`` from its replay
    report: :func:`~rollcheck.pyimpl.attribution.classify_cell` (the user-sink check's per-KEY
    counts, re-deliveries since the restored checkpoint counted from the trace).

    Examples
    --------
    >>> from rollcheck.pyimpl.verdict import Check
    >>> classify(Report([Check.violated("output-exactly-once", "row 3 committed 2 times (duplicated output)")]))[
    ...     "attributed_to"]
    'engine'
    """
    from rollcheck.pyimpl.attribution import classify_cell

    return classify_cell(rep)


def _header(trace: Path) -> dict[str, Any]:
    with open(trace) as f:
        return dict(json.loads(f.readline()))


def summarise(results: list[dict[str, Any]]) -> dict[str, int]:
    """``{"conformant": n, "not_conformant": n, "inconclusive": n}`` (the contract's summary), and of
    the not-conformant cells how many the engine's documentation expects (``expected_by_engine``)
    and how many are ``findings``."""
    out = {"conformant": 0, "not_conformant": 0, "inconclusive": 0, "expected_by_engine": 0, "findings": 0}
    for r in results:
        out[r["verdict"].replace("-", "_")] += 1
        if r["verdict"] == "not-conformant":
            out["expected_by_engine" if r.get("expected_by_engine") else "findings"] += 1
    return out


def run_matrix(all_cells: list[Cell], out: str | Path, *, jobs: int = 1,
               log: Callable[[str], None] = lambda m: None, spread_seed: int | None = None,
               **kw: Any) -> dict[str, Any]:
    """Run every cell (``jobs`` at a time); write ``out/matrix.json`` and ``out/index.html`` after
    each cell (the table keeps its order). ``spread_seed``: run the cells in an order shuffled with
    this seed, so that a matrix cut short has covered every dimension about evenly."""
    import random
    import threading
    from concurrent.futures import ThreadPoolExecutor

    order = list(range(len(all_cells)))
    if spread_seed is not None:
        random.Random(spread_seed).shuffle(order)
    outdir = Path(out)
    outdir.mkdir(parents=True, exist_ok=True)
    results: list[dict[str, Any] | None] = [None] * len(all_cells)
    lock = threading.Lock()  # one writer of matrix.json at a time (its .partial file is shared)
    n = len(all_cells)

    def one(i: int) -> None:
        c = all_cells[i]
        log(f"[cell {i + 1}/{n}] {c.ident} ...")
        r = run_cell(c, outdir, **kw)
        with lock:
            results[i] = r
            done = sum(x is not None for x in results)
            log(f"[{done}/{n} done] {c.ident}: {r['verdict']} ({r.get('seconds')} s) {r['reason'][:160]}")
            _write(outdir, [x for x in results if x is not None])

    pool = ThreadPoolExecutor(max_workers=max(1, jobs))
    try:
        list(pool.map(one, order))
    except BaseException:
        # interrupted (SIGINT/SIGTERM arrive in this thread): no new cell starts, the running cells'
        # Flink processes are stopped so that their threads end now, not when the cells would have
        from rollcheck.pyimpl import children

        pool.shutdown(wait=False, cancel_futures=True)
        children.kill_all()
        raise
    pool.shutdown()
    done = [r for r in results if r is not None]
    return _write(outdir, done)


def _write(outdir: Path, done: list[dict[str, Any]]) -> dict[str, Any]:
    doc = {"cells": done, "summary": summarise(done)}
    tmp = outdir / "matrix.json.partial"
    tmp.write_text(json.dumps(doc, indent=1))
    tmp.replace(outdir / "matrix.json")
    write_html(doc, outdir / "index.html")
    return doc


_COLOUR = {"conformant": "#c8efc8", "not-conformant": "#f5b5b5", "inconclusive": "#f3e3a8"}
_EXPECTED_COLOUR = "#cddcf3"  # not conformant, as Flink's documentation says it will be: not a finding


def write_html(doc: dict[str, Any], path: Path) -> Path:
    """The table: one row per configuration, one column per failure, a link to each trace."""
    rows: dict[str, dict[str, dict[str, Any]]] = {}
    failures: list[str] = []
    for c in doc["cells"]:
        cfg = c["config"]
        r = cfg["rescale"]
        job = "wordcount" if c["module"] == "wordcount" else Path(c["module"]).stem
        row = f"{job} | {cfg['backend']} | {cfg['checkpoints']} | rescale {f'{r[0]}:{r[1]}' if r else '-'}"
        rows.setdefault(row, {})[c["failure"]["kind"]] = c
        if c["failure"]["kind"] not in failures:
            failures.append(c["failure"]["kind"])
    s = doc["summary"]
    parts = ["<!doctype html><meta charset='utf-8'><title>rollcheck flink matrix</title>",
             "<style>body{font-family:sans-serif}td,th{border:1px solid #999;padding:4px 8px;"
             "vertical-align:top;font-size:13px}table{border-collapse:collapse}</style>",
             "<h1>rollcheck flink matrix</h1>",
             f"<p>{s['conformant']} conformant, {s['not_conformant']} not conformant "
             f"({s.get('expected_by_engine', 0)} expected by the engine, {s.get('findings', 0)} finding(s)), "
             f"{s['inconclusive']} inconclusive</p><table><tr><th>job | backend | checkpoints | rescale</th>"]
    parts += [f"<th>{html.escape(f)}</th>" for f in failures]
    parts.append("</tr>")
    for row, by_failure in rows.items():
        parts.append(f"<tr><td>{html.escape(row)}</td>")
        for f in failures:
            c = by_failure.get(f)
            if c is None:
                parts.append("<td></td>")
                continue
            word = c["verdict"] + (" (expected by the engine)" if c.get("expected_by_engine") else "")
            links = [f"<a href='{html.escape(Path(c['trace']).name)}'>trace</a>"]
            for k in ("witness", "reproducer"):
                if c.get(k):
                    links.append(f"<a href='{html.escape(Path(c[k]).name)}'>{k}</a>")
            colour = _EXPECTED_COLOUR if c.get("expected_by_engine") else _COLOUR[c["verdict"]]
            parts.append(f"<td style='background:{colour}'><b>{html.escape(word)}</b><br>"
                         f"{html.escape(c['reason'][:300])}<br>{' '.join(links)}</td>")
        parts.append("</tr>")
    parts.append("</table>")
    path.write_text("".join(parts))
    return path
