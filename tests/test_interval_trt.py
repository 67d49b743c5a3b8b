"""Chiron's TRT heuristic, the CI optimiser, profiling files and the trt/interval commands."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rollcheck.cli.main import main
from rollcheck.pyimpl.errors import InvalidInputError
from rollcheck.pyimpl.intervals import (
    ProfilingPoint,
    fit_quadratic,
    optimise_ci,
    total_recovery_time,
    trt_breakdown,
    trt_limit,
)
from rollcheck.pyimpl.intervals.profile import load_profile

KW = {"timeout": 5.0, "recovery": 3.0, "warmup": 2.0, "ratio": 0.5}


# --------------------------------------------------------------------------- heuristic


def test_worked_example_eq3_reading() -> None:
    """E + T_o + R + W = 20 (worst, CI = 10), U = 1/2: terms 20, 10, 5, 2.5, 1.25, 0.625 → n = 6."""
    b = trt_breakdown(10.0, case="worst", **KW)
    assert (b.reprocess, b.first_term, b.terms) == (10.0, 20.0, 6)
    assert b.catch_up == pytest.approx(20 * (1 - 0.5**6) / 0.5)
    assert b.trt == pytest.approx(8 + 39.375)
    assert [trt_breakdown(10.0, case=c, **KW).reprocess for c in ("best", "average", "worst")] == [0, 5, 10]


def test_eq2_reading_multiplies_first_term_by_u() -> None:
    b = trt_breakdown(10.0, case="worst", reading="eq2", **KW)
    assert b.first_term == 10.0 and b.terms == 5
    assert b.trt == pytest.approx(8 + 10 * (1 - 0.5**5) / 0.5)
    assert trt_limit(10.0, case="worst", reading="eq2", **KW) == pytest.approx(8 + 20)


def test_threshold_and_limit() -> None:
    coarse = total_recovery_time(10.0, case="average", threshold=5.0, **KW)
    fine = total_recovery_time(10.0, case="average", threshold=1e-9, **KW)
    lim = trt_limit(10.0, case="average", **KW)
    assert coarse < fine <= lim and lim - fine < 1e-8
    # U = 0: nothing arrives while catching up; the series is its first term
    assert total_recovery_time(10.0, timeout=5, recovery=3, warmup=2, ratio=0.0, case="worst") == 8 + 20


def _brute_force_trt(ci: float, case: str, ratio: float, threshold: float, **kw: float) -> tuple[int, float]:
    """The series term by term, from the definitions (no closed form, no cap)."""
    e = {"best": 0.0, "average": ci / 2, "worst": ci}[case]
    term, n, total = e + kw["timeout"] + kw["recovery"] + kw["warmup"], 1, 0.0
    while True:
        total += term
        if term < threshold:
            return n, kw["timeout"] + kw["recovery"] + total
        term *= ratio
        n += 1


@pytest.mark.parametrize("ratio", [0.5, 0.9, 0.999, 0.99999])
def test_many_terms_are_counted_not_truncated(ratio: float) -> None:
    """Issue: the series used to stop silently at 100,001 terms (U = 0.99999 gave −37%)."""
    kw = {"timeout": 5.0, "recovery": 3.0, "warmup": 2.0}
    b = trt_breakdown(1000.0, case="average", ratio=ratio, **kw)
    n, trt = _brute_force_trt(1000.0, "average", ratio, 1.0, **kw)
    assert b.terms == n
    assert b.trt == pytest.approx(trt, rel=1e-9)
    lim = trt_limit(1000.0, case="average", ratio=ratio, **kw)
    assert b.trt <= lim and lim - b.trt < ratio / (1 - ratio) + 1e-6 * lim


def test_trt_cli_close_to_one(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["trt", "--ci", "1000", "--timeout", "0", "--recovery", "0", "--warmup", "0",
                 "--ratio", "0.99999", "--case", "worst", "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0
    assert doc["trt"]["worst"] == pytest.approx(9.99e7, rel=1e-3)
    assert doc["terms"]["worst"]["terms"] > 100_001


def test_trt_overflow_is_bad_input() -> None:
    with pytest.raises(InvalidInputError, match="overflows") as e:
        trt_breakdown(1e300, timeout=0.0, recovery=0.0, warmup=0.0, ratio=1 - 1e-15, case="worst")
    assert e.value.location == "ratio"


@pytest.mark.parametrize(
    ("kw", "location"),
    [({"ratio": 1.0}, "ratio"), ({"ratio": 1.5}, "ratio"), ({"ratio": -0.1}, "ratio"), ({"timeout": -1.0}, "timeout"),
     ({"case": "median"}, "case"), ({"reading": "eq4"}, "reading"), ({"threshold": 0.0}, "threshold")],
)
def test_trt_bad_input(kw: dict[str, object], location: str) -> None:
    args = {**KW, **kw}
    with pytest.raises(InvalidInputError) as e:
        trt_breakdown(10.0, **args)  # type: ignore[arg-type]
    assert e.value.location == location


# --------------------------------------------------------------------------- optimiser


def _points(lat: object, trt: object, cis: tuple[float, ...] = (1, 7, 13, 25, 40, 60)) -> list[ProfilingPoint]:
    return [ProfilingPoint(float(x), float(lat(x)), float(trt(x))) for x in cis]  # type: ignore[operator]


def test_optimiser_prefers_interior_latency_minimum() -> None:
    """P has its minimum at CI = 30 and A(CI) = 100 + 2·CI: with bound 200 (CI <= 50) the answer is 30,
    not the paper's inverse A⁻¹(200) = 50."""
    pts = _points(lambda x: 1000 + (x - 30) ** 2, lambda x: 100 + 2 * x)
    ch = optimise_ci(pts, 200.0)
    assert ch.ci == pytest.approx(30.0, abs=1e-6)
    assert ch.feasible[0][1] == pytest.approx(50.0)
    assert ch.latency_fit.r_squared == pytest.approx(1.0)


