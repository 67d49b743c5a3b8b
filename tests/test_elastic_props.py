"""The elastic properties hold for the reference and catch every broken variant (mutant)."""

from __future__ import annotations

import pytest

from rollcheck.properties.elastic_props import failure_steps
from rollcheck.properties.mutants_elastic import ELASTIC_MUTANTS, check_elastic_mutant
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


@pytest.mark.parametrize("m", ELASTIC_MUTANTS, ids=lambda m: m.name)
def test_mutant_is_killed(m):
    out = check_elastic_mutant(m)
    assert out.verdict == "killed", out.detail
    if m.properties != ("elastic-slice-split",):  # the slice-split property has no config document
        assert out.counterexample["format"] == "rollcheck.elastic/1"


def test_failure_steps_cover_the_run():
    assert list(failure_steps(5, 0)) == [1, 2, 3, 4, 5]
    got = set()
    for phase in range(10):
        got |= set(failure_steps(100, phase, runs=10))
    assert got == set(range(1, 101))


def test_safe_variants_stay_correct_and_report_their_cost():
    from rollcheck.properties.mutants_elastic import SAFE_MUTANTS, check_safe_elastic

    ratios = {}
    for name, _, measure in SAFE_MUTANTS:
        out = check_safe_elastic(name, measure)
        assert out.verdict == "safe", out.detail
        ratios[name] = out.ratio
    assert ratios["elastic-safe-l1-on-checkpoint-only"] < 1 < ratios["elastic-safe-checkpoint-whole-queue"]


def test_safe_variants_are_in_the_catalogue():
    from rollcheck.properties.mutation import load_all

    cat = load_all()
    assert cat["elastic-safe-checkpoint-whole-queue"].safe
    assert not cat["elastic-l1-before-checkpoint"].safe
