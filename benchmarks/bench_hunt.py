"""Blind recall of the hunt (``make bench-hunt``): does the hunt find the zoo's bugs without their modules?

For every entry of the bug zoo (``benchmarks/engine_bugs/manifest.json``) that rollcheck's own
module shows (``verified``), it runs the hunt on the entry's affected release, with the entry's
fixed release as the reference, for a fixed budget — never with the entry's module: the hunt
writes its programs itself::

    rollcheck <engine> hunt --engine-version AFFECTED --reference-version FIXED --budget 45m \\
        --seed S --out build/hunt-recall/<ID> --json

A finding **rediscovers** the entry when it shows the entry's symptom (a query or restore failure:
the engine raised; wrong output or data loss: an output check failed without an exception) and its
standalone reproducer, run again here with the interpreter of the entry's fixed release, does not
show it there (while the hunt saw it reproduced on the affected one). Every other finding is
reported too (a new bug, or one the zoo lacks). For an entry the hunt missed, the operators the
entry's query needs that the hunt's programs never used say what the grammar lacks.

It writes ``benchmarks/results/hunt-recall.json`` and the table in ``docs/hunt-recall.md``::

    python -m benchmarks.bench_hunt [--budget 45m] [--seed 1] [--only ID[,ID]] [--engine spark|flink]
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

__all__ = ["NEEDS", "entries", "entry_seed", "symptom_of", "rediscovers", "lacks", "render_markdown", "main"]

ROOT = Path(__file__).resolve().parent.parent
MANIFEST = ROOT / "benchmarks" / "engine_bugs" / "manifest.json"
RESULTS = ROOT / "benchmarks" / "results" / "hunt-recall.json"
EVIDENCE = ROOT / "benchmarks" / "results" / "hunt-recall"
DOC = ROOT / "docs" / "hunt-recall.md"
WORK = ROOT / "build" / "hunt-recall"

#: What each entry's query is made of, in the grammars' operator names: an operator the hunt never
#: used is what its grammar lacked for that entry (read from the entries' descriptions).
NEEDS: dict[str, list[str]] = {
    "SPARK-49829": ["watermark", "window-tumbling", "join-inner"],
    "SPARK-49836": ["watermark", "window-tumbling", "window-of-window"],
    # the projection after the dedup must drop the event-time column: the grammar's projections keep
    # every column (no such kind in its vocabulary yet)
    "SPARK-50492": ["watermark", "dedup-within-watermark", "project-drops-event-time"],
    "SPARK-52553": ["agg-count", "long-key"],
    "SPARK-48934": ["pandas-state"],
    "SPARK-44464": ["pandas-state", "null-key"],
    "SPARK-47840": ["union", "literal-key", "agg-count"],
    "SPARK-43404": ["agg-count"],
    # the restart's first batch must find the right input of the outer join idle (the data's corner)
    "SPARK-57003": ["watermark", "join-left-outer"],
    "FLINK-30687": ["sql-filtered-agg", "sql-global-agg"],
    "FLINK-27741": ["sql-over-rank"],
    "FLINK-35112": ["map-row-field"],
    "FLINK-35351": ["custom-partitioner"],
}

#: The checks that show wrong output or lost data (no exception).
OUTPUT_CHECKS = frozenset({
    "batch-equivalent", "release-differential", "output-exactly-once", "output-at-least-once",
    "provider-differential", "partitioning-differential", "plan-stable", "complete-key-unique",
    "state-failure-free"})


def entries(engine: str | None = None, only: list[str] | None = None) -> list[dict[str, Any]]:
    """The zoo's entries whose module shows the bug (``verified``), of ``engine``, or just ``only``.

    >>> all(e["verified"]["value"] for e in entries())
    True
    >>> [e["id"] for e in entries(only=["SPARK-49829"])]
    ['SPARK-49829']
    """
    doc = json.loads(MANIFEST.read_text(encoding="utf-8"))
    out = []
    for e in doc["entries"]:
        if only and e["id"] not in only:
            continue
        if not only and not (e.get("verified") or {}).get("value"):
            continue
        if engine and e["engine"] != engine:
            continue
        out.append(e)
    return out


def symptom_of(finding: dict[str, Any]) -> str:
    """``"failure"`` when the engine raised, ``"output"`` when only output checks failed, else ``"other"``.

    >>> symptom_of({"exception": "java.util.NoSuchElementException", "checks": ["recovery-succeeded"]})
    'failure'
    >>> symptom_of({"exception": None, "checks": ["batch-equivalent"]})
    'output'
    >>> symptom_of({"exception": None, "checks": ["kill-point"]})
    'other'
    """
    if finding.get("exception"):
        return "failure"
    return "output" if set(finding.get("checks") or ()) & OUTPUT_CHECKS else "other"


def _entry_symptom(entry: dict[str, Any]) -> str:
    return "failure" if entry["kind"] in ("query failure", "restore failure") else "output"


def rediscovers(entry: dict[str, Any], finding: dict[str, Any], fixed_run: str) -> bool:
    """Whether ``finding`` is the entry's bug: its symptom, reproduced on the affected release
    (the hunt's ``reproducer_run``) and ``fixed_run == "not reproduced"`` on the fixed one.

    >>> e = {"kind": "wrong output", "affected": "3.5.3", "fixed": "3.5.4"}
    >>> f = {"exception": None, "checks": ["batch-equivalent"], "reproducer_run": {"3.5.3": "reproduced"}}
    >>> rediscovers(e, f, "not reproduced"), rediscovers(e, f, "reproduced")
    (True, False)
    """
    affected = (finding.get("reproducer_run") or {}).get(entry["affected"])
    return (symptom_of(finding) == _entry_symptom(entry) and affected == "reproduced"
            and fixed_run == "not reproduced")


def lacks(entry: dict[str, Any], coverage: dict[str, int]) -> list[str]:
    """The operators the entry's query needs that the hunt's programs never used.

    >>> lacks({"id": "SPARK-47840"}, {"union": 3, "agg-count": 9})
    ['literal-key']
    """
    return [op for op in NEEDS.get(entry["id"], []) if not coverage.get(op)]


def _python_of(engine: str, release: str) -> Path:
    if engine == "spark":
        from rollcheck.spark_replay.releases import spark_environment

        return spark_environment(release)
    from rollcheck.flink_replay.releases import flink_python

    py = flink_python(release)
    if py is None:
        raise RuntimeError(f"no PyFlink {release} environment")
    return py


def _run(argv: list[str], timeout: float, log: Path, env: dict[str, str] | None = None) -> int | None:
    """Run ``argv`` in a process group of its own, output to ``log``; kill the group at ``timeout``."""
    with log.open("w", encoding="utf-8") as out:
        p = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True, env=env)
        try:
            return p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
            return None
        finally:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)


def run_reproducer_on(engine: str, release: str, script: Path, log: Path) -> str:
    """``reproduced`` (exit 1) / ``not reproduced`` (exit 0) / ``could not run: ...`` on ``release``."""
    try:
        py = _python_of(engine, release)
    except Exception as e:  # an environment that cannot be made is said, not hidden
        return f"could not run: {e}"
    if engine == "spark":
        from rollcheck.spark_replay.releases import child_environment

        env = child_environment(py)
    else:
        env = None
    rc = _run([str(py), str(script)], 1800, log, env)
    return {1: "reproduced", 0: "not reproduced"}.get(rc, f"could not run: exit {rc}")  # type: ignore[arg-type]


def entry_seed(seed: int, entry_id: str) -> int:
    """The hunt's seed for one entry: drawn from the run's ``seed`` and the entry (entries on the same
    release would otherwise hunt the very same programs).

    >>> entry_seed(1, "SPARK-49836") == entry_seed(1, "SPARK-49836") != entry_seed(1, "SPARK-50492")
    True
    """
    return int(hashlib.blake2b(f"{seed}/{entry_id}".encode(), digest_size=4).hexdigest(), 16)


def hunt_entry(entry: dict[str, Any], budget: str, seed: int, jobs: int) -> dict[str, Any]:
    """Hunt blind on the entry's affected release (seed :func:`entry_seed`); judge its findings."""
    seed = entry_seed(seed, entry["id"])
    out = WORK / entry["id"]
    shutil.rmtree(out, ignore_errors=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, "-m", "rollcheck", entry["engine"], "hunt", "--engine-version", entry["affected"],
            "--reference-version", entry["fixed"], "--budget", budget, "--seed", str(seed), "--jobs", str(jobs),
            "--out", str(out), "--json"]
    t0 = time.monotonic()
    rc = _run(argv, _seconds(budget) * 1.5 + 1800, out.with_suffix(".log"))
    return judge_hunt(entry, out, budget=budget, seed=seed, exit_code=rc, wall=time.monotonic() - t0)


def judge_hunt(entry: dict[str, Any], out: Path, *, budget: str, seed: int, exit_code: int | None,
               wall: float) -> dict[str, Any]:
    """Judge the hunt in ``out`` (its ``hunt.json``) against the entry: the row of the results."""
    rc = exit_code
    row: dict[str, Any] = {"id": entry["id"], "engine": entry["engine"], "affected": entry["affected"],
                           "fixed": entry["fixed"], "kind": entry["kind"], "budget": budget, "seed": seed,
                           "exit": rc, "wall_seconds": round(wall, 1), "found": False, "findings": []}
    try:
        doc = json.loads((out / "hunt.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        row["error"] = f"no hunt document ({e}); exit {rc}; log {out.with_suffix('.log').name}"
        return row
    row.update(programs=doc.get("programs"), cells=doc.get("cells"), seconds=doc.get("seconds"),
               seed=doc.get("seed", seed))
    coverage = (doc.get("coverage") or {}).get("operators") or {}
    for f in doc.get("findings") or []:
        script = Path(f.get("reproducer") or "")
        if not script.is_absolute():
            script = out / script if (out / script).exists() else ROOT / script
        fixed_run = (run_reproducer_on(entry["engine"], entry["fixed"], script, out / f"{f['id']}.fixed.log")
                     if script.is_file() else "could not run: no reproducer")
        hit = rediscovers(entry, f, fixed_run)
        row["findings"].append({"id": f["id"], "signature": f.get("signature"), "status": f.get("status"),
                                "reproducer_run": {**(f.get("reproducer_run") or {}), entry["fixed"]: fixed_run},
                                "rediscovers": hit})
        keep = EVIDENCE / entry["id"]
        keep.mkdir(parents=True, exist_ok=True)
        for p in (Path(f.get("module") or ""), script, Path(f.get("report") or "")):
            src = p if p.is_absolute() else out / p
            if str(p) and src.is_file():
                shutil.copy2(src, keep / src.name)
        row["found"] = row["found"] or hit
    if not row["found"]:
        row["lacks"] = lacks(entry, coverage)
    return row


def _hunt_seconds(out: Path) -> float:
    """The wall seconds a finished hunt in ``out`` spent (its JSON's ``seconds``; 0 without one)."""
    try:
        return float(json.loads((out / "hunt.json").read_text(encoding="utf-8")).get("seconds") or 0.0)
    except (OSError, ValueError):
        return 0.0


def _seconds(budget: str) -> float:
    """``"45m"`` -> 2700.0 (``s``, ``m``, ``h``)."""
    unit = {"s": 1, "m": 60, "h": 3600}.get(budget[-1:], 1)
    return float(budget.rstrip("smh")) * unit


def render_markdown(rows: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    """The table of ``docs/hunt-recall.md``."""
    found = sum(r["found"] for r in rows)
    lines = ["# Blind recall of the hunt", "",
             "Written by `make bench-hunt` (`benchmarks/bench_hunt.py`) from its own runs: the hunt on each",
             "zoo entry's affected release (reference: the fixed release), without the entry's module.", "",
             f"Measured {meta['when']} on {meta['machine']}; budget {meta['budget']} per entry, seed {meta['seed']}.",
             f"**{found} of {len(rows)}** rediscovered.", "",
             "| entry | releases | found | finding | programs | cells | wall | the grammar lacks |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        hit = next((f for f in r["findings"] if f["rediscovers"]), None)
        what = f"{hit['id']} `{hit['signature']}`" if hit else (r.get("error") or f"{len(r['findings'])} other")
        lines.append(f"| {r['id']} | {r['affected']} / {r['fixed']} | {'yes' if r['found'] else 'no'} | {what} | "
                     f"{r.get('programs', '-')} | {r.get('cells', '-')} | {r['wall_seconds']:.0f} s | "
                     f"{', '.join(r.get('lacks') or []) or '-'} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="bench_hunt", description=__doc__.splitlines()[0])
    ap.add_argument("--budget", default="45m")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--engine", choices=("spark", "flink"))
    ap.add_argument("--only", type=lambda s: [x.strip() for x in s.split(",") if x.strip()])
    ap.add_argument("--judge-only", action="store_true",
                    help="judge the hunts already in build/hunt-recall/<ID> (a bench interrupted after them)")
    args = ap.parse_args(argv)
    chosen = entries(args.engine, args.only)
    if not chosen:
        print("bench_hunt: no zoo entry matches", file=sys.stderr)
        return 2
    rows = []
    for e in chosen:
        print(f"bench_hunt: {e['id']} on {e['engine']} {e['affected']} (reference {e['fixed']}), "
              f"budget {args.budget}", flush=True)
        if args.judge_only:
            rows.append(judge_hunt(e, WORK / e["id"], budget=args.budget, seed=entry_seed(args.seed, e["id"]),
                                   exit_code=None, wall=_hunt_seconds(WORK / e["id"])))
        else:
            rows.append(hunt_entry(e, args.budget, args.seed, args.jobs))
        print(f"bench_hunt: {e['id']}: {'found' if rows[-1]['found'] else 'missed'} "
              f"({rows[-1]['wall_seconds']:.0f} s)", flush=True)
        meta = {"when": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"), "budget": args.budget,
                "seed": args.seed, "machine": f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}"}
        _write(rows, meta)
    return 0


def _write(rows: list[dict[str, Any]], meta: dict[str, Any]) -> None:
    """Merge ``rows`` into the results (an entry's newest run replaces its older one) and the doc."""
    from rollcheck.pyimpl.patternio import atomic_write_text

    old = {}
    if RESULTS.is_file():
        try:
            old = {r["id"]: r for r in json.loads(RESULTS.read_text(encoding="utf-8")).get("entries", [])}
        except (OSError, ValueError):
            old = {}
    old.update({r["id"]: r for r in rows})
    merged = sorted(old.values(), key=lambda r: r["id"])
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(RESULTS, json.dumps({"format": "rollcheck.hunt-recall/1", **meta, "entries": merged},
                                          indent=1) + "\n")
    atomic_write_text(DOC, render_markdown(merged, meta))


if __name__ == "__main__":
    sys.exit(main())
