"""Every small-bound model of tla/manifest.json meets its expected outcome with TLC, and every
counterexample of a pattern-producing model is confirmed by the Python reference."""

from __future__ import annotations

import json
from collections import defaultdict

import pytest

from rollcheck.pyimpl.errors import InvalidInputError
from rollcheck.tla.crosscheck import (
    crosscheck_cic,
    crosscheck_recovery,
    pattern_from_cic_trace,
    propagation_line,
)
from rollcheck.tla.manifest import (
    MANIFEST_PATH,
    MODELS_DIR,
    ModelEntry,
    check_coverage,
    load_manifest,
    run_entry,
)

ENTRIES = load_manifest()
SMALL = [e for e in ENTRIES if e.bound == "small"]
COVER = [(e, g) for e in SMALL for g in e.cover]


def test_manifest_shape():
    names = [e.name for e in ENTRIES]
    assert len(names) == len(set(names))
    assert {e.bound for e in ENTRIES} == {"small", "large"}
    # Every model file has a small configuration, and every model with an "ok" expectation has a
    # deliberately broken (or limiting) variant that must fail.
    by_module = defaultdict(set)
    for e in SMALL:
        by_module[e.module].add(e.expected)
    assert set(by_module) == {e.module for e in ENTRIES}
    for module, expected in by_module.items():
        assert expected & {"violation", "deadlock"}, f"{module} has no failing configuration"


def test_manifest_rejects_bad_entries(tmp_path):
    doc = json.loads(MANIFEST_PATH.read_text())
    doc["models"][0]["expected"] = "maybe"
    bad = tmp_path / "m.json"
    bad.write_text(json.dumps(doc))
    with pytest.raises(InvalidInputError, match=r"models\[0\]\.expected"):
        load_manifest(bad)
    doc["models"][0]["expected"] = "ok"
    doc["models"][0]["config"] = "missing.cfg"
    bad.write_text(json.dumps(doc))
    with pytest.raises(InvalidInputError, match="missing.cfg"):
        load_manifest(bad)
    doc["models"][0]["config"] = "cl-aligned-acyclic-small.cfg"
    doc["models"][0]["cover"] = ["Alignment"]
    bad.write_text(json.dumps(doc))
    with pytest.raises(InvalidInputError, match=r"models\[0\]\.cover"):
        load_manifest(bad)


@pytest.mark.tlc
@pytest.mark.parametrize("entry", SMALL, ids=[e.name for e in SMALL])
def test_small_model_meets_expectation(entry, tmp_path):
    o = run_entry(entry, workers=1, timeout=170)
    r = o.result
    assert o.met, f"{entry.name}: expected {entry.expected}, TLC said {r.status}: {r.message}"
    assert r.distinct_states > 0
    if entry.expected != "ok":
        assert r.trace, "a failing run must come with a counterexample"
    if entry.crosscheck == "cic":
        c = crosscheck_cic(r.trace, entry.protocol, tmp_path, entry.name)
        assert c.agrees, c.detail
        assert (tmp_path / f"{entry.name}.json").is_file() and (tmp_path / f"{entry.name}.png").is_file()
    elif entry.crosscheck == "recovery":
        c = crosscheck_recovery(r.trace, tmp_path, entry.name, virtual=entry.constant("Virtual") != "FALSE",
                                variant=entry.constant("Variant"))
        assert c.agrees, c.detail
        assert c.facts["mutant_wrong"], "the mutant must be shown wrong at its own counterexample"


def test_every_model_has_a_type_invariant_checked_and_coverage_goals():
    modules = {e.module for e in ENTRIES}
    # 8 modules: these 6, TraceCheck.tla (driven by tla/trace.py) and CICRules.tla (rules only)
    assert len(modules) == 6
    for e in ENTRIES:
        assert "INVARIANT TypeOK" in e.config_path.read_text(), e.name
    for m in modules | {"TraceCheck.tla"}:
        assert "\nTypeOK ==" in (MODELS_DIR / m).read_text(), m
    assert "\nRulesTypeOK ==" in (MODELS_DIR / "CICRules.tla").read_text()
    for m in ("CIC.tla", "TraceCheck.tla"):
        assert "RulesTypeOK" in (MODELS_DIR / m).read_text().split("TypeOK ==", 1)[1][:200], m
    for m in modules:
        goals = {g for e in SMALL if e.module == m for g in e.cover}
        assert goals, f"{m}: no coverage goal at the small bound"
        text = (MODELS_DIR / m).read_text()
        for g in goals:
            assert f"\n{g} ==" in text, (m, g)