def test_optimiser_bound_active_and_infeasible() -> None:
    pts = _points(lambda x: 1000 + 5000 / x, lambda x: 100 + 2 * x)
    ch = optimise_ci(pts, 150.0)  # latency decreases: the bound decides (CI = 25)
    assert ch.ci == pytest.approx(25.0, abs=1e-6) and ch.trt <= 150.0
    with pytest.raises(InvalidInputError, match="smallest predicted TRT is 102"):
        optimise_ci(pts, 90.0)
    with pytest.raises(InvalidInputError, match="3 distinct"):
        optimise_ci(pts[:2], 150.0)
    with pytest.raises(InvalidInputError):
        optimise_ci([], 150.0)
    with pytest.raises(InvalidInputError):
        optimise_ci(pts, -1.0)


def test_optimiser_two_feasible_pieces() -> None:
    """A concave TRT (high in the middle) splits the feasible set; the best piece is chosen."""
    pts = _points(lambda x: 2000 - 10 * x, lambda x: 50 + 8 * x - 0.13 * x * x, cis=(0, 10, 20, 30, 40, 50, 60))
    ch = optimise_ci(pts, 150.0)
    assert len(ch.feasible) == 2
    assert ch.ci == pytest.approx(60.0) and ch.trt <= 150.0


def test_fit_quadratic_conditioning() -> None:
    """CIs in milliseconds (1e3..6e4) must not break the fit or the root finding."""
    xs = [1000, 7000, 13000, 25000, 40000, 60000]
    f = fit_quadratic(xs, [50 + x / 500 for x in xs])
    assert f.roots_of(120.0)[0] == pytest.approx(35000.0, rel=1e-9)


# --------------------------------------------------------------------------- profiling files and CLI

CSV = "ci,latency,recovery,warmup,i_avg,i_max\n" + "\n".join(
    f"{ci},{1000 + (ci - 30) ** 2},20,5,1000,2000" for ci in (1, 7, 13, 25, 40, 60)) + "\n"


def test_load_profile_csv_and_json(tmp_path: Path) -> None:
    f = tmp_path / "p.csv"
    f.write_text(CSV)
    pts = load_profile(f, defaults={"timeout": 30.0})
    assert len(pts) == 6 and pts[0].trt == pytest.approx(
        total_recovery_time(1, timeout=30, recovery=20, warmup=5, ratio=0.5, case="worst"))
    j = tmp_path / "p.json"
    j.write_text(json.dumps({"format": "rollcheck.profiling/1",
                             "points": [{"ci": p.ci, "latency": p.latency, "trt": p.trt} for p in pts]}))
    assert load_profile(j) == pts


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [("e.csv", "ci,latency\n", "no profiling points"),
     ("e.json", "[]", "no profiling points"),
     ("b.csv", "ci,latency,trt\n1,abc,3\n", "line 2, column 'latency': latency must be a number"),
     ("b.json", '{"points": [{"ci": 1, "latency": "q"}]}', "points[0].latency"),
     ("m.csv", "ci,latency\n1,2\n", "line 2: no 'trt' and missing"),
     ("u.csv", "ci,lat\n1,2\n", "unknown column"),
     ("r.csv", "ci,latency,trt\n1,2\n", "expected 3 fields"),
     ("n.json", "{", "not valid JSON")],
)
def test_load_profile_errors(tmp_path: Path, name: str, text: str, message: str) -> None:
    f = tmp_path / name
    f.write_text(text)
    with pytest.raises(InvalidInputError) as e:
        load_profile(f)
    assert message in str(e.value) and name in str(e.value)


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    rc = main(argv)
    out, err = capsys.readouterr()
    return rc, out, err


