"""Every foundation property passes on the reference with enough interesting examples (its mutants
are run by tests/test_mutation_catalogue.py)."""

from __future__ import annotations

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

import rollcheck.properties.foundation  # noqa: F401  (registers the properties)
import rollcheck.properties.z3check  # noqa: F401
from rollcheck.properties import oracle as O
from rollcheck.properties.registry import PROPERTIES, prop, properties_of_area, run_property
from rollcheck.pyimpl.pattern import PatternBuilder

FOUNDATION = properties_of_area("foundation")


def test_foundation_properties_registered():
    assert len(FOUNDATION) >= 13
    for name in FOUNDATION:
        assert PROPERTIES[name].theorem.startswith("specs/")


@pytest.mark.parametrize("name", FOUNDATION)
def test_property_holds_on_reference(name):
    r = run_property(name)
    assert r.status == "pass", r.error
    assert r.examples > 0
    if PROPERTIES[name].floor is not None:
        assert r.fraction is not None and r.fraction >= PROPERTIES[name].floor


def test_useless_checkpoint_floor_is_enforced():
    """A property whose examples are too trivial fails as vacuous (and kills no mutant)."""
    from hypothesis import given

    @prop("test-vacuous", target="test", theorem="specs/theorems.md", interesting="a useless checkpoint",
          floor=0.25)
    @given(x=st.integers())
    def trivial(x):
        from rollcheck.properties.registry import interesting

        interesting(False, "a useless checkpoint")

    try:
        r = run_property("test-vacuous", max_examples=20)
        assert r.status == "fail" and r.outcome == "vacuous" and not r.violated
        assert r.fraction == 0.0 and "floor" in (r.error or "")
    finally:
        PROPERTIES.pop("test-vacuous")


def test_oracle_reads_intervals_from_the_events():
    b = PatternBuilder(2)
    m1 = b.send(0, 1)
    b.checkpoint(1)
    b.deliver(1, m1)
    b.checkpoint(0)
    m2 = b.send(0, 1)
    p = b.build()
    msgs = O.raw_messages(p)
    assert [(m.send_interval, m.deliver_interval) for m in msgs] == [(0, 1), (1, None)]
    assert O.raw_last(p) == [1, 1] and m2


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
