"""The utilization model held against a real Flink job: measured vs predicted utilization.

The model (Jayasekara et al., Eq. 4) predicts the long-run fraction of time a checkpointing
stream processor spends on useful work when it checkpoints every ``T`` at a blocking cost ``c``,
fails as a Poisson process of rate ``λ`` and needs ``R`` to restart:
``U = λ(T − c)e^{−λR}/(e^{λT} − 1)``, best at ``T* = (cλ + W₀(−e^{−cλ−1}) + 1)/λ``.

The experiment runs, in one JVM, a failure-free run (the denominator) and one run per interval
with the same seeded failure schedule; useful records are source positions, and ``λ``, ``R``,
``c`` and ``(n − 1)δ`` are fitted from the same runs. Predicted: Eq. 10 (the DAG model, ``n = 2``)
and Eq. 4 alone (``predicted_eq4``). See docs/internals/flink-intervals.md#utilization for the job
and how each quantity is measured.

References
----------
S. Jayasekara, A. Harwood, S. Karunasekera, "A Utilization Model for Optimization of Checkpoint
Intervals in Distributed Stream Processing Systems", Eqs. 4 and 10, §3.4 and §4.3 (T* via Lambert
W), Table 1.
"""

from __future__ import annotations

import bisect
import json
import os
import random
import shutil
import statistics
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rollcheck.flink_replay.environment import find_flink, tap_jar
from rollcheck.flink_replay.recording.record import LOG4J, _job_file
from rollcheck.infra import children
from rollcheck.pyimpl.errors import InconclusiveError, InvalidInputError
from rollcheck.pyimpl.intervals import optimal_interval, utilization_dag, utilization_single

__all__ = ["failure_schedule", "measure_utilization", "analyse_sweep", "analyse_positions", "plot_utilization", "GOAL",
           "HELD_RATE", "paced_rate"]

GOAL = 0.05  # the goal: measured within 5 % of predicted
DEPTH = 2  # operators on the checkpoint token's path: the source (with the work step), the keyed count
#: the model assumes the work step's service rate: the failure-free run must process at least this
#: fraction of ``service_rate`` records/s, else the machine, not the work step, set the pace
HELD_RATE = 0.9
#: where it did not, the sweep is run again at this fraction of the rate the failure-free run reached
RATE_HEADROOM = 0.7
#: below this service rate (records/s) a sweep is too coarse to measure utilization on
MIN_SERVICE_RATE = 10.0


def paced_rate(service_rate: float, reached: float) -> float | None:
    """The service rate to run the sweep again at, when the failure-free run fell short of ``service_rate``.

    ``reached``: the records/s it reached; None when the rate held (no need).

    Parameters
    ----------
    service_rate : float
        The rate asked for, records/s.
    reached : float
        The rate the failure-free run reached, records/s.

    Returns
    -------
    float or None
        The lower rate, records/s, or None when the rate held.

    Examples
    --------
    >>> paced_rate(50.0, 46.0) is None                # held
    True
    >>> paced_rate(50.0, 30.0), paced_rate(50.0, 21.0)  # a machine 2x and 3x too slow for 50/s
    (21.0, 14.0)
    """
    if reached >= HELD_RATE * service_rate:
        return None
    return float(int(RATE_HEADROOM * reached))


def failure_schedule(seed: int, mean_s: float, start_s: float, end_s: float) -> list[float]:
    """Failure times (seconds after the first record): a Poisson process of rate 1/mean in [start, end).

    Parameters
    ----------
    seed : int
        The random generator's seed.
    mean_s : float
        The mean time between failures, s (positive).
    start_s, end_s : float
        The window, s after the first record (``end_s`` > ``start_s``).

    Returns
    -------
    list of float
        The failure times in increasing order, s.

    Examples
    --------
    >>> ts = failure_schedule(0, 5.0, 2.0, 60.0)
    >>> all(2.0 <= t < 60.0 for t in ts), ts == sorted(ts), ts == failure_schedule(0, 5.0, 2.0, 60.0)
    (True, True, True)
    """
    if mean_s <= 0 or end_s <= start_s:
        raise InvalidInputError("the failure schedule needs a positive mean and a non-empty window")
    rng = random.Random(seed)
    out: list[float] = []
    t = start_s
    while True:
        t += rng.expovariate(1.0 / mean_s)
        if t >= end_s:
            return out
        out.append(t)


