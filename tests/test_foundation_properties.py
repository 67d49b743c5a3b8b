"""Every foundation property passes on the reference and kills its broken variants."""

from __future__ import annotations

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

import rollcheck.properties.foundation  # noqa: F401  (registers the properties)
import rollcheck.properties.z3check  # noqa: F401
from rollcheck.properties.mutants_foundation import BROKEN, kill
from rollcheck.properties.profiles import active_profile
from rollcheck.properties.registry import PROPERTIES, prop, run_property

FOUNDATION = [n for n, p in PROPERTIES.items()
              if p.func.__module__ in ("rollcheck.properties.foundation", "rollcheck.properties.z3check")]


def test_foundation_properties_registered():
    assert len(FOUNDATION) >= 13
    for name in FOUNDATION:
        assert PROPERTIES[name].theorem.startswith("specs/")


@pytest.mark.parametrize("name", FOUNDATION)
def test_property_holds_on_reference(name):
    r = run_property(name)
    assert r.status == "pass", r.error
    assert r.examples > 0


@pytest.mark.parametrize("mutant", sorted(BROKEN))
def test_property_kills_mutant(mutant):
    prop_name, slot, broken, _ = BROKEN[mutant]
    outcome = kill(prop_name, slot, broken, active_profile())
    assert outcome.verdict == "killed", outcome.detail
    assert outcome.counterexample is not None  # the shrunk pattern, to save and draw


def test_every_foundation_property_has_a_mutant():
    covered = {spec[0] for spec in BROKEN.values()}
    assert set(FOUNDATION) <= covered


def test_zero_examples_is_inconclusive():
    @prop("test-nothing-checked", target="test", theorem="specs/theorems.md")
    @given(x=st.integers())
    def nothing(x):
        assume(False)

    try:
        r = run_property("test-nothing-checked")
        assert r.status == "inconclusive"
        assert r.examples == 0
    finally:
        PROPERTIES.pop("test-nothing-checked")


def test_unknown_implementation_slot_rejected():
    with pytest.raises(TypeError):
        PROPERTIES["scc-useless"].func(nonsense=1)
