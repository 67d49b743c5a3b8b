"""Minimise a finding of the Spark matrix and write a standalone reproducer script.

A *finding* is a matrix cell that is not conformant where Spark's documentation does not allow it
(:mod:`rollcheck.spark_replay.matrix.run`). :func:`minimise_and_write` shrinks its input — first the
number of batches (the batches after the failing batch K, then those before it), then the rows
of each batch (halving, greedily: the first half, else the second) —
re-recording the cell after every step (at most :data:`MAX_RUNS` recordings) and keeping a step
only if the cell still fails the same check. :func:`reproducer_source` then writes a script that
imports only pyspark and the standard library: the user's query module verbatim, the minimised
input, the same failure at the same kill point; it runs a failure-free reference and the failing
run (one driver process, a second one after a kill; one core, no UI, the JVM's fast start-up
settings: about 15 s on an idle machine), and prints every lost or duplicated row with the batch
that handed it to the sink. It is meant to be attached to a report to the Spark project; the
matrix runs it once and records whether it showed the finding.

A finding of an oracle that does not trust Spark's own failure-free run (``release-differential``,
``batch-equivalent``; :mod:`rollcheck.spark_replay.oracles.checks`) is wrong with or without the failure,
so comparing the two runs shows nothing. Its reproducer carries the *expected* final table of the
minimised input (:func:`expected_table`: the failure-free run on the reference release, or the
query evaluated as a batch job) and also compares the failure-free run with it, per ``KEY``: run
with the affected release's pyspark it prints the wrong rows and exits 1, with the fixed one it
exits 0. A query that fails where no failure was injected (in the failure-free run, or when it
restarts from its checkpoint) is shown as well (``QUERY FAILED``).

References
----------
Zeller & Hildebrandt, "Simplifying and Isolating Failure-Inducing Input" (delta debugging; the
row step is its one-pass, halving variant).
"""

from __future__ import annotations

import datetime
import json
import math
import pprint
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rollcheck.infra.matrix.reproducer import run_reproducer
from rollcheck.infra.matrix.shrink import shrink_batches
from rollcheck.infra.templates import fill_template, read_template
from rollcheck.pyimpl.errors import InvalidInputError
from rollcheck.pyimpl.patternio import atomic_write_text
from rollcheck.spark_replay.faults.killpoints import STATE_STORES
from rollcheck.spark_replay.query.module import SINGLE_SOURCE

__all__ = ["module_with_rows", "reproducer_source", "fill_template", "minimise_and_write", "reproducer_python",
           "expected_table", "MAX_RUNS", "SHOWS", "TEMPLATE_PACKAGE", "TEMPLATE_FILE"]

#: How the reproducer's lines that show a finding begin (what the matrix looks for in its output).
SHOWS = ("LOST row", "DUPLICATED row", "MISSING row", "EXTRA row", "WRONG row", "QUERY FAILED")

#: Re-recordings a minimisation may spend at most (each is a full Spark run; the matrix's
#: ``shrink_runs`` may ask for fewer).
MAX_RUNS = 6


def _value(v: Any) -> str:
    """Python source of one value.

    A float that is not finite as ``float("nan")`` / ``float("inf")`` (``repr`` gives ``nan``, a
    name no script defines).
    """
    if isinstance(v, float) and not math.isfinite(v):
        return f'float("{v}")'
    if isinstance(v, dict):
        return "{" + ", ".join(f"{_value(k)}: {_value(x)}" for k, x in v.items()) + "}"
    if isinstance(v, list):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    if isinstance(v, tuple):
        return "(" + ", ".join(_value(x) for x in v) + ("," if len(v) == 1 else "") + ")"
    return repr(v)


def _literal(rows: list[Any]) -> str:
    """Python source of the batches (datetimes as ``datetime.datetime(...)``).

    Lists of rows, or one ``{source: rows}`` dict per batch for a module of several sources.

    >>> import datetime as dt
    >>> _literal([[(dt.datetime(2024, 1, 1, 0, 0, 5), "a", 1)]])
    "[[(datetime.datetime(2024, 1, 1, 0, 0, 5), 'a', 1)]]"
    >>> _literal([{"clicks": [[1, "u"]]}, {}])
    "[{'clicks': [(1, 'u')]}, {}]"
    >>> _literal([[(float("nan"), float("-inf"), 1.5)]])
    '[[(float("nan"), float("-inf"), 1.5)]]'
    """
    text = _value([{n: [tuple(r) for r in rs] for n, rs in b.items()} if isinstance(b, dict)
                   else [tuple(r) for r in b] for b in rows])
    eval(compile(text, "<rows>", "eval"), {"datetime": datetime})  # every value must evaluate
    return text


