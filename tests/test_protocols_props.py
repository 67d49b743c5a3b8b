"""The registered protocol properties pass on the references and catch a broken variant each."""

from __future__ import annotations

import dataclasses

import pytest

import rollcheck.properties.protocols_cic as C
import rollcheck.properties.protocols_forced as F
from rollcheck.properties.mutants_protocols import schedule_restart_basic_only
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
    "hmnr-forced-reference",
    "bcs-forced-reference",
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


def test_independent_reference_forces_like_the_rules():
    p = _c2_cycle()
    assert F.reference_forced("hmnr", p) == tuple(run_protocol("hmnr", p).forced_messages) == ("m1",)
    assert F.reference_forced("bcs", p) == tuple(run_protocol("bcs", p).forced_messages)


def test_forced_reference_catches_over_and_under_forcing():
    assert run_property("hmnr-forced-reference", protocol=F.OverForcingHMNR()).violated
    assert run_property("hmnr-forced-reference", protocol=get_protocol("hmnr-no-c2")).violated
    assert run_property("bcs-forced-reference", protocol=get_protocol("bcs-geq")).violated
