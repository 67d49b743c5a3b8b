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
import math
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

__all__ = ["measure_recovery_times", "analyse_run", "analyse_drain", "choose_rates", "excluded_text",
           "CAUGHT_UP_S", "CALIBRATE_S", "STABLE_RATE", "STATED_ERROR", "HEADROOM", "MIN_DRAIN", "MIN_RATE"]

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
#: the cap holds on this machine when a run drained its initial backlog at least this fraction of it
HOLDS_CAP = 0.9
#: where the cap did not hold, the repeated runs' cap is this fraction of the rate the first ones reached
#: (at load 25 on 2 cores, runs capped at 77 % of it still caught up at only 81-93 % of their drain rate)
HEADROOM = 0.65
#: records each subtask must drain from the initial backlog before it catches up (the service
#: rate is measured on the last two thirds of them; ``analyse_run`` needs at least 20)
MIN_DRAIN = 150
#: the failure is scheduled this many times the drain time the first runs saw after the start
#: (the job also waits until every subtask caught up)
DRAIN_MARGIN = 1.5
#: the start-up counted at most (seconds): in runs the load saturated the rate is too noisy to
#: say when the start-up ended, and a longer one would only lengthen every run
MAX_WARMUP_S = 2.0
#: the shortest interval is at least this many of the first runs' median checkpoint durations
INTERVAL_PER_CHECKPOINT = 4.0
#: an arrival rate below this (records/s, all subtasks) is too coarse to measure a recovery on:
#: a machine this slow (or this loaded) gives an inconclusive row naming its service rate and load
MIN_RATE = 40.0


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
        if done is None:
            late = rows[-1][2] - rows[-1][1] if rows else 0.0
            raise InconclusiveError(f"{run.name}: a subtask had not drained its initial backlog when the failure "
                                    f"struck ({len(rows)} records emitted, the last {late:.2f} s late): the "
                                    "service rate before the failure could not be measured")
        if done < 20:
            raise InconclusiveError(f"{run.name}: a subtask caught up after {done} records, too small an initial "
                                    "backlog to measure the service rate on")
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


def _rows(f: Path) -> list[tuple[float, ...]]:
    return [tuple(map(float, x.split())) for x in f.read_text().splitlines() if x.strip()]


def _warmup(rows: list[tuple[float, ...]], steady: float, window: float = 0.25) -> float:
    """Seconds from a subtask's first record until it first emitted at 90 % of its ``steady`` rate
    over ``window`` seconds (the job's start-up: Python workers, JIT, the first checkpoints).

    >>> rows = [(v, 0.0, v / 50.0) for v in range(50)] + [(50 + v, 0.0, 1.0 + v / 200.0) for v in range(400)]
    >>> 0.9 < _warmup(rows, 200.0) <= 1.0   # the 50/s second, then 200/s
    True
    """
    ats = [r[2] for r in rows]
    j = 0
    for i, t in enumerate(ats):
        while j < len(ats) and ats[j] < t + window:
            j += 1
        if j >= len(ats):
            break
        if (j - i) / window >= 0.9 * steady:
            return round(t - ats[0], 3)
    return round(ats[-1] - ats[0], 3)


def analyse_drain(run: Path, parallelism: int) -> dict[str, Any]:
    """The machine as a recovery-time run saw it before its failure: how its source drained the
    initial backlog (the pace logs of the first attempt) and how long its checkpoints took.

    Returns ``{"service_rate", "drain_s", "caught_up", "warmup_s", "start_skew_s", "checkpoint_ms",
    "checkpoints"}``: the records/s (all subtasks) at which the source drained its backlog, after the
    first third of the drain (``analyse_run``'s μ; the whole run when a subtask never caught up);
    the seconds from the first record to the last subtask's catch-up (the run's length when one
    never caught up); whether every subtask caught up; the slowest subtask's start-up (seconds until
    it first emitted at 90 % of its steady rate); how much later than the first the last subtask
    began; the
    median end-to-end checkpoint duration (None without a completed checkpoint).

    Raises
    ------
    InconclusiveError
        The run ended without a record to measure on.
    """
    files = [_rows(f) for f in sorted(run.glob("pace-gen0-*.jsonl"))]
    files = [r for r in files if len(r) >= 30]
    if not files:
        raise InconclusiveError(f"{run.name}: too few records were emitted to measure the machine on")
    first = min(r[0][2] for r in files)
    rates, ends, warmups, all_caught = [], [], [], True
    for rows in files:
        done = next((i for i, (_, due, at) in enumerate(rows) if at - due <= CAUGHT_UP_S), None)
        if done is None or done < 30:
            all_caught = all_caught and done is not None
            done = len(rows) - 1
        a = done // 3
        span = rows[done][2] - rows[a][2]
        if span <= 0:
            continue
        steady = (done - a) / span
        rates.append(steady)
        ends.append(rows[done][2])
        warmups.append(_warmup(rows[: done + 1], steady))
    if not rates:
        raise InconclusiveError(f"{run.name}: the records left no time to measure a rate on")
    durations: list[float] = []
    if (run / "run.json").exists():
        hist = json.loads((run / "run.json").read_text()).get("rest", {}).get("checkpoints", {})
        durations = [float(h["end_to_end_duration"]) for h in hist.values()
                     if h.get("status") == "COMPLETED" and h.get("end_to_end_duration") is not None]
    return {"service_rate": round(statistics.fmean(rates) * parallelism, 1),
            "drain_s": round(max(ends) - first, 3), "caught_up": all_caught, "warmup_s": round(max(warmups), 3),
            "start_skew_s": round(max(r[0][2] for r in files) - first, 3),
            "checkpoint_ms": round(statistics.median(durations), 1) if durations else None,
            "checkpoints": len(durations)}


