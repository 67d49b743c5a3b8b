"""The timed Flink rows adapt to the machine: an interval whose first runs the machine could not
pace is measured again at rates, backlog, failure point and interval chosen from how it drained
the first runs' backlog (``flink_replay.intervals.recovery.analyse_drain`` and ``choose_rates``); the
reasons they give read as sentences.

The machines here are simulated: a subtask's source emits record v at
``max(due_v, previous + 1/cap, previous + 1/machine)``, the machine's rate halved during a warm-up,
the second subtask starting later (what ``job.py``'s pacing does with a machine that cannot
always keep up). A machine 2x and 3x slower than the one the defaults were tuned on must still
drain a backlog at the cap's pace before the failure; with the fixed defaults it does not.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

from rollcheck.flink_replay.intervals import recovery
from rollcheck.flink_replay.intervals.recovery import (
    CALIBRATE_S,
    CAUGHT_UP_S,
    MIN_RATE,
    STABLE_RATE,
    analyse_drain,
    choose_rates,
    excluded_text,
)
from rollcheck.pyimpl.errors import InconclusiveError

#: records/s (both subtasks) the source's pacing reaches on the machine the defaults were tuned on
FAST = 1100.0
PAR = 2


def _subtask(rate: float, cap: float, machine: float, backlog_s: float, start: float, t0: float, n: int,
             warmup_s: float) -> list[tuple[float, float, float]]:
    """(value, due, emitted) of one subtask's source: due at t0 + v/(λ/p), at most cap/p and the
    machine's share per second (half of it during the warm-up)."""
    rows: list[tuple[float, float, float]] = []
    last = start
    per_rate, per_cap, per_machine = rate / PAR, cap / PAR, machine / PAR
    for v in range(n):
        due = t0 + v / per_rate
        speed = per_machine / 2 if last - start < warmup_s else per_machine
        at = due if v == 0 and due >= start else max(due, last + 1.0 / per_cap, last + 1.0 / speed)
        at = max(at, start)
        rows.append((float(v), due, at))
        last = at
    return rows


def _machine_run(slowdown: float, rate: float, cap: float, backlog_s: float, seconds: float):
    """Both subtasks' rows on a machine ``slowdown`` times slower than FAST (skew and warm-up grow too)."""
    machine = FAST / slowdown
    skew, warmup = 0.15 * slowdown, 0.4 * slowdown
    t0 = 1000.0 - backlog_s
    n = int(rate / PAR * (backlog_s + seconds))
    return [_subtask(rate, cap, machine, backlog_s, 1000.0 + k * skew, t0, n, warmup) for k in range(PAR)]


#: seconds of a first run before its failure (the job waits for every subtask to catch up, or the
#: input ends): the part the drain is read from
FIRST_RUN_S = 8.0


def _write_first_run(run: Path, subtasks, checkpoint_ms: float) -> None:
    run.mkdir(parents=True)
    for k, rows in enumerate(subtasks):
        stop = rows[0][2] + FIRST_RUN_S
        (run / f"pace-gen0-{k}.jsonl").write_text("\n".join(f"{int(v)} {d:.6f} {a:.6f}" for v, d, a in rows
                                                            if a <= stop))
    (run / "run.json").write_text(json.dumps({"rest": {"checkpoints": {
        str(i): {"status": "COMPLETED", "end_to_end_duration": checkpoint_ms} for i in range(1, 6)}}}))


def _drain(rows) -> tuple[int | None, float | None, float | None]:
    """analyse_run's reading of a subtask's rows before the failure: (records until caught up, the
    time it caught up, the service rate over the last two thirds of the drain)."""
    done = next((i for i, (_, due, at) in enumerate(rows) if at - due <= CAUGHT_UP_S), None)
    if done is None or done < 20:
        return done, None, None
    a = done // 3
    return done, rows[done][2], (done - a) / (rows[done][2] - rows[a][2])


def _plan_holds(slowdown: float, plan: dict) -> tuple[bool, str]:
    """Whether the measured runs with ``plan`` on that machine drain a backlog at the cap's pace and
    catch up before the failure point, in every subtask."""
    fail_after = plan["drain_s"] + 1.0  # fail_at / λ for the 200 ms interval
    subtasks = _machine_run(slowdown, plan["rate"], plan["max_rate"], plan["calibrate_s"], fail_after + 5)
    first = min(r[0][2] for r in subtasks)
    mus = []
    for rows in subtasks:
        done, when, mu = _drain(rows)
        if done is None or mu is None or when is None:
            return False, f"a subtask never drained a backlog of 20 records (done={done})"
        if when - first > fail_after:
            return False, f"a subtask caught up {when - first:.2f} s after the start, after the failure point"
        mus.append(mu)
    mu = statistics.fmean(mus) * PAR
    if abs(mu - plan["max_rate"]) > STABLE_RATE * plan["max_rate"]:
        return False, f"the backlog drained at {mu:.0f}/s, not at the cap {plan['max_rate']:g}/s (the machine set the pace)"
    return True, f"drained at {mu:.0f}/s, cap {plan['max_rate']:g}/s"


