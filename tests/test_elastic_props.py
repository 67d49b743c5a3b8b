"""The elastic properties hold for the reference and catch every broken variant (mutant)."""

from __future__ import annotations

import pytest

from rollcheck.properties.elastic_props import failure_steps
from rollcheck.properties.registry import PROPERTIES, run_property

ELASTIC_PROPS = sorted(n for n, p in PROPERTIES.items() if p.target == "elastic")


def test_all_elastic_properties_are_registered_with_theorems():
    assert ELASTIC_PROPS == ["elastic-exactly-once", "elastic-queue-bound", "elastic-scaling-preserves-output",
                             "elastic-slice-split", "elastic-trim-safety"]
    for n in ELASTIC_PROPS:
        assert PROPERTIES[n].theorem.startswith("specs/elastic.md#T")


@pytest.mark.parametrize("name", ELASTIC_PROPS)
def test_property_holds_for_the_reference(name):
    res = run_property(name)
    assert res.status == "pass", res.error
    assert res.examples > 0
    assert res.fraction is not None and res.fraction >= PROPERTIES[name].floor


def test_failure_steps_cover_the_run():
    assert list(failure_steps(5, 0)) == [1, 2, 3, 4, 5]
    got = set()
    for phase in range(10):
        got |= set(failure_steps(100, phase, runs=10))
    assert got == set(range(1, 101))


def test_safe_variants_are_in_the_catalogue():
    from rollcheck.properties.mutation import load_all

    cat = load_all()
    assert cat["elastic-safe-checkpoint-whole-queue"].safe
    assert not cat["elastic-l1-before-checkpoint"].safe
    assert {m.area for n, m in cat.items() if n.startswith("elastic-")} == {"elastic"}
