"""``rollcheck flink record|replay|tamper``: real Apache Flink runs recorded and replayed.

See ``docs/flink.md``. The Flink job runs in a separate PyFlink environment (``make
flink-setup``); without it every command is inconclusive (exit 3) and says how to install it.
"""

from __future__ import annotations

import argparse
from typing import Any

from rollcheck.cli._util import add_parser, emit_json


def register(sub: Any) -> None:
    """Add ``rollcheck flink`` and its subcommands (``record``, ``replay``, ``matrix``...)."""
    p = add_parser(sub, "flink", "Record real Flink runs (aligned/unaligned checkpoints, injected "
                   "failures) and replay them against the coordinated-snapshot model.", None)
    p.set_defaults(handler=None)
    fsub = p.add_subparsers(dest="flink_command", metavar="SUBCOMMAND", parser_class=type(p))

    rec = add_parser(fsub, "record", "Run and record a Flink job.", None)
    rec.set_defaults(handler=None)
    rsub = rec.add_subparsers(dest="job", metavar="JOB", parser_class=type(p))
    wc = add_parser(rsub, "wordcount", "Keyed count behind a keyBy shuffle, a transactional FileSink "
                    "and a naive side-effect sink.", _record)
    uj = add_parser(rsub, "job", "Your own PyFlink job: a Python file with records(seed), job(env, source), "
                    "KEY and optional sink/read_output; several input streams: SOURCES (their names), "
                    "records(seed) -> {name: [tuples]}, job(env, sources) (docs/your-flink-job.md).", _record)
    uj.add_argument("--module", required=True, metavar="FILE.py", help="the job module")
    uj.add_argument("--call-timeout", type=float, default=300.0, metavar="SECONDS",
                    help="limit for each call of the module (records, job, sink, read_output)")
    for sp in (wc, uj):
        _record_args(sp)
    _register_rest(fsub)
    __import__("rollcheck.cli.cmd_hunt", fromlist=["register_engine"]).register_engine(fsub, "flink")


def _record_args(wc: Any) -> None:
    wc.add_argument("--out", required=True, help="trace file to write (rollcheck.trace/1)")
    wc.add_argument("--checkpoints", choices=["aligned", "unaligned"], default="aligned")
    wc.add_argument("--parallelism", type=int, default=2)
    wc.add_argument("--interval", type=int, default=300, metavar="MS", help="checkpoint interval")
    wc.add_argument("--records", type=int, default=2000)
    wc.add_argument("--rate", type=float, default=500.0, help="source records/s (all subtasks)")
    wc.add_argument("--max-rate", type=float, default=None, metavar="M",
                    help="service-rate cap (used by recovery-time; accepted and recorded here)")
    wc.add_argument("--keys", type=int, default=8, help="distinct words")
    wc.add_argument("--fail-at-record", type=int, default=None, metavar="K")
    wc.add_argument("--failure", choices=["task", "taskmanager", "during-restore", "twice"], default=None,
                    help="task: a task fails at record K; taskmanager: its process is killed; during-restore: then a "
                         "second task failure while the restarted job restores; twice: then a second one right after "
                         "the first recovery")
    wc.add_argument("--fail-subtask", type=int, default=None, metavar="I",
                    help="the failure strikes in subtask I (0-based) of rollcheck's step after the source; the "
                         "trace proves it (failure-struck-as-asked)")
    wc.add_argument("--fail-after-checkpoint", type=int, default=None, metavar="C",
                    help="the failure strikes once checkpoint C completed (at the next record, or at a "
                         "checkpoint's completion if the input ended); the trace proves it")
    wc.add_argument("--seed", type=int, default=0)
    wc.add_argument("--timeout", type=float, default=300.0, help="seconds before the job is cancelled")
    wc.add_argument("--backend", choices=["hashmap", "rocksdb", "changelog"], default="hashmap",
                    help="state backend (rocksdb: incremental checkpoints; changelog: hashmap + changelog)")
    wc.add_argument("--rescale", default=None, metavar="P1:P2",
                    help="fail at parallelism P1, restore from the latest checkpoint at P2")
    wc.add_argument("--engine-version", default=None, metavar="V",
                    help="record on apache-flink V (1.19.0 <= V < 3.0.0; made once in rollcheck's cache folder, "
                         "$ROLLCHECK_CACHE or the user cache folder; default: the pinned 2.3.0 of .venv-flink)")
    wc.add_argument("--reference-version", default=None, metavar="R",
                    help="with --engine-version: the release whose failure-free run of the same job the "
                         "release-differential check compares with (default: the pinned 2.3.0)")
    wc.add_argument("--json", action="store_true")