def _probe_and_choose(tmp_path: Path, slowdown: float, checkpoint_ms: float = 25.0) -> dict:
    """A first run at the defaults on that machine, read by analyse_drain, and the choice from it."""
    rows = _machine_run(slowdown, 400.0, 800.0, CALIBRATE_S, FIRST_RUN_S)
    _write_first_run(tmp_path / "i200-r0", rows, checkpoint_ms)
    seen = analyse_drain(tmp_path / "i200-r0", PAR)
    return choose_rates(seen, [200, 1000], rate=400.0, max_rate=800.0, parallelism=PAR, load=0.5) | {"probe": seen}


def test_doctests() -> None:
    import doctest

    from rollcheck.flink_replay.intervals import (
        recovery_analysis,  # the run's reading, split off recovery
    )

    res = doctest.testmod(recovery_analysis)
    assert res.attempted >= 10 and res.failed == 0


def test_the_machine_the_defaults_were_tuned_on_keeps_them(tmp_path: Path) -> None:
    plan = _probe_and_choose(tmp_path, 1.0)
    assert (plan["rate"], plan["max_rate"], plan["intervals"], plan["calibrate_s"]) == (400.0, 800.0, [200, 1000], 1.0)
    assert plan["probe"]["caught_up"] and abs(plan["probe"]["service_rate"] - 800) < 80
    ok, why = _plan_holds(1.0, plan)
    assert ok, why


@pytest.mark.parametrize("slowdown", [2.0, 2.5, 3.0])
def test_a_slower_machine_gets_a_backlog_at_the_caps_pace(tmp_path: Path, slowdown: float) -> None:
    plan = _probe_and_choose(tmp_path, slowdown, checkpoint_ms=25.0 * slowdown)
    assert plan["max_rate"] < 800.0 and plan["rate"] / plan["max_rate"] == 0.5
    assert plan["max_rate"] < FAST / slowdown  # the cap, not the machine, sets the pace
    ok, why = _plan_holds(slowdown, plan)
    assert ok, f"{slowdown}x slower: {why}; plan {plan}"
    assert "lowered from 800 to" in plan["reason"] and "records/s" in plan["reason"]


@pytest.mark.parametrize("slowdown", [2.0, 3.0])
def test_the_fixed_defaults_fail_on_a_slower_machine(slowdown: float) -> None:
    """The check above can fail: the defaults (λ 400/s, cap 800/s, 1 s backlog, failure 2 s + 1 s
    after the start) on the same simulated machines do not give a backlog drained at the cap."""
    fixed = {"rate": 400.0, "max_rate": 800.0, "calibrate_s": CALIBRATE_S, "drain_s": 2.0}
    ok, why = _plan_holds(slowdown, fixed)
    assert not ok, why


def test_intervals_follow_the_checkpoint_cost_and_a_too_slow_machine_is_named() -> None:
    probe = {"service_rate": 790.0, "drain_s": 2.0, "caught_up": True, "checkpoint_ms": 130.0}
    plan = choose_rates(probe, [200, 500, 1000])
    assert plan["intervals"] == [550, 1000] and "raised to 550 and 1000 ms" in plan["reason"]
    assert "rates stay λ = 400/s, μ = 800/s" in plan["reason"]
    crawling = {"service_rate": 60.0, "drain_s": 8.0, "caught_up": False, "checkpoint_ms": 30.0}
    with pytest.raises(InconclusiveError) as e:
        choose_rates(crawling, [200, 1000], load=7.25)
    assert "only 60 records/s at load 7.2" in str(e.value) and f"below {MIN_RATE:.0f}/s" in str(e.value)