def _emissions(run: Path) -> tuple[list[float], list[int]]:
    pairs = []
    for f in run.glob("work-*.log"):
        for line in f.read_text().splitlines():
            parts = line.split()
            if len(parts) == 2:
                pairs.append((float(parts[1]), int(parts[0])))
    pairs.sort()
    return [t for t, _ in pairs], [v for _, v in pairs]


def analyse_positions(times: list[float], values: list[int], t_from: float, t_to: float) -> int:
    """Useful records in ``[t_from, t_to]``: the source position at the end minus the one at the start.

    The position is the last value emitted; work redone after a rollback counts once.

    Parameters
    ----------
    times : list of float
        When each source position was emitted, sorted, s.
    values : list of int
        The positions emitted.
    t_from, t_to : float
        The window, s.

    Returns
    -------
    int
        The useful records in the window.

    Examples
    --------
    >>> analyse_positions([0, 1, 2, 3, 4, 5], [1, 2, 3, 2, 3, 4], 0.5, 5.0)   # 3 rolled back to 2
    3
    """
    def pos(t: float) -> int:
        i = bisect.bisect_right(times, t) - 1
        return values[i] if i >= 0 else 0

    return pos(t_to) - pos(t_from)


def _t0(run: Path) -> float:
    try:
        return float((run / "t0").read_text())
    except (OSError, ValueError):
        raise InconclusiveError(f"{run.name}: the job never processed a record") from None


def _restart_costs(run: Path, times: list[float]) -> list[float]:
    out = []
    for f in sorted(run.glob("ufail-*")):
        tf = float(f.read_text())
        # the failing record itself is logged (to the microsecond) at tf: the next one is the restart
        i = bisect.bisect_right(times, tf + 1e-5)
        if i < len(times):
            out.append(times[i] - tf)
    return out


def _checkpoint_costs(run: Path, times: list[float], service_time: float) -> list[float]:
    """The pause of the work step across each source snapshot, minus one service time."""
    costs = []
    for f in run.glob("tap-tap-source-*.jsonl"):
        for line in f.read_text().splitlines():
            try:
                ev = json.loads(line)
            except json.JSONDecodeError:
                continue
            if ev.get("ev") != "snapshot":
                continue
            t = ev["t_us"] / 1e6  # logged when the blocking part ended
            i = bisect.bisect_right(times, t)
            if 0 < i < len(times):
                costs.append(max(0.0, times[i] - times[i - 1] - service_time))
    return costs


