"""Reading a Flink recovery-time run and choosing the rates of a second try.

:func:`analyse_run` measures one repetition (failure → caught up, the models' parameters),
:func:`analyse_drain` how the machine drained the initial backlog, and :func:`choose_rates` the
rates, backlog and intervals a machine too slow for the first ones can hold.
"""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path
from typing import Any

from rollcheck.pyimpl.errors import InconclusiveError, InvalidInputError

__all__ = ["analyse_run", "analyse_drain", "choose_rates", "excluded_text", "ms_list", "CAUGHT_UP_S",
           "CALIBRATE_S", "HOLDS_CAP", "HEADROOM", "MIN_DRAIN", "DRAIN_MARGIN", "MAX_WARMUP_S",
           "INTERVAL_PER_CHECKPOINT", "MIN_RATE"]

CAUGHT_UP_S = 0.05
#: seconds of input already due when a recovery-time run starts: the source drains this backlog at
#: its capped rate, which measures the service rate μ before (and independently of) the failure
CALIBRATE_S = 1.0
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

    Parameters
    ----------
    run : Path
        The run folder.
    rate : float
        The arrival rate, records/s (all subtasks).
    parallelism : int
        The source's parallelism.

    Returns
    -------
    dict
        ``measured_s``, ``downtime_s``, ``checkpoint_age_s``, ``service_rate``, ``ratio``, ...

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
    """Seconds from a subtask's first record until it first emitted at 90 % of its ``steady`` rate.

    Over ``window`` seconds: the job's start-up (Python workers, JIT, the first checkpoints).

    Examples
    --------
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
    """The machine as a recovery-time run saw it before its failure: its backlog drain, its checkpoints.

    How its source drained the initial backlog (the pace logs of the first attempt) and how long its
    checkpoints took.

    Parameters
    ----------
    run : Path
        The run folder.
    parallelism : int
        The source's parallelism.

    Returns
    -------
    dict
        ``service_rate``: the records/s (all subtasks) at which the source drained its backlog, after
        the first third of the drain (``analyse_run``'s μ; the whole run when a subtask never caught
        up); ``drain_s``: the seconds from the first record to the last subtask's catch-up (the run's
        length when one never caught up); ``caught_up``: whether every subtask caught up;
        ``warmup_s``: the slowest subtask's start-up (seconds until it first emitted at 90 % of its
        steady rate); ``start_skew_s``: how much later than the first the last subtask began;
        ``checkpoint_ms``: the median end-to-end checkpoint duration (None without a completed
        checkpoint); ``checkpoints``.

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
    """The arrival rate, service-rate cap, initial backlog, failure point and intervals of the measured runs.

    Chosen from how the machine ran the first ones (at ``rate``/``max_rate`` with ``calibrate_s`` of
    backlog; ``seen``: :func:`analyse_drain`, over their repetitions): the cap stays ``max_rate`` when
    the first runs held :data:`HOLDS_CAP` of it, else it is :data:`HEADROOM` of the rate they reached
    (the ratio ``U = rate/max_rate`` kept); the backlog drains at least :data:`MIN_DRAIN` records per
    subtask and lasts three times the start-up; ``drain_s`` has :data:`DRAIN_MARGIN`; every interval is
    at least :data:`INTERVAL_PER_CHECKPOINT` checkpoint durations. The derivation of each is in
    docs/internals/flink-intervals.md#recovery_analysis.

    Parameters
    ----------
    seen : dict
        The first runs as :func:`analyse_drain` saw them.
    intervals : list of int
        The checkpoint intervals asked for, ms.
    rate, max_rate : float, optional
        The first runs' arrival rate and service-rate cap, records/s.
    parallelism : int, optional
        The source's parallelism.
    calibrate_s : float, optional
        The first runs' initial backlog, s of input.
    load : float, optional
        The load average the first runs saw (named in the reason); None: unknown.

    Returns
    -------
    dict
        ``rate``, ``max_rate``, ``calibrate_s``, ``drain_s``, ``intervals`` and ``reason``.

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
        said.append(f"the intervals are raised to {ms_list(chosen)} (at least {INTERVAL_PER_CHECKPOINT:g} times the "
                    f"median checkpoint duration of {float(ck or 0):.0f} ms)")
    if backlog > calibrate_s:
        said.append(f"the initial backlog is {backlog:.2f} s of input")
    said.append(f"the failure waits {drain:.1f} s for the backlog to drain")
    return {"rate": lam, "max_rate": cap, "calibrate_s": round(backlog, 3), "drain_s": round(drain, 3),
            "intervals": chosen, "reason": ", ".join(said[:2]) + ("; " + "; ".join(said[2:]) if said[2:] else "")}


def ms_list(values: list[int]) -> str:
    """``[200, 500, 1000]`` as ``200, 500 and 1000 ms``.

    >>> ms_list([200]), ms_list([200, 1000]), ms_list([200, 500, 1000])
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
