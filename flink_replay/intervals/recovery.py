"""Measured recovery time of real Flink runs next to the interval models' predictions.

For each checkpoint interval the word-count job runs with an *absolute* arrival schedule (rate
``λ``), a source that serves at most ``μ`` records/s (``--max-rate``), and a task failure injected
just before the next checkpoint trigger, so the restored checkpoint is about one interval old. From
the per-record emission log of the same run it measures ``measured_s`` (failure → caught up, the
median of the repetitions) and the models' parameters (downtime ``D``, age ``E`` of the restored
checkpoint, service rate ``μ``, ``U = λ/μ``), and predicts from them:

- ``chiron-trt``: Chiron's total recovery time, ``D + (E + D)·U/(1 − U)``;
- ``utilization``: the utilization model's time lost per failure, ``D + E``.

See docs/internals/flink-intervals.md#recovery for how each is measured.

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
from rollcheck.flink_replay.intervals.recovery_analysis import (
    CALIBRATE_S,
    CAUGHT_UP_S,
    HEADROOM,
    MAX_WARMUP_S,
    MIN_DRAIN,
    MIN_RATE,
    analyse_drain,
    analyse_run,
    choose_rates,
    excluded_text,
    ms_list,
)
from rollcheck.flink_replay.recording.run_folder import LOG4J, _job_file
from rollcheck.infra import children
from rollcheck.pyimpl.errors import InconclusiveError, InvalidInputError
from rollcheck.pyimpl.intervals.trt import trt_breakdown

# reading a run and choosing the rates of a second try: recovery_analysis (its names stay importable
# from here)
__all__ = ["measure_recovery_times", "analyse_run", "analyse_drain", "choose_rates", "excluded_text",
           "CAUGHT_UP_S", "CALIBRATE_S", "STABLE_RATE", "STATED_ERROR", "HEADROOM", "MIN_DRAIN", "MIN_RATE",
           "MAX_WARMUP_S"]

#: a repetition counts only if its catch-up ran within this fraction of the calibrated service rate
STABLE_RATE = 0.10
#: the largest relative error of the Chiron TRT prediction that ``rollcheck verify`` accepts (the
#: median over the repetitions of (predicted − measured)/measured, each repetition predicted from
#: its own parameters)
STATED_ERROR = 0.15


def _load() -> float | None:
    try:
        return round(os.getloadavg()[0], 1)
    except (AttributeError, OSError):
        return None


def _predict(p: dict[str, float]) -> dict[str, float]:
    d, e, u = p["downtime_s"], p["checkpoint_age_s"], p["ratio"]
    if not 0 <= u < 1:
        raise InconclusiveError(f"measured U = λ/μ = {u:.3f} is not below 1: the job cannot catch up")
    trt = trt_breakdown(e * 1000.0, timeout=0.0, recovery=d * 1000.0, warmup=0.0, ratio=u, case="worst",
                        reading="eq2", threshold=1.0).trt / 1000.0
    return {"chiron-trt": trt, "utilization": d + e}


def _run_job(root: Path, name: str, cfg: dict[str, Any], python: str, timeout: float) -> None:
    """Run the Flink job file on ``root/<name>.json`` (its output in ``root/<name>.out``)."""
    (root / f"{name}.json").write_text(json.dumps(cfg))
    penv = dict(os.environ, LOG4J_PROPERTIES=str(root / "log4j.properties"), FLINK_LOG_DIR=str(root),
                TMPDIR=str(root / "tmp"))
    penv["JVM_ARGS"] = (penv.get("JVM_ARGS", "") + f" -Djava.io.tmpdir={root / 'tmp'}").strip()
    with open(root / f"{name}.out", "w") as so:
        try:
            children.run([python, str(_job_file()), str(root / f"{name}.json")], stdout=so,
                         stderr=subprocess.STDOUT, env=penv, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise InconclusiveError(f"the Flink recovery-time runs ({name}) did not end in time, at a load "
                                    f"average of {_load()}") from None


def _plan(root: Path, prefix: str, plans: list[dict[str, Any]], repetitions: int) -> list[dict[str, Any]]:
    """The runs of one JVM: a warm-up, then ``repetitions`` failures per planned interval.

    The first job in a fresh JVM runs slower (class loading, JIT, Python start): it is not measured.
    """
    first = plans[0]
    runs: list[dict[str, Any]] = [{"run_dir": str((root / f"{prefix}warmup").resolve()),
                                   "interval_ms": first["interval_ms"], "rate": first["rate"],
                                   "source_cap": first["max_rate"], "calibrate_s": first["calibrate_s"],
                                   "records": int(first["rate"] * 4), "fail_at_record": None}]
    for p in plans:
        iv, rate, cap = p["interval_ms"], p["rate"], p["max_rate"]
        # the failure comes after the drain, 2 completed checkpoints and 1 s, then: downtime + catch-up
        fail_at = int(rate * (p["drain_s"] + max(1.0, 3.2 * iv / 1000.0)))
        span = fail_at / rate + 1.0 + (iv / 1000.0 + 2.0) * cap / (cap - rate)
        for r in range(repetitions):
            runs.append({"run_dir": str((root / f"{prefix}i{iv}-r{r}").resolve()), "interval_ms": iv, "rate": rate,
                         "source_cap": cap, "calibrate_s": p["calibrate_s"], "records": int(rate * span),
                         "fail_at_record": fail_at})
    return runs


def _analyse_interval(root: Path, prefix: str, iv: int, repetitions: int, rate: float,
                      parallelism: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The stable repetitions of one interval and the excluded ones (each with its reason)."""
    reps: list[dict[str, Any]] = []
    excluded: list[dict[str, Any]] = []
    for r in range(repetitions):
        run = root / f"{prefix}i{iv}-r{r}"
        if not (run / "run.json").exists():
            excluded.append({"run": run.name, "reason": "the job ended without a result"})
            continue
        try:
            x = analyse_run(run, rate, parallelism)
        except InconclusiveError as e:
            # one repetition the machine's load disturbed (no backlog, no catch-up seen) is
            # excluded like one whose service rate changed; too few left is inconclusive
            excluded.append({"run": run.name, "reason": str(e)})
            continue
        after = x["service_rate_after_restart"]
        # the models assume one service rate; a repetition whose catch-up ran at a rate more
        # than STABLE_RATE off the calibrated one (other load on the machine) is not a test of them
        if after is not None and abs(after - x["service_rate"]) > STABLE_RATE * x["service_rate"]:
            excluded.append({"run": run.name, "service_rate": round(x["service_rate"], 1),
                             "service_rate_after_restart": round(after, 1)})
            continue
        reps.append(x)
    return reps, excluded


