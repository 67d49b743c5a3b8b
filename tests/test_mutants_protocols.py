"""The protocol mutants and ``rollcheck mutants``: killed with a drawn counterexample, safe with a
ratio, exit 1 when an unsafe mutant survives."""

from __future__ import annotations

import json

import pytest

from rollcheck.properties.mutants_protocols import minimize_schedule, random_schedules
from rollcheck.properties.mutation import MUTANTS, MutantOutcome, load_all
from rollcheck.pyimpl.pattern import Pattern
from rollcheck.pyimpl.patternio import load_pattern
from rollcheck.pyimpl.protocols import get_protocol, run_protocol
from rollcheck.pyimpl.zpaths import useless_checkpoints
from rollcheck.cli.cmd_mutants import run_catalogue
from rollcheck.cli.main import main

PROTOCOL_MUTANTS = {
    "hmnr-no-c1", "hmnr-no-c2", "hmnr-merge-skip-sender", "bcs-no-force", "hmnr-no-minto",
    "hmnr-minto-every-send", "bcs-geq", "hmnr-piggyback-at-delivery", "run-forced-list-off-by-one",
    "run-drops-in-transit", "fast-kernel-off-by-one", "timer-restart-basic-only",
}


def test_catalogue_has_the_protocol_mutants():
    assert PROTOCOL_MUTANTS <= set(load_all())
    assert len(load_all()) >= 15


@pytest.mark.parametrize("name", ["hmnr-no-c1", "hmnr-no-c2", "hmnr-merge-skip-sender", "bcs-no-force"])
def test_unsafe_protocol_mutant_is_killed_with_a_small_counterexample(name):
    o = MUTANTS[name].check("ci")
    assert o.verdict == "killed", o.detail
    p = o.counterexample
    assert isinstance(p, Pattern) and len(p) <= 12
    if name != "bcs-no-force":
        assert useless_checkpoints(p)
        # The reference protocol on the same basic schedule leaves no useless checkpoint.
        basic = Pattern(p.processes, tuple(e for e in p.events if not e.forced))
        assert not useless_checkpoints(run_protocol("hmnr", basic).pattern)


def test_safe_variant_reports_its_ratio():
    o = MUTANTS["hmnr-no-minto"].check("ci")
    assert o.verdict == "safe" and o.ratio is not None and o.ratio > 1.5
    assert o.counterexample is None


def test_minimize_schedule_is_one_minimal():
    variant = get_protocol("hmnr-no-c2")
    big = next(s for s in random_schedules(500, seed=1)
               if useless_checkpoints(run_protocol(variant, s).pattern) and len(s) > 20)

    def fails(q):
        return bool(useless_checkpoints(run_protocol(variant, q).pattern))

    small = minimize_schedule(big, fails)
    assert fails(small) and len(small) < len(big)
    for k in range(len(small.events)):
        ev = small.events[k]
        if ev.kind == "deliver":
            q = Pattern(small.processes, small.events[:k] + small.events[k + 1:])
            assert not fails(q)


def test_cli_writes_counterexample_and_picture(tmp_path, capsys):
    rc = main(["mutants", "--only", "hmnr-no-c2", "--only", "bcs-geq", "--out", str(tmp_path), "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert rc == 0
    by = {m["name"]: m for m in doc["mutants"]}
    k = by["hmnr-no-c2"]
    assert k["verdict"] == "killed" and k["ratio"] is None
    assert useless_checkpoints(load_pattern(k["counterexample"]))
    assert k["picture"].endswith(".png") and (tmp_path / "hmnr-no-c2.png").stat().st_size > 1000
    s = by["bcs-geq"]
    assert s["verdict"] == "safe" and s["counterexample"] is None and s["ratio"] > 1


def test_cli_exit_1_when_an_unsafe_mutant_survives(tmp_path, capsys):
    from rollcheck.properties.mutation import mutant

    @mutant("zz-test-survivor", target="test", description="a variant no property catches")
    def _survivor(profile):
        return MutantOutcome("survived", "nothing caught it", examples=3)

    try:
        rc = main(["mutants", "--only", "zz-test-survivor", "--out", str(tmp_path), "--json"])
        doc = json.loads(capsys.readouterr().out)
        assert rc == 1 and doc["survived_unsafe"] == ["zz-test-survivor"]
        assert doc["mutants"][0]["counterexample"] is None
        rc = main(["mutants", "--only", "no-such-mutant", "--out", str(tmp_path)])
        assert rc == 2
    finally:
        MUTANTS.pop("zz-test-survivor", None)


def test_run_catalogue_records_have_the_contract_keys(tmp_path):
    recs = run_catalogue("ci", tmp_path, ["timer-restart-basic-only"], pictures=False)
    assert set(recs[0]) >= {"name", "target", "verdict", "counterexample", "picture", "ratio"}
    assert recs[0]["verdict"] == "killed"


def test_a_hanging_check_is_cut_off(tmp_path, capsys):
    import time as _time

    from rollcheck.properties.mutation import mutant

    @mutant("zz-test-hang", target="test", description="a check that never returns")
    def _hang(profile):
        _time.sleep(60)
        return MutantOutcome("killed")

    try:
        t0 = _time.perf_counter()
        rc = main(["mutants", "--only", "zz-test-hang", "--timeout", "1", "--out", str(tmp_path), "--json"])
        doc = json.loads(capsys.readouterr().out)
        assert rc == 1 and _time.perf_counter() - t0 < 30
        assert doc["mutants"][0]["verdict"] == "survived" and "limit" in doc["mutants"][0]["detail"]
    finally:
        MUTANTS.pop("zz-test-hang", None)