def measure_utilization(intervals_ms: list[int], failure_every_s: float, *, duration_s: float = 60.0,
                        warmup_s: float = 5.0, service_rate: float = 50.0, snapshot_cost_ms: int = 100,
                        seed: int = 0, work_dir: str | Path | None = None,
                        log: Callable[[str], None] | None = None, adapt: bool = False) -> dict[str, Any]:
    """Run the sweep (see the module docstring) and compare with the model.

    ``adapt``: when the failure-free run processed fewer than :data:`HELD_RATE` of ``service_rate``
    records/s (the machine, not the work step, set the pace, which the model does not describe), the
    sweep is run again at the rate :func:`paced_rate` chooses from the one it reached; the result's
    ``adapted`` says why (None when the first sweep stood).

    Returns ``{"runs": [...], "optimum": {"measured_ms", "predicted_ms"}, "parameters": {...}, ...}``.

    Raises
    ------
    InvalidInputError
        Bad intervals, durations or rates.
    InconclusiveError
        PyFlink missing, a run without a result, or no failure inside the window; with ``adapt``,
        a machine that did not hold even the lowered rate (the reason names the rates and the load).
    """
    if adapt:
        first = measure_utilization(intervals_ms, failure_every_s, duration_s=duration_s, warmup_s=warmup_s,
                                    service_rate=service_rate, snapshot_cost_ms=snapshot_cost_ms, seed=seed,
                                    work_dir=work_dir, log=log)
        reached = float(first["baseline_rate"])
        lower = paced_rate(service_rate, reached)
        if lower is None:
            return first | {"adapted": None}
        why = (f"the failure-free run processed {reached:.1f} records/s of the work step's {service_rate:g} (load "
               f"{first['load_average']['start']} to {first['load_average']['end']}): the machine, not the work "
               f"step, set the pace")
        if lower < MIN_SERVICE_RATE:
            raise InconclusiveError(f"{why}, and {lower:g} records/s is too coarse to measure utilization on")
        if log:
            log(f"flink utilization: {why}; the sweep runs again at {lower:g} records/s")
        again = measure_utilization(intervals_ms, failure_every_s, duration_s=duration_s, warmup_s=warmup_s,
                                    service_rate=lower, snapshot_cost_ms=snapshot_cost_ms, seed=seed,
                                    work_dir=None if work_dir is None else Path(work_dir) / "again", log=log)
        if paced_rate(lower, float(again["baseline_rate"])) is not None:
            raise InconclusiveError(f"{why}; run again at {lower:g} records/s it processed "
                                    f"{again['baseline_rate']:.1f} records/s (load {again['load_average']['start']} "
                                    f"to {again['load_average']['end']}): the machine set the pace both times")
        return again | {"adapted": f"{why}, so it ran again at {lower:g} records/s"}
    if not intervals_ms or any(i < 50 for i in intervals_ms):
        raise InvalidInputError("--intervals: at least one interval, each at least 50 ms")
    if len(set(intervals_ms)) != len(intervals_ms):
        raise InvalidInputError("--intervals: each interval once")
    if failure_every_s <= 0 or duration_s <= 0 or service_rate <= 0 or snapshot_cost_ms < 0:
        raise InvalidInputError("--failure-every, --duration, the service rate must be positive")
    if any(i <= snapshot_cost_ms for i in intervals_ms):
        raise InvalidInputError(f"every interval must exceed the checkpoint cost ({snapshot_cost_ms} ms)")
    if work_dir is None:
        with tempfile.TemporaryDirectory(prefix="rollcheck-utilization-") as d:
            return measure_utilization(intervals_ms, failure_every_s, duration_s=duration_s, warmup_s=warmup_s,
                                       service_rate=service_rate, snapshot_cost_ms=snapshot_cost_ms, seed=seed,
                                       work_dir=d, log=log) | {"work_dir": None}
    env = find_flink()
    jar = tap_jar(env)
    root = Path(work_dir)
    if root.exists():
        shutil.rmtree(root)
    (root / "tmp").mkdir(parents=True)
    schedule = failure_schedule(seed, failure_every_s, warmup_s, warmup_s + duration_s)
    if not schedule:
        raise InconclusiveError(f"no failure falls in the {duration_s:g} s window with mean {failure_every_s:g} s "
                                f"(seed {seed}): a longer --duration or another seed")
    span = warmup_s + duration_s + 1.0
    runs: list[dict[str, Any]] = [{"run_dir": str((root / "warmup").resolve()), "interval_ms": intervals_ms[0], "failure_times": [],
             "stop_after_s": 8, "timeout_s": 150}]
    runs.append({"run_dir": str((root / "baseline").resolve()), "interval_ms": intervals_ms[0],
                 "no_checkpoints": True, "failure_times": [], "stop_after_s": span, "timeout_s": span + 150})
    for iv in intervals_ms:
        runs.append({"run_dir": str((root / f"i{iv}").resolve()), "interval_ms": iv, "failure_times": schedule,
                     "stop_after_s": span, "timeout_s": span + 150})
    cfg = {"job": "utilization", "checkpoints": "aligned", "parallelism": 1, "keys": 4, "rate": service_rate,
           "records": 0, "service_rate": service_rate, "snapshot_cost_ms": snapshot_cost_ms,
           "restart_attempts": 10000, "restart_delay_ms": 200, "tap_jar": str(jar), "seed": seed, "runs": runs}
    (root / "config.json").write_text(json.dumps(cfg))
    (root / "log4j.properties").write_text(LOG4J.replace("DEBUG", "INFO"))
    penv = dict(os.environ, LOG4J_PROPERTIES=str(root / "log4j.properties"), FLINK_LOG_DIR=str(root),
                TMPDIR=str(root / "tmp"))
    penv["JVM_ARGS"] = (penv.get("JVM_ARGS", "") + f" -Djava.io.tmpdir={root / 'tmp'}").strip()
    if log:
        log(f"flink utilization: {len(runs)} runs in one JVM (intervals of {', '.join(map(str, intervals_ms))} ms, {len(schedule)} failures "
            f"in {duration_s:g} s, service rate {service_rate:g}/s, checkpoint cost {snapshot_cost_ms} ms, seed {seed})")
    load_start = _load()
    with open(root / "job.out", "w") as so:
        try:
            children.run([str(env.python), str(_job_file()), str(root / "config.json")], stdout=so,
                         stderr=subprocess.STDOUT, env=penv,
                         timeout=sum(float(r["timeout_s"]) + 90 for r in runs))
        except subprocess.TimeoutExpired:
            raise InconclusiveError(f"the Flink utilization runs did not end in time, at a load average of "
                                    f"{_load()}") from None

    return analyse_sweep(root, intervals_ms, failure_every_s, duration_s=duration_s, warmup_s=warmup_s,
                         service_rate=service_rate, snapshot_cost_ms=snapshot_cost_ms, seed=seed,
                         scheduled=len(schedule)) | {"load_average": {"start": load_start, "end": _load()}}


