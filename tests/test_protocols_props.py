"""The registered protocol properties pass on the references and catch a broken variant each."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import strategies as st

import rollcheck.properties.protocols_cic as C
from rollcheck.properties.mutants_protocols import (
    fast_drops_last_event,
    hunt,
    run_dropping_in_transit,
    run_forced_list_shifted,
    schedule_restart_basic_only,
)
from rollcheck.properties.registry import run_property
from rollcheck.pyimpl.errors import PropertyViolation
from rollcheck.pyimpl.pattern import PatternBuilder
from rollcheck.pyimpl.protocols import get_protocol, run_protocol
from rollcheck.pyimpl.zpaths import useless_checkpoints

NAMES = [
    "hmnr-no-useless",
    "bcs-no-useless",
    "bcs-index-lines-consistent",
    "protocol-forced-list",
    "protocol-keeps-basic",
    "protocol-fast-path-agrees",
    "basic-timer-restarts",
    "cic-no-useless-dataflow",
]


@pytest.mark.parametrize("name", NAMES)
def test_property_passes_on_reference(name):
    r = run_property(name)
    assert r.status == "pass", r.error
    assert r.examples > 0


def _c2_cycle():
    b = PatternBuilder(2)
    b.deliver(0, b.send(1, 0))
    b.checkpoint(0)
    b.deliver(1, b.send(0, 1))
    return b.build()


# One broken variant per property. The registered property runs its check function on Hypothesis
# examples; here the same check function is hunted without Hypothesis's (slow) shrinking phase.
_NAMES = st.sampled_from(("bcs", "hmnr"))
BROKEN = [
    ("hmnr-no-useless", C.schedules, lambda p: C.check_no_useless(p, get_protocol("hmnr-no-c2"))),
    ("hmnr-no-useless/no-c1", C.schedules, lambda p: C.check_no_useless(p, get_protocol("hmnr-no-c1"))),
    ("bcs-no-useless", C.schedules, lambda p: C.check_no_useless(p, get_protocol("bcs-no-force"))),
    ("bcs-index-lines-consistent", C.schedules, lambda p: C.check_bcs_lines(p, get_protocol("bcs-no-force"))),
    ("cic-no-useless-dataflow", st.tuples(C.dataflow_schedules, _NAMES),
     lambda x: C.check_no_useless(x[0], get_protocol({"bcs": "bcs-no-force", "hmnr": "hmnr-no-c2"}[x[1]]))),
    ("protocol-forced-list", st.tuples(C.schedules, _NAMES),
     lambda x: C.check_forced_list(x[0], x[1], run_forced_list_shifted)),
    ("protocol-keeps-basic", st.tuples(C.schedules, _NAMES),
     lambda x: C.check_keeps_basic(x[0], x[1], run_dropping_in_transit)),
    ("protocol-fast-path-agrees", st.tuples(C.schedules, _NAMES, st.sampled_from(("python", "numpy"))),
     lambda x: C.check_fast_agrees(x[0], x[1], x[2], fast_drops_last_event)),
]


@pytest.mark.parametrize("name,strategy,check", BROKEN, ids=[b[0] for b in BROKEN])
def test_property_catches_broken_variant(name, strategy, check):
    n, err = hunt(strategy, check, 400, shrink=False)
    assert err is not None, f"{name} missed the broken variant in {n} examples"


def test_registered_property_catches_broken_timer():
    r = run_property("basic-timer-restarts", schedule=schedule_restart_basic_only)
    assert r.status == "fail" and r.examples > 0


def test_checks_catch_known_counterexamples_directly():
    p = _c2_cycle()
    C.check_no_useless(p, get_protocol("hmnr"))
    with pytest.raises(PropertyViolation) as e:
        C.check_no_useless(p, get_protocol("hmnr-no-c2"))
    assert useless_checkpoints(e.value.counterexample)
    with pytest.raises(PropertyViolation):
        C.check_bcs_lines(p, get_protocol("bcs-no-force"))
    with pytest.raises(PropertyViolation):
        C.check_forced_list(p, "hmnr", lambda n, q: dataclasses.replace(run_protocol(n, q), forced_messages=()))


def test_bcs_checkpoint_indices_follow_adopted_lc():
    out = run_protocol("bcs", _c2_cycle()).pattern
    assert C.bcs_checkpoint_indices(out, get_protocol("bcs")) == [[0, 1], [0, 1]]