def _seen(root: Path, prefix: str, iv: int, repetitions: int, parallelism: int,
          excluded: list[dict[str, Any]] | None = None) -> dict[str, Any] | None:
    """How the machine drained the initial backlog in an interval's repetitions, combined.

    :func:`analyse_drain` of each: the median service rate and checkpoint duration, the longest drain
    and start-up; caught up only if every one did. None when no repetition could be read. A repetition
    excluded because its catch-up ran at another rate counts the lower of its two rates: the rate the
    machine could hold through both.
    """
    after = {str(x["run"]): float(x["service_rate_after_restart"]) for x in excluded or []
             if x.get("service_rate_after_restart") is not None}
    got = []
    for r in range(repetitions):
        name = f"{prefix}i{iv}-r{r}"
        try:
            g = analyse_drain(root / name, parallelism)
        except (InconclusiveError, OSError, ValueError, KeyError):
            continue
        if name in after:
            g["service_rate"] = min(g["service_rate"], after[name])
        got.append(g)
    if not got:
        return None
    cks = [g["checkpoint_ms"] for g in got if g["checkpoint_ms"] is not None]
    return {"service_rate": statistics.median(g["service_rate"] for g in got),
            "drain_s": max(g["drain_s"] for g in got), "warmup_s": max(g["warmup_s"] for g in got),
            "caught_up": all(g["caught_up"] for g in got), "checkpoint_ms": statistics.median(cks) if cks else None,
            "repetitions": len(got)}