def _n_rows(rows: list[Any]) -> int:
    return sum(sum(len(r) for r in b.values()) if isinstance(b, dict) else len(b) for b in rows)


def module_with_rows(source: str, rows: list[Any]) -> str:
    """The user's module source with ``batches(seed)`` replaced by fixed ``rows``.

    Lists of rows, or ``{source: rows}`` dicts.
    """
    return (source.rstrip() + "\n\n\n# --- rollcheck: the minimised input replaces batches(seed) ---\n"
            "import datetime  # noqa: E402\n\n\n"
            f"def batches(seed):\n    return {_literal(rows)}\n")


#: The reproducer script: a module of its own (``templates/spark_reproducer.py``, linted and
#: type-checked as such) whose placeholder lines :func:`reproducer_source` replaces whole.
TEMPLATE_PACKAGE = "rollcheck.spark_replay.templates"
TEMPLATE_FILE = "spark_reproducer.py"
_FILLED = "  # filled by rollcheck"
_DOC_LINE = '"""Reproducer of a Spark matrix finding (rollcheck writes its account here)."""'


def _template() -> str:
    return read_template(TEMPLATE_PACKAGE, TEMPLATE_FILE)


def _docstring(*, title: str, reason: str, n_batches: int, n_rows: int, failure: str, script: str,
               expected_doc: str) -> str:
    return (f'"""Reproducer: {title}\n\n{reason}\n\n'
            "Generated by rollcheck's Spark matrix; it imports only pyspark and the standard library. It runs\n"
            f"the query below on {n_batches} micro-batch(es) ({n_rows} input rows) twice: once without failure\n"
            f"(the reference) and once with the failure ({failure}), restarting the query from the same\n"
            "checkpoint folder (in a new driver process after a kill), then prints every row of the output that\n"
            f"is duplicated or lost compared with the reference, with the batch that handed it to the sink"
            f"{expected_doc}.\n"
            f"Run:  python {script} [WORKDIR]   (about a minute; exit 1 when a row differs; the work folder, a new\n"
            'temporary one by default, is kept)\n"""')


#: The reproducer's Spark settings besides the state store provider: the recording's (UTC, state
#: maintenance every second) and what makes a short local run start fast (no UI, the JVM's
#: client compiler only, the serial collector). ``@ROOT@`` is the reproducer's work folder.
REPRO_CONF = {"spark.sql.session.timeZone": "UTC", "spark.sql.streaming.stateStore.maintenanceInterval": "1s",
              "spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false",
              "spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1",
              "spark.sql.warehouse.dir": "@ROOT@/warehouse", "spark.python.worker.reuse": "true",
              "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"}


def _block(text: str) -> str:
    r"""``text`` as a readable triple-quoted Python literal (backslashes and triple quotes escaped).

    >>> src = 'x = "a\\b"\n' + '"' * 3 + "doc" + '"' * 3 + "\n"
    >>> eval(_block(src)) == src
    True
    """
    body = text.replace("\\", "\\\\").replace('"""', '\\"\\"\\"')
    return '"""\\\n' + body + '"""'


def reproducer_source(module_source: str, rows: list[Any], *, failure: str,
                      kill_point: str | None, fail_at: int, state_store: str, title: str, reason: str,
                      script: str = "reproducer.py", shuffle_partitions: int = 2,
                      master: str = "local[1]", expected: dict[str, Any] | None = None) -> str:
    """The standalone reproducer script (module docstring); exit 1 when it shows the bug.

    It runs on ``master`` (one core by default: the input is tiny) with the recording's number of
    shuffle partitions (the number of state store partitions) and :data:`REPRO_CONF`. ``expected``
    (:func:`expected_table`) is the final table the failure-free run must give.
    """
    if failure not in ("task", "sink", "kill") or (kill_point is not None) != (failure == "kill"):
        raise ValueError(f"no reproducer for failure {failure!r} at kill point {kill_point!r}")
    conf = {**REPRO_CONF, "spark.sql.shuffle.partitions": str(shuffle_partitions), **STATE_STORES[state_store]}
    doc = _docstring(
        title=title, reason=reason.replace("\\", "/").replace('"""', "'''"), n_batches=len(rows),
        n_rows=_n_rows(rows),
        failure=failure + (f" at kill point {kill_point}" if kill_point else "") + f" in batch {fail_at}",
        script=script,
        expected_doc=(f", and every KEY whose row in the failure-free run differs from {expected['from']} "
                      "(EXPECTED below)" if expected else ""))
    expected_from = expected["from"] if expected else "nowhere: the finding shows in the run with the failure"
    text = fill_template(_template(), {
        _DOC_LINE: doc,
        "FAIL_AT = None" + _FILLED: f"FAIL_AT = {fail_at}",
        "FAILURE = None" + _FILLED: f"FAILURE = {failure!r}",
        "KILL_POINT = None" + _FILLED: f"KILL_POINT = {kill_point!r}",
        "MASTER = None" + _FILLED: f"MASTER = {master!r}",
        "SPARK_CONF = None" + _FILLED: "SPARK_CONF = " + pprint.pformat(conf, width=100),
        "# EXPECTED_FROM (filled by rollcheck).": f"# {expected_from}.",
        "EXPECTED = None" + _FILLED: "EXPECTED = " + pprint.pformat(expected, width=100, sort_dicts=False),
        "USER_SOURCE = None" + _FILLED: "USER_SOURCE = " + _block(module_with_rows(module_source, rows)),
    })
    compile(text, script, "exec")
    return text


