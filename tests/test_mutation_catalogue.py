"""The mutation catalogue, driven by the registry: every mutant of every area gets its verdict from
the one runner — unsafe ones killed by a property violation (with a counterexample, a reproducer
that replays the violation and a picture), safe ones correct with a cost ratio — and the runner
itself reports crashes as "error", never as kills."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from rollcheck.cli.main import main
from rollcheck.properties.catalogue import _run_one, run_catalogue
from rollcheck.properties.mutation import MUTANTS, MutantSpec, load_all, register, run_mutant
from rollcheck.properties.registry import AREAS, PROPERTIES
from rollcheck.properties.reproducer import replay
from rollcheck.pyimpl.errors import PropertyViolation
from rollcheck.pyimpl.pattern import Pattern
from rollcheck.pyimpl.patternio import load_pattern
from rollcheck.pyimpl.zpaths import useless_checkpoints

CATALOGUE = load_all()
NAMES = sorted(CATALOGUE)
TEST_PREFIX = "zz-test-"
#: bounds on the cost ratio of safe variants (costlier, or cheaper, than the reference)
SAFE_RATIO = {"hmnr-no-minto": (1.5, 10.0), "bcs-geq": (1.0, 20.0), "spans-whole-graph-rounds": (10.0, 1e6),
              "elastic-safe-l1-on-checkpoint-only": (0.0, 1.0), "elastic-safe-checkpoint-whole-queue": (1.0, 10.0)}


@pytest.fixture(scope="module")
def ci_profile():
    from rollcheck.properties.profiles import load_profile

    old = os.environ.get("ROLLCHECK_PROFILE")
    os.environ["ROLLCHECK_PROFILE"] = "ci"
    load_profile("ci")
    yield "ci"
    if old is None:
        os.environ.pop("ROLLCHECK_PROFILE", None)
    else:
        os.environ["ROLLCHECK_PROFILE"] = old


def test_catalogue_is_declarative_and_complete():
    assert len(CATALOGUE) >= 75
    for m in CATALOGUE.values():
        assert isinstance(m, MutantSpec) and m.area in AREAS
        assert set(m.kills) <= set(PROPERTIES), m.name
        assert m.safe == (m.cost is not None), m.name
    assert {m.area for m in CATALOGUE.values()} == set(AREAS)


def test_every_property_has_an_unsafe_mutant():
    killers = {k for m in CATALOGUE.values() if not m.safe for k in m.kills}
    props = {n for n in PROPERTIES if not n.startswith("test-")}
    assert props <= killers, sorted(props - killers)


def test_audit_bugs_are_in_the_catalogue():
    """The independent audit's injected bugs are each a mutant that a ci property must kill."""
    wanted = {"spans-drops-inflight": "spans-greatest-brute", "trt-a1-without-warmup": "trt-direct-sum",
              "hmnr-over-forcing": "hmnr-forced-reference"}
    for name, prop in wanted.items():
        assert prop in CATALOGUE[name].kills and not CATALOGUE[name].safe


@pytest.mark.parametrize("name", NAMES)
def test_mutant_verdict_with_evidence(name, ci_profile, tmp_path):
    spec = CATALOGUE[name]
    rec = _run_one(spec, "ci", tmp_path, pictures=True)
    if spec.safe:
        assert rec["verdict"] == "safe", rec["detail"]
        assert rec["ratio"] is not None and rec["counterexample"] is None
        low, high = SAFE_RATIO.get(name, (0.0, float("inf")))
        assert low < rec["ratio"] < high, rec["ratio"]  # which way the cost goes
        return
    assert rec["verdict"] == "killed", rec["detail"]
    assert rec["killed_by"] in spec.kills
    for key in ("counterexample", "reproducer", "picture"):
        assert rec[key] and Path(rec[key]).is_file(), key
    assert Path(rec["picture"]).stat().st_size > 2000
    # the reproducer reads back and raises the same property's violation again
    doc = json.loads(Path(rec["reproducer"]).read_text())
    assert doc["format"] == "rollcheck.reproducer/1" and doc["property"] == rec["killed_by"]
    assert isinstance(replay(rec["reproducer"]), PropertyViolation)
    if spec.area in ("foundation", "protocols", "simulate") and rec["counterexample"] != rec["reproducer"]:
        load_pattern(rec["counterexample"])  # a pattern file the CLI reads