def _load() -> float | None:
    try:
        return round(os.getloadavg()[0], 1)
    except (AttributeError, OSError):
        return None


def analyse_sweep(root: Path, intervals_ms: list[int], failure_every_s: float, *, duration_s: float, warmup_s: float,
                  service_rate: float, snapshot_cost_ms: int, seed: int, scheduled: int) -> dict[str, Any]:
    """Measured and predicted utilization from the run folders of a sweep (see the module docstring).

    Parameters
    ----------
    root : Path
        The sweep's folder (a run folder per interval, ``baseline``).
    intervals_ms, failure_every_s, duration_s, warmup_s, service_rate, snapshot_cost_ms, seed
        The sweep's settings (as :func:`measure_utilization`).
    scheduled : int
        How many failures the schedule held.

    Returns
    -------
    dict
        The result :func:`measure_utilization` returns.
    """

    def window(run: Path) -> tuple[list[float], list[int], float, float]:
        if not (run / "run.json").exists():
            raise InconclusiveError(f"{run.name}: the job ended without a result (see {root / 'job.out'})")
        times, values = _emissions(run)
        t0 = _t0(run)
        t_from, t_to = t0 + warmup_s, t0 + warmup_s + duration_s
        if not times or times[-1] < t_to - 1.0:
            raise InconclusiveError(f"{run.name}: the job stopped before the end of the measured window")
        return times, values, t_from, t_to

    bt, bv, bf, bto = window(root / "baseline")
    base = analyse_positions(bt, bv, bf, bto)
    if base <= 0:
        raise InconclusiveError("the failure-free run processed nothing in the window")
    out: list[dict[str, Any]] = []
    fits: list[dict[str, Any]] = []
    for iv in intervals_ms:
        run = root / f"i{iv}"
        times, values, t_from, t_to = window(run)
        useful = analyse_positions(times, values, t_from, t_to)
        fired = sorted(float(f.read_text()) for f in run.glob("ufail-*"))
        in_window = [t for t in fired if t_from <= t < t_to]
        if not in_window:
            raise InconclusiveError(f"interval {iv} ms: no injected failure struck inside the window")
        lam = len(in_window) / duration_s
        restarts = _restart_costs(run, times)
        costs = _checkpoint_costs(run, times, 1.0 / service_rate)
        if not restarts or not costs:
            raise InconclusiveError(f"interval {iv} ms: no restart or no checkpoint could be measured")
        r_cost = statistics.fmean(restarts)
        c = statistics.fmean(costs)  # the model's cost is the expected time lost per checkpoint
        # a checkpoint becomes restorable when it completes, after its token passed the keyed
        # operator and the JobManager collected the acknowledgements: Eq. 10's (n - 1)·δ
        info = json.loads((run / "run.json").read_text())
        e2e = [h["end_to_end_duration"] / 1000.0 for h in info["rest"]["checkpoints"].values()
               if h.get("status") == "COMPLETED" and h.get("end_to_end_duration") is not None]
        delay = max(0.0, statistics.fmean(e2e) - c) if e2e else 0.0
        t = iv / 1000.0
        measured = useful / base
        predicted = float(utilization_dag(t, lam, c, r_cost, DEPTH, delay)) if t > c else 0.0
        single = float(utilization_single(t, lam, c, r_cost)) if t > c else 0.0
        out.append({"interval_ms": iv, "measured_utilization": round(measured, 4),
                    "predicted_utilization": round(predicted, 4),
                    "error": round((predicted - measured) / measured, 4) if measured > 0 else None,
                    "predicted_eq4": round(single, 4),
                    "error_eq4": round((single - measured) / measured, 4) if measured > 0 else None,
                    "useful_records": useful, "baseline_records": base})
        fits.append({"interval_ms": iv, "failure_rate": round(lam, 5), "failures": len(in_window),
                     "restart_cost_s": round(r_cost, 4), "checkpoint_cost_s": round(c, 4),
                     "completion_delay_s": round(delay, 4), "checkpoints": len(costs),
                     "restart_costs_s": [round(x, 3) for x in restarts]})
    lam_all = statistics.fmean(f["failure_rate"] for f in fits)
    c_all = statistics.fmean(f["checkpoint_cost_s"] for f in fits)
    r_all = statistics.fmean(f["restart_cost_s"] for f in fits)
    d_all = statistics.fmean(f["completion_delay_s"] for f in fits)
    t_star = optimal_interval(lam_all, c_all) if c_all > 0 else None
    best = max(out, key=lambda r: r["measured_utilization"])
    worst_err = max(abs(r["error"]) for r in out if r["error"] is not None)
    return {"runs": out, "optimum": {"measured_ms": best["interval_ms"],
                                     "predicted_ms": round(t_star * 1000, 1) if t_star else None},
            "parameters": {"failure_rate": round(lam_all, 5), "checkpoint_cost_s": round(c_all, 4),
                           "restart_cost_s": round(r_all, 4), "completion_delay_s": round(d_all, 4),
                           "depth": DEPTH, "service_rate": service_rate,
                           "snapshot_cost_ms": snapshot_cost_ms, "per_interval": fits},
            "failure_every_s": failure_every_s, "duration_s": duration_s, "warmup_s": warmup_s, "seed": seed,
            "failures_scheduled": scheduled, "baseline_records": base, "baseline_rate": round(base / duration_s, 2),
            "goal": GOAL,
            "within_goal": worst_err <= GOAL, "max_abs_error": round(worst_err, 4), "work_dir": str(root)}