def test_saturated_first_runs_lower_the_rates_but_not_the_intervals() -> None:
    """Figures read from real first runs at load 23 on 2 cores: the job never drained its backlog
    (it served about 263 records/s against λ = 400/s) and its barriers queued behind it (checkpoints
    of 166 ms). The cap follows what it served; the interval stays (those durations are the
    backlog's, not the checkpoints'); the failure point is a few seconds out, not the 14 s run."""
    saturated = {"service_rate": 263.0, "drain_s": 14.4, "caught_up": False, "warmup_s": 0.5, "start_skew_s": 0.05,
                 "checkpoint_ms": 166.0}
    plan = choose_rates(saturated, [200])
    assert (plan["max_rate"], plan["rate"], plan["intervals"]) == (170.0, 85.0, [200])
    assert plan["calibrate_s"] == pytest.approx(1.765, abs=0.001) and 3.0 < plan["drain_s"] < 7.0
    assert "without catching up" in plan["reason"]
    # a start-up read from a saturated run (noisy) counts at most MAX_WARMUP_S
    long = choose_rates(saturated | {"warmup_s": 4.8}, [200])
    assert long["calibrate_s"] == pytest.approx(3 * recovery.MAX_WARMUP_S * 0.5) and long["drain_s"] < 13.0


def test_a_longer_drain_in_the_first_runs_moves_the_failure_later() -> None:
    quick = choose_rates({"service_rate": 790.0, "drain_s": 2.0, "caught_up": True, "checkpoint_ms": 20.0}, [200])
    slow = choose_rates({"service_rate": 790.0, "drain_s": 4.0, "caught_up": True, "checkpoint_ms": 20.0}, [200])
    assert slow["drain_s"] == pytest.approx(2 * quick["drain_s"]) and quick["drain_s"] >= 2.0


# --- the report reads like text -------------------------------------------------------------------


class _Env:
    python = "python3"


GOOD = {"measured_s": 0.8, "downtime_s": 0.3, "checkpoint_age_s": 0.2, "service_rate": 440.0, "ratio": 0.5,
        "service_rate_after_restart": 435.0, "checkpoint_duration_ms": 30.0, "latency_s": 0.01}
DISTURBED = ("a subtask had not drained its initial backlog when the failure struck (400 records emitted, the "
             "last 0.13 s late): the service rate before the failure could not be measured")


def _fake_flink(monkeypatch: pytest.MonkeyPatch, again_ok: bool) -> list[dict]:
    """The Flink runs replaced by their results: at 200 ms four of five first repetitions are
    disturbed (the machine could not pace them: it drained at 560/s against the 800/s cap), at
    1000 ms all hold; the repetitions measured again hold when ``again_ok``."""
    configs: list[dict] = []
    monkeypatch.setattr(recovery, "find_flink", lambda: _Env())
    monkeypatch.setattr(recovery, "tap_jar", lambda env: Path("tap.jar"))

    def run_job(root: Path, name: str, cfg: dict, python: str, timeout: float) -> None:
        configs.append(cfg)
        for r in cfg["runs"]:
            Path(r["run_dir"]).mkdir(parents=True, exist_ok=True)
            (Path(r["run_dir"]) / "run.json").write_text("{}")

    def analyse(run: Path, rate: float, par: int) -> dict:
        k = int(run.name.split("-r")[1])
        if run.name.startswith("again-"):
            if again_ok:
                return dict(GOOD, service_rate=rate * 2 * 0.97, service_rate_after_restart=rate * 2 * 0.95)
            return dict(GOOD, service_rate_after_restart=300.0) if k else dict(GOOD)
        if run.name.startswith("i1000") or k == 0:
            return dict(GOOD)
        if k in (1, 2):
            raise InconclusiveError(f"{run.name}: {DISTURBED}")
        return dict(GOOD, service_rate_after_restart=300.0)

    monkeypatch.setattr(recovery, "_run_job", run_job)
    monkeypatch.setattr(recovery, "analyse_run", analyse)
    monkeypatch.setattr(recovery, "analyse_drain", lambda run, par: {
        "service_rate": 560.0, "drain_s": 4.1, "caught_up": True, "warmup_s": 0.6, "start_skew_s": 0.3,
        "checkpoint_ms": 40.0, "checkpoints": 9})
    monkeypatch.setattr(recovery, "_load", lambda: 1.5)
    return configs


def _trt_row(tmp_path: Path):
    from rollcheck.sections import sec_flink
    from rollcheck.suite import VerifyContext

    ctx = VerifyContext("ci", True, tmp_path / "report", 0, log=lambda s: None, part="recovery-time")
    row = sec_flink._recovery_time(ctx, tmp_path)
    row.section = "flink"
    return row


