"""``rollcheck spark record|replay|checkpoint|sweep|tamper``: real PySpark runs recorded and replayed.

See ``docs/spark.md`` and ``docs/your-query.md`` (usage) and ``specs/spark.md`` (what the checks mean).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from rollcheck.cli._util import add_parser, emit_json


def register(sub: Any) -> None:
    """Add ``rollcheck spark`` and its subcommands (``record``, ``replay``, ``matrix``...)."""
    p = add_parser(sub, "spark", "Record real PySpark runs with injected failures, replay them "
                   "for conformance, and run sweeps on Spark.", None)
    p.set_defaults(handler=None)
    ssub = p.add_subparsers(dest="spark_command", metavar="SUBCOMMAND", parser_class=type(p))

    rec = add_parser(ssub, "record", "Run and record a Spark job (wordcount, nhop or your own query).", None)
    rec.set_defaults(handler=None)
    rsub = rec.add_subparsers(dest="job", metavar="JOB", parser_class=type(p))
    _register_wordcount(rsub)
    _register_nhop(rsub)
    _register_query(rsub)
    _register_matrix(ssub)
    _register_tools(ssub)
    __import__("rollcheck.cli.cmd_hunt", fromlist=["register_engine"]).register_engine(ssub, "spark")


def _register_wordcount(rsub: Any) -> None:
    """``spark record wordcount``."""
    wc = add_parser(rsub, "wordcount", "Stateful Structured Streaming word count with a failure.", _record_wordcount)
    wc.add_argument("--out", required=True, help="trace file to write (rollcheck.trace/1)")
    wc.add_argument("--batches", type=int, default=6)
    wc.add_argument("--fail-at-batch", type=int, default=None, metavar="K")
    wc.add_argument("--failure", choices=["task", "sink", "kill"], default=None)
    wc.add_argument("--seed", type=int, default=0)
    wc.add_argument("--master", default=None, help="Spark master (default local[2])")
    wc.add_argument("--words-per-batch", type=int, default=12)
    wc.add_argument("--no-crosscheck", action="store_true",
                    help="skip Spark's statestore reader at the end")
    wc.add_argument("--no-record", action="store_true", help="run without the recorder (overhead baseline)")
    wc.add_argument("--json", action="store_true")


def _register_nhop(rsub: Any) -> None:
    """``spark record nhop``."""
    nh = add_parser(rsub, "nhop", "Message passing in rounds with a checkpointing protocol in the tasks.",
                    _record_nhop)
    nh.add_argument("--protocol", required=True, choices=["uc", "bcs", "hmnr"])
    nh.add_argument("--out", required=True)
    nh.add_argument("--processes", type=int, default=3)
    nh.add_argument("--rounds", type=int, default=6)
    nh.add_argument("--fail-process", default=None, metavar="P", help="P1 or 1")
    nh.add_argument("--fail-round", type=int, default=None, metavar="K")
    nh.add_argument("--topology", choices=["pipeline", "scatter", "cyclic"], default="cyclic")
    nh.add_argument("--seed", type=int, default=0)
    nh.add_argument("--master", default=None)
    nh.add_argument("--engine", choices=["spark", "local"], default="spark",
                    help="local: the same rounds without Spark (for quick checks)")
    nh.add_argument("--json", action="store_true")


def _register_query(rsub: Any) -> None:
    """``spark record query``: the module, the failure and where it strikes, then the run's settings."""
    qq = add_parser(rsub, "query", "Your own Structured Streaming query (a Python file or module with "
                    "SCHEMA, batches, query, OUTPUT_MODE, KEY), recorded with a real injected failure.",
                    _record_query)
    qq.add_argument("--module", required=True, metavar="FILE.py|MODULE")
    qq.add_argument("--out", required=True, help="trace file to write (rollcheck.trace/1)")
    qq.add_argument("--batches", type=int, default=None, help="use the first N input batches")
    qq.add_argument("--fail-at-batch", type=int, default=None, metavar="K", help="Spark batch id")
    qq.add_argument("--failure", choices=["task", "sink", "kill", "executor", "retry", "twice", "during-recovery",
                                          "upgrade"],
                    default=None,
                    help="upgrade: the query stops after batch K commits and the module's query_next restarts "
                         "from its checkpoint; executor: SIGKILL an executor JVM of the cluster after the batch's state store commit "
                         "(needs --cluster or --master spark://...); retry: a task fails after its state store "
                         "committed and Spark retries it, the driver restarts after the next batch; twice: the "
                         "driver killed after batch K and again after its restart wrote batch K again; "
                         "during-recovery: killed again while the restarted driver restores its state")
    qq.add_argument("--cluster", choices=["local-standalone"], default=None,
                    help="run on a Spark standalone cluster that rollcheck starts and stops (a master and two "
                         "workers on 127.0.0.1)")
    qq.add_argument("--kill-point", choices=["offsets", "state", "sink", "commit"], default=None,
                    help="with --failure kill: SIGKILL the driver after the offset log entry (offsets), after "
                         "the state store commit (state), after the sink wrote (sink, the default) or just "
                         "before the commit log entry (commit)")
    qq.add_argument("--fail-tasks", choices=["one", "all"], default=None,
                    help="with --failure retry: one task of the stage fails (default) or every task of it")
    qq.add_argument("--fail-stage", choices=["stateful", "input"], default=None,
                    help="with --failure retry: the stage holding the state stores (default) or the stage that "
                         "reads the batch's input, before the shuffle")
    qq.add_argument("--fail-where", choices=["after-commit"], default=None,
                    help="with --failure retry: where in the stateful task it fails (after its state store "
                         "committed)")
    qq.add_argument("--fail-attempts", type=int, default=None, metavar="N",
                    help="with --failure retry: the first N attempts of each failing task fail (1..4; default 1; "
                         "4 = spark.task.maxFailures: the batch fails and a new driver restarts the query)")
    qq.add_argument("--fail-load", choices=["first", "later"], default=None,
                    help="with --failure retry: batch K is the first batch of its driver (for K > 0 the driver is "
                         "restarted as batch K starts, its state stores load version K) or a later one")
    qq.add_argument("--after-failure", choices=["restart", "continue"], default=None,
                    help="with --failure retry: after the next batch a new driver restarts from the checkpoint "
                         "(default), or the query goes on to its end")
    _query_run_options(qq)