def expected_table(trace: Path, violated: set[str] | frozenset[str]) -> dict[str, Any] | None:
    """The final table the failure-free run of a recording should have given.

    From an oracle that does not trust it, for a finding whose violated checks are ``violated``;
    None when the finding shows in the run with the failure (the reproducer then compares the two
    runs only).

    ``release-differential`` violated: the failure-free run on the reference release (its rows in
    the trace's ``spark.release_reference``). Else ``batch-equivalent`` violated, in update or
    complete mode, with no late row: the query evaluated as a batch job over the input (the
    ``spark.batch_evaluation`` of the reference run). In append mode the batch job also gives rows
    the stream may rightly not have emitted yet, so it is no expected table there.

    Returns
    -------
    dict or None
        ``{"from": words, "key": KEY columns, "columns": compared columns or None (all), "rows": [...]}``.
    """
    from rollcheck.spark_replay.trace import read_trace

    if trace.stat().st_size == 0:
        return None
    t = read_trace(trace)
    cfg = t.header.get("config") or {}
    found = {k: t.of_kind(k) for k in ("spark.release_reference", "spark.batch_evaluation")}
    ev = next((e for e in found.get("spark.batch_evaluation", []) if e.get("run") == "reference"
               and e.get("applicable") and e.get("variants")), None)
    cols = None if ev is None else [str(f["name"]) for f in ev.get("fields") or []]
    key = [str(k) for k in cfg.get("key") or []]
    if "release-differential" in violated and found.get("spark.release_reference"):
        r = found["spark.release_reference"][0]
        return {"from": f"the failure-free run on pyspark {r.get('engine_version')}", "key": key, "columns": cols,
                "rows": list(r.get("output") or [])}
    if ("batch-equivalent" in violated and ev is not None and cfg.get("output_mode") in ("update", "complete")
            and not ev.get("late") and len(ev["variants"]) == 1):
        return {"from": "the same query run as a batch job over the input", "key": key, "columns": cols,
                "rows": list(ev["variants"][0]["rows"])}
    return None


def _module_source(module: str) -> str:
    from rollcheck.spark_replay.query.record import load_query

    uq = load_query(module)
    path = getattr(uq.module, "__file__", None)
    if not path:
        raise InvalidInputError("the query module has no source file", source=module)
    return Path(path).read_text(encoding="utf-8")


def reproducer_python(engine_version: str | None) -> Path:
    """The interpreter a finding's reproducer runs with.

    The running one for the pinned release (None), else the environment of pyspark
    ``engine_version`` (:func:`rollcheck.spark_replay.releases.spark_environment`, made once and
    reused).

    >>> import sys
    >>> str(reproducer_python(None)) == sys.executable
    True
    """
    from rollcheck.spark_replay.releases import spark_environment

    return Path(sys.executable) if engine_version is None else spark_environment(engine_version)