def choose_rates(seen: dict[str, Any], intervals: list[int], *, rate: float = 400.0, max_rate: float = 800.0,
                 parallelism: int = 2, calibrate_s: float = CALIBRATE_S, load: float | None = None) -> dict[str, Any]:
    """The arrival rate, service-rate cap, initial backlog, failure point and intervals of the measured
    runs, from how the machine ran the first ones (at ``rate``/``max_rate`` with ``calibrate_s`` of
    backlog; ``seen``: :func:`analyse_drain`, over their repetitions).

    - the cap ``μ`` stays ``max_rate`` when the first runs drained at :data:`HOLDS_CAP` of it or more;
      otherwise (the machine, not the cap, set the pace) it is :data:`HEADROOM` of the rate the first
      runs reached, and the arrival rate keeps the ratio ``U = rate/max_rate``;
    - the initial backlog (seconds of input due at the start) is long enough that each subtask
      drains at least :data:`MIN_DRAIN` records before it catches up (a subtask's backlog grows at
      λ/p while it drains at μ/p, so it drains (λ/p)·B·μ/(μ − λ) records), and that the drain,
      B/(1 − U) seconds, lasts three times the first runs' start-up (``warmup_s``, at most
      :data:`MAX_WARMUP_S`), which then falls in the first third that ``analyse_run`` leaves out of
      the service rate;
    - ``drain_s``, the time by which the backlog is expected gone: B·μ/(μ − λ) plus the time the
      first runs took beyond their own such expectation (the start skew, the warm-up) or, when
      they never caught up, plus their start-up and start skew; times :data:`DRAIN_MARGIN`;
    - every interval is at least :data:`INTERVAL_PER_CHECKPOINT` checkpoint durations (rounded up
      to 50 ms; equal intervals merged), counted only when the first runs caught up (in a saturated
      job the barriers queue behind the backlog).

    Raises
    ------
    InconclusiveError
        The arrival rate would fall below :data:`MIN_RATE`: the machine (at the load it had) serves
        too few records for a recovery to be measured; the reason names its service rate and load.

    Examples
    --------
    A machine whose first runs drained at the cap keeps the rates; one that reached only 560 records/s
    (about half the speed the defaults need) gets a cap it can hold and still drains a backlog:

    >>> fast = {"service_rate": 790.0, "drain_s": 2.2, "caught_up": True, "checkpoint_ms": 25.0}
    >>> c = choose_rates(fast, [200, 1000])
    >>> c["rate"], c["max_rate"], c["intervals"], c["calibrate_s"]
    (400.0, 800.0, [200, 1000], 1.0)
    >>> slow = {"service_rate": 560.0, "drain_s": 5.0, "caught_up": True, "checkpoint_ms": 60.0}
    >>> c = choose_rates(slow, [200, 1000])
    >>> c["max_rate"], c["rate"], c["intervals"], c["drain_s"] > 5.0
    (360.0, 180.0, [250, 1000], True)
    """
    if not 0 < rate < max_rate or parallelism < 1 or calibrate_s <= 0:
        raise InvalidInputError("the rates, the backlog and the parallelism must be positive, rate < max-rate")
    served = float(seen["service_rate"])
    at_load = f" at load {load:.1f}" if load is not None else ""
    u = rate / max_rate
    holds = bool(seen.get("caught_up")) and served >= HOLDS_CAP * max_rate
    cap = max_rate if holds else float(int(HEADROOM * served / 10) * 10)
    lam = round(cap * u, 1)
    if lam < MIN_RATE:
        raise InconclusiveError(f"the machine drained the initial backlog at only {served:.0f} records/s"
                                f"{at_load}: an arrival rate of {lam:.0f}/s (below {MIN_RATE:.0f}/s) is too coarse "
                                "to measure a recovery on")
    per = lam / parallelism
    warmup = min(MAX_WARMUP_S, float(seen.get("warmup_s") or 0.0))
    backlog = max(calibrate_s, MIN_DRAIN * (cap - lam) / (per * cap), 3 * warmup * (1 - u))
    if seen.get("caught_up"):
        # how much longer than the backlog's arithmetic the first runs took to drain it (start skew, warm-up)
        extra = max(0.0, float(seen.get("drain_s") or 0.0) - calibrate_s / (1 - u))
        drain = DRAIN_MARGIN * (backlog / (1 - u) + extra)
    else:  # they never drained it: the new cap does, after the start-up they showed
        drain = DRAIN_MARGIN * (backlog / (1 - u) + warmup + float(seen.get("start_skew_s") or 0.0))
    # checkpoint durations count only from runs that kept up (a saturated job's barriers queue)
    ck = seen.get("checkpoint_ms") if seen.get("caught_up") else None
    floor = 50 * math.ceil(INTERVAL_PER_CHECKPOINT * float(ck) / 50) if ck else 0
    chosen: list[int] = []
    for iv in intervals:
        v = max(iv, floor)
        if v not in chosen:
            chosen.append(v)
    said = [f"the first runs drained their backlog at {served:.0f} records/s{at_load} in "
            f"{float(seen.get('drain_s') or 0.0):.1f} s"
            + ("" if seen.get("caught_up") else " without catching up")]
    if cap < max_rate:
        said.append(f"so the cap is lowered from {max_rate:g} to {cap:g} records/s and the arrival rate from "
                    f"{rate:g} to {lam:g}/s (the cap at {100 * HEADROOM:.0f} % of what the machine reached)")
    else:
        said.append(f"at least {100 * HOLDS_CAP:.0f} % of the cap, so the rates stay λ = {rate:g}/s, μ = {max_rate:g}/s")
    if chosen != list(intervals):
        said.append(f"the intervals are raised to {_ms_list(chosen)} (at least {INTERVAL_PER_CHECKPOINT:g} times the "
                    f"median checkpoint duration of {float(ck or 0):.0f} ms)")
    if backlog > calibrate_s:
        said.append(f"the initial backlog is {backlog:.2f} s of input")
    said.append(f"the failure waits {drain:.1f} s for the backlog to drain")
    return {"rate": lam, "max_rate": cap, "calibrate_s": round(backlog, 3), "drain_s": round(drain, 3),
            "intervals": chosen, "reason": ", ".join(said[:2]) + ("; " + "; ".join(said[2:]) if said[2:] else "")}


