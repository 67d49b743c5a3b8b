"""``rollcheck verify`` section: real Apache Flink runs recorded with failures and replayed.

Aligned and unaligned barrier snapshots under a task failure (full run: also a killed
TaskManager), replayed against the coordinated-snapshot model (aligned runs also by TLC against
Chandy-Lamport); tampered copies rejected by the check each targets; measured recovery times
against Chiron's TRT and the utilization model; a user's own job under a failure, a restore at
another parallelism checked key by key, and a short utilization sweep. See ``docs/flink.md`` and
``docs/your-flink-job.md``.

Without the PyFlink environment (``make flink-setup``) every row is inconclusive.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from rollcheck.sections._words import word
from rollcheck.suite import Row, VerifyContext

TITLE = "Flink: aligned and unaligned snapshots recorded with failures, replayed"

ALGORITHM = "Chandy-Lamport snapshots (Flink)"


def _tlc():
    from importlib import resources

    from rollcheck.flink_replay.checks.tlc import validate_with_tlc
    from rollcheck.tla.runner import run_tlc

    cl = Path(str(resources.files("rollcheck.tla.models").joinpath("ChandyLamport.tla")))
    return lambda path: validate_with_tlc(path, run_tlc, cl)


def _record(ctx: VerifyContext, tmp: Path, mode: str, rows: list[Row], failure: str = "task") -> Path | None:
    from rollcheck.flink_replay.checks.replay import replay
    from rollcheck.flink_replay.recording.record import RecordConfig, record_wordcount
    from rollcheck.pyimpl.errors import InconclusiveError

    records = 1500 if ctx.quick else 3000
    cfg = RecordConfig.make(checkpoints=mode, parallelism=2, interval_ms=300, records=records, rate=500.0,
                            fail_at_record=records // 2, failure=failure, seed=ctx.seed)
    if mode == "unaligned":  # a service-rate cap below the input rate: back-pressure, in-flight data
        cfg.update(rate=600.0, max_rate=400.0)
    out = tmp / f"wordcount-{mode}-{failure}.jsonl"
    ctx.log(f"  flink: wordcount, {mode} checkpoints, {failure} failure at record {records // 2} (seed {ctx.seed})")
    t0 = time.perf_counter()
    try:
        res = record_wordcount(out, cfg)
    except InconclusiveError as e:
        rows.append(Row(ALGORITHM, "Flink", f"record wordcount ({mode}, {failure} failure)", "inconclusive", 0, "runs",
                        time.perf_counter() - t0, str(e)))
        return None
    except Exception as e:  # a crashed recording is a failed check, not a crashed section
        rows.append(Row(ALGORITHM, "Flink", f"record wordcount ({mode}, {failure} failure)", "fail", 0, "runs",
                        time.perf_counter() - t0, f"{type(e).__name__}: {e}"))
        return None
    rep = replay(out, tlc=_tlc())
    status = {True: "pass", False: "fail", None: "inconclusive"}[rep.conformant]
    detail = "; ".join(f"{c.name}: {c.detail}" for c in rep.checks)
    what = "TaskManager process killed" if failure == "taskmanager" else "task failure"
    rows.append(Row(ALGORITHM, "Flink", f"wordcount, {mode} checkpoints, {what}: record "
                    f"{res['seconds']:.0f} s, replay conformant (restored checkpoint {word(res['restored_checkpoint'])})"
                    + (" incl. TLC validation against the Chandy-Lamport model"
                       if (t := rep.check("barrier-alignment-tlc")) is not None and t.ok is True else ""),
                    status, sum(c.ok is True for c in rep.checks), "checks", time.perf_counter() - t0, detail))
    return out


def _tampered(trace: Path, tmp: Path) -> Row:
    from rollcheck.flink_replay.checks.tamper import TAMPERS, tamper
    from rollcheck.flink_replay.checks.user_replay import word_count_report
    from rollcheck.pyimpl.verdict import Status

    t0 = time.perf_counter()
    caught, details = 0, []
    # the word count's own tampers (those of a user operator's keyed state need a user job's trace)
    for how in [h for h in TAMPERS if "-user-" not in h]:
        out = tmp / f"tampered-{how}.jsonl"
        expected = tamper(trace, how, out)
        rep = word_count_report(out, tlc=_tlc() if how == "barrier-after-snapshot" else None)
        check = rep.check(expected)
        if how == "drop-failure":
            ok = check is not None and check.status is Status.UNCHECKED and rep.conformant is None
        else:
            ok = check is not None and check.status is Status.VIOLATED
        caught += ok
        details.append(f"{how}: {expected} -> {check.status.value if check else 'missing'}")
    return Row(ALGORITHM, "Flink", "tampered traces rejected by the right check",
               "pass" if caught == len(details) else "fail", len(details), "traces",
               time.perf_counter() - t0, "; ".join(details))


def _report_row(what: str, rep, t0: float) -> Row:  # type: ignore[no-untyped-def]
    status = {"conformant": "pass", "violated": "fail"}.get(rep.verdict.value, "inconclusive")
    held = sum(1 for c in rep.checks if c.ok is True)
    return Row(ALGORITHM, "Flink", what, status, held, "checks", time.perf_counter() - t0,
               "; ".join(f"{c.name}: {c.status.value} — {c.detail}" for c in rep.checks))


def _user_job(ctx: VerifyContext, tmp: Path) -> Row:
    """A job written against the module contract (the tutorial's), recorded under a task failure."""
    from importlib import resources

    from rollcheck.flink_replay.checks.user_replay import replay_job
    from rollcheck.flink_replay.recording.record import RecordConfig, record
    from rollcheck.pyimpl.errors import InconclusiveError

    t0 = time.perf_counter()
    module = Path(str(resources.files("rollcheck.data").joinpath("keyed_totals.py")))
    what = "a user's PyFlink job (keyed running totals, RocksDB, unaligned checkpoints), task failure"
    ctx.log(f"  flink: {what} (seed {ctx.seed})")
    try:
        cfg = RecordConfig.make(checkpoints="unaligned", interval_ms=300, rate=400.0, fail_at_record=300,
                                failure="task", seed=ctx.seed, backend="rocksdb", module=str(module))
        record(tmp / "user-job.jsonl", cfg)
    except InconclusiveError as e:
        return Row(ALGORITHM, "Flink", what, "inconclusive", 0, "runs", time.perf_counter() - t0, str(e))
    return _report_row(what + ": replay", replay_job(tmp / "user-job.jsonl"), t0)


def _rescale(ctx: VerifyContext, tmp: Path) -> Row:
    """The word count failed at parallelism 2 and restored at 3: key groups redistributed."""
    from rollcheck.flink_replay.checks.user_replay import word_count_report
    from rollcheck.flink_replay.recording.record import RecordConfig, record
    from rollcheck.pyimpl.errors import InconclusiveError

    t0 = time.perf_counter()
    what = "wordcount failed at parallelism 2, restored at 3 (changelog state backend)"
    ctx.log(f"  flink: {what} (seed {ctx.seed})")
    try:
        cfg = RecordConfig.make(records=1500, rate=500.0, fail_at_record=700, failure="task", seed=ctx.seed,
                                backend="changelog", rescale=(2, 3))
        record(tmp / "rescale.jsonl", cfg)
    except InconclusiveError as e:
        return Row(ALGORITHM, "Flink", what, "inconclusive", 0, "runs", time.perf_counter() - t0, str(e))
    return _report_row(what + ": every key restored once by its key group's owner, output exactly once",
                       word_count_report(tmp / "rescale.jsonl", tlc=_tlc()), t0)


def _utilization(ctx: VerifyContext, tmp: Path) -> Row:
    """A short sweep of the utilization model against measured utilization."""
    from rollcheck.flink_replay.intervals.utilization import (
        GOAL,
        measure_utilization,
        plot_utilization,
    )
    from rollcheck.pyimpl.errors import InconclusiveError

    t0 = time.perf_counter()
    intervals = [300, 1500]
    duration = 40.0 if ctx.quick else 60.0
    ctx.log(f"  flink: utilization for intervals of {_ms_words(intervals)}, {duration:g} s each, failures every "
            "6 s (mean)")
    name = "Utilization model on Flink"
    try:
        # adapt: a machine that cannot hold the work step's rate runs the sweep again at one it can
        res = measure_utilization(intervals, 6.0, duration_s=duration, seed=ctx.seed, work_dir=tmp / "utilization",
                                  log=ctx.log, adapt=True)
    except InconclusiveError as e:
        return Row(name, "Flink", "measured vs predicted utilization", "inconclusive", 0, "runs",
                   time.perf_counter() - t0, str(e))
    row_ok = res["max_abs_error"] <= 2 * GOAL
    detail = "; ".join(f"{r['interval_ms']} ms: measured {r['measured_utilization']:.3f}, predicted "
                       f"{r['predicted_utilization']:.3f} ({100 * r['error']:+.1f} %)" for r in res["runs"])
    p = res["parameters"]
    detail += (f"; fitted λ={p['failure_rate']}/s, c={p['checkpoint_cost_s']} s, R={p['restart_cost_s']} s; best "
               f"measured {res['optimum']['measured_ms']} ms, T*={res['optimum']['predicted_ms']} ms")
    if res.get("adapted"):
        detail += f"; {res['adapted']}"
    la = res.get("load_average") or {}
    detail += (f"; load average {word(la.get('start'), 'unknown')} at the start and "
               f"{word(la.get('end'), 'unknown')} at the end")
    row = Row(name, "Flink", f"measured vs predicted utilization within {100 * 2 * GOAL:.0f} % (short sweep; the "
              f"full sweep's goal is {100 * GOAL:.0f} %)", "pass" if row_ok else "fail", len(res["runs"]), "runs",
              time.perf_counter() - t0, detail)
    row.pictures = [str(plot_utilization(res, ctx.path("flink", "utilization.png")))]
    return row


def _ms_words(values: list[int]) -> str:
    """``[200, 500, 1000]`` as ``200, 500 and 1000 ms``."""
    words = [str(v) for v in values]
    return (words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]) + " ms"