def test_an_interval_the_machine_could_not_pace_is_measured_again_and_decided(tmp_path: Path,
                                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    configs = _fake_flink(monkeypatch, again_ok=True)
    row = _trt_row(tmp_path)
    assert row.status == "pass", row.detail
    assert len(configs) == 2  # the first JVM, then one for the interval measured again
    again = [r for r in configs[1]["runs"] if "fail_at_record" in r and r["fail_at_record"]]
    assert len(again) == 5 and {r["interval_ms"] for r in again} == {200}
    assert {(r["rate"], r["source_cap"]) for r in again} == {(180.0, 360.0)}
    assert all(r["calibrate_s"] >= 1.0 for r in again)
    assert configs[0]["fail_after_all_caught_up"] is True
    assert "200 ms was measured again at λ = 180/s, μ = 360/s because the first runs drained their backlog " \
           "at 560 records/s at load 1.5" in row.detail
    assert "(the first time: i200-r1: a subtask had not drained" in row.detail


def test_an_inconclusive_trt_row_reads_as_sentences(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from rollcheck.cli.cmd_verify import _plain_line
    from rollcheck.report import write_report

    _fake_flink(monkeypatch, again_ok=False)
    row = _trt_row(tmp_path)
    assert row.status == "inconclusive"
    text = row.detail
    assert "only 1 of 5 repetitions" in text and "load average of 1.5 at the start and 1.5 at the end" in text
    assert "Measured again at 200 ms, λ=180/s, μ=360/s (load 1.5 to 1.5) because the first runs drained" in text
    assert "Excluded the first time: i200-r1: a subtask had not drained" in text
    assert "i200-r3: the catch-up ran at 300 records/s against 440 records/s before the failure (32 % off)" in text
    assert "Excluded again: again-i200-r1: the catch-up ran at 300 records/s" in text
    out = tmp_path / "report"
    md, html = write_report([row], out, {"verdict": "1 checks: 0 passed, 0 failed, 1 inconclusive in 1s"})
    for where, body in (("terminal", _plain_line(row)), ("report.md", md.read_text(encoding="utf-8")),
                        ("index.html", html.read_text(encoding="utf-8"))):
        for python_ism in ("[{", "{'", "'run':", "[200", "&#x27;run&#x27;"):
            assert python_ism not in body, (where, python_ism)
    assert "i200-r1: a subtask had not drained" in md.read_text(encoding="utf-8")


def test_without_adapting_the_row_stays_inconclusive(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    configs = _fake_flink(monkeypatch, again_ok=True)
    with pytest.raises(InconclusiveError) as e:
        recovery.measure_recovery_times([200, 1000], repetitions=5, work_dir=tmp_path / "rt")
    assert len(configs) == 1 and "only 1 of 5" in str(e.value) and "Excluded: i200-r1" in str(e.value)


def test_excluded_text_names_every_repetition() -> None:
    text = excluded_text([{"run": "i500-r2", "reason": "the requested failure did not happen"},
                          {"run": "i500-r4", "service_rate": 800.0, "service_rate_after_restart": 880.0}])
    assert text == ("i500-r2: the requested failure did not happen; i500-r4: the catch-up ran at 880 records/s "
                    "against 800 records/s before the failure (10 % off)")


# --- the utilization row --------------------------------------------------------------------------


def _fake_sweep(monkeypatch: pytest.MonkeyPatch, machine_rate: float, again_rate: float | None = None) -> list[float]:
    """The utilization sweep's Flink runs replaced by a machine whose work step reaches at most
    ``machine_rate`` records/s (``again_rate`` on the second sweep, e.g. under new load)."""
    from rollcheck.flink_replay.intervals import utilization

    asked: list[float] = []
    monkeypatch.setattr(utilization, "find_flink", lambda: _Env())
    monkeypatch.setattr(utilization, "tap_jar", lambda env: Path("tap.jar"))
    monkeypatch.setattr(utilization.children, "run", lambda *a, **k: None)
    monkeypatch.setattr(utilization, "_load", lambda: 2.0)

    def sweep(root, intervals_ms, failure_every_s, *, service_rate, duration_s, **kw):  # type: ignore[no-untyped-def]
        asked.append(service_rate)
        limit = machine_rate if len(asked) == 1 or again_rate is None else again_rate
        return {"runs": [], "baseline_rate": min(service_rate * 0.98, limit), "service_rate": service_rate}

    monkeypatch.setattr(utilization, "analyse_sweep", sweep)
    return asked


def test_utilization_keeps_a_rate_the_machine_holds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from rollcheck.flink_replay.intervals.utilization import measure_utilization

    asked = _fake_sweep(monkeypatch, machine_rate=200.0)
    res = measure_utilization([300, 1500], 6.0, duration_s=40.0, work_dir=tmp_path / "u", adapt=True)
    assert asked == [50.0] and res["adapted"] is None


@pytest.mark.parametrize(("slowdown", "expected"), [(2.0, 24.0), (3.0, 16.0)])
def test_utilization_runs_again_at_a_rate_a_slower_machine_holds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                  slowdown: float, expected: float) -> None:
    """A work step at 50/s on a machine whose ceiling for it is 70/s on the tuned machine divided by
    the slowdown (the docs: at 200/s that machine set the pace)."""
    from rollcheck.flink_replay.intervals.utilization import measure_utilization

    ceiling = 70.0 / slowdown
    asked = _fake_sweep(monkeypatch, machine_rate=ceiling)
    res = measure_utilization([300, 1500], 6.0, duration_s=40.0, work_dir=tmp_path / "u", adapt=True)
    assert asked == [50.0, expected] and expected < ceiling * 0.9
    assert f"processed {ceiling:.1f} records/s of the work step's 50 (load 2.0 to 2.0)" in res["adapted"]
    assert f"so it ran again at {expected:g} records/s" in res["adapted"]


def test_utilization_on_a_machine_too_loaded_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from rollcheck.flink_replay.intervals.utilization import measure_utilization

    _fake_sweep(monkeypatch, machine_rate=30.0, again_rate=10.0)
    with pytest.raises(InconclusiveError) as e:
        measure_utilization([300, 1500], 6.0, duration_s=40.0, work_dir=tmp_path / "u", adapt=True)
    assert "run again at 21 records/s it processed 10.0 records/s (load 2.0 to 2.0)" in str(e.value)
    assert "the machine set the pace both times" in str(e.value)
    _fake_sweep(monkeypatch, machine_rate=12.0)
    with pytest.raises(InconclusiveError) as e:
        measure_utilization([300, 1500], 6.0, duration_s=40.0, work_dir=tmp_path / "u2", adapt=True)
    assert "too coarse" in str(e.value) and "{" not in str(e.value)


def test_a_rate_that_wavered_between_drain_and_catch_up_lowers_the_cap(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Real first runs at 1000 ms, load 22: the cap held on average (746/s of 800) but every catch-up
    ran 12-26 % off the drain's rate. The lower rate of each counts, so the cap comes down to one
    the machine held through both."""
    before = {"i1000-r0": 556.0, "i1000-r1": 684.0, "i1000-r2": 757.0, "i1000-r3": 746.0, "i1000-r4": 768.0}
    after = {"i1000-r0": 636.0, "i1000-r1": 768.0, "i1000-r2": 656.0, "i1000-r3": 647.0, "i1000-r4": 570.0}
    monkeypatch.setattr(recovery, "analyse_drain", lambda run, par: {
        "service_rate": before[run.name], "drain_s": 4.05, "caught_up": True, "warmup_s": 0.5, "start_skew_s": 0.01,
        "checkpoint_ms": 19.5, "checkpoints": 9})
    excluded = [{"run": k, "service_rate": before[k], "service_rate_after_restart": after[k]} for k in before]
    seen = recovery._seen(tmp_path, "", 1000, 5, 2, excluded)
    assert seen is not None and seen["service_rate"] == 647.0
    plan = choose_rates(seen, [1000])
    assert (plan["max_rate"], plan["rate"]) == (420.0, 210.0)
    # without the catch-up rates it would have kept the cap that wavered
    assert choose_rates(recovery._seen(tmp_path, "", 1000, 5, 2), [1000])["max_rate"] == 800.0


def test_the_picture_names_an_interval_measured_again_at_other_rates(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from rollcheck.flink_replay.intervals.plot import plot_recovery

    titles: list[str] = []
    real_savefig = plt.Figure.savefig

    def savefig(fig, *a, **k):  # type: ignore[no-untyped-def]
        titles.append(fig.axes[0].get_title())
        return real_savefig(fig, *a, **k)

    monkeypatch.setattr(plt.Figure, "savefig", savefig)
    params = [{"interval_ms": 200, "measured_s": 0.8, "repetitions": [0.8, 0.79, 0.82], "rate": 180.0, "max_rate": 360.0},
              {"interval_ms": 1000, "measured_s": 1.9, "repetitions": [1.9, 2.0, 1.8], "rate": 400.0, "max_rate": 800.0}]
    runs = [{"interval_ms": p["interval_ms"], "model": m, "predicted_s": p["measured_s"]}
            for p in params for m in ("chiron-trt", "utilization")]
    out = plot_recovery({"parameters": params, "runs": runs, "rate": 400.0, "max_rate": 800.0}, tmp_path / "rt.png")
    assert out.is_file() and titles == ["Flink recovery time, λ=400/s, μ cap=800/s; 200 ms at 180/360"]
