"""The bug zoo's runner (``make bench-bugs``): every entry of ``manifest.json`` on both releases.

For each entry and each of its two releases (the affected one and the one that fixed it) it runs

1. the entry's **standalone reproducer** (``spark_standalone.py`` / ``flink_standalone.py``,
   PySpark or PyFlink only, no rollcheck import) with the Python of that release's environment
   (rollcheck's own per-release environments: ``spark_environment(V)`` / ``flink_python(V)``),
   and judges it against the entry's right output: ``reproduced`` when the run failed or its
   final table is not the right one, else ``not reproduced`` (``no result`` when a module with
   several sources was not fed one data batch per micro-batch: ``feed_aligned`` false);
2. **rollcheck** on the entry's matrix slice with ``--engine-version V``: ``spark matrix`` /
   ``flink matrix`` where the matrix takes the flag, else ``spark record query --engine-version``
   followed by ``spark replay`` (one cell: the slice's first provider and failure); where neither
   exists, ``not run`` with the reason.

It writes ``benchmarks/results/engine-bugs.json`` (every number in it comes from these runs) and
the table in ``docs/engine-bugs.md``. A bug rollcheck misses stays in the table as missed::

    python benchmarks/engine_bugs/run.py [--only ID[,ID]] [--skip-rollcheck] [--skip-reproducer]
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

__all__ = ["main", "judge", "render_markdown", "recall", "run_script", "schedule_flags", "combine"]

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
RESULTS = ROOT / "benchmarks" / "results" / "engine-bugs.json"
DOC = ROOT / "docs" / "engine-bugs.md"
ROLLCHECK = [str(ROOT / ".venv" / "bin" / "rollcheck")]
#: seconds one reproducer or one rollcheck command may take
LIMIT = 1800


def judge(result: dict[str, Any], right_rows: int | None, right_table: list[Any] | None = None) -> str:
    """``reproduced`` when the run failed (or could not restore) or its final table has not the
    right number of rows, or (where the entry gives ``right_table``, for a bug that changes values
    and not the number of rows) is not that table; ``not reproduced`` otherwise; ``no result``
    when nothing was printed.

    Examples
    --------
    >>> judge({"error": None, "rows": [{"a": 1}]}, 1)
    'not reproduced'
    >>> judge({"error": "NoSuchElementException", "rows": []}, 1)
    'reproduced'
    >>> judge({"error": None, "rows": []}, 1)
    'reproduced'
    >>> judge({}, 1)
    'no result'
    >>> judge({"error": None, "rows": [["all", 240, 240]]}, 1, [["all", 240, 124]])
    'reproduced'
    >>> judge({"error": None, "rows": [["all", 240, 124]]}, 1, [["all", 240, 124]])
    'not reproduced'
    """
    if not result:
        return "no result"
    if result.get("error") or result.get("restore_ok") is False:
        return "reproduced"
    if right_rows is not None and len(result.get("rows", [])) != right_rows:
        return "reproduced"
    if right_table is not None and sorted(json.dumps(r) for r in result.get("rows", [])) != \
            sorted(json.dumps(r) for r in right_table):
        return "reproduced"
    return "not reproduced"


def _python_of(engine: str, version: str) -> str:
    """The interpreter of ``version``'s environment (made once by rollcheck in its cache folder)."""
    if engine == "spark":
        from rollcheck.spark_replay.releases import spark_environment

        return str(spark_environment(version))
    from rollcheck.flink_replay.releases import flink_python

    py = flink_python(version)
    if py is None:
        raise RuntimeError(f"no environment for apache-flink {version}")
    return str(py)