def _query_run_options(qq: Any) -> None:
    """``spark record query``'s state store, Spark, reference and release options."""
    qq.add_argument("--state-store", choices=["hdfs", "rocksdb", "rocksdb-changelog"], default="hdfs",
                    help="state store provider (rocksdb-changelog: RocksDB with changelog checkpointing)")
    qq.add_argument("--seed", type=int, default=0)
    qq.add_argument("--master", default=None, help="Spark master (default local[2])")
    qq.add_argument("--shuffle-partitions", type=int, default=2)
    qq.add_argument("--workdir", default=None,
                    help="folder for inputs, checkpoints and outputs (default: OUT.work; kept)")
    qq.add_argument("--no-reference", action="store_true",
                    help="skip the failure-free reference run (the replay then cannot compare)")
    qq.add_argument("--no-record", action="store_true", help="run without the recorder (overhead baseline)")
    qq.add_argument("--call-timeout", type=float, default=300.0, metavar="SECONDS",
                    help="limit per call into the query module (batches, query, sink, read_output); "
                         "past it: exit 2 naming the file, the method and the limit (default 300)")
    qq.add_argument("--reference-from", default=None, metavar="TRACE",
                    help="a failure-free recording of the same query and settings: its final output and "
                         "state are the reference (instead of a reference run)")
    qq.add_argument("--engine-version", default=None, metavar="V",
                    help="record on pyspark V (3.4 <= V < 5; made once into rollcheck's cache folder, "
                         "$ROLLCHECK_CACHE or the user cache folder); default: the pinned release")
    qq.add_argument("--reference-version", default=None, metavar="R",
                    help="with --engine-version: the release whose failure-free run the release-differential "
                         "check compares with (default: the pinned release)")
    qq.add_argument("--json", action="store_true")