@pytest.mark.parametrize("name", ["hmnr-no-c1", "hmnr-no-c2", "hmnr-merge-skip-sender"])
def test_protocol_counterexamples_are_small_and_useless(name, ci_profile):
    from rollcheck.pyimpl.protocols import run_protocol

    o = run_mutant(CATALOGUE[name], "ci")
    p = o.counterexample
    assert o.verdict == "killed" and isinstance(p, Pattern) and len(p) <= 14
    assert useless_checkpoints(p)
    basic = Pattern(p.processes, tuple(e for e in p.events if not e.forced))
    assert not useless_checkpoints(run_protocol("hmnr", basic).pattern)


def _temporary(spec: MutantSpec):
    register(spec)
    return spec


def test_crashing_mutant_is_an_error_not_a_kill(ci_profile, tmp_path, capsys):
    def crashes(p):
        raise RuntimeError("the variant blew up")

    spec = _temporary(MutantSpec(f"{TEST_PREFIX}crash", area="foundation", description="raises RuntimeError",
                                 kills=("scc-useless",), slots={"useless": crashes}))
    try:
        o = run_mutant(spec, "ci")
        assert o.verdict == "error" and o.killed_by is None and "RuntimeError" in o.detail
        rc = main(["mutants", "--only", spec.name, "--out", str(tmp_path), "--json"])
        doc = json.loads(capsys.readouterr().out)
        assert rc == 4 and doc["errors"] == [spec.name] and doc["error"] == 1
        assert doc["mutants"][0]["verdict"] == "error" and doc["mutants"][0]["counterexample"] is None
    finally:
        MUTANTS.pop(spec.name, None)


def test_survivor_exits_1_and_unknown_names_exit_2(ci_profile, tmp_path, capsys):
    from rollcheck.pyimpl.zpaths import useless_checkpoints as reference

    spec = _temporary(MutantSpec(f"{TEST_PREFIX}survivor", area="foundation", description="the reference itself",
                                 kills=("scc-useless",), slots={"useless": reference}))
    try:
        rc = main(["mutants", "--only", spec.name, "--out", str(tmp_path), "--json"])
        doc = json.loads(capsys.readouterr().out)
        assert rc == 1 and doc["survived_unsafe"] == [spec.name]
        rec = doc["mutants"][0]
        assert set(rec) >= {"name", "target", "area", "verdict", "killed_by", "counterexample", "picture", "ratio"}
        assert rec["killed_by"] is None and rec["counterexample"] is None
        assert main(["mutants", "--only", "no-such-mutant", "--out", str(tmp_path)]) == 2
        assert main(["mutants", "--area", "nowhere", "--out", str(tmp_path)]) == 2
    finally:
        MUTANTS.pop(spec.name, None)


def test_hanging_check_is_cut_off(ci_profile, tmp_path):
    import time

    def hangs(p):
        time.sleep(60)
        return []

    spec = _temporary(MutantSpec(f"{TEST_PREFIX}hang", area="foundation", description="never returns",
                                 kills=("scc-useless",), slots={"useless": hangs}))
    try:
        t0 = time.perf_counter()
        recs = run_catalogue("ci", tmp_path, [spec.name], pictures=False, timeout=2)
        assert time.perf_counter() - t0 < 30
        assert recs[0]["verdict"] == "survived" and "limit" in recs[0]["detail"]
    finally:
        MUTANTS.pop(spec.name, None)


def test_cli_json_has_seed_and_replay_reads_back(ci_profile, tmp_path, capsys):
    rc = main(["mutants", "--only", "hmnr-no-c2", "--only", "bcs-geq", "--out", str(tmp_path), "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert rc == 0 and "seed" in doc
    by = {m["name"]: m for m in doc["mutants"]}
    k = by["hmnr-no-c2"]
    assert k["verdict"] == "killed" and k["killed_by"] == "hmnr-no-useless" and k["area"] == "protocols"
    assert useless_checkpoints(load_pattern(k["counterexample"]))
    assert by["bcs-geq"]["verdict"] == "safe" and by["bcs-geq"]["ratio"] > 1
    assert main(["mutants", "--replay", k["reproducer"]]) == 1
    assert "reproduced" in capsys.readouterr().out
    bad = tmp_path / "not-a-reproducer.json"
    bad.write_text("{}")
    assert main(["mutants", "--replay", str(bad)]) == 2