def _run_reproducer(entry: dict[str, Any], version: str, work: Path) -> dict[str, Any]:
    script = HERE / ("spark_standalone.py" if entry["engine"] == "spark" else "flink_standalone.py")
    t0 = time.time()
    try:
        py = _python_of(entry["engine"], version)
    except Exception as e:  # an environment that cannot be made is reported, not hidden
        return {"outcome": "not run", "reason": f"environment of {version}: {e}", "seconds": 0.0}
    cmd = ["nice", py, str(script), str(HERE / entry["module"]), *entry.get("reproducer_args", []),
           "--workdir", str(work / f"repro-{version}")]
    env = dict(os.environ)
    env["PATH"] = str(Path(py).parent) + os.pathsep + env.get("PATH", "")
    p = run_script(cmd, env, work / f"repro-{version}.log", LIMIT)
    if p is None:
        return {"outcome": "no result", "reason": f"timed out after {LIMIT} s", "seconds": LIMIT}
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
    result = json.loads(lines[-1]) if lines else {}
    expected = entry["expected"]
    outcome = judge(result, expected.get("right_rows"), expected.get("right_table"))
    if result.get("feed_aligned") is False:  # a several-source run whose micro-batches did not read the module's batches
        outcome = "no result"
    return {"outcome": outcome, "error": result.get("error"), "feed_aligned": result.get("feed_aligned"),
            "input_per_batch": result.get("input_per_batch"), "table": result.get("rows") if expected.get("right_table") else None,
            "rows": len(result.get("rows", [])), "restore_ok": result.get("restore_ok"),
            "engine_version": result.get("version"), "seconds": round(time.time() - t0, 1),
            "stderr_tail": p.stderr.strip().splitlines()[-1][:300] if not lines and p.stderr.strip() else None}


def run_script(cmd: list[str], env: dict[str, str], log: Path, limit: float) -> subprocess.CompletedProcess[str] | None:
    """Run a reproducer in a session of its own, its output in files (``log`` and ``log`` + ``.err``);
    once it exited, whatever it left running (a Spark JVM that did not exit with its driver keeps the
    output open) is killed with its session. None when it ran longer than ``limit`` seconds.

    Examples
    --------
    >>> import sys, tempfile
    >>> d = Path(tempfile.mkdtemp())
    >>> run_script([sys.executable, "-c", "print('{}')"], dict(os.environ), d / "x.log", 60).stdout
    '{}\\n'
    """
    log.parent.mkdir(parents=True, exist_ok=True)
    err = log.with_name(log.name + ".err")
    with open(log, "w", encoding="utf-8") as out, open(err, "w", encoding="utf-8") as eout:
        proc = subprocess.Popen(cmd, stdout=out, stderr=eout, text=True, env=env, start_new_session=True)
        try:
            code = proc.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            code = None
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)  # the script's session: only what it started
        proc.wait()
    if code is None:
        return None
    return subprocess.CompletedProcess(cmd, code, log.read_text(encoding="utf-8"), err.read_text(encoding="utf-8"))


def _help(*sub: str) -> str:
    p = subprocess.run([*ROLLCHECK, *sub, "--help"], capture_output=True, text=True, cwd=ROOT)
    return p.stdout


def _failed_checks(obj: Any) -> list[str]:
    """The names of the checks that failed anywhere in a replay or matrix answer."""
    out: list[str] = []
    if isinstance(obj, dict):
        if "name" in obj and (obj.get("ok") is False or obj.get("status") == "violated"):  # replay / matrix cell
            out.append(str(obj["name"]))
        for v in obj.values():
            out.extend(_failed_checks(v))
    elif isinstance(obj, list):
        for v in obj:
            out.extend(_failed_checks(v))
    return sorted(set(out))


def _json_of(text: str) -> Any:
    text = text.strip()
    try:
        return json.loads(text)
    except ValueError:
        starts = [i for i, c in enumerate(text) if c == "{"]
        for i in starts:
            try:
                return json.loads(text[i:])
            except ValueError:
                continue
    return None