def test_issue_mutants_are_in_the_small_bound():
    """The audit's injected bug (own clock merged with m.clock[i]) and the other new mutants are
    checked by make test, on 3 processes where HMNR's C1 can fire."""
    small = {e.name: e for e in SMALL}
    for name, proto in [("cic-hmnr-merge-own-index-small", "hmnr-merge-own-index"),
                        ("cic-hmnr-taken-overwrite-small", "hmnr-taken-overwrite")]:
        e = small[name]
        assert (e.expected, e.protocol, e.crosscheck) == ("violation", proto, "cic")
        assert e.constant("Procs").count("p") == 3
    assert small["cic-hmnr-small"].constant("Procs").count("p") == 3
    assert "Unreached_ForcedByC1" in small["cic-hmnr-small"].cover
    assert {"upstream-backup-no-dedup-small", "cl-aligned-eager-small"} <= set(small)
    assert small["cl-aligned-eager-small"].invariants == ("NoChannelState",)


@pytest.mark.tlc
@pytest.mark.parametrize("entry,goal", COVER, ids=[f"{e.name}:{g}" for e, g in COVER])
def test_coverage_goal_reached(entry, goal):
    (c,) = check_coverage(entry, goals=(goal,), timeout=170)
    assert c.status == "reached", f"{entry.name}: {goal} not reached: {c.result.status} {c.result.message}"
    assert c.result.trace, "a reached goal comes with the path to it"


@pytest.mark.tlc
def test_two_processes_never_force_by_c1(tmp_path):
    """Why the C1 configurations have 3 processes: with 2, C1 never fires (goal unreached)."""
    cfg = tmp_path / "two.cfg"
    cfg.write_text((MODELS_DIR / "cic-hmnr-small.cfg").read_text()
                   .replace("{p0, p1, p2}", "{p0, p1}").replace("MaxSends = 3", "MaxSends = 4"))
    e = ModelEntry("two", "CIC.tla", str(cfg), "ok", "small", False, ("NoUseless",), protocol="hmnr")
    (c,) = check_coverage(e, goals=("Unreached_ForcedByC1",), timeout=170)
    assert c.status == "unreached" and c.result.distinct_states > 0


def test_propagation_line_variants_differ_where_they_should():
    # P1 checkpoints after receiving m1 from P0 (sent after P0's checkpoint); P0 fails: V[0] lost,
    # so C[0,1]'s successor is unavailable ... a two-round example for single-pass:
    # m1: P0 -> P1 sent in I[0,1], delivered in I[1,0]; m2: P1 -> P0 sent in I[1,0], delivered in I[0,0].
    ck = [1, 1]
    msgs = [(0, 1, 1, 0), (1, 0, 0, 0)]
    best = (0, 0)
    assert propagation_line(ck, msgs, (0,), True) == best
    assert propagation_line(ck, msgs, (0,), True, "single-pass") != best


def test_crosscheck_recovery_needs_the_mutant_to_be_wrong():
    """A 'counterexample' on which the variant happens to be right is not confirmed."""
    from rollcheck.tla.runner import TraceState
    from rollcheck.tla.values import parse_state

    s0 = parse_state("/\\ ck = <<0, 0>>\n/\\ msgs = <<>>\n/\\ nev = 0")
    s1 = parse_state("/\\ ck = <<1, 0>>\n/\\ msgs = <<>>\n/\\ nev = 1")
    trace = [TraceState(1, "Initial predicate", s0), TraceState(2, "Next", s1)]
    assert crosscheck_recovery(trace).agrees  # the reference alone: fine
    c = crosscheck_recovery(trace, variant="single-pass")
    assert not c.agrees and "nothing confirms" in c.detail


