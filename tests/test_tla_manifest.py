"""Every small-bound model of tla/manifest.json meets its expected outcome with TLC, and every
counterexample of a pattern-producing model is confirmed by the Python reference."""

from __future__ import annotations

import json
from collections import defaultdict

import pytest

from rollcheck.pyimpl.errors import InvalidInputError
from rollcheck.tla.crosscheck import crosscheck_cic, crosscheck_recovery, pattern_from_cic_trace
from rollcheck.tla.manifest import MANIFEST_PATH, load_manifest, run_entry

ENTRIES = load_manifest()
SMALL = [e for e in ENTRIES if e.bound == "small"]


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
        c = crosscheck_recovery(r.trace, tmp_path, entry.name)
        assert c.agrees, c.detail


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
