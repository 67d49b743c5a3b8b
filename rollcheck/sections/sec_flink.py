"""``rollcheck verify`` section: real Apache Flink runs (aligned and unaligned barrier snapshots)
recorded with an injected task failure (and, in the full run, a killed TaskManager process),
replayed against the coordinated-snapshot model (aligned runs also by TLC against the
Chandy-Lamport model), tampered copies rejected by the check each one targets, and measured
recovery times compared with Chiron's TRT and the utilization model. See ``docs/flink.md``.

Without the PyFlink environment (``make flink-setup``) every row is inconclusive.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from rollcheck.suite import Row, VerifyContext

TITLE = "Flink: aligned and unaligned snapshots recorded with failures, replayed"

ALGORITHM = "Chandy-Lamport snapshots (Flink)"


def _tlc():
    from importlib import resources

    from rollcheck.flink_replay.tlc import validate_with_tlc
    from rollcheck.tla.runner import run_tlc

    cl = Path(str(resources.files("rollcheck.tla.models").joinpath("ChandyLamport.tla")))
    return lambda path: validate_with_tlc(path, run_tlc, cl)


def _record(ctx: VerifyContext, tmp: Path, mode: str, rows: list[Row], failure: str = "task") -> Path | None:
    from rollcheck.flink_replay.record import RecordConfig, record_wordcount
    from rollcheck.flink_replay.replay import replay
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
                    f"{res['seconds']:.0f} s, replay conformant (restored checkpoint {res['restored_checkpoint']})"
                    + (" incl. TLC validation against the Chandy-Lamport model"
                       if (t := rep.check("barrier-alignment-tlc")) is not None and t.ok is True else ""),
                    status, sum(c.ok is True for c in rep.checks), "checks", time.perf_counter() - t0, detail))
    return out


def _tampered(trace: Path, tmp: Path) -> Row:
    from rollcheck.flink_replay.replay import replay
    from rollcheck.flink_replay.tamper import TAMPERS, tamper

    t0 = time.perf_counter()
    caught, details = 0, []
    for how in TAMPERS:
        out = tmp / f"tampered-{how}.jsonl"
        expected = tamper(trace, how, out)
        rep = replay(out, tlc=_tlc() if how == "barrier-after-snapshot" else None)
        check = next(c for c in rep.checks if c.name == expected)
        ok = check.ok is False if how != "drop-failure" else (check.ok is None and rep.conformant is None)
        caught += ok
        details.append(f"{how}: {expected} -> {check.ok}")
    return Row(ALGORITHM, "Flink", "tampered traces rejected by the right check",
               "pass" if caught == len(TAMPERS) else "fail", len(TAMPERS), "traces",
               time.perf_counter() - t0, "; ".join(details))


def _recovery_time(ctx: VerifyContext, tmp: Path) -> Row:
    from rollcheck.flink_replay.plot import plot_recovery
    from rollcheck.flink_replay.recovery import STATED_ERROR, measure_recovery_times
    from rollcheck.pyimpl.errors import InconclusiveError

    t0 = time.perf_counter()
    intervals = [200, 1000] if ctx.quick else [200, 500, 1000]
    ctx.log(f"  flink: recovery time for intervals {intervals} ms, 5 failures each")
    try:
        res = measure_recovery_times(intervals, repetitions=5, work_dir=tmp / "recovery-time", seed=ctx.seed,
                                     log=ctx.log)
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
        detail += f"; {n_out} repetition(s) excluded: service rate changed by more than 10 % (machine load)"
    row = Row("TRT (Chiron) on Flink", "Flink", f"failure -> caught up vs Chiron TRT within "
              f"{100 * STATED_ERROR:.0f} % (median of 5 failures per interval)", "pass" if ok else "fail",
              sum(len(p["repetitions"]) for p in res["parameters"]), "runs", time.perf_counter() - t0, detail)
    row.pictures = pictures
    return row


def run(ctx: VerifyContext) -> list[Row]:
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="rollcheck-verify-flink-") as d:
        tmp = Path(d)
        aligned = _record(ctx, tmp, "aligned", rows)
        if aligned is None and rows and rows[-1].status == "inconclusive":
            return rows  # no Flink environment: one inconclusive row says how to install it
        _record(ctx, tmp, "unaligned", rows)
        if not ctx.quick:
            _record(ctx, tmp, "aligned", rows, failure="taskmanager")
        if aligned is not None:
            rows.append(_tampered(aligned, tmp))
        rows.append(_recovery_time(ctx, tmp))
    return rows