def _register_rest(fsub: Any) -> None:
    rp = add_parser(fsub, "replay", "Check a recorded Flink trace.", _replay)
    rp.add_argument("trace")
    rp.add_argument("--json", action="store_true")
    rp.add_argument("--no-tlc", action="store_true", help="skip TLC validation of aligned barrier snapshots")

    rt = add_parser(fsub, "recovery-time", "Measure failure -> caught-up time for several checkpoint "
                    "intervals and compare with Chiron's TRT and the utilization model.", _recovery_time)
    rt.add_argument("--intervals", required=True, metavar="MS,MS,...")
    rt.add_argument("--rate", type=float, default=400.0, help="arrival rate λ, records/s")
    rt.add_argument("--max-rate", type=float, default=800.0, help="service-rate cap μ, records/s")
    rt.add_argument("--repetitions", type=int, default=3, help="failures per interval (median)")
    rt.add_argument("--parallelism", type=int, default=2)
    rt.add_argument("--seed", type=int, default=0)
    rt.add_argument("--work-dir", default=None, help="keep the runs in this folder (default: a temporary folder, removed)")
    rt.add_argument("--plot", default=None, metavar="PNG", help="draw measured vs predicted")
    rt.add_argument("--target-trt", type=float, default=None, metavar="SECONDS",
                    help="let Chiron's optimiser pick the interval for this total recovery time (the --intervals "
                    "are the profiling runs, at least 3) and measure whether the recovery meets it")
    rt.add_argument("--json", action="store_true")

    ut = add_parser(fsub, "utilization", "Measure utilization under injected failures across checkpoint intervals "
                    "and compare with the utilization model (T* via Lambert W).", _utilization)
    ut.add_argument("--intervals", required=True, metavar="MS,MS,...")
    ut.add_argument("--failure-every", required=True, type=float, metavar="SECONDS",
                    help="mean time between injected failures (exponential, seeded)")
    ut.add_argument("--duration", type=float, default=60.0, metavar="S", help="measured window of each run")
    ut.add_argument("--warmup", type=float, default=5.0, metavar="S", help="unmeasured start of each run")
    ut.add_argument("--service-rate", type=float, default=50.0,
                    help="records/s the job serves at most (low, so that the machine's load does not set the pace)")
    ut.add_argument("--checkpoint-cost", type=int, default=100, metavar="MS",
                    help="blocking part of each source snapshot (the model's checkpoint cost)")
    ut.add_argument("--seed", type=int, default=0)
    ut.add_argument("--work-dir", default=None, help="keep the runs in this folder (default: temporary, removed)")
    ut.add_argument("--plot", default=None, metavar="PNG", help="draw measured vs predicted utilization")
    ut.add_argument("--json", action="store_true")

    mx = add_parser(fsub, "matrix", "Chaos matrix: jobs x state backends x checkpoint modes x failures x "
                    "rescalings, each cell recorded, replayed and decided.", _matrix)
    mx.add_argument("--module", action="append", default=None, metavar="FILE.py",
                    help="a job module (repeatable; default: the built-in wordcount)")
    mx.add_argument("--backends", default="hashmap,rocksdb,changelog")
    mx.add_argument("--checkpoints", default="aligned,unaligned")
    mx.add_argument("--failures", default="task,taskmanager")
    mx.add_argument("--rescale", action="append", default=None, metavar="P1:P2",
                    help="also restore at another parallelism (repeatable); cells without rescaling always run")
    mx.add_argument("--no-same", action="store_true", help="only the rescaled cells")
    mx.add_argument("--records", type=int, default=1200, help="records of the wordcount cells")
    mx.add_argument("--rate", type=float, default=400.0)
    mx.add_argument("--interval", type=int, default=300, metavar="MS")
    mx.add_argument("--seed", type=int, default=0)
    mx.add_argument("--out", default="flink-matrix", metavar="DIR")
    mx.add_argument("--jobs", type=int, default=1, metavar="J", help="cells run at the same time")
    mx.add_argument("--spread", type=int, default=None, metavar="SEED",
                    help="run the cells in an order shuffled with this seed (a matrix cut short covers every "
                    "dimension about evenly); the table keeps its order")
    mx.add_argument("--shrink-runs", type=int, default=4, metavar="K",
                    help="re-runs that shrink a finding of a job module to its fewest records (0: none)")
    mx.add_argument("--run-reproducer", action="store_true",
                    help="run a finding's reproducer once with the PyFlink environment's Python and record "
                         "whether it showed the finding (reproducer_run)")
    mx.add_argument("--engine-version", default=None, metavar="V[,V2...]",
                    help="run the matrix on these apache-flink releases (one group of rows per release; each "
                         "made once in rollcheck's cache folder; default: the pinned 2.3.0 of .venv-flink)")
    mx.add_argument("--reference-version", default=None, metavar="R",
                    help="with --engine-version: the release whose failure-free run (once per configuration) the "
                         "release-differential check compares with (default: the pinned 2.3.0)")
    mx.add_argument("--json", action="store_true")

    tp = add_parser(fsub, "tamper", "Write a deliberately broken copy of a Flink trace.", _tamper)
    tp.add_argument("trace")
    from rollcheck.flink_replay.checks.tamper import TAMPER_NAMES

    tp.add_argument("--how", required=True, choices=list(TAMPER_NAMES))
    tp.add_argument("-o", "--out", required=True)
    tp.add_argument("--json", action="store_true")