def _ms_list(values: list[int]) -> str:
    """``[200, 500, 1000]`` as ``200, 500 and 1000 ms``.

    >>> _ms_list([200]), _ms_list([200, 1000]), _ms_list([200, 500, 1000])
    ('200 ms', '200 and 1000 ms', '200, 500 and 1000 ms')
    """
    words = [str(v) for v in values]
    text = words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]
    return text + " ms"


def excluded_text(excluded: list[dict[str, Any]]) -> str:
    """Excluded repetitions in words, one clause each.

    Examples
    --------
    >>> excluded_text([{"run": "i200-r1", "reason": "i200-r1: no initial backlog to measure the service rate on"},
    ...                {"run": "i200-r3", "service_rate": 800.1, "service_rate_after_restart": 640.0}])
    'i200-r1: no initial backlog to measure the service rate on; i200-r3: the catch-up ran at 640 records/s against 800 records/s before the failure (20 % off)'
    >>> excluded_text([])
    'none'
    """
    parts = []
    for x in excluded:
        name = str(x.get("run", "a repetition"))
        if "reason" in x:
            reason = str(x["reason"])
            parts.append(reason if reason.startswith(name) else f"{name}: {reason}")
        else:
            before, after = float(x["service_rate"]), float(x["service_rate_after_restart"])
            parts.append(f"{name}: the catch-up ran at {after:.0f} records/s against {before:.0f} records/s before "
                         f"the failure ({100 * abs(after - before) / before:.0f} % off)")
    return "; ".join(parts) or "none"


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
    """The runs of one JVM: a warm-up (the first job in a fresh JVM runs slower: class loading, JIT,
    Python start; not measured), then ``repetitions`` failures per planned interval."""
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
    """How the machine drained the initial backlog in an interval's repetitions (:func:`analyse_drain`
    of each, combined: the median service rate and checkpoint duration, the longest drain and
    start-up; caught up only if every one did); None when no repetition could be read.

    A repetition excluded because its catch-up ran at another rate counts the lower of its two
    rates: the rate the machine could hold through both."""
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

    ``adapt``: an interval with fewer than 3 stable repetitions is measured again, in a second JVM,
    at rates, initial backlog, failure point and interval chosen (:func:`choose_rates`) from how the
    machine ran its first repetitions (:func:`analyse_drain`): a machine too slow to hold the
    service-rate cap gets a cap it can hold, so that it still drains a backlog at the cap's pace.
    Each entry of ``parameters`` says the ``rate`` and ``max_rate`` it ran at, and ``adapted`` why
    (None when the first runs stood).

    Returns ``{"runs": [{"interval_ms", "measured_s", "predicted_s", "model", "error", ...}], ...}``
    with one entry per (interval, model): ``measured_s`` and ``predicted_s`` are the medians over
    the repetitions (each repetition predicted from its own measured parameters) and ``error`` is
    the median of the repetitions' (predicted − measured)/measured.

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
        log(f"flink recovery-time: {len(runs)} runs in one JVM (intervals of {_ms_list(intervals)}, "
            f"λ={rate:g}/s, μ={max_rate:g}/s)")
    load = {"start": _load(), "end": None}
    _run_job(root, "config", dict(base, runs=runs), str(env.python), timeout=300 * len(runs))
    load["end"] = _load()
    outcome = {iv: _analyse_interval(root, "", iv, repetitions, rate, parallelism) for iv in intervals}
    failed = [iv for iv in intervals if len(outcome[iv][0]) < 3]
    retried: dict[int, dict[str, Any]] = {}
    notes: dict[int, str] = {}
    if adapt and failed:
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
                    f"{_ms_list([iv])} measured again at {p['interval_ms']} ms: {p['adapted']}"
                    for iv, p in retried.items()))
            load["again_start"] = _load()
            _run_job(root, "again", dict(base, runs=runs2), str(env.python), timeout=300 * len(runs2))
            load["again_end"] = _load()
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
        med = {k: statistics.median(x[k] for x in reps) for k in
               ("measured_s", "downtime_s", "checkpoint_age_s", "service_rate", "ratio")}
        after = [x["service_rate_after_restart"] for x in reps if x["service_rate_after_restart"]]
        med["service_rate_after_restart"] = statistics.median(after) if after else None
        lats = [x["latency_s"] for x in reps if x.get("latency_s") is not None]
        med["latency_s"] = statistics.fmean(lats) if lats else None
        durs = [x["checkpoint_duration_ms"] for x in reps if x["checkpoint_duration_ms"] is not None]
        med["checkpoint_duration_ms"] = statistics.fmean(durs) if durs else None
        shown = plan["interval_ms"]
        params.append({"interval_ms": shown, **{k: (round(v, 4) if v is not None else None) for k, v in med.items()},
                       "repetitions": [round(x["measured_s"], 4) for x in reps], "excluded": excluded,
                       "rate": plan["rate"], "max_rate": plan["max_rate"], "adapted": plan["adapted"],
                       "excluded_first": plan.get("first", [])})
        # each repetition is predicted from its own parameters; both sides are then medians
        preds = [_predict(x) for x in reps]
        for model in preds[0]:
            pred = statistics.median(p[model] for p in preds)
            errs = [(p[model] - x["measured_s"]) / x["measured_s"] for p, x in zip(preds, reps, strict=True)]
            out.append({"interval_ms": shown, "measured_s": round(med["measured_s"], 4),
                        "predicted_s": round(pred, 4), "model": model, "error": round(statistics.median(errs), 4),
                        "repetition_errors": [round(e, 4) for e in errs]})
    return {"runs": out, "parameters": params, "rate": rate, "max_rate": max_rate, "repetitions": repetitions,
            "load_average": load, "seconds": round(time.time() - t0, 1), "work_dir": str(root)}


def _too_few(iv: int, plan: dict[str, Any], reps: list[Any], excluded: list[dict[str, Any]], repetitions: int,
             load: dict[str, Any], note: str | None) -> str:
    """Why an interval is inconclusive, in sentences: the stable repetitions, the load, what was
    excluded and (when it was measured again) why and at which rates."""
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