def _rollcheck(entry: dict[str, Any], version: str, work: Path) -> dict[str, Any]:
    s = entry["slice"]
    module = str(HERE / entry["module"])
    out = work / f"rollcheck-{version}"
    t0 = time.time()
    # on the affected release, the fixed one is the reference: release-differential compares the two,
    # and a finding's reproducer runs on both (reproducer_run keyed by release)
    ref = ["--reference-version", entry["fixed"]] if version == entry["affected"] else []
    if entry["engine"] == "spark":
        if s.get("runner") != "record" and "--engine-version" in _help("spark", "matrix"):
            cmd = [*ROLLCHECK, "spark", "matrix", "--module", module, "--engine-version", version,
                   "--providers", ",".join(s["providers"]), "--failures", ",".join(s["failures"]),
                   "--fail-at-batch", str(s["fail_at_batch"]), "--out", str(out), "--jobs", "1", "--json", *ref]
            if s.get("kill_points"):
                cmd += ["--kill-points", ",".join(s["kill_points"])]
            if s.get("retry_schedules"):  # the retry failure's schedules (a column each)
                cmd += ["--retry-schedules", ",".join(s["retry_schedules"])]
            if s.get("minimise") is False:  # the entry's slice says a finding is reported as found, not minimised
                cmd += ["--no-minimise"]
            how = "spark matrix" + (" (findings not minimised)" if s.get("minimise") is False else "")
            cmds = [cmd]
        elif "--engine-version" in _help("spark", "record", "query"):
            trace = out / "trace.jsonl"
            out.mkdir(parents=True, exist_ok=True)
            rec = [*ROLLCHECK, "spark", "record", "query", "--module", module, "--engine-version", version,
                   "--out", str(trace), "--fail-at-batch", str(s["fail_at_batch"]),
                   "--failure", s["failures"][0], "--state-store", s["providers"][0],
                   "--workdir", str(out / "work"), "--json", *ref]
            if s["failures"][0] == "kill" and s.get("kill_points"):
                rec += ["--kill-point", s["kill_points"][0]]
            if s["failures"][0] == "retry" and s.get("retry_schedules"):
                rec += schedule_flags(s["retry_schedules"][0])
            how = "spark record query + spark replay (one cell: the slice's first provider and failure" + (
                f", retry schedule {s['retry_schedules'][0]}" if s["failures"][0] == "retry" and s.get("retry_schedules")
                else "") + ")"
            cmds = [rec, [*ROLLCHECK, "spark", "replay", str(trace), "--json"]]
        else:
            return {"found": None, "how": "not run",
                    "reason": "this rollcheck has no --engine-version on spark matrix or spark record query"}
    else:
        if "--engine-version" not in _help("flink", "matrix"):
            return {"found": None, "how": "not run", "reason": "this rollcheck has no --engine-version on flink matrix"}
        cmd = [*ROLLCHECK, "flink", "matrix", "--module", module, "--engine-version", version,
               "--backends", ",".join(s["backends"]), "--checkpoints", ",".join(s["checkpoints"]),
               "--failures", ",".join(s["failures"]), "--out", str(out), "--jobs", "1", "--json",
               "--run-reproducer", *ref]
        for r in s.get("rescale", []):
            cmd += ["--rescale", r, "--no-same"]
        how = "flink matrix"
        cmds = [cmd]
    runs: list[dict[str, Any]] = []
    answer: Any = None
    for c in cmds:
        try:
            p = subprocess.run(["nice", *c], capture_output=True, text=True, timeout=LIMIT, cwd=ROOT)
        except subprocess.TimeoutExpired:
            runs.append({"command": " ".join(c[1:]), "exit": None, "note": f"timed out after {LIMIT} s"})
            break
        answer = _json_of(p.stdout)
        err = p.stderr.strip().splitlines()
        runs.append({"command": " ".join(c[1:]), "exit": p.returncode,
                     "stderr_tail": err[-1][:300] if err else None})
        if p.returncode not in (0, 1, 3):
            break
    last = runs[-1] if runs else {}
    failed = _failed_checks(answer)
    verdicts: list[str] = []
    if isinstance(answer, dict) and isinstance(answer.get("cells"), list):
        verdicts = sorted({str(c.get("verdict")) for c in answer["cells"]})
        found = any(c.get("verdict") == "not-conformant" for c in answer["cells"])
    elif isinstance(answer, dict) and "conformant" in answer and len(runs) == len(cmds):
        verdicts = [{True: "conformant", False: "not-conformant", None: "inconclusive"}[answer["conformant"]]]
        found = answer["conformant"] is False
    elif runs and last.get("exit") is None:  # rollcheck did not end in its time: no answer, not a miss
        found = None
    else:
        found = False
    return {"found": found, "how": how, "exit": last.get("exit"), "verdicts": verdicts,
            "failed_checks": failed, "runs": runs, "seconds": round(time.time() - t0, 1),
            "finding": finding_of(answer)}


