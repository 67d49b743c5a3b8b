"""The registered span properties pass on the reference and catch every broken variant."""

from __future__ import annotations

import pytest
from hypothesis import Phase, settings

import rollcheck.properties.mutants_spans as mutants_spans
import rollcheck.properties.spans_props as sp
from rollcheck.properties.mutation import MUTANTS
from rollcheck.properties.registry import PROPERTIES, run_property

SPANS_PROPS = sorted(n for n in PROPERTIES if n.startswith("spans-"))


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
    assert run_property("spans-feasible", solver=everyone_zero).status == "pass"  # feasible, not greatest


def test_downstream_only_worklist_is_caught(no_shrink: None) -> None:
    assert run_property("spans-end-to-end", solver=sp.downstream_only_solver).status == "fail"


def test_top_all_times_is_caught(no_shrink: None) -> None:
    r = run_property("spans-end-to-end", top_all=True)
    assert r.status == "fail" and "lost" in (r.error or "")


def test_watermark_only_p_is_caught(no_shrink: None) -> None:
    assert run_property("spans-watermark", update=mutants_spans.only_p_update).status == "fail"


def test_mutant_catalogue() -> None:
    names = {n for n in MUTANTS if n.startswith("spans-")}
    assert names == {"spans-downstream-worklist", "spans-top-all-times", "spans-watermark-only-p",
                     "spans-whole-graph-rounds"}
    out = MUTANTS["spans-whole-graph-rounds"].check("ci")
    assert out.verdict == "safe" and out.ratio is not None and out.ratio > 10
    assert MUTANTS["spans-top-all-times"].check("ci").verdict == "killed"


def test_frontier_property_catches_a_wrong_exemption(no_shrink: None) -> None:
    from rollcheck.pyimpl.spans.frontier import compile_seq

    def no_top_exemption(s):  # forgets the ⊤–⊤ exemption of C1: too cautious, not the greatest
        fc = compile_seq(s)
        c1 = fc.need[: len(s.src)]  # C1 rows come first, one per edge
        # an unlogged edge with a message in flight: without the exemption no receiver level works
        c1[~s.failed[s.dst] & ~s.logged & (s.total > s.processed), s.K + 1] = 255
        return fc

    r = run_property("spans-frontier-equals-sets", max_examples=60, compile_fn=no_top_exemption)
    assert r.status == "fail"