def measure_recovery_times(intervals: list[int], *, rate: float = 400.0, max_rate: float = 800.0,
                           repetitions: int = 3, parallelism: int = 2, keys: int = 8, seed: int = 0,
                           work_dir: str | Path | None = None, log: Any = None, adapt: bool = False) -> dict[str, Any]:
    """Run ``repetitions`` failures per interval in one JVM and compare with the models.

    ``adapt``: an interval with fewer than 3 stable repetitions is measured again, in a second JVM, at
    rates, initial backlog, failure point and interval chosen (:func:`choose_rates`) from how the
    machine ran its first repetitions (:func:`analyse_drain`): a machine too slow to hold the
    service-rate cap gets a cap it can hold. Each entry of ``parameters`` says the ``rate`` and
    ``max_rate`` it ran at, and ``adapted`` why (None when the first runs stood).

    Returns
    -------
    dict
        ``{"runs": [{"interval_ms", "measured_s", "predicted_s", "model", "error", ...}], ...}`` with
        one entry per (interval, model): ``measured_s`` and ``predicted_s`` are the medians over the
        repetitions (each repetition predicted from its own measured parameters) and ``error`` is the
        median of the repetitions' (predicted − measured)/measured.

    Raises
    ------
    InconclusiveError
        PyFlink missing, the runs did not end in time, or an interval kept fewer than 3 stable
        repetitions: the reason names every excluded repetition and the machine's load.
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
                                         parallelism=parallelism, keys=keys, seed=seed, work_dir=d, log=log,
                                         adapt=adapt)
            res["work_dir"] = None
            return res
    root = Path(work_dir)
    if root.exists():
        shutil.rmtree(root)
    (root / "tmp").mkdir(parents=True)
    (root / "log4j.properties").write_text(LOG4J.replace("DEBUG", "INFO"))
    # the failure waits until every subtask drained its initial backlog (fail_after_all_caught_up)
    base = {"checkpoints": "aligned", "parallelism": parallelism, "keys": keys, "schedule": "absolute",
            "fail_before_trigger": True, "fail_after_all_caught_up": True, "failure": "task", "tap_jar": str(jar),
            "seed": seed, "timeout_s": 240}
    drain = CALIBRATE_S * max_rate / (max_rate - rate)  # the initial backlog is gone by then
    plans: list[dict[str, Any]] = [{"interval_ms": iv, "rate": rate, "max_rate": max_rate, "calibrate_s": CALIBRATE_S,
                                    "drain_s": drain, "adapted": None} for iv in intervals]
    runs = _plan(root, "", plans, repetitions)
    if log:
        log(f"flink recovery-time: {len(runs)} runs in one JVM (intervals of {ms_list(intervals)}, "
            f"λ={rate:g}/s, μ={max_rate:g}/s)")
    load = {"start": _load(), "end": None}
    _run_job(root, "config", dict(base, runs=runs), str(env.python), timeout=300 * len(runs))
    load["end"] = _load()
    outcome = {iv: _analyse_interval(root, "", iv, repetitions, rate, parallelism) for iv in intervals}
    failed = [iv for iv in intervals if len(outcome[iv][0]) < 3]
    retried: dict[int, dict[str, Any]] = {}
    notes: dict[int, str] = {}
    if adapt and failed:
        retried = _retry(root, failed, outcome, notes, load, base=base, python=str(env.python), log=log,
                         rate=rate, max_rate=max_rate, repetitions=repetitions, parallelism=parallelism)
    out: list[dict[str, Any]] = []
    params: list[dict[str, Any]] = []
    for iv in intervals:
        plan = next(p for p in plans if p["interval_ms"] == iv)
        reps, excluded = outcome[iv]
        if iv in retried:
            plan = retried[iv]
            reps, excluded = _analyse_interval(root, "again-", plan["interval_ms"], repetitions, plan["rate"],
                                               parallelism)
        if len(reps) < 3:
            raise InconclusiveError(_too_few(iv, plan, reps, excluded, repetitions, load, notes.get(iv)))
        params.append(_parameters(plan, reps, excluded))
        out += _predictions(plan["interval_ms"], reps, params[-1]["measured_s"])
    return {"runs": out, "parameters": params, "rate": rate, "max_rate": max_rate, "repetitions": repetitions,
            "load_average": load, "seconds": round(time.time() - t0, 1), "work_dir": str(root)}


def _retry(root: Path, failed: list[int], outcome: dict[int, tuple[list[dict[str, Any]], list[dict[str, Any]]]],
           notes: dict[int, str], load: dict[str, Any], *, base: dict[str, Any], python: str, log: Any,
           rate: float, max_rate: float, repetitions: int, parallelism: int) -> dict[int, dict[str, Any]]:
    """Measure the ``failed`` intervals again in a second JVM, at rates chosen from their first repetitions.

    Returns the plan of each interval measured again (why another was not goes to ``notes``, the
    second JVM's load to ``load``).
    """
    retried: dict[int, dict[str, Any]] = {}
    for iv in failed:
        seen = _seen(root, "", iv, repetitions, parallelism, outcome[iv][1])
        if seen is None:
            notes[iv] = "no repetition showed how the machine drained its backlog, so none was repeated"
            continue
        try:
            c = choose_rates(seen, [iv], rate=rate, max_rate=max_rate, parallelism=parallelism,
                             calibrate_s=CALIBRATE_S, load=load["end"])
        except InconclusiveError as e:
            notes[iv] = str(e)
            continue
        retried[iv] = {"interval_ms": c["intervals"][0], "rate": c["rate"], "max_rate": c["max_rate"],
                       "calibrate_s": c["calibrate_s"], "drain_s": c["drain_s"], "adapted": c["reason"],
                       "first": outcome[iv][1]}
    if retried:
        again = list(retried.values())
        runs2 = _plan(root, "again-", again, repetitions)
        if log:
            log("flink recovery-time: " + "; ".join(
                f"{ms_list([iv])} measured again at {p['interval_ms']} ms: {p['adapted']}"
                for iv, p in retried.items()))
        load["again_start"] = _load()
        _run_job(root, "again", dict(base, runs=runs2), python, timeout=300 * len(runs2))
        load["again_end"] = _load()
    return retried


def _parameters(plan: dict[str, Any], reps: list[dict[str, Any]], excluded: list[dict[str, Any]]) -> dict[str, Any]:
    """One interval's ``parameters`` entry: the medians of its stable repetitions' parameters, the rates.

    The latency and the checkpoint duration are means per repetition, then medians.
    """
    med = {k: statistics.median(x[k] for x in reps) for k in
           ("measured_s", "downtime_s", "checkpoint_age_s", "service_rate", "ratio")}
    after = [x["service_rate_after_restart"] for x in reps if x["service_rate_after_restart"]]
    med["service_rate_after_restart"] = statistics.median(after) if after else None
    lats = [x["latency_s"] for x in reps if x.get("latency_s") is not None]
    med["latency_s"] = statistics.fmean(lats) if lats else None
    durs = [x["checkpoint_duration_ms"] for x in reps if x["checkpoint_duration_ms"] is not None]
    med["checkpoint_duration_ms"] = statistics.fmean(durs) if durs else None
    return {"interval_ms": plan["interval_ms"], **{k: (round(v, 4) if v is not None else None) for k, v in med.items()},
            "repetitions": [round(x["measured_s"], 4) for x in reps], "excluded": excluded,
            "rate": plan["rate"], "max_rate": plan["max_rate"], "adapted": plan["adapted"],
            "excluded_first": plan.get("first", [])}


def _predictions(shown: int, reps: list[dict[str, Any]], measured: float) -> list[dict[str, Any]]:
    """One ``runs`` entry per model: each repetition predicted from its own parameters, both sides medians."""
    out: list[dict[str, Any]] = []
    preds = [_predict(x) for x in reps]
    for model in preds[0]:
        pred = statistics.median(p[model] for p in preds)
        errs = [(p[model] - x["measured_s"]) / x["measured_s"] for p, x in zip(preds, reps, strict=True)]
        out.append({"interval_ms": shown, "measured_s": measured,
                    "predicted_s": round(pred, 4), "model": model, "error": round(statistics.median(errs), 4),
                    "repetition_errors": [round(e, 4) for e in errs]})
    return out


def _too_few(iv: int, plan: dict[str, Any], reps: list[Any], excluded: list[dict[str, Any]], repetitions: int,
             load: dict[str, Any], note: str | None) -> str:
    """Why an interval is inconclusive, in sentences.

    The stable repetitions, the load, what was excluded and (when it was measured again) why and at
    which rates.
    """
    text = (f"interval {iv} ms: only {len(reps)} of {repetitions} repetitions ran at a stable service rate, at a "
            f"load average of {load['start']} at the start and {load['end']} at the end of the runs on "
            f"{os.cpu_count()} cores")
    if plan.get("adapted"):
        text += (f". Measured again at {plan['interval_ms']} ms, λ={plan['rate']:g}/s, μ={plan['max_rate']:g}/s "
                 f"(load {load.get('again_start')} to {load.get('again_end')}) because {plan['adapted']}. "
                 f"Excluded the first time: {excluded_text(plan.get('first', []))}. Excluded again: "
                 f"{excluded_text(excluded)}")
    else:
        text += f". Excluded: {excluded_text(excluded)}"
        if note:
            text += f". Not measured again: {note}"
    return text