def _register_matrix(ssub: Any) -> None:
    """``spark matrix``."""
    mx = add_parser(ssub, "matrix", "Chaos matrix: every query module x state store provider x failure x "
                    "kill point, each cell recorded and replayed (docs/spark-matrix.md).", _matrix)
    mx.add_argument("--module", action="append", default=None, metavar="FILE.py|MODULE",
                    help="a query module (repeat; default: the query library in examples/queries)")
    mx.add_argument("--providers", default="hdfs,rocksdb,rocksdb-changelog",
                    help="state store providers, comma-separated")
    mx.add_argument("--failures", default="task,sink,kill",
                    help="failures, comma-separated: task, sink, kill, executor (needs --cluster or --master "
                         "spark://...), retry, twice, during-recovery, upgrade (modules giving query_next)")
    mx.add_argument("--cluster", choices=["local-standalone"], default=None,
                    help="run every cell on a Spark standalone cluster that rollcheck starts and stops")
    mx.add_argument("--kill-points", default="offsets,state,sink,commit",
                    help="kill points of the kill failure, comma-separated")
    mx.add_argument("--retry-schedules", default=None, metavar="S[,S2...]",
                    help="with --failures retry: one column per schedule, comma-separated; a schedule is "
                         "'default' or KEY=VALUE joined by '+' (tasks=one|all, stage=stateful|input, "
                         "attempts=1..4, load=first|later, then=restart|continue), e.g. tasks=all+attempts=2")
    mx.add_argument("--batches", type=int, default=None, help="use the first N input batches")
    mx.add_argument("--fail-at-batch", type=int, default=2, metavar="K", help="the batch every failure strikes")
    mx.add_argument("--seed", type=int, default=0)
    mx.add_argument("--out", default="spark-matrix", metavar="DIR",
                    help="folder for traces, checks, witnesses, reproducers and index.html")
    mx.add_argument("--jobs", type=int, default=1, help="cells at once (each Spark driver needs ~1 GB)")
    mx.add_argument("--master", default=None)
    mx.add_argument("--cell-timeout", type=float, default=900.0, metavar="S", help="seconds per recording")
    mx.add_argument("--call-timeout", type=float, default=300.0, metavar="S",
                    help="seconds per call into a query module (below --cell-timeout; default 300)")
    mx.add_argument("--no-minimise", action="store_true", help="do not minimise findings")
    mx.add_argument("--no-warm", action="store_true",
                    help="run every recording in a fresh Spark driver (default: task, sink and reference cells "
                         "run one after another in a warm driver per worker)")
    mx.add_argument("--no-reference-cache", action="store_true",
                    help="record each configuration's failure-free reference again instead of reusing the one "
                         "kept in rollcheck's cache folder")
    mx.add_argument("--engine-version", default=None, metavar="V[,V2...]",
                    help="run the matrix on these pyspark releases (3.4 <= V < 5; one group of rows per release; "
                         "each made once in rollcheck's cache folder before any cell runs); default: the pinned "
                         "release")
    mx.add_argument("--reference-version", default=None, metavar="R",
                    help="with --engine-version: the release whose failure-free run the release-differential "
                         "check compares with (default: the pinned release)")
    mx.add_argument("--json", action="store_true")


def _register_tools(ssub: Any) -> None:
    """``spark replay``, ``checkpoint``, ``sweep`` and ``tamper``."""
    rp = add_parser(ssub, "replay", "Check a recorded trace against the reference models.", _replay)
    rp.add_argument("trace")
    rp.add_argument("--json", action="store_true")
    rp.add_argument("--no-tlc", action="store_true", help="skip TLC trace validation of HMNR traces")

    ck = add_parser(ssub, "checkpoint", "Validate any Structured Streaming checkpoint folder (logs, state "
                    "versions, metadata; Spark's state reader against rollcheck's decoder).", _checkpoint)
    ck.add_argument("dir", metavar="DIR")
    ck.add_argument("--no-spark", action="store_true",
                    help="skip Spark's state reader (decode with rollcheck only; reader_agrees is null)")
    ck.add_argument("--master", default=None)
    ck.add_argument("--json", action="store_true")

    sw = add_parser(ssub, "sweep", "Spread seeded runs over Spark tasks; compare with one process.", _sweep)
    sw.add_argument("--kind", choices=["protocols", "properties", "interval"], default="protocols")
    sw.add_argument("--seeds", type=int, default=64, help="number of seeds")
    sw.add_argument("--seed", type=int, default=0, help="first seed")
    sw.add_argument("--size", type=int, default=1, help="work per seed (multiplier)")
    sw.add_argument("--master", default=None)
    sw.add_argument("--partitions", type=int, default=None, help="Spark tasks (default: 4 per core)")
    sw.add_argument("--no-compare", action="store_true", help="skip the single-process run")
    sw.add_argument("--json", action="store_true")

    tp = add_parser(ssub, "tamper", "Write a deliberately broken copy of a trace (for testing replay).", _tamper)
    tp.add_argument("trace")
    tp.add_argument("--how", required=True, choices=["drop-commit", "move-resume", "delete-forced-checkpoint",
                                                     "drop-retried-state"])
    tp.add_argument("-o", "--out", required=True)
    tp.add_argument("--json", action="store_true")


def _print(args: argparse.Namespace, obj: dict[str, Any], text: str) -> None:
    if getattr(args, "json", False):
        emit_json(obj)
    else:
        print(text)


