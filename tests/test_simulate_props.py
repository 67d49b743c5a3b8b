"""The simulator's properties pass on the reference and catch their broken variants
(``specs/simulate.md``; the variants are the mutation catalogue's, ``properties/mutants_simulate.py``)."""

from __future__ import annotations

import pytest

import rollcheck.properties.mutants_simulate as ms
import rollcheck.properties.simulate_props  # noqa: F401  (registers the properties)
from rollcheck.properties.mutation import MUTANTS
from rollcheck.properties.registry import PROPERTIES, run_property
from rollcheck.pyimpl.pattern import Pattern

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


@pytest.mark.parametrize("name", sorted(ms.UNSAFE))
def test_broken_variant_is_caught(name):
    prop_name, slot, broken, _ = ms.UNSAFE[name]
    r = run_property(prop_name, **{slot: broken})
    assert r.status == "fail", f"{name} survived {prop_name}"
    assert isinstance(r.counterexample, Pattern)


def test_every_property_has_a_broken_variant():
    caught = {spec[0] for spec in ms.UNSAFE.values()}
    assert caught == set(SIM_PROPS)


def test_mutants_registered_and_safe_ones_report_a_ratio():
    # the interval area also has "sim-…" mutants: select this area's by the module that registered them
    names = {n for n, m in MUTANTS.items() if m.check.__module__ == ms.__name__}
    assert names == set(ms.UNSAFE) | set(ms.SAFE)
    out = MUTANTS["sim-bcs-geq"].check("ci")
    assert out.verdict == "safe" and out.ratio is not None and out.ratio > 1.0