def plot_utilization(res: dict[str, Any], out: str | Path) -> Path:
    """Measured utilization per interval against the model's curve (with its parameters), T* marked.

    Parameters
    ----------
    res : dict
        A result of :func:`measure_utilization`.
    out : str or Path
        The image file to write.

    Returns
    -------
    Path
        ``out``.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    p = res["parameters"]
    xs = [r["interval_ms"] for r in res["runs"]]
    lo, hi = min(xs) * 0.8, max(xs) * 1.25
    c = p["checkpoint_cost_s"]
    grid = np.linspace(max(lo, c * 1000 * 1.05), hi, 200)
    curve = [float(utilization_dag(g / 1000, p["failure_rate"], c, p["restart_cost_s"], p.get("depth", 1),
                                   p.get("completion_delay_s", 0.0))) for g in grid]
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(grid, curve, "b-", label="utilization model (fitted λ, c, R)")
    ax.plot(xs, [r["predicted_utilization"] for r in res["runs"]], "bs", label="predicted (per run)")
    ax.plot(xs, [r["measured_utilization"] for r in res["runs"]], "ko-", label="measured")
    if res["optimum"]["predicted_ms"]:
        ax.axvline(res["optimum"]["predicted_ms"], color="b", ls=":", label=f"T* = {res['optimum']['predicted_ms']:.0f} ms")
    ax.set_xlabel("checkpoint interval (ms)")
    ax.set_ylabel("utilization")
    ax.set_title(f"Flink utilization: failures every {res['failure_every_s']:g} s (mean), c = {c * 1000:.0f} ms, "
                 f"R = {p['restart_cost_s']:.2f} s", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