#: A retry schedule's keys (``spark matrix --retry-schedules``) and the ``spark record query`` flag of each.
SCHEDULE_FLAGS = {"tasks": "--fail-tasks", "stage": "--fail-stage", "where": "--fail-where",
                  "attempts": "--fail-attempts", "load": "--fail-load", "then": "--after-failure"}


def schedule_flags(schedule: str) -> list[str]:
    """The ``spark record query`` flags of a retry schedule written as the matrix takes it.

    Examples
    --------
    >>> schedule_flags("load=first+tasks=all")
    ['--fail-load', 'first', '--fail-tasks', 'all']
    >>> schedule_flags("default")
    []
    """
    if schedule == "default":
        return []
    out: list[str] = []
    for part in schedule.split("+"):
        key, _, value = part.partition("=")
        if key not in SCHEDULE_FLAGS or not value:
            raise ValueError(f"retry schedule {schedule!r}: {part!r} is not KEY=VALUE with KEY one of "
                             f"{', '.join(SCHEDULE_FLAGS)}")
        out += [SCHEDULE_FLAGS[key], value]
    return out


def finding_of(answer: Any) -> dict[str, Any] | None:
    """The first not-conformant cell's minimised input, reproducer and reproducer runs (per release
    with ``--reference-version``), from a matrix's JSON; None without one.

    Examples
    --------
    >>> finding_of({"cells": [{"verdict": "conformant"}, {"verdict": "not-conformant", "reproducer": "r.py",
    ...             "minimised": {"batches": 1}, "reproducer_run": {"3.5.3": {"reproduced": True}}}]})["reproduced"]
    {'3.5.3': True}
    >>> finding_of({"cells": []}) is None
    True
    """
    if not isinstance(answer, dict) or not isinstance(answer.get("cells"), list):
        return None
    cell = next((c for c in answer["cells"] if isinstance(c, dict) and c.get("verdict") == "not-conformant"), None)
    if cell is None:
        return None
    runs = cell.get("reproducer_run") or {}
    per = ({r: bool(x.get("reproduced")) for r, x in runs.items() if isinstance(x, dict)}
           if runs and "reproduced" not in runs else ({"": bool(runs.get("reproduced"))} if runs else {}))
    return {"reproducer": cell.get("reproducer"), "minimised": cell.get("minimised"),
            "reproduced": per, "reproducer_run": runs}


def _status(affected: dict[str, Any], fixed: dict[str, Any]) -> str:
    if affected.get("found") is None:
        return "not run"
    if affected["found"] and not fixed.get("found"):
        return "found"
    if affected["found"]:
        return "found (but also a finding on the fixed release)"
    return "missed"