def _record(args: argparse.Namespace) -> int:
    import sys

    from rollcheck.flink_replay.recording.record import RecordConfig, parse_rescale
    from rollcheck.flink_replay.recording.release_reference import record_job

    module = getattr(args, "module", None)
    rescale = parse_rescale(args.rescale) if args.rescale else None
    cfg = RecordConfig.make(checkpoints=args.checkpoints, parallelism=args.parallelism,
                            interval_ms=args.interval, records=args.records, rate=args.rate, keys=args.keys,
                            fail_at_record=args.fail_at_record, failure=args.failure, seed=args.seed,
                            timeout_s=args.timeout, backend=args.backend, rescale=rescale, module=module,
                            call_timeout=getattr(args, "call_timeout", 300.0), engine_version=args.engine_version,
                            reference_version=args.reference_version, fail_subtask=args.fail_subtask,
                            fail_after_checkpoint=args.fail_after_checkpoint)
    if args.max_rate is not None:
        cfg["max_rate"] = args.max_rate
    what = f"job {module}" if module else "wordcount"
    par = f"rescaled {rescale[0]} -> {rescale[1]}" if rescale else f"parallelism {args.parallelism}"
    print(f"rollcheck flink record {what}: seed {args.seed}, {args.checkpoints} checkpoints every "
          f"{args.interval} ms, {args.backend} state backend, {par}"
          + (f", apache-flink {args.engine_version}" if args.engine_version else ""), file=sys.stderr)
    from rollcheck.pyimpl.verdict import Check, exit_code, recording_check

    res = record_job(args.out, cfg)  # with --engine-version: also the failure-free run on the reference release
    if args.json:
        emit_json(res)
    else:
        print(f"trace {res['trace']}: {res['events']} events, job {res['final_state']}, restored checkpoint "
              f"{res['restored_checkpoint']}, {res['seconds']} s")
    if res.get("engine_failure"):  # Flink raised inside job() on V; the job built and ran on R
        print(f"apache-flink {args.engine_version} raised {res['engine_failure']} inside the module's job(); on "
              f"{cfg.get('reference_version')} the same job was built and ran to its end: the trace records the "
              "engine's exception (its replay: release-differential)", file=sys.stderr)
        return exit_code([recording_check("FINISHED")])
    if args.fail_at_record is not None and not res.get("failure_injected"):
        print(f"the requested failure at record {args.fail_at_record} did not happen (the input ended first): "
              "the trace replays as inconclusive", file=sys.stderr)
        return exit_code([Check.unchecked("failure-observed", "the requested failure did not happen")])
    return exit_code([recording_check(str(res["final_state"]))])


def tlc_validator() -> Any:
    """``validate_with_tlc`` bound to rollcheck's TLC runner and its ``ChandyLamport`` model.

    It is the validator ``flink replay`` and ``check trace`` use.
    """
    from rollcheck.cli.engine_replay import flink_tlc_validator

    return flink_tlc_validator()


def _replay(args: argparse.Namespace) -> int:
    from rollcheck.cli import engine_replay
    from rollcheck.cli.check_trace import print_report

    # the one function check trace runs on a Flink trace too (a user's job or the word count)
    res = engine_replay.replay_engine_trace(args.trace, engine="flink", tlc=not args.no_tlc)
    if args.json:
        emit_json(res.to_json())
    else:
        print_report(res, args.trace)
    return res.exit_code