def _check_out(path: str) -> Path:
    from rollcheck.pyimpl.errors import InvalidInputError

    out = Path(path)
    if out.parent and not out.parent.exists():
        raise InvalidInputError("the output folder does not exist", source=str(out.parent), location="--out")
    return out


def _record_wordcount(args: argparse.Namespace) -> int:
    from rollcheck.spark_replay.jobs.wordcount import WordcountConfig, record_wordcount

    cfg = WordcountConfig(batches=args.batches, fail_at_batch=args.fail_at_batch, failure=args.failure,
                          seed=args.seed, master=args.master, words_per_batch=args.words_per_batch,
                          crosscheck=not args.no_crosscheck)
    cfg.validate()
    out = _check_out(args.out)
    print(f"rollcheck spark record wordcount: seed={args.seed}", file=sys.stderr)
    res = record_wordcount(cfg, out, enabled=not args.no_record)
    _print(args, res, f"recorded {out} in {res['seconds']} s ({res['status']})")
    return _recording_exit(res["status"])


def _record_query(args: argparse.Namespace) -> int:
    from rollcheck.spark_replay.query.record import QueryConfig, record_query

    cfg = QueryConfig(module=args.module, batches=args.batches, seed=args.seed, fail_at_batch=args.fail_at_batch,
                      failure=args.failure, master=args.master, shuffle_partitions=args.shuffle_partitions,
                      reference=not args.no_reference, call_timeout=args.call_timeout,
                      state_store=args.state_store, kill_point=args.kill_point,
                      engine_version=args.engine_version, reference_version=args.reference_version,
                      cluster=args.cluster, fail_tasks=args.fail_tasks, fail_stage=args.fail_stage,
                      fail_where=args.fail_where, fail_attempts=args.fail_attempts, fail_load=args.fail_load,
                      after_failure=args.after_failure)
    cfg.validate()
    out = _check_out(args.out)
    print(f"rollcheck spark record query: module={args.module} seed={args.seed}"
          + (f" pyspark={args.engine_version}" if args.engine_version else ""), file=sys.stderr)
    res = record_query(cfg, out, workdir=args.workdir, enabled=not args.no_record,
                       reference_from=args.reference_from)
    _print(args, res, f"recorded {out} in {res['seconds']} s ({res['status']}); checkpoint folder "
                      f"{res['checkpoint']}")
    return _recording_exit(res["status"])


def _recording_exit(status: str) -> int:
    """0 for a recording that ended done; else 3 (inconclusive: a recording judges nothing)."""
    from rollcheck.pyimpl.verdict import Status, exit_code, recording_check

    check = recording_check(status)
    if check.status is not Status.HELD:
        print(f"rollcheck: inconclusive: {check.detail}", file=sys.stderr)
    return exit_code([check])


def _checkpoint(args: argparse.Namespace) -> int:
    from rollcheck.spark_replay.checkpoint.check import check_checkpoint

    res = check_checkpoint(args.dir, spark=not args.no_spark, master=args.master)
    lines = [f"{'valid' if res['valid'] else 'INVALID'}: last committed batch {res['last_committed']}"]
    for op in res["operators"]:
        lines.append(f"  operator {op['operator']} ({op.get('name')}): {op['partitions']} partition(s), "
                     f"version {op['version']}, {op['rows']} row(s); Spark's reader agrees: "
                     f"{op['reader_agrees']}")
    lines += [f"  problem: {p}" for p in res["problems"]]
    _print(args, res, "\n".join(lines))
    from rollcheck.pyimpl.verdict import Check, exit_code

    return exit_code([Check.from_ok("checkpoint-valid", bool(res["valid"]), "; ".join(map(str, res["problems"])))])


def _parse_proc(v: str | None) -> int | None:
    from rollcheck.pyimpl.errors import InvalidInputError

    if v is None:
        return None
    s = v[1:] if v[:1] in "Pp" else v
    if not s.isdigit():
        raise InvalidInputError(f"expected a process like P1 or 1, got {v!r}", location="--fail-process")
    return int(s)


def _record_nhop(args: argparse.Namespace) -> int:
    from rollcheck.spark_replay.jobs.nhop import NhopConfig, record_nhop

    cfg = NhopConfig(protocol=args.protocol, processes=args.processes, rounds=args.rounds,
                     topology=args.topology, fail_process=_parse_proc(args.fail_process),
                     fail_round=args.fail_round, seed=args.seed, master=args.master)
    cfg.validate()
    out = _check_out(args.out)
    print(f"rollcheck spark record nhop: seed={args.seed}", file=sys.stderr)
    res = record_nhop(cfg, out, engine=args.engine)
    _print(args, res, f"recorded {out} in {res['seconds']} s ({res['rounds']} rounds)")
    return 0


