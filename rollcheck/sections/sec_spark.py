"""``rollcheck verify`` section: real PySpark runs recorded with failures and replayed.

Quick: one streaming run (sink failure) and one HMNR message-passing run (process failure) on
Spark, each replayed for conformance, plus the tamper checks (each tampered trace must be flagged
at its first offending event) and a seeded batch of in-process message-passing recordings.
Full: every streaming failure mode (task, sink, SIGKILL of the driver), the three protocols on
Spark, a larger in-process batch, and the protocol comparison sweep on Spark (identical to one
process). User queries (``docs/your-query.md``): quick records the example query with a sink
failure and the non-idempotent sink (its duplicate must be named); full records the library of
queries of the tests under task, sink and kill failures, each replayed and its checkpoint folder
validated. Full also runs a slice of the chaos matrix (:data:`MATRIX_SLICE`: every operator of
the query library once, every kill point once, both RocksDB providers). See ``docs/spark.md`` and
``docs/spark-matrix.md``.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

from rollcheck.sections._words import and_join, word
from rollcheck.suite import Row, VerifyContext

TITLE = "Spark: recorded runs with failures, replayed for conformance"


def _replay_row(algorithm: str, check: str, path: Path, seconds: float, tlc: bool = True) -> tuple[Row, Any]:
    from rollcheck.spark_replay.replay.tlc import replay_with_tlc

    res = replay_with_tlc(str(path), tlc=tlc)
    failed = [c for c in res.checks if c.status.value in ("violated", "unchecked")]
    detail = "; ".join(f"{c.name}: {c.detail}" for c in failed) if failed else ", ".join(c.name for c in res.checks)
    status = {True: "pass", False: "fail"}.get(res.conformant, "inconclusive")  # type: ignore[arg-type]
    return Row(algorithm, "Spark", check, status, len(res.checks), "checks", seconds, detail), res


def _tamper_rows(trace_path: Path, tampers: list[str], algorithm: str) -> list[Row]:
    from rollcheck.spark_replay.replay.conformance import replay_trace
    from rollcheck.spark_replay.tamper import TAMPERS
    from rollcheck.spark_replay.trace import parse_trace_text, read_trace

    rows = []
    caught = 0
    details = []
    t0 = time.perf_counter()
    trace = read_trace(trace_path)
    for name in tampers:
        lines, seq = TAMPERS[name](trace)
        r = replay_trace(parse_trace_text(("\n".join(lines) + "\n").encode()))
        ok = (not r.conformant) and r.first_offending_seq == seq
        caught += ok
        details.append(f"{name}: flagged seq {r.first_offending_seq} (expected {seq})")
    rows.append(Row(algorithm, "Spark", "tampered traces flagged at the first offending event",
                    "pass" if caught == len(tampers) else "fail", len(tampers), "traces",
                    time.perf_counter() - t0, "; ".join(details)))
    return rows


#: Independent parts the scheduler runs side by side, each in a process of its own with its own
#: Spark JVM (PySpark keeps one per process, warm, for every session the part starts): the
#: streaming word count and the message-passing protocols (in the full run with the protocol
#: sweep), the user queries (in the full run the kill failures apart: their drivers are child
#: processes), the chaos matrix slice (full run; its cells are child processes) and the in-process
#: batch (CPU only, no Spark; in the quick run, where it takes a second, with the streaming part).
PARTS = {"quick": ("streaming", "queries"),
         "full": ("streaming", "queries", "queries-kill", "matrix", "batch")}


def run(ctx: VerifyContext) -> list[Row]:
    """Run the Spark section (or the part ``ctx.part``): its rows."""
    from rollcheck.sections._class_archive import use_class_archive
    from rollcheck.sections._jvm import use_short_jvm_options

    if ctx.part is not None:  # its own process: the Spark drivers it starts (children too) get C1 only
        use_short_jvm_options("SPARK_SUBMIT_OPTS")
        if ctx.part != "batch":  # and the class-data archive (made once per machine; no Spark in batch)
            use_class_archive("spark", ctx.log)
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="rollcheck-verify-spark-") as d:
        tmp = Path(d)
        if ctx.runs("streaming"):
            rows += _streaming(ctx, tmp)
            rows += _nhop(ctx, tmp)
            if not ctx.quick:
                rows += _sweep(ctx)
        if ctx.runs("queries") or ctx.runs("queries-kill"):
            rows += _queries(ctx, tmp)
        if not ctx.quick and ctx.runs("matrix"):
            rows += _matrix_slice(ctx, tmp)
        if ctx.runs("batch") or (ctx.quick and ctx.part == "streaming"):
            rows += _local_batch(ctx, tmp)
    return rows


def _streaming(ctx: VerifyContext, tmp: Path) -> list[Row]:
    """The streaming word count under each failure, replayed; the tamper checks on its trace."""
    from rollcheck.spark_replay.jobs.wordcount import WordcountConfig, record_wordcount

    rows: list[Row] = []
    seed = ctx.seed
    modes = ["sink"] if ctx.quick else ["task", "sink", "kill"]
    for mode in modes:
        out = tmp / f"wordcount-{mode}.jsonl"
        ctx.log(f"  spark: streaming wordcount, {mode} failure at batch 1 (seed {seed})")
        t0 = time.perf_counter()
        try:
            res = record_wordcount(WordcountConfig(batches=3 if ctx.quick else 6, fail_at_batch=1,
                                                   failure=mode, seed=seed), out)
        except Exception as e:  # a crashed recording is a failed check, not a crashed section
            rows.append(Row("streaming recovery", "Spark", f"record wordcount ({mode} failure)", "fail",
                            0, "runs", time.perf_counter() - t0, f"{type(e).__name__}: {e}"))
            continue
        rec_s = time.perf_counter() - t0
        row, _ = _replay_row("streaming recovery", f"wordcount, {mode} failure: record {rec_s:.0f} s, "
                             f"replay conformant", out, time.perf_counter() - t0)
        if res["status"] != "done":
            row.status = "fail"
            row.detail = (f"the recording did not finish: it ended {word(res.get('status'), 'without a status')} "
                          f"after {word(res.get('children'), 'no')} driver run(s) in "
                          f"{word(res.get('seconds'), 'an unknown number of')} s")
        rows.append(row)
        if mode == "sink":
            rows += _tamper_rows(out, ["drop-commit", "move-resume"], "streaming recovery")
    return rows


def _nhop(ctx: VerifyContext, tmp: Path) -> list[Row]:
    """The message-passing protocols on Spark with a process failure, replayed (TLC included)."""
    from rollcheck.spark_replay.jobs.nhop import NhopConfig, record_nhop

    rows: list[Row] = []
    seed = ctx.seed
    protocols = ["hmnr"] if ctx.quick else ["uc", "bcs", "hmnr"]
    topo = {"uc": "cyclic", "bcs": "scatter", "hmnr": "cyclic"}
    for proto in protocols:
        out = tmp / f"nhop-{proto}.jsonl"
        ctx.log(f"  spark: nhop {proto} ({topo[proto]}), P1 fails in round 3 (seed {seed})")
        t0 = time.perf_counter()
        try:
            record_nhop(NhopConfig(protocol=proto, processes=3, rounds=3 if ctx.quick else 6,
                                   topology=topo[proto], fail_process=1, fail_round=3, seed=seed), out)
        except Exception as e:
            rows.append(Row(proto, "Spark", "record nhop with a failure", "fail", 0, "runs",
                            time.perf_counter() - t0, f"{type(e).__name__}: {e}"))
            continue
        row, res = _replay_row(proto, f"nhop on Spark ({topo[proto]}, P1 fails in round 3): replay "
                               f"conformant", out, time.perf_counter() - t0)
        tlc = res.check("tlc-trace")
        if tlc is not None and tlc.ok is True:  # claimed only when TLC ran and accepted
            row.check += " incl. TLC trace validation"
        row.pictures = _draw(ctx, out, proto)
        rows.append(row)
        if proto == "hmnr":
            rows += _tamper_rows(_with_forced(out, tmp, seed), ["delete-forced-checkpoint"], proto)
    return rows


def _query_files() -> dict[str, Path | None]:
    """The example query (package-independent: found next to the checkout when present)."""
    root = Path(__file__).resolve().parents[2]
    lib = root / "tests" / "queries"
    names = ["windowed_agg", "dedup", "stream_join", "pandas_state", "append_sink"]
    out: dict[str, Path | None] = {"example": root / "examples" / "queries" / "clicks_per_window.py"}
    out.update({n: lib / f"{n}.py" for n in names})
    return {k: (v if v is not None and v.is_file() else None) for k, v in out.items()}


def _query_cases(ctx: VerifyContext) -> list[tuple[str, str]]:
    """The (query, failure) pairs recorded by this call: the quick run's two, or the full run's 18.

    Of the full run's, the part ``queries-kill`` takes the kill failures (their drivers are child
    processes; the session of the part only validates their checkpoints) and ``queries`` the others.
    """
    if ctx.quick:
        return [("example", "sink"), ("append_sink", "sink")]
    cases = [(q, m) for q in ("example", "windowed_agg", "dedup", "stream_join", "pandas_state",
                              "append_sink") for m in ("task", "sink", "kill")]
    if ctx.part is None:
        return cases
    return [c for c in cases if (c[1] == "kill") == (ctx.part == "queries-kill")] if ctx.part.startswith(
        "queries") else []


def _queries(ctx: VerifyContext, tmp: Path) -> list[Row]:
    """User queries recorded with failures: replay verdicts and checkpoint validation."""
    from rollcheck.spark_replay.checkpoint.check import check_checkpoint
    from rollcheck.spark_replay.query.record import QueryConfig, record_query, session_conf
    from rollcheck.spark_replay.session import spark_session

    files = _query_files()
    cases = _query_cases(ctx)
    if not cases:
        return []
    cases = [c for c in cases if files.get(c[0]) is not None]
    if not cases and ctx.part == "queries-kill":
        return []  # the queries part says so, once
    if not cases:
        return [Row("user queries", "Spark", "record and replay user queries", "inconclusive", 0, "runs",
                    0.0, "the query files (examples/queries, tests/queries) are not next to this install")]
    rows: list[Row] = []
    with spark_session(conf=session_conf()) as spark:
        for q, mode in cases:
            out = tmp / f"query-{q}-{mode}.jsonl"
            ctx.log(f"  spark: user query {q}, {mode} failure at batch 2 (seed {ctx.seed})")
            t0 = time.perf_counter()
            try:
                res = record_query(QueryConfig(str(files[q]), failure=mode, fail_at_batch=2, seed=ctx.seed),
                                   out, spark=None if mode == "kill" else spark)
                val = check_checkpoint(res["checkpoint"], session=spark)
            except Exception as e:  # a crashed recording is a failed row, not a crashed section
                rows.append(Row(f"query {q}", "Spark", f"record query ({mode} failure)", "fail", 0, "runs",
                                time.perf_counter() - t0, f"{type(e).__name__}: {e}"))
                continue
            if q == "append_sink" and mode in ("sink", "kill"):
                # The non-idempotent sink appends every batch it is handed. The trace's own sink
                # writes say what the replay must find: batch 2 written with rows by two attempts
                # (before and after the failure) is a duplicate the replay must name; written once,
                # the output must be exact. A sink failure strikes after the sink wrote batch 2, so
                # there the writes must show the second write too. (A task failure strikes before
                # the sink: the generic row below expects a conformant replay.)
                from rollcheck.spark_replay.replay.conformance import replay_file

                implied, evidence = _sink_writes_imply_duplicate(out, batch=2)
                r = replay_file(out)
                c = next((c for c in r.checks if c.name == "output-exactly-once"), None)
                ok = _sink_row_ok(implied, c, mode, batch=2)
                what = "names the duplicate" if implied else "finds the output exact"
                rows.append(Row(f"query {q}", "Spark", f"non-idempotent sink, {mode} failure: {evidence}, so the "
                                f"replay {what}", "pass" if ok else "fail", 1, "runs",
                                time.perf_counter() - t0, c.detail if c else "no output check"))
                continue
            row, _ = _replay_row(f"query {q}", f"{mode} failure at batch 2: replay conformant; checkpoint "
                                 f"folder valid, Spark's state reader agrees", out, time.perf_counter() - t0)
            if not val["valid"] or not all(o["reader_agrees"] for o in val["operators"]):
                row.status = "fail"
                row.detail += "; " + _checkpoint_words(val)
            rows.append(row)
    return rows


def _checkpoint_words(val: dict[str, Any]) -> str:
    """What is wrong with a checkpoint folder (``rollcheck spark checkpoint``'s document), in words."""
    said = [f"the checkpoint folder's problems: {and_join(val['problems'])}"] if val.get("problems") else []
    unsure = [str(o.get("operator")) for o in val.get("operators", []) if not o.get("reader_agrees")]
    if unsure:
        said.append(f"Spark's state reader did not agree (or could not read) on operator {and_join(unsure)}")
    return "; ".join(said) or "the checkpoint folder is not valid"


def _sink_writes_imply_duplicate(trace_path: Path, batch: int) -> tuple[bool, str]:
    """Whether a non-idempotent sink holds ``batch``'s rows twice, by the trace's sink writes.

    Yes when two or more ``spark.sink_written`` events of the batch carried rows. Returns the
    answer and the evidence in words.
    """
    import json

    writes = []
    with open(trace_path, encoding="utf-8") as fh:
        for line in fh:
            try:
                ev = json.loads(line)
            except ValueError:
                continue  # a cut last line
            if isinstance(ev, dict) and ev.get("kind") == "spark.sink_written" and ev.get("batch") == batch:
                writes.append(ev)
    with_rows = [e for e in writes if e.get("rows")]
    seqs = ", ".join(str(e.get("seq")) for e in writes) or "none"
    return len(with_rows) >= 2, (f"the trace shows batch {batch} written {len(writes)} time(s) "
                                 f"({len(with_rows)} with rows; seq {seqs})")


def _sink_row_ok(implied: bool, check: Any, mode: str, batch: int) -> bool:
    """The non-idempotent sink row's verdict.

    The replay's ``output-exactly-once`` check must name the duplicate of ``batch`` exactly when
    the sink writes imply one, and hold otherwise; under a sink failure the writes must imply it
    (the failure strikes after the sink wrote).
    """
    if check is None:
        return False
    detail = str(getattr(check, "detail", ""))
    named = check.ok is False and "duplicate" in detail and f"of batch {batch}" in detail
    exact = check.ok is True
    return (named if implied else exact) and (implied or mode == "kill")


#: The chaos matrix's slice in ``verify``: every operator of the query library once, every kill
#: point once, both non-default state store providers (``docs/spark-matrix.md``).
MATRIX_SLICE = [("clicks_per_window", "rocksdb", "kill", "offsets"),
                ("stream_join", "rocksdb-changelog", "kill", "state"),
                ("dedup_within_watermark", "hdfs", "kill", "sink"),
                ("pandas_state", "hdfs", "kill", "commit"),
                ("tws_timers", "rocksdb-changelog", "task", None),
                ("foreachbatch_idempotent", "rocksdb", "sink", None)]


def _matrix_slice(ctx: VerifyContext, tmp: Path) -> list[Row]:
    """The matrix slice (:data:`MATRIX_SLICE`), two cells at once; one row per cell."""
    from rollcheck.infra.matrix import matrix_verdict
    from rollcheck.spark_replay.matrix.run import Cell, MatrixOptions, run_matrix

    lib = Path(__file__).resolve().parents[2] / "examples" / "queries"
    cells = [Cell(str(lib / f"{m}.py"), p, f, k) for m, p, f, k in MATRIX_SLICE]
    if not all(Path(c.module).is_file() for c in cells):
        return [Row("chaos matrix", "Spark", "matrix slice", "inconclusive", 0, "cells", 0.0,
                    "the query library (examples/queries) is not next to this install")]
    ctx.log(f"  spark: chaos matrix slice, {len(cells)} cells, 2 at a time (seed {ctx.seed})")
    t0 = time.perf_counter()
    opts = MatrixOptions([c.module for c in cells], batches=4, fail_at_batch=2, seed=ctx.seed,
                         out=ctx.path("spark-matrix", "index.html").parent, jobs=2, minimise=False)
    try:
        res = run_matrix(opts, cells=cells)
    except Exception as e:  # a crashed matrix is a failed row, not a crashed section
        return [Row("chaos matrix", "Spark", "matrix slice", "fail", 0, "cells", time.perf_counter() - t0,
                    f"{type(e).__name__}: {e}")]
    rows = []
    for r in res["cells"]:
        status = matrix_verdict([r]).word("row")  # the one verdict rule: only a conformant cell passes
        rows.append(Row(f"matrix {r['name']}", "Spark", f"{r['config']['state_store']} · {r['column']} at batch 2: "
                        f"recorded and replayed", status, 1, "cells", float(r.get("seconds") or 0.0), r["reason"]))
    return rows


def _draw(ctx: VerifyContext, trace_path: Path, proto: str) -> list[str]:
    """Space-time diagram of the pre-failure pattern with the recovery line Spark restored."""
    try:
        from rollcheck.pyimpl.render import render_pattern
        from rollcheck.spark_replay.jobs.nhop_replay import derive_patterns
        from rollcheck.spark_replay.trace import read_trace

        d = derive_patterns(read_trace(trace_path))
        if d.pre is None or d.recovery is None:
            return []
        failed = [d.pre.process_index(x) for x in d.recovery.get("failed", [])]
        out = ctx.path("spark", f"nhop-{proto}-recovery.png")
        render_pattern(d.pre, out, failed=failed,
                       title=f"{proto} on Spark: pattern before the failure, recovery line")
        return [str(out)]
    except Exception as e:  # a picture is a bonus
        ctx.log(f"  spark: no diagram ({type(e).__name__}: {e})")
        return []


def _with_forced(spark_trace: Path, tmp: Path, seed: int) -> Path:
    """The Spark HMNR trace if it has a forced checkpoint, else an in-process HMNR recording that has."""
    from rollcheck.spark_replay.jobs.nhop import NhopConfig, record_nhop
    from rollcheck.spark_replay.trace import read_trace

    def has_forced(p: Path) -> bool:
        return any(e["kind"] == "checkpoint" and e.get("forced") for e in read_trace(p).events)

    if has_forced(spark_trace):
        return spark_trace
    out = tmp / "nhop-hmnr-local.jsonl"
    for k in range(50):
        record_nhop(NhopConfig(protocol="hmnr", processes=4, rounds=6, topology="scatter", fail_process=1,
                               fail_round=3, seed=seed * 100 + k), out, engine="local")
        if has_forced(out):
            break
    return out


def _local_batch(ctx: VerifyContext, tmp: Path) -> list[Row]:
    """The same message-passing job executed in-process over many seeds: every trace conforms."""
    from rollcheck.spark_replay.jobs.nhop import TOPOLOGIES, NhopConfig, record_nhop
    from rollcheck.spark_replay.replay.conformance import replay_file

    per = 4 if ctx.quick else 25
    rows = []
    for proto in ("uc", "bcs", "hmnr"):
        t0 = time.perf_counter()
        bad = []
        count = 0
        for topo in TOPOLOGIES:
            for k in range(per):
                s = ctx.seed * 1000 + k
                n = 2 + k % 4
                cfg = NhopConfig(protocol=proto, topology=topo, processes=n, rounds=5, seed=s,
                                 fail_process=k % n, fail_round=1 + k % 5)
                out = tmp / "local.jsonl"
                record_nhop(cfg, out, engine="local")
                r = replay_file(out)
                count += 1
                if not r.conformant:
                    bad.append(f"{topo} seed {s}: " + ", ".join(c.name for c in r.checks
                                                                 if c.status.value in ("violated", "unchecked")))
        rows.append(Row(proto, "pyimpl", "message-passing recordings with one failure (in-process "
                        "rounds) conform: forced checkpoints, recovery line, failure-free outputs",
                        "fail" if bad else "pass", count, "traces", time.perf_counter() - t0,
                        "; ".join(bad[:3])))
    return rows


def _sweep(ctx: VerifyContext) -> list[Row]:
    from rollcheck.spark_replay.jobs.sweep import run_sweep

    t0 = time.perf_counter()
    res = run_sweep("protocols", ctx.seed, 16)
    pics = []
    try:
        pics.append(str(_plot_table(res["table"], ctx.path("spark", "protocol-comparison.png"))))
    except Exception as e:  # a picture is a bonus; the row still reports the numbers
        ctx.log(f"  spark: no picture ({e})")
    table = "; ".join(f"{r['protocol']}/{r['topology']}: {r['forced_per_delivery']} forced/delivery, "
                      f"{r['useless']} useless" for r in res["table"])
    ok = res["identical"] and all(r["useless"] == 0 for r in res["table"] if r["protocol"] != "uc")
    return [Row("protocol comparison", "Spark", "sweep on Spark identical to one process; BCS/HMNR "
                "no useless checkpoint", "pass" if ok else "fail", res["seeds"], "seeds",
                time.perf_counter() - t0, f"speed-up {res['speedup']}x; " + table, pics)]


def _plot_table(table: list[dict[str, Any]], out: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    topos = sorted({r["topology"] for r in table})
    protos = ["uc", "bcs", "hmnr"]
    fig, ax = plt.subplots(figsize=(7, 3.5))
    w = 0.25
    for k, proto in enumerate(protos):
        vals = [next((r["forced_per_delivery"] for r in table if r["topology"] == t and r["protocol"] == proto), 0)
                for t in topos]
        ax.bar([x + (k - 1) * w for x in range(len(topos))], vals, w, label=proto)
    ax.set_xticks(range(len(topos)), topos)
    ax.set_ylabel("forced checkpoints per delivery")
    ax.set_title("Protocol comparison (sweep on Spark)")
    ax.legend()
    fig.tight_layout()
    tmp = out.with_name("." + out.name + ".tmp.png")
    fig.savefig(tmp, dpi=100)
    plt.close(fig)
    tmp.replace(out)
    return out