def _recovery_time(args: argparse.Namespace) -> int:
    import sys

    from rollcheck.flink_replay.intervals.recovery import measure_recovery_times
    from rollcheck.pyimpl.errors import InvalidInputError

    try:
        intervals = [int(x) for x in args.intervals.split(",") if x.strip()]
    except ValueError:
        raise InvalidInputError(f"--intervals: integers separated by commas, not {args.intervals!r}") from None
    print(f"rollcheck flink recovery-time: seed {args.seed}", file=sys.stderr)
    if args.target_trt is not None:
        from rollcheck.flink_replay.intervals.target_trt import meet_target_trt

        tr = meet_target_trt(args.target_trt, intervals, rate=args.rate, max_rate=args.max_rate,
                             repetitions=args.repetitions, parallelism=args.parallelism, seed=args.seed,
                             work_dir=args.work_dir, log=lambda m: print(m, file=sys.stderr))
        if args.json:
            emit_json(tr)
        else:
            for p in tr["profile"]:
                print(f"profile {p['interval_ms']:>5} ms: TRT {p['measured_s']:.3f} s, latency {p['latency_s']:.4f} s")
            print(f"chosen interval {tr['chosen_interval_ms']} ms, predicted TRT {tr['predicted_trt_s']} s; "
                  f"meets target: {tr['meets_target']} ({tr['reason']})")
        return {True: 0, False: 1, None: 3}[tr["meets_target"]]
    res = measure_recovery_times(intervals, rate=args.rate, max_rate=args.max_rate, repetitions=args.repetitions,
                                 parallelism=args.parallelism, seed=args.seed, work_dir=args.work_dir,
                                 log=lambda m: print(m, file=sys.stderr))
    if args.plot:
        from rollcheck.flink_replay.intervals.plot import plot_recovery

        res["plot"] = str(plot_recovery(res, args.plot))
    if args.json:
        emit_json(res)
    else:
        for p in res["parameters"]:
            print(f"interval {p['interval_ms']} ms: D={p['downtime_s']} s, E={p['checkpoint_age_s']} s, "
                  f"mu={p['service_rate']}/s, U={p['ratio']}, checkpoint {p['checkpoint_duration_ms']} ms, "
                  f"{len(p['repetitions'])} repetitions, {len(p['excluded'])} excluded (unstable service rate)")
        for r in res["runs"]:
            print(f"interval {r['interval_ms']:>5} ms  {r['model']:<12} measured {r['measured_s']:.3f} s  "
                  f"predicted {r['predicted_s']:.3f} s  error {100 * r['error']:+.1f} %")
    return 0


def _utilization(args: argparse.Namespace) -> int:
    import sys

    from rollcheck.flink_replay.intervals.utilization import measure_utilization, plot_utilization
    from rollcheck.pyimpl.errors import InvalidInputError

    try:
        intervals = [int(x) for x in args.intervals.split(",") if x.strip()]
    except ValueError:
        raise InvalidInputError(f"--intervals: integers separated by commas, not {args.intervals!r}") from None
    print(f"rollcheck flink utilization: seed {args.seed}", file=sys.stderr)
    res = measure_utilization(intervals, args.failure_every, duration_s=args.duration, warmup_s=args.warmup,
                              service_rate=args.service_rate, snapshot_cost_ms=args.checkpoint_cost,
                              seed=args.seed, work_dir=args.work_dir, log=lambda m: print(m, file=sys.stderr))
    if args.plot:
        res["plot"] = str(plot_utilization(res, args.plot))
    if args.json:
        emit_json(res)
    else:
        p = res["parameters"]
        print(f"fitted: failure rate {p['failure_rate']}/s, checkpoint cost {p['checkpoint_cost_s']} s, "
              f"restart cost {p['restart_cost_s']} s")
        for r in res["runs"]:
            print(f"interval {r['interval_ms']:>5} ms  measured {r['measured_utilization']:.4f}  "
                  f"predicted {r['predicted_utilization']:.4f}  error {100 * r['error']:+.1f} %")
        o = res["optimum"]
        print(f"best interval: measured {o['measured_ms']} ms, model T* = {o['predicted_ms']} ms")
        print(f"largest |error| {100 * res['max_abs_error']:.1f} % ({'within' if res['within_goal'] else 'outside'} "
              f"the {100 * res['goal']:.0f} % goal)")
    return 0


