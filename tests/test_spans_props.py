"""The registered span properties pass on the reference and catch every broken variant."""

from __future__ import annotations

import pytest
from hypothesis import Phase, settings

import rollcheck.properties.spans_props as sp
from rollcheck.properties.registry import PROPERTIES, properties_of_area, run_property

SPANS_PROPS = properties_of_area("spans")


@pytest.fixture
def no_shrink():
    """Finding a failure is what these tests check; shrinking it would only cost time."""
    prev = settings.default
    settings.register_profile("_spans_no_shrink", settings(prev, phases=[Phase.explicit, Phase.generate]))
    settings.load_profile("_spans_no_shrink")
    yield
    settings.register_profile("_spans_restore", prev)
    settings.load_profile("_spans_restore")


def test_all_expected_properties_registered() -> None:
    assert set(SPANS_PROPS) >= {"spans-feasible", "spans-greatest-brute", "spans-greatest-z3", "spans-frontier-equals-sets",
                                "spans-orders-agree", "spans-watermark", "spans-end-to-end"}


@pytest.mark.parametrize("name", SPANS_PROPS)
def test_property_passes_on_reference(name: str) -> None:
    r = run_property(name)
    assert r.status == "pass", r.error
    assert r.examples > 0
    if PROPERTIES[name].floor is not None:  # ≥ 30% with a processor strictly between c_0 and ⊤
        assert r.fraction >= PROPERTIES[name].floor


def test_definitional_oracle_disagrees_with_an_inflight_dropping_solver(no_shrink: None) -> None:
    """The audit's bug: a solver whose C1 forgets an in-flight unlogged message; brute force and Z3
    (both from the definitions) catch it."""
    for name in ("spans-greatest-brute", "spans-greatest-z3", "spans-feasible"):
        r = run_property(name, solver=sp.drops_inflight_solver)
        assert r.violated, name


@pytest.mark.parametrize("name", ["spans-feasible", "spans-greatest-brute", "spans-orders-agree"])
def test_fixpoint_properties_catch_a_broken_solver(name: str, no_shrink: None) -> None:
    def keeps_top(s, order="fifo", seed=0):  # never lowers anything: infeasible when a failure matters
        return {p.name: p.top_level for p in s.processors} if order != "lifo" else sp.reference_solver(s)

    r = run_property(name, max_examples=20, solver=keeps_top)
    assert r.status == "fail"
    assert r.counterexample is not None  # a rollcheck.spans/1 document


def test_greatest_catches_a_too_cautious_solver(no_shrink: None) -> None:
    def everyone_zero(s, order="fifo", seed=0):
        return {p.name: 0 for p in s.processors}

    assert run_property("spans-greatest-brute", max_examples=20, solver=everyone_zero).status == "fail"
    assert run_property("spans-greatest-z3", max_examples=20, solver=everyone_zero).status == "fail"
    # feasible, not greatest (all at level 0 is never "interesting", so the run is vacuous, not violated)
    assert not run_property("spans-feasible", solver=everyone_zero).violated


def test_brute_force_enumerates_exactly_the_assignments_without_violations() -> None:
    """The per-edge tables of brute_force give the assignments definition_violations accepts."""
    import itertools

    from hypothesis import given
    from hypothesis import strategies as st

    from rollcheck.properties.spans_strategies import mixed_span_docs
    from rollcheck.pyimpl.spans.system import system_from_dict

    seen = {"feasible": 0, "infeasible": 0}

    @settings(max_examples=80, deadline=None, database=None, derandomize=True)
    @given(doc=mixed_span_docs(max_procs=4, max_chain=3, max_edges=6), keep=st.booleans())
    def check(doc: dict, keep: bool) -> None:
        s = system_from_dict(doc, phi="keep" if keep else "reject")
        names = s.names
        want = []
        for combo in itertools.product(*[sp._levels(p) for p in s.processors]):
            lv = dict(zip(names, combo, strict=True))
            if sp.definition_violations(s, lv):
                seen["infeasible"] += 1
            else:
                seen["feasible"] += 1
                want.append(lv)
        assert sp.brute_force(s) == want

    check()
    assert seen["feasible"] > 0 and seen["infeasible"] > 0