def render_markdown(results: dict[str, Any]) -> str:
    """The table of ``docs/engine-bugs.md`` from the results (nothing but what the runs gave)."""
    head = [
        "# The bug zoo: real engine bugs, rediscovered",
        "",
        "`make bench-bugs` runs every entry of `benchmarks/engine_bugs/manifest.json` on the release",
        "the bug was reported against and on the release that fixed it: the entry's standalone",
        "reproducer (PySpark or PyFlink only, no rollcheck import) and rollcheck on the entry's matrix",
        "slice with `--engine-version`. The numbers below are from the bench passes merged on "
        f"{results['generated']} (`benchmarks/results/engine-bugs.json`).",
        "",
        "A reproducer counts as *reproduced* when its run failed, or its final output table (the last row per KEY) "
        "has not the entry's number of rows or, where the entry gives the right table (a bug that changes values, "
        "not rows), is not that table. A Flink reproducer with `--no-failure` runs the job once over its whole "
        "input (for a bug that shows with or without a failure); otherwise it fails the job half way and judges "
        "the output of the job restored from its checkpoint.",
        "",
        "*Needs a failure* says whether the bug shows only under a failure or a restore (a task retry, a "
        "driver crash and restart, a restore from a checkpoint): a failure-free run of the affected release "
        "is right.",
        "",
        "| bug | kind | needs a failure | releases (affected → fixed) | reproducer on affected / fixed | "
        "rollcheck on affected | check(s) that found it | rollcheck's reproducer of the finding, on affected / "
        "fixed | quiet on fixed | wall time (s; both releases, reproducer + rollcheck) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    rows = []
    for r in results["entries"]:
        a, f = r["affected"], r["fixed"]
        ra, rf = r["reproducer_run"].get(a, {}), r["reproducer_run"].get(f, {})
        ca, cf = r["rollcheck"].get(a, {}), r["rollcheck"].get(f, {})
        status = r["status"]
        found = {"found": "yes", "missed": "**missed**"}.get(status, status)
        checks = ", ".join(ca.get("failed_checks") or []) or ("—" if status != "missed" else "none failed")
        quiet = "—" if cf.get("found") is None else ("yes" if not cf.get("found") else "**no**")
        secs = sum(float(x.get("seconds") or 0) for x in (ra, rf, ca, cf))
        fnd = (ca.get("finding") or {}).get("reproduced") or {}
        words = {True: "reproduced", False: "not reproduced"}
        own = (f"{words[fnd[a]]} / {words[fnd[f]]}" if a in fnd and f in fnd
               else "not run (recorded before)" if status == "found" else "—")
        needs = "yes" if r.get("needs_failure") else "no"
        rows.append(f"| {r['id']} | {r['kind']} | {needs} | {a} → {f} | {ra.get('outcome', '—')} / {rf.get('outcome', '—')} "
                    f"| {found} | {checks} | {own} | {quiet} | {secs:.0f} |")
    notes = ["", "## Entries", ""]
    for r in results["entries"]:
        notes.append(f"- **{r['id']}** ({r['engine']}, `{r['module']}`): {r['description']}")
        notes.append(f"  Wrong on {r['affected']}: {r['expected']['wrong']}. Right on {r['fixed']}: "
                     f"{r['expected']['right']}.")
        for v in (r["affected"], r["fixed"]):
            c = r["rollcheck"].get(v)
            if c and c.get("how") != "not run":
                notes.append(f"  rollcheck on {v}: {c.get('how')}; verdicts {', '.join(c.get('verdicts') or []) or 'none'}; "
                             f"exit codes {[x.get('exit') for x in c.get('runs', [])]}; failed checks "
                             f"{', '.join(c.get('failed_checks') or []) or 'none'}.")
        if (r.get("slice") or {}).get("runner_reason"):
            notes.append(f"  Why spark record query and not the matrix: {r['slice']['runner_reason']}.")
        if r["status"] == "missed":
            notes.append(f"  rollcheck missed it: {r.get('lacks') or 'no check failed on the affected release'}.")
        if r["status"] == "not run":
            reason = next((x.get("reason") for x in r["rollcheck"].values() if x.get("reason")), r.get("note", ""))
            notes.append(f"  rollcheck not run: {reason}.")
    if results.get("notes"):
        notes += ["", "## Found while building the zoo (not fixed, so not an entry)", ""]
        notes += [f"- {n}" for n in results["notes"]]
    if results.get("candidates"):
        notes += ["", "## Recovery bugs examined, not entries", ""]
        notes += [f"- {n}" for n in results["candidates"]]
    s = results["summary"]
    tail = ["", f"Summary: {s['entries']} entries, reproduced on the affected release {s['reproduced_affected']}, "
            f"quiet reproducer on the fixed release {s['quiet_fixed_reproducer']}; rollcheck found "
            f"{s['found']}, missed {s['missed']}, not run {s['not_run']}, findings on fixed releases "
            f"{s['findings_on_fixed']}.", "", _recall_line(results["entries"]), ""]
    return "\n".join(head + rows + notes + tail)


def recall(entries: list[dict[str, Any]], needs_failure: bool) -> tuple[int, int]:
    """(found, found + missed) among the entries that need a failure (or that do not); entries
    rollcheck did not run count in neither.

    Examples
    --------
    >>> recall([{"needs_failure": True, "status": "found"}, {"needs_failure": True, "status": "missed"},
    ...         {"status": "found"}, {"needs_failure": True, "status": "not run"}], True)
    (1, 2)
    """
    mine = [e for e in entries if bool(e.get("needs_failure")) == needs_failure]
    found = sum(e["status"] == "found" for e in mine)
    return found, found + sum(e["status"] == "missed" for e in mine)


def _recall_line(entries: list[dict[str, Any]]) -> str:
    parts = []
    for needs, what in ((False, "bugs that show without a failure"), (True, "bugs that need a failure or a restore")):
        found, ran = recall(entries, needs)
        n = sum(bool(e.get("needs_failure")) == needs for e in entries)
        share = f" ({100 * found / ran:.0f} %)" if ran else ""
        parts.append(f"{what} {found}/{ran}{share} ({n} entries: {found} found, {ran - found} missed, "
                     f"{n - ran} neither: not run, or a finding on the fixed release too)")
    return "Recall (found / (found + missed)): " + "; ".join(parts) + "."


def combine(earlier: dict[str, Any] | None, later: dict[str, Any]) -> dict[str, Any]:
    """A later pass's result of an entry over an earlier one's: the later wins, but a part it skipped
    (``--skip-reproducer``: no reproducer runs; ``--skip-rollcheck``: no rollcheck runs) is the
    earlier pass's, and the status is judged again from the parts kept.

    Examples
    --------
    >>> a = {"reproducer_run": {"1": {"outcome": "reproduced"}}, "rollcheck": {}, "status": "not run",
    ...      "affected": "1", "fixed": "2"}
    >>> b = {"reproducer_run": {}, "rollcheck": {"1": {"found": True}, "2": {"found": False}}, "status": "found",
    ...      "affected": "1", "fixed": "2"}
    >>> c = combine(a, b)
    >>> c["reproducer_run"]["1"]["outcome"], c["status"]
    ('reproduced', 'found')
    """
    if earlier is None:
        return later
    out = dict(later)
    for part in ("reproducer_run", "rollcheck"):
        if not later.get(part) and earlier.get(part):
            out[part] = earlier[part]
    out["status"] = _status(out["rollcheck"].get(out["affected"], {"found": None}), out["rollcheck"].get(out["fixed"], {}))
    return out


def main(argv: list[str] | None = None) -> int:
    """Run the zoo; write the results JSON and the doc table; exit 0 (the table says what was found)."""
    global RESULTS
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default=None, help="comma-separated entry ids")
    ap.add_argument("--skip-rollcheck", action="store_true")
    ap.add_argument("--skip-reproducer", action="store_true")
    ap.add_argument("--work", default=None, help="folder for the runs (default: a temporary one, kept)")
    ap.add_argument("--results", default=str(RESULTS), help="the results file (default: %(default)s)")
    ap.add_argument("--merge", nargs="*", default=None, metavar="RESULTS",
                    help="only merge these results files (of passes run side by side) into --results "
                         "and write the doc table; entries in manifest order, a later file's entry wins")
    a = ap.parse_args(argv)
    RESULTS = Path(a.results).resolve()
    manifest = json.loads((HERE / "manifest.json").read_text(encoding="utf-8"))
    if a.merge is not None:
        got: dict[str, Any] = {}
        for f in a.merge:
            for e in json.loads(Path(f).read_text(encoding="utf-8")).get("entries", []):
                got[e["id"]] = combine(got.get(e["id"]), e)
        merged = []
        for e in manifest["entries"]:
            if e["id"] in got:
                r = got[e["id"]]
                if r.get("status") == "missed":  # what rollcheck lacks is written after seeing the miss
                    r["lacks"] = e.get("lacks") or r.get("lacks")
                if r.get("status") == "not run" and e.get("not_run_reason"):
                    r["note"] = e["not_run_reason"]
                r["needs_failure"] = bool(e.get("needs_failure"))
                if e["slice"].get("runner_reason"):  # written after seeing the matrix's answer
                    r["slice"] = dict(r["slice"], runner_reason=e["slice"]["runner_reason"])
            else:  # in the manifest, but no pass ran it: a row that says so, with no number
                r = {k: e[k] for k in ("id", "engine", "kind", "affected", "fixed", "module", "description",
                                       "slice", "expected", "sources")}
                r.update(reproducer_run={}, rollcheck={}, status="not run", needs_failure=bool(e.get("needs_failure")),
                         note="no bench pass ran this entry (the merged results do not contain it)")
            merged.append(r)
        _write(merged, manifest)
        return 0
    only = set(a.only.split(",")) if a.only else None
    work = Path(a.work or tempfile.mkdtemp(prefix="rollcheck-bench-bugs-"))
    previous = json.loads(RESULTS.read_text(encoding="utf-8")) if RESULTS.exists() else {"entries": []}
    kept = {e["id"]: e for e in previous.get("entries", [])}
    out_entries = []
    for entry in manifest["entries"]:
        if only is not None and entry["id"] not in only:
            if entry["id"] in kept:
                kept[entry["id"]]["needs_failure"] = bool(entry.get("needs_failure"))
                out_entries.append(kept[entry["id"]])
            continue
        ew = work / entry["id"]
        ew.mkdir(parents=True, exist_ok=True)
        rec: dict[str, Any] = {k: entry[k] for k in ("id", "engine", "kind", "affected", "fixed", "module",
                                                     "description", "slice", "expected", "sources")}
        rec["reproducer_run"] = {}
        rec["rollcheck"] = {}
        rec["needs_failure"] = bool(entry.get("needs_failure"))
        for v in (entry["affected"], entry["fixed"]):
            print(f"[bench-bugs] {entry['id']} on {entry['engine']} {v} ...", file=sys.stderr, flush=True)
            if not a.skip_reproducer:
                rec["reproducer_run"][v] = _run_reproducer(entry, v, ew)
            if not a.skip_rollcheck:
                rec["rollcheck"][v] = _rollcheck(entry, v, ew)
        rec["status"] = _status(rec["rollcheck"].get(entry["affected"], {"found": None}),
                                rec["rollcheck"].get(entry["fixed"], {}))
        if rec["status"] == "missed":
            rec["lacks"] = entry.get("lacks")
        out_entries.append(rec)
        _write(out_entries, manifest)
    _write(out_entries, manifest)
    wrote = f"{RESULTS} and {DOC}" if RESULTS == (ROOT / "benchmarks" / "results" / "engine-bugs.json").resolve() \
        else f"{RESULTS} (merge it with --merge to update {DOC})"
    print(f"[bench-bugs] wrote {wrote}", file=sys.stderr)
    return 0