def minimise_and_write(cell: Any, opts: Any, result: dict[str, Any],
                       run: Callable[[list[str], float, Path], tuple[int | None, str]],
                       argv_for: Callable[[str, Path, int], list[str]],
                       root_cause: Callable[[Path], str | None]) -> dict[str, Any]:
    """Shrink the finding of ``cell``, write ``DIR/<cell>.reproducer.py`` and run it once.

    Return the fields to add to the cell's entry (``reproducer``, ``minimised``, ``reproducer_run``:
    its exit status, seconds, the rows it printed, and whether it showed the finding).

    ``run(argv, timeout, log)`` runs a recording (and at the end the reproducer), ``argv_for(module_file,
    trace, fail_at)`` is the cell's recording command for another module file with the failure at
    batch ``fail_at``, ``root_cause(trace)`` the name of the violated check at the root of a replay
    (the matrix provides all three).

    The steps, each kept only if the re-recording still fails the same check: (1) drop the batches
    after the failing batch K (keep 0..K, else 0..K+1, ...); (2) drop the batches before K (the
    failure then strikes at batch 0); (3) halve each batch's rows (the first half, else the second)
    while it fails (the core's search, :func:`rollcheck.infra.matrix.shrink.shrink_batches`). At
    most ``opts.shrink_runs`` (at most :data:`MAX_RUNS`) re-recordings; the reproducer is run
    unless ``opts.run_reproducer`` is false.
    """
    from rollcheck.spark_replay.query.record import load_query

    source = _module_source(cell.module)
    uq = load_query(cell.module)
    data = uq.batches(opts.seed)
    if opts.batches is not None:
        data = data[: opts.batches]
    # the minimiser's batches are lists: of rows, or (several sources) of (source, row) pairs, so
    # that halving a batch may drop one source's rows
    rows: list[list[Any]] = ([[(n, r) for n, rs in b.items() for r in rs] for b in data] if uq.multi
                             else [b.get(SINGLE_SOURCE, []) for b in data])

    def shaped(batches: list[list[Any]]) -> list[Any]:
        if not uq.multi:
            return batches
        return [{n: [r for m, r in b if m == n] for n in dict.fromkeys(m for m, _ in b)} for b in batches]
    want = json.loads(Path(result["checks"]).read_text()).get("root_cause")
    work = opts.out / f"{cell.stem}.min"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    tries = 0
    failing: dict[tuple[str, int], Path] = {}

    def still_fails(candidate: list[list[Any]], fail_at: int) -> bool:
        nonlocal tries
        tries += 1
        mod = work / f"try{tries}.py"
        mod.write_text(module_with_rows(source, shaped(candidate)), encoding="utf-8")
        trace = work / f"try{tries}.jsonl"
        rc, _ = run(argv_for(str(mod), trace, fail_at), opts.cell_timeout, work / f"try{tries}.log")
        if rc not in (0, 1) or not trace.exists():
            return False
        try:
            ok = root_cause(trace) == want
        except InvalidInputError:
            return False
        if ok:
            failing[(json.dumps(candidate, default=str), fail_at)] = trace
        return ok

    budget = min(MAX_RUNS, int(getattr(opts, "shrink_runs", MAX_RUNS)))
    dropped, original = 0, rows
    if uq.multi:  # several sources: first each source left out (its rows gone, its batches idle)
        for name in uq.sources:
            if dropped >= budget or len({m for b in rows for m, _ in b}) < 2:
                break
            cand = [[(m, r) for m, r in b if m != name] for b in rows]
            if cand == rows:
                continue
            dropped += 1
            if still_fails(cand, opts.fail_at_batch):
                rows = cand
    best, k, runs = shrink_batches(rows, opts.fail_at_batch, still_fails, budget - dropped)
    runs += dropped
    script = opts.out / f"{cell.stem}.reproducer.py"
    best_trace = failing.get((json.dumps(best, default=str), k)) or (Path(result["trace"]) if result.get("trace")
                                                                      else None)
    checks = json.loads(Path(result["checks"]).read_text())
    violated = {str(c.get("name")) for c in checks.get("checks") or [] if c.get("status") == "violated"}
    expected = expected_table(best_trace, violated) if best_trace is not None and best_trace.is_file() else None
    text = reproducer_source(source, shaped(best), failure=cell.failure, kill_point=cell.kill_point, fail_at=k,
                             state_store=cell.provider, title=f"{cell.name} with {cell.provider} state, "
                             f"{cell.column} at batch {k}", reason=result["reason"], script=script.name,
                             expected=expected)
    atomic_write_text(script, text)
    out: dict[str, Any] = {"reproducer": str(script),
                           "minimised": {"batches": len(best), "rows": sum(len(b) for b in best), "fail_at_batch": k,
                                         "runs": runs, "from_batches": len(original),
                                         "from_rows": sum(len(b) for b in original)}}
    if getattr(opts, "run_reproducer", True):
        # run it once, as a user would (isolated mode: no current folder on the path; it imports no
        # rollcheck module), on the cell's release (--engine-version: that release's environment,
        # made before the cells ran): does it show the rows?
        python = reproducer_python(getattr(cell, "engine_version", None))
        out["reproducer_run"] = run_reproducer([str(python), "-I", str(script), str(work / "reproducer-run")],
                                               run, opts.cell_timeout, work / "reproducer.log", shows=SHOWS)
    return out