def _replay(args: argparse.Namespace) -> int:
    from rollcheck.cli import engine_replay
    from rollcheck.cli.check_trace import print_report

    # the one function check trace runs on a Spark trace too
    res = engine_replay.replay_engine_trace(args.trace, engine="spark", tlc=not args.no_tlc)
    if args.json:
        emit_json(res.to_json())
    else:
        print_report(res, args.trace)
    return res.exit_code


def _sweep(args: argparse.Namespace) -> int:
    from rollcheck.spark_replay.jobs.sweep import run_sweep

    print(f"rollcheck spark sweep: kind={args.kind} seeds={args.seed}..{args.seed + args.seeds - 1}",
          file=sys.stderr)
    res = run_sweep(args.kind, args.seed, args.seeds, size=args.size, master=args.master,
                    partitions=args.partitions, compare=not args.no_compare)
    text = [f"{args.kind}: {args.seeds} seeds on Spark in {res['spark_seconds']} s"]
    if res.get("local_seconds") is not None:
        text.append(f"single process {res['local_seconds']} s; speed-up {res['speedup']}x; "
                    f"identical: {res['identical']}")
    for row in res.get("table", []):
        text.append("  " + ", ".join(f"{k}={v}" for k, v in row.items()))
    _print(args, res, "\n".join(text))
    from rollcheck.pyimpl.verdict import Check, exit_code

    return exit_code([Check.from_ok("sweep", not (res.get("identical") is False or res.get("violations")),
                                    f"{args.seeds} seeds")])


def _tamper(args: argparse.Namespace) -> int:
    from rollcheck.pyimpl.patternio import atomic_write_text
    from rollcheck.spark_replay.tamper import TAMPERS
    from rollcheck.spark_replay.trace import read_trace

    trace = read_trace(args.trace)
    lines, seq = TAMPERS[args.how](trace)
    atomic_write_text(Path(args.out), "\n".join(lines) + "\n")
    _print(args, {"out": args.out, "expected_first_offending_seq": seq},
           f"wrote {args.out}; the replay must flag seq {seq}")
    return 0


def _split(v: str, flag: str) -> list[str]:
    from rollcheck.pyimpl.errors import InvalidInputError

    items = [x.strip() for x in v.split(",") if x.strip()]
    if not items:
        raise InvalidInputError("empty list", location=flag)
    return items


def _matrix(args: argparse.Namespace) -> int:
    from rollcheck.spark_replay.matrix.plan import RELEASE_ROW_HEADER, ROW_HEADER, parse_versions
    from rollcheck.spark_replay.matrix.run import MatrixOptions, library_modules, run_matrix

    opts = MatrixOptions(engine_versions=parse_versions(args.engine_version),
                         reference_version=args.reference_version,
                         modules=args.module or library_modules(), providers=_split(args.providers, "--providers"),
                         failures=_split(args.failures, "--failures"),
                         kill_points=_split(args.kill_points, "--kill-points"), batches=args.batches,
                         seed=args.seed, fail_at_batch=args.fail_at_batch, out=Path(args.out), jobs=args.jobs,
                         master=args.master, cell_timeout=args.cell_timeout,
                         call_timeout=args.call_timeout, minimise=not args.no_minimise, cluster=args.cluster,
                         warm=not args.no_warm, reuse_reference=not args.no_reference_cache,
                         retry_schedules=_split(args.retry_schedules, "--retry-schedules") if args.retry_schedules
                         else [])
    opts.validate()
    print(f"rollcheck spark matrix: seed={args.seed} jobs={args.jobs} out={args.out}"
          + (f" pyspark={','.join(opts.engine_versions)}" if opts.engine_versions else ""), file=sys.stderr)
    from rollcheck.cli.spark_matrix_view import MatrixView

    with MatrixView(row_header=RELEASE_ROW_HEADER if opts.engine_versions else ROW_HEADER) as view:
        res = run_matrix(opts, on_update=view.update)
    from rollcheck.infra.matrix import matrix_verdict
    from rollcheck.infra.matrix.table import summary_line

    if args.json:
        emit_json(res)
    else:
        print(f"{len(res['cells'])} cells in {res['seconds']} s: {summary_line(res['summary'])}; "
              f"table: {res['index']}")
    return matrix_verdict(res["cells"]).exit_code  # the one verdict rule: exit 0 only if every cell is conformant