def portable(text: str) -> str:
    """``text`` without this machine's paths: the checkout's prefix dropped (paths relative to the
    repository), a run folder under the temporary directory written ``<work>``, the home folder ``~``.

    Examples
    --------
    >>> portable(f"--module {ROOT}/benchmarks/m.py --out /tmp/zoo-bench-c/SPARK-1/rollcheck-3.5.3")
    '--module benchmarks/m.py --out <work>/SPARK-1/rollcheck-3.5.3'
    """
    text = text.replace(str(ROOT) + os.sep, "")
    text = re.sub(re.escape(tempfile.gettempdir()) + r"/[^\s\"'/]+", "<work>", text)
    return text.replace(str(Path.home()) + os.sep, "~" + os.sep)


def _write(entries: list[dict[str, Any]], manifest: dict[str, Any]) -> None:
    def rep(e: dict[str, Any], which: str, outcome: str) -> bool:
        return bool(e["reproducer_run"].get(e[which], {}).get("outcome") == outcome)

    summary = {
        "entries": len(entries),
        "reproduced_affected": sum(rep(e, "affected", "reproduced") for e in entries),
        "quiet_fixed_reproducer": sum(rep(e, "fixed", "not reproduced") for e in entries),
        "found": sum(e["status"] == "found" for e in entries),
        "missed": sum(e["status"] == "missed" for e in entries),
        "not_run": sum(e["status"] == "not run" for e in entries),
        "findings_on_fixed": sum(bool(e["rollcheck"].get(e["fixed"], {}).get("found")) for e in entries),
        # [found, found + missed] among the bugs that show without a failure, and among those that need one
        "recall_failure_free": list(recall(entries, False)),
        "recall_needs_failure": list(recall(entries, True)),
    }
    results = {"format": "rollcheck.engine-bugs-results/1",
               "generated": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
               "entries": entries, "summary": summary, "notes": list(manifest.get("notes", [])),
               "candidates": list(manifest.get("candidates", []))}
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(portable(json.dumps(results, indent=1, sort_keys=True)) + "\n", encoding="utf-8")
    if RESULTS == (ROOT / "benchmarks" / "results" / "engine-bugs.json").resolve():
        DOC.write_text(render_markdown(results), encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main())
