"""Measured recovery time of real Flink runs next to the interval models' predictions.

For each checkpoint interval the word-count job runs with an *absolute* arrival schedule (record
v of a split is due at ``t0 + (v - start)/λ``), a source that serves at most ``μ`` records/s
(``--max-rate``), and a task failure injected just before the next checkpoint trigger, so the
restored checkpoint is about one interval old. From the per-record emission log of the same run
it measures:

- ``measured_s``: failure → caught up (the first record after the restart emitted within
  ``CAUGHT_UP_S`` of its due time, the slowest subtask), the median of the repetitions;
- the models' parameters: the downtime ``D`` (failure → first record emitted after the
  restart: detection, restart, state restore, warm-up), the age ``E`` of the restored checkpoint
  at the failure (failure − its trigger time), the service rate ``μ`` (measured *before* the
  failure, while the source drains an initial backlog of ``CALIBRATE_S`` seconds of input) and
  ``U = λ/μ``; the service rate during the catch-up and the mean checkpoint duration are reported
  too.

Predictions from those parameters:

- ``chiron-trt``: Chiron's total recovery time (:func:`rollcheck.pyimpl.intervals.trt.trt_breakdown`
  with ``E`` measured, ``T_o + R + W = D``, ratio ``U``, the Eq. 2 reading, 1 ms threshold):
  ``D + (E + D)·U/(1 − U)``, the backlog ``λ(E + D)`` drained at ``μ − λ``;
- ``utilization``: the utilization model's time lost per failure, restart cost plus the work
  since the last checkpoint redone at its original pace: ``D + E``.

References
----------
Geldenhuys, Thamsen, Kao, Chiron, §III Eqs. 1–5 (TRT).
The utilization paper, §3 (time lost per failure: restart plus lost work).
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from rollcheck.flink_replay.environment import find_flink, tap_jar
from rollcheck.flink_replay.record import LOG4J, _job_file
from rollcheck.pyimpl import children
from rollcheck.pyimpl.errors import InconclusiveError, InvalidInputError
from rollcheck.pyimpl.intervals.trt import trt_breakdown

__all__ = ["measure_recovery_times", "analyse_run", "CAUGHT_UP_S", "CALIBRATE_S", "STABLE_RATE", "STATED_ERROR"]

CAUGHT_UP_S = 0.05
#: seconds of input already due when a recovery-time run starts: the source drains this backlog at
#: its capped rate, which measures the service rate μ before (and independently of) the failure
CALIBRATE_S = 1.0
#: a repetition counts only if its catch-up ran within this fraction of the calibrated service rate
STABLE_RATE = 0.10
#: the largest relative error of the Chiron TRT prediction that ``rollcheck verify`` accepts (the
#: median over the repetitions of (predicted − measured)/measured, each repetition predicted from
#: its own parameters)
STATED_ERROR = 0.15


def analyse_run(run: Path, rate: float, parallelism: int) -> dict[str, Any]:
    """Measured recovery time and model parameters of one recovery-time run folder.

    Raises
    ------
    InconclusiveError
        The failure did not happen, the job did not restart, or it never caught up.
    """
    marker = run / "failure.json"
    if not marker.exists():
        raise InconclusiveError(f"{run.name}: the requested failure did not happen")
    t_fail = json.loads(marker.read_text())["t"]
    info = json.loads((run / "run.json").read_text())
    restored = None
    for f in run.glob("tap-tap-source-*-1.jsonl"):
        for line in f.read_text().splitlines():
            ev = json.loads(line)
            if ev["ev"] == "restore":
                restored = ev["checkpoint"]
    hist = info["rest"]["checkpoints"]
    if restored is None or str(restored) not in hist:
        raise InconclusiveError(f"{run.name}: no restored checkpoint with statistics")
    age = t_fail - hist[str(restored)]["trigger_timestamp"] / 1000.0
    durations = [h["end_to_end_duration"] for h in hist.values() if h.get("status") == "COMPLETED"]
    mus = []
    delays: list[float] = []
    for f in run.glob("pace-gen0-*.jsonl"):
        rows = [tuple(map(float, x.split())) for x in f.read_text().splitlines() if x.strip()]
        done = next((i for i, (_, due, at) in enumerate(rows) if at - due <= CAUGHT_UP_S), None)
        if done is None or done < 20:
            raise InconclusiveError(f"{run.name}: no initial backlog to measure the service rate on")
        # steady state before the failure: how late each record left the source (Chiron's latency)
        delays += [at - due for _, due, at in rows[done:]]
        # the first third of the drain includes the operators' warm-up: the rate is taken after it
        a = done // 3
        mus.append((done - a) / (rows[done][2] - rows[a][2]))
    firsts, caught, catch_mus = [], [], []
    for f in run.glob("pace-gen1-*.jsonl"):
        rows = [tuple(map(float, x.split())) for x in f.read_text().splitlines() if x.strip()]
        if not rows:
            continue
        first = rows[0][2]
        firsts.append(first)
        done = next((i for i, (_, due, at) in enumerate(rows) if at - due <= CAUGHT_UP_S), None)
        if done is None:
            raise InconclusiveError(f"{run.name}: a subtask never caught up with its input")
        caught.append(rows[done][2])
        if done >= 2:
            catch_mus.append(done / (rows[done][2] - first))
    if not firsts or not mus:
        raise InconclusiveError(f"{run.name}: no catch-up phase was observed")
    mu = statistics.fmean(mus) * parallelism
    return {"restored_checkpoint": restored, "measured_s": max(caught) - t_fail, "downtime_s": min(firsts) - t_fail,
            "checkpoint_age_s": age, "service_rate": mu, "ratio": rate / mu,
            "service_rate_after_restart": statistics.fmean(catch_mus) * parallelism if catch_mus else None,
            "checkpoint_duration_ms": statistics.fmean(durations) if durations else None,
            "latency_s": statistics.fmean(delays) if delays else None}


def _predict(p: dict[str, float]) -> dict[str, float]:
    d, e, u = p["downtime_s"], p["checkpoint_age_s"], p["ratio"]
    if not 0 <= u < 1:
        raise InconclusiveError(f"measured U = λ/μ = {u:.3f} is not below 1: the job cannot catch up")
    trt = trt_breakdown(e * 1000.0, timeout=0.0, recovery=d * 1000.0, warmup=0.0, ratio=u, case="worst",
                        reading="eq2", threshold=1.0).trt / 1000.0
    return {"chiron-trt": trt, "utilization": d + e}


def measure_recovery_times(intervals: list[int], *, rate: float = 400.0, max_rate: float = 800.0,
                           repetitions: int = 3, parallelism: int = 2, keys: int = 8, seed: int = 0,
                           work_dir: str | Path | None = None, log: Any = None) -> dict[str, Any]:
    """Run ``repetitions`` failures per interval in one JVM and compare with the models.

    Returns ``{"runs": [{"interval_ms", "measured_s", "predicted_s", "model", "error", ...}], ...}``
    with one entry per (interval, model): ``measured_s`` and ``predicted_s`` are the medians over
    the repetitions (each repetition predicted from its own measured parameters) and ``error`` is
    the median of the repetitions' (predicted − measured)/measured.
    """
    if not intervals or any(i < 50 for i in intervals):
        raise InvalidInputError("--intervals: a list of checkpoint intervals of at least 50 ms")
    if not 0 < rate < max_rate:
        raise InvalidInputError(f"--rate {rate} must be positive and below --max-rate {max_rate}")
    if repetitions < 3:
        raise InvalidInputError("--repetitions must be at least 3 (the median of 3 or more)")
    t0 = time.time()
    env = find_flink()
    jar = tap_jar(env)
    if work_dir is None:
        with tempfile.TemporaryDirectory(prefix="rollcheck-flink-rt-") as d:
            res = measure_recovery_times(intervals, rate=rate, max_rate=max_rate, repetitions=repetitions,
                                         parallelism=parallelism, keys=keys, seed=seed, work_dir=d, log=log)
            res["work_dir"] = None
            return res
    root = Path(work_dir)
    if root.exists():
        shutil.rmtree(root)
    (root / "tmp").mkdir(parents=True)
    # the first job in a fresh JVM runs slower (class loading, JIT, Python start): a warm-up run
    # with the first interval goes first and is not measured
    runs = [{"run_dir": str((root / "warmup").resolve()), "interval_ms": intervals[0],
             "records": int(rate * 4), "fail_at_record": None}]
    for iv in intervals:
        # the failure comes after 2 completed checkpoints and 1.5 s, then: downtime + catch-up
        drain = CALIBRATE_S * max_rate / (max_rate - rate)  # the initial backlog is gone by then
        fail_at = int(rate * (drain + max(1.0, 3.2 * iv / 1000.0)))
        span = fail_at / rate + 1.0 + (iv / 1000.0 + 2.0) * max_rate / (max_rate - rate)
        for r in range(repetitions):
            runs.append({"run_dir": str((root / f"i{iv}-r{r}").resolve()), "interval_ms": iv,
                         "records": int(rate * span), "fail_at_record": fail_at})
    cfg = {"checkpoints": "aligned", "parallelism": parallelism, "keys": keys, "rate": rate,
           "source_cap": max_rate, "schedule": "absolute", "calibrate_s": CALIBRATE_S, "fail_before_trigger": True, "failure": "task",
           "tap_jar": str(jar), "seed": seed, "timeout_s": 240, "runs": runs}
    (root / "config.json").write_text(json.dumps(cfg))
    (root / "log4j.properties").write_text(LOG4J.replace("DEBUG", "INFO"))
    penv = dict(os.environ, LOG4J_PROPERTIES=str(root / "log4j.properties"), FLINK_LOG_DIR=str(root),
                TMPDIR=str(root / "tmp"))
    penv["JVM_ARGS"] = (penv.get("JVM_ARGS", "") + f" -Djava.io.tmpdir={root / 'tmp'}").strip()
    if log:
        log(f"flink recovery-time: {len(runs)} runs in one JVM (intervals {intervals} ms, λ={rate}/s, μ={max_rate}/s)")
    with open(root / "job.out", "w") as so:
        try:
            children.run([str(env.python), str(_job_file()), str(root / "config.json")], stdout=so,
                           stderr=subprocess.STDOUT, env=penv, timeout=300 * len(runs))
        except subprocess.TimeoutExpired:
            raise InconclusiveError("the Flink recovery-time runs did not end in time") from None
    out: list[dict[str, Any]] = []
    params: list[dict[str, Any]] = []
    for iv in intervals:
        reps = []
        excluded = []
        for r in range(repetitions):
            run = root / f"i{iv}-r{r}"
            if not (run / "run.json").exists():
                raise InconclusiveError(f"{run.name}: the job ended without a result (see {root / 'job.out'})")
            x = analyse_run(run, rate, parallelism)
            after = x["service_rate_after_restart"]
            # the models assume one service rate; a repetition whose catch-up ran at a rate more
            # than STABLE_RATE off the calibrated one (other load on the machine) is not a test of them
            if after is not None and abs(after - x["service_rate"]) > STABLE_RATE * x["service_rate"]:
                excluded.append({"run": run.name, "service_rate": round(x["service_rate"], 1),
                                 "service_rate_after_restart": round(after, 1)})
                continue
            reps.append(x)
        if len(reps) < 3:
            raise InconclusiveError(f"interval {iv} ms: only {len(reps)} of {repetitions} repetitions ran at a "
                                    f"stable service rate (excluded: {excluded})")
        med = {k: statistics.median(x[k] for x in reps) for k in
               ("measured_s", "downtime_s", "checkpoint_age_s", "service_rate", "ratio")}
        after = [x["service_rate_after_restart"] for x in reps if x["service_rate_after_restart"]]
        med["service_rate_after_restart"] = statistics.median(after) if after else None
        lats = [x["latency_s"] for x in reps if x.get("latency_s") is not None]
        med["latency_s"] = statistics.fmean(lats) if lats else None
        durs = [x["checkpoint_duration_ms"] for x in reps if x["checkpoint_duration_ms"] is not None]
        med["checkpoint_duration_ms"] = statistics.fmean(durs) if durs else None
        params.append({"interval_ms": iv, **{k: (round(v, 4) if v is not None else None) for k, v in med.items()},
                       "repetitions": [round(x["measured_s"], 4) for x in reps], "excluded": excluded})
        # each repetition is predicted from its own parameters; both sides are then medians
        preds = [_predict(x) for x in reps]
        for model in preds[0]:
            pred = statistics.median(p[model] for p in preds)
            errs = [(p[model] - x["measured_s"]) / x["measured_s"] for p, x in zip(preds, reps, strict=True)]
            out.append({"interval_ms": iv, "measured_s": round(med["measured_s"], 4), "predicted_s": round(pred, 4),
                        "model": model, "error": round(statistics.median(errs), 4),
                        "repetition_errors": [round(e, 4) for e in errs]})
    return {"runs": out, "parameters": params, "rate": rate, "max_rate": max_rate, "repetitions": repetitions,
            "seconds": round(time.time() - t0, 1), "work_dir": str(root)}