def _recovery_time(ctx: VerifyContext, tmp: Path) -> Row:
    from rollcheck.flink_replay.intervals.plot import plot_recovery
    from rollcheck.flink_replay.intervals.recovery import (
        STATED_ERROR,
        excluded_text,
        measure_recovery_times,
    )
    from rollcheck.pyimpl.errors import InconclusiveError

    t0 = time.perf_counter()
    intervals = [200, 1000] if ctx.quick else [200, 500, 1000]
    ctx.log(f"  flink: recovery time for intervals of {_ms_words(intervals)}, 5 failures each (an interval the "
            "machine could not pace is measured again at rates chosen from its first runs)")
    try:
        # adapt: an interval without 3 stable repetitions is measured again at rates, backlog and
        # failure point chosen from how the machine drained the first runs' backlog
        res = measure_recovery_times(intervals, repetitions=5, work_dir=tmp / "recovery-time", seed=ctx.seed,
                                     log=ctx.log, adapt=True)
    except InconclusiveError as e:
        return Row("TRT (Chiron) on Flink", "Flink", "measured vs predicted recovery time", "inconclusive",
                   0, "runs", time.perf_counter() - t0, str(e))
    pictures = [str(plot_recovery(res, ctx.path("flink", "recovery-time.png")))]
    chiron = [r for r in res["runs"] if r["model"] == "chiron-trt"]
    ok = all(abs(r["error"]) <= STATED_ERROR for r in chiron)
    detail = "; ".join(f"{r['interval_ms']} ms: measured {r['measured_s']:.2f} s, {r['model']} "
                       f"{r['predicted_s']:.2f} s ({100 * r['error']:+.1f} %)" for r in res["runs"])
    n_out = sum(len(p["excluded"]) for p in res["parameters"])
    if n_out:
        detail += (f"; {n_out} repetition(s) excluded as disturbed by the machine's load ("
                   + "; ".join(excluded_text(p["excluded"]) for p in res["parameters"] if p["excluded"]) + ")")
    for p in res["parameters"]:
        if p.get("adapted"):
            detail += (f"; {p['interval_ms']} ms was measured again at λ = {p['rate']:g}/s, μ = {p['max_rate']:g}/s "
                       f"because {p['adapted']} (the first time: {excluded_text(p.get('excluded_first') or [])})")
    la = res.get("load_average") or {}
    detail += (f"; load average {word(la.get('start'), 'unknown')} at the start and "
               f"{word(la.get('end'), 'unknown')} at the end")
    row = Row("TRT (Chiron) on Flink", "Flink", f"failure -> caught up vs Chiron TRT within "
              f"{100 * STATED_ERROR:.0f} % (median of 5 failures per interval)", "pass" if ok else "fail",
              sum(len(p["repetitions"]) for p in res["parameters"]), "runs", time.perf_counter() - t0, detail)
    row.pictures = pictures
    return row