def _matrix(args: argparse.Namespace) -> int:
    import sys
    from pathlib import Path

    from rollcheck.flink_replay.matrix import cells, run_matrix
    from rollcheck.flink_replay.recording.record import BACKENDS, FAILURES, parse_rescale
    from rollcheck.pyimpl.errors import InvalidInputError

    def split(text: str, allowed: tuple[str, ...], flag: str) -> list[str]:
        items = [x.strip() for x in text.split(",") if x.strip()]
        bad = [x for x in items if x not in allowed]
        if bad or not items:
            raise InvalidInputError(f"{flag} {text!r}: choose from {', '.join(allowed)}")
        return items

    modules = args.module or ["wordcount"]
    for m in modules:
        if m != "wordcount" and not Path(m).is_file():
            raise InvalidInputError("no such job module", source=m)
    rescales: list[tuple[int, int] | None] = [] if args.no_same else [None]
    rescales += [parse_rescale(r) for r in args.rescale or []]
    if not rescales:
        raise InvalidInputError("--no-same needs at least one --rescale")
    if args.jobs < 1:
        raise InvalidInputError("--jobs must be at least 1")
    from rollcheck.flink_replay.environment import find_flink
    from rollcheck.flink_replay.releases import PINNED, parse_release

    versions: list[str | None] = [None]
    reference = args.reference_version
    if reference is not None:
        if args.engine_version is None:
            raise InvalidInputError("--reference-version needs --engine-version (the releases it is compared with)",
                                    location="--reference-version")
        parse_release(reference, location="--reference-version")
        reference = reference.strip()
    if args.engine_version is not None:
        versions = list(dict.fromkeys(x.strip() for x in args.engine_version.split(",") if x.strip()))
        if not versions:
            raise InvalidInputError(f"--engine-version {args.engine_version!r}: one release or several, "
                                    "separated by commas")
        for v in versions:
            parse_release(str(v))  # every release's range first, before anything is installed
        for v in dict.fromkeys([*versions, reference or PINNED]):
            find_flink(v)  # made once (exit 2 naming a release pip cannot install), before any cell runs
    todo = cells(modules,
                  split(args.backends, BACKENDS, "--backends"),
                  split(args.checkpoints, ("aligned", "unaligned"), "--checkpoints"),
                  split(args.failures, FAILURES, "--failures"), rescales, versions)
    print(f"rollcheck flink matrix: {len(todo)} cells, seed {args.seed}, {args.jobs} at a time, into {args.out}",
          file=sys.stderr)
    from rollcheck.cli.spark_matrix_view import MatrixView
    from rollcheck.flink_replay.matrix import FlinkAdapter, row_header
    from rollcheck.infra.matrix import matrix_verdict

    with MatrixView(title=FlinkAdapter.title, row_header=row_header(todo)) as view:
        doc = run_matrix(todo, args.out, jobs=args.jobs, on_update=view.update, records=args.records,
                         rate=args.rate, interval_ms=args.interval, seed=args.seed,
                         shrink_runs=max(0, args.shrink_runs), spread_seed=args.spread,
                         run_reproducer=args.run_reproducer, reference_version=reference)
    if args.json:
        emit_json(doc)
    else:
        _print_matrix(doc, todo)
    return matrix_verdict(doc["cells"]).exit_code  # the one verdict rule: exit 0 only if every cell is conformant


def _print_matrix(doc: dict[str, Any], planned: list[Any]) -> None:
    from rich.console import Console

    from rollcheck.flink_replay.matrix import FlinkAdapter, row_header
    from rollcheck.infra.matrix import terminal_table
    from rollcheck.infra.matrix.table import summary_line

    Console().print(terminal_table(doc["cells"], planned, {}, title=FlinkAdapter.title, row_header=row_header(planned),
                                   reasons=True))
    print(f"{len(doc['cells'])} cells: {summary_line(doc['summary'])}; table: {doc['index']}")


def _tamper(args: argparse.Namespace) -> int:
    from rollcheck.flink_replay.checks.tamper import tamper

    check = tamper(args.trace, args.how, args.out)
    if args.json:
        emit_json({"trace": args.out, "how": args.how, "expected_check": check})
    else:
        print(f"wrote {args.out} ({args.how}; expected to trip {check})")
    return 0
