"""The simulator's properties pass on the reference and catch their broken variants
(``specs/simulate.md``; the variants are the mutation catalogue's, ``properties/mutants_simulate.py``)."""

from __future__ import annotations

import pytest

import rollcheck.properties.mutants_simulate as ms
import rollcheck.properties.simulate_props  # noqa: F401  (registers the properties)
from rollcheck.properties.registry import PROPERTIES, run_property

SIM_PROPS = sorted(n for n in PROPERTIES if n.startswith("sim-"))


def test_every_property_is_registered_with_a_theorem():
    assert len(SIM_PROPS) == 8
    for n in SIM_PROPS:
        assert PROPERTIES[n].theorem.startswith("specs/simulate.md#t-")


@pytest.mark.parametrize("name", SIM_PROPS)
def test_property_holds_on_the_reference(name):
    r = run_property(name)
    assert r.status == "pass", r.error
    assert r.examples >= 20


def test_every_property_has_a_broken_variant():
    caught = {spec[0] for spec in ms.UNSAFE.values()}
    assert caught == set(SIM_PROPS)