def test_cli_trt_and_optimise(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = _run(["trt", "--ci", "10", "--timeout", "5", "--recovery", "3", "--warmup", "2",
                       "--i-avg", "50", "--i-max", "100", "--json"], capsys)
    doc = json.loads(out)
    assert rc == 0 and doc["trt"]["worst"] == pytest.approx(47.375) and doc["limit"]["worst"] == 48
    f = tmp_path / "p.csv"
    f.write_text(CSV)
    rc, out, _ = _run(["trt", "optimise", str(f), "--bound", "250", "--timeout", "30", "--json"], capsys)
    doc = json.loads(out)
    assert rc == 0 and doc["trt"] <= 250 and doc["points"] == 6
    assert doc["ci"] == pytest.approx(30.0, abs=0.01)  # interior latency minimum
    rc, _, err = _run(["trt", "optimize", str(f), "--bound", "100", "--timeout", "30"], capsys)
    assert rc == 2 and "no checkpoint interval" in err and "p.csv" in err


@pytest.mark.parametrize(
    ("argv", "needle"),
    [(["trt", "--ci", "10", "--timeout", "5", "--recovery", "3", "--warmup", "2", "--ratio", "1"], "0 <= U < 1"),
     (["trt", "--ci", "10"], "missing"),
     (["trt", "--ci", "10", "--timeout", "5", "--recovery", "3", "--warmup", "2", "--ratio", "0.5",
       "--i-avg", "1", "--i-max", "2"], "not both"),
     (["interval", "utilization", "--interval", "5", "--failure-rate", "0.01", "--checkpoint-cost", "5"],
      "--interval: interval must exceed"),
     (["interval", "optimal", "--failure-rate", "-0.01", "--checkpoint-cost", "5"], "--failure-rate"),
     (["interval", "optimal", "--failure-rate", "0", "--checkpoint-cost", "5"], "must be > 0"),
     (["interval", "utilization", "--interval", "50", "--failure-rate", "0.01", "--checkpoint-cost", "5",
       "--depth", "0"], "--depth")],
)
def test_cli_bad_input_exit_2(argv: list[str], needle: str, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = _run(argv, capsys)
    assert rc == 2 and needle in err and out == ""
    assert "Traceback" not in err


def test_cli_interval_contract(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = _run(["interval", "optimal", "--failure-rate", "0.005", "--checkpoint-cost", "5",
                       "--restart-cost", "10", "--json"], capsys)
    doc = json.loads(out)
    assert rc == 0 and doc["interval"] == pytest.approx(46.452, abs=5e-4)
    assert doc["utilization"] == pytest.approx(0.7541, abs=5e-5)
    rc, out, _ = _run(["interval", "optimal", "--failure-rate", "0.005", "--checkpoint-cost", "5",
                       "--restart-cost", "10", "--depth", "50", "--token-delay", "0.5", "--json"], capsys)
    assert json.loads(out)["utilization"] == pytest.approx(0.667, abs=5e-4)
    rc, out, _ = _run(["interval", "utilization", "--interval", "30", "--failure-rate", "0.005",
                       "--checkpoint-cost", "5", "--restart-cost", "10", "--json"], capsys)
    assert rc == 0 and set(json.loads(out)) >= {"utilization"}
    rc, out, _ = _run(["interval", "compare", "--failure-rate", "0.005", "--checkpoint-cost", "5",
                       "--restart-cost", "10", "--against", "30", "--json"], capsys)
    doc = json.loads(out)
    assert set(doc["baselines"]) == {"young", "daly", "zhuang", "fixed:30"}
    assert all(b["gain_percent"] >= 0 for b in doc["baselines"].values())
    rc, out, _ = _run(["interval", "compare", "--failure-rate", "1", "--checkpoint-cost", "5", "--json"], capsys)
    assert json.loads(out)["baselines"]["young"]["utilization"] is None  # √(2c/λ) <= c here
    rc, out, err = _run(["interval", "simulate", "--failure-rate", "0.05", "--checkpoint-cost", "2",
                         "--restart-cost", "3", "--runs", "20", "--horizon-failures", "200", "--seed", "4",
                         "--json"], capsys)
    doc = json.loads(out)
    assert rc == 0 and doc["seed"] == 4 and "seed=4" in err and doc["runs"] == 20
    assert abs(doc["z"]) < 5
    rc, _, _ = _run(["interval"], capsys)
    assert rc == 2
