"""Chiron's optimiser on the real engine: the checkpoint interval for a target total recovery time.

Then measure whether Flink's recovery meets it. Profiling runs (``flink recovery-time`` at several
intervals, each repeated) give, per interval, the measured total recovery time (failure → caught
up) and the steady-state latency (how late a record leaves the source before the failure).
:func:`rollcheck.pyimpl.intervals.optimise_ci` fits both as quadratics in the interval and picks
the interval with the least predicted latency whose predicted TRT is within the target; that
interval is then run again (the same number of repetitions) and its measured TRT, the median, is
compared with the target.

References
----------
Chiron (checkpoint interval under a QoS/TRT constraint), §IV-C (profiling, quadratic fits, the
optimiser).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from rollcheck.flink_replay.intervals.recovery import measure_recovery_times
from rollcheck.pyimpl.errors import InconclusiveError, InvalidInputError
from rollcheck.pyimpl.intervals import ProfilingPoint, optimise_ci

__all__ = ["meet_target_trt"]


def meet_target_trt(target_s: float, intervals: list[int], *, rate: float, max_rate: float, repetitions: int,
                    parallelism: int, seed: int, work_dir: str | Path | None = None,
                    log: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Profile ``intervals``, let Chiron's optimiser choose one for ``target_s``, measure it.

    Returns ``{"target_trt_s", "chosen_interval_ms", "predicted_trt_s", "measured_s", "meets_target",
    "profile": [...], "reason"}``; when no profiled interval range can meet the target the choice is
    null, ``meets_target`` false and ``reason`` gives the smallest predicted TRT; when the chosen
    interval's runs could not be measured (too many disturbed by load) ``meets_target`` is null.
    """
    if target_s <= 0:
        raise InvalidInputError("--target-trt must be positive (seconds)")
    if len(set(intervals)) < 3:
        raise InvalidInputError("--target-trt needs at least 3 profiling intervals (--intervals) for the quadratic fits")
    wd = None if work_dir is None else Path(work_dir) / "profile"
    prof = measure_recovery_times(intervals, rate=rate, max_rate=max_rate, repetitions=repetitions,
                                  parallelism=parallelism, seed=seed, work_dir=wd, log=log)
    points = []
    for p in prof["parameters"]:
        lat = p.get("latency_s")
        points.append(ProfilingPoint(float(p["interval_ms"]), float(lat if lat is not None else 0.0),
                                     float(p["measured_s"])))
    out: dict[str, Any] = {"target_trt_s": target_s,
                           "profile": [{"interval_ms": int(pt.ci), "measured_s": pt.trt, "latency_s": pt.latency}
                                       for pt in points]}
    try:
        choice = optimise_ci(points, bound=target_s)
    except InvalidInputError as e:
        return out | {"chosen_interval_ms": None, "predicted_trt_s": None, "measured_s": None,
                      "meets_target": False, "reason": f"Chiron's optimiser: {e.reason}"}
    ci = max(50, int(round(choice.ci)))
    if log:
        log(f"Chiron's optimiser chose {ci} ms (predicted TRT {choice.trt:.3f} s <= {target_s} s); measuring it")
    wd2 = None if work_dir is None else Path(work_dir) / "chosen"
    try:
        got = measure_recovery_times([ci], rate=rate, max_rate=max_rate, repetitions=repetitions,
                                     parallelism=parallelism, seed=seed, work_dir=wd2, log=log)
    except InconclusiveError as e:  # the choice stands; whether it meets the target is undecided
        return out | {"chosen_interval_ms": ci, "predicted_trt_s": round(choice.trt, 4), "measured_s": None,
                      "meets_target": None, "reason": f"the chosen interval could not be measured: {e}"}
    measured = float(got["parameters"][0]["measured_s"])
    meets = measured <= target_s
    reason = (f"measured TRT {measured:.3f} s {'<=' if meets else '>'} target {target_s} s at the chosen "
              f"{ci} ms (median of {repetitions})")
    return out | {"chosen_interval_ms": ci, "predicted_trt_s": round(choice.trt, 4), "measured_s": round(measured, 4),
                  "meets_target": meets, "reason": reason, "chosen_run": got["parameters"][0]}