def test_crosscheck_cic_rejects_a_non_step():
    from rollcheck.tla.runner import TraceState
    from rollcheck.tla.values import parse_state

    s0 = parse_state('/\\ ck = (p0 :> 0 @@ p1 :> 0)\n/\\ net = {}')
    s1 = parse_state('/\\ ck = (p0 :> 1 @@ p1 :> 1)\n/\\ net = {}')
    with pytest.raises(InvalidInputError):
        pattern_from_cic_trace([TraceState(1, "Initial predicate", s0), TraceState(2, "Next", s1)])


def test_crosscheck_cic_detects_disagreement():
    """A hand-made 'counterexample' that the Python reference does not confirm: a broken variant
    of the cross-check input must be caught (no useless checkpoint, forcing differs)."""
    from rollcheck.tla.runner import TraceState
    from rollcheck.tla.values import parse_state

    st = [
        '/\\ ck = (p0 :> 0 @@ p1 :> 0)\n/\\ net = {}',
        '/\\ ck = (p0 :> 0 @@ p1 :> 0)\n/\\ net = {[id |-> 1, from |-> p0, to |-> p1, sx |-> 0, pb |-> 0]}',
        '/\\ ck = (p0 :> 0 @@ p1 :> 1)\n/\\ net = {}',
    ]
    trace = [TraceState(k + 1, "x", parse_state(s)) for k, s in enumerate(st)]
    c = crosscheck_cic(trace, "hmnr")
    assert not c.agrees
    assert c.facts["useless"] == [] and c.facts["same_forcing"] is False


@pytest.mark.tlc
def test_tracecheck_rejects_a_forced_checkpoint_without_its_delivery():
    """TraceCheck.tla: a forced checkpoint must precede a delivery of its process; a trailing one
    (or one followed by a send) is rejected at the checkpoint itself."""
    from rollcheck.pyimpl.pattern import CHECKPOINT, DELIVER, SEND, Event, Pattern
    from rollcheck.tla.trace import validate_trace

    base = [Event(0, SEND, "m0", 1), Event(1, DELIVER, "m0")]
    ok = validate_trace("hmnr", Pattern(("P0", "P1"), tuple(base)), timeout=170)
    assert ok.status == "accepted"
    trailing = Pattern(("P0", "P1"), tuple(base + [Event(1, CHECKPOINT, forced=True)]))
    w = validate_trace("hmnr", trailing, timeout=170)
    assert w.status == "rejected" and w.first_rejected_event == 2
    then_send = Pattern(("P0", "P1"), tuple(base + [Event(1, CHECKPOINT, forced=True), Event(1, SEND, "m1", 0)]))
    w = validate_trace("hmnr", then_send, timeout=170)
    assert w.status == "rejected" and w.first_rejected_event == 2


@pytest.mark.tlc
@pytest.mark.parametrize("old,new", [
    # the audit's injected bug: the receiver's own clock merged with m.clock[i] instead of m.clock[j]
    ("m.clock[OwnMergeIndex(p, j)]", "m.clock[p]"),
    # an equal-index rule that does not OR taken
    ("ELSE s.taken[k] \\/ m.taken[k]", "ELSE m.taken[k]"),
], ids=["merge-own-index", "taken-no-or"])
def test_bug_injected_into_the_hmnr_rules_is_caught_by_the_small_bound(tmp_path, old, new):
    """Edit HMNR's rules themselves (not a named variant) and run the small HMNR entry: it fails."""
    import shutil

    for f in ("CIC.tla", "CICRules.tla"):
        shutil.copy(MODELS_DIR / f, tmp_path / f)
    rules = (tmp_path / "CICRules.tla").read_text()
    assert rules.count(old) == 1
    (tmp_path / "CICRules.tla").write_text(rules.replace(old, new))
    entry = next(e for e in SMALL if e.name == "cic-hmnr-small")
    from rollcheck.tla.runner import run_tlc

    r = run_tlc(tmp_path / "CIC.tla", entry.config_path, timeout=170, deadlock=False)
    assert r.status == "violation" and r.violated == "NoUseless", r.message
