"""The interval models against the real engine, without Flink: the analysis of a utilization run
folder (useful records, restart and checkpoint costs) and Chiron's choice for a target TRT from
profiling results (the Flink runs themselves are exercised by `verify` and the docs)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rollcheck.flink_replay.intervals import target_trt, utilization
from rollcheck.pyimpl.errors import InvalidInputError


def _fake_run(path: Path, *, mu: float, pauses: list[tuple[float, float]], failures: list[tuple[float, float, int]],
              end: float) -> None:
    """Emissions at rate mu from t=0, with (start, length) pauses at snapshots and failures
    (time, downtime, records rolled back)."""
    path.mkdir(parents=True)
    (path / "t0").write_text("0.0")
    t, v, lines, snaps = 0.0, 0, [], []
    events = sorted([(s, "pause", d) for s, d in pauses] + [(s, "fail", (d, back)) for s, d, back in failures])
    k = 0
    for s, what, arg in events:
        while t + 1 / mu <= s:
            t += 1 / mu
            v += 1
            lines.append(f"{v} {t:.6f}")
        if what == "pause":
            t += arg
            snaps.append({"ev": "snapshot", "t_us": int(t * 1e6)})
        else:
            down, back = arg
            (path / f"ufail-{k}").write_text(repr(t))
            k += 1
            t += down
            v -= back
    while t + 1 / mu <= end:
        t += 1 / mu
        v += 1
        lines.append(f"{v} {t:.6f}")
    (path / "work-0.log").write_text("\n".join(lines) + "\n")
    (path / "tap-tap-source-0-0.jsonl").write_text("\n".join(json.dumps(s) for s in snaps) + "\n")


def test_costs_and_useful_records_are_read_back(tmp_path: Path) -> None:
    run = tmp_path / "i1000"
    _fake_run(run, mu=50.0, pauses=[(x + 0.5, 0.1) for x in range(0, 30)], failures=[(10.7, 0.4, 20)], end=30.0)
    times, values = utilization._emissions(run)
    assert len(times) == len(values) > 1000
    costs = utilization._checkpoint_costs(run, times, 1 / 50)
    assert len(costs) == 30 and all(abs(c - 0.1) < 0.03 for c in costs)
    restarts = utilization._restart_costs(run, times)
    assert len(restarts) == 1 and abs(restarts[0] - 0.4) < 0.03
    useful = utilization.analyse_positions(times, values, 5.0, 25.0)
    # 20 s at 50/s, minus 20 pauses of 0.1 s, the 0.4 s downtime and 20 records rolled back
    assert abs(useful - (1000 - 100 - 20 - 20)) <= 3


def test_failure_schedule_is_seeded_and_bounded() -> None:
    a = utilization.failure_schedule(3, 6.0, 5.0, 95.0)
    assert a == utilization.failure_schedule(3, 6.0, 5.0, 95.0) != utilization.failure_schedule(4, 6.0, 5.0, 95.0)
    assert 5 <= len(a) <= 30 and all(5.0 <= t < 95.0 for t in a)
    with pytest.raises(InvalidInputError):
        utilization.failure_schedule(0, 0.0, 0.0, 1.0)


def test_bad_sweeps_are_refused() -> None:
    for args in (([], 5.0), ([100, 100], 5.0), ([80], 5.0), ([500], -1.0)):
        with pytest.raises(InvalidInputError):
            utilization.measure_utilization(*args, snapshot_cost_ms=100)  # type: ignore[arg-type]


def _profile(monkeypatch: pytest.MonkeyPatch, trt_of) -> list[int]:  # type: ignore[no-untyped-def]
    calls: list[int] = []

    def fake(intervals, **kw):  # type: ignore[no-untyped-def]
        calls.extend(intervals)
        return {"parameters": [{"interval_ms": i, "measured_s": trt_of(i), "latency_s": 0.05 + 10 / i}
                               for i in intervals]}

    monkeypatch.setattr(target_trt, "measure_recovery_times", fake)
    return calls


def test_target_met(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _profile(monkeypatch, lambda i: 0.5 + i / 1000)
    res = target_trt.meet_target_trt(1.2, [200, 500, 1000], rate=400, max_rate=800, repetitions=3, parallelism=2,
                                     seed=0)
    assert res["chosen_interval_ms"] == 700 and res["meets_target"] is True and calls[-1] == 700
    assert res["predicted_trt_s"] <= 1.2


def test_target_missed_is_reported_with_numbers(monkeypatch: pytest.MonkeyPatch) -> None:
    _profile(monkeypatch, lambda i: 0.5 + i / 1000 if i != 700 else 1.5)   # the chosen run is slower
    res = target_trt.meet_target_trt(1.2, [200, 500, 1000], rate=400, max_rate=800, repetitions=3, parallelism=2,
                                     seed=0)
    assert res["meets_target"] is False and "1.500 s > target 1.2 s" in res["reason"]
    _profile(monkeypatch, lambda i: 2.0 + i / 1000)   # nothing in range can meet it
    res = target_trt.meet_target_trt(1.2, [200, 500, 1000], rate=400, max_rate=800, repetitions=3, parallelism=2,
                                     seed=0)
    assert res["chosen_interval_ms"] is None and res["meets_target"] is False and "smallest" in res["reason"]
    with pytest.raises(InvalidInputError):
        target_trt.meet_target_trt(1.2, [200, 500], rate=400, max_rate=800, repetitions=3, parallelism=2, seed=0)


def test_target_undecided_when_the_chosen_interval_cannot_be_measured(monkeypatch: pytest.MonkeyPatch) -> None:
    from rollcheck.pyimpl.errors import InconclusiveError

    def fake(intervals, **kw):  # type: ignore[no-untyped-def]
        if len(intervals) == 1:
            raise InconclusiveError("only 2 of 4 repetitions ran at a stable service rate")
        return {"parameters": [{"interval_ms": i, "measured_s": 0.5 + i / 1000, "latency_s": 0.05 + 10 / i}
                               for i in intervals]}

    monkeypatch.setattr(target_trt, "measure_recovery_times", fake)
    res = target_trt.meet_target_trt(1.2, [200, 500, 1000], rate=400, max_rate=800, repetitions=4, parallelism=2,
                                     seed=0)
    assert res["chosen_interval_ms"] == 700 and res["meets_target"] is None and "stable" in res["reason"]