#: Independent parts the scheduler runs side by side, each with its own Flink job process: the
#: word count recordings (and the tamper checks on the aligned one), the user's job with the
#: rescaled restore, and the two timed sweeps (recovery time, utilization), each of which already
#: runs all of its runs in one Flink environment (one JVM).
PARTS = ("recordings", "user-rescale", "recovery-time", "utilization")


def _no_flink_row() -> Row | None:
    """One inconclusive row when the PyFlink environment is missing (``make flink-setup``), else None."""
    from rollcheck.flink_replay.environment import find_flink
    from rollcheck.pyimpl.errors import InconclusiveError

    try:
        find_flink()
    except InconclusiveError as e:
        return Row(ALGORITHM, "Flink", "record wordcount (aligned, task failure)", "inconclusive", 0, "runs", 0.0,
                   str(e))
    return None


def run(ctx: VerifyContext) -> list[Row]:
    """Run the Flink section, or its part ``ctx.part`` (one row naming the setup without PyFlink)."""
    rows: list[Row] = []
    if ctx.part is not None:  # without Flink, one row says how to install it (from the first part only)
        missing = _no_flink_row()
        if missing is not None:
            return [missing] if ctx.part == PARTS[0] else []
    if ctx.part in ("recordings", "user-rescale"):  # its own process; the timed sweeps keep the defaults
        from rollcheck.sections._jvm import use_short_jvm_options

        use_short_jvm_options("JVM_ARGS")
    with tempfile.TemporaryDirectory(prefix="rollcheck-verify-flink-") as d:
        tmp = Path(d)
        if ctx.runs("recordings"):
            aligned = _record(ctx, tmp, "aligned", rows)
            if aligned is None and rows and rows[-1].status == "inconclusive":
                return rows  # no Flink environment: one inconclusive row says how to install it
            _record(ctx, tmp, "unaligned", rows)
            if not ctx.quick:
                _record(ctx, tmp, "aligned", rows, failure="taskmanager")
            if aligned is not None:
                rows.append(_tampered(aligned, tmp))
        if ctx.runs("user-rescale"):
            rows.append(_user_job(ctx, tmp))
            rows.append(_rescale(ctx, tmp))
        if ctx.runs("recovery-time"):
            rows.append(_recovery_time(ctx, tmp))
        if ctx.runs("utilization"):
            rows.append(_utilization(ctx, tmp))
    return rows
