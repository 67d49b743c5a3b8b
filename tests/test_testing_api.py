"""The public testing API (``rollcheck.testing``), the profiles and the seed reader.

The protocols under test are written in ``tests/user_protocols/`` the way a user would write them.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import rollcheck.pyimpl as pyimpl
import rollcheck.testing as rt
from rollcheck.properties import profiles
from rollcheck.properties.oracle import brute_recovery_line, brute_useless
from rollcheck.pyimpl import (
    InvalidInputError,
    load_pattern,
    recovery_line,
    run_protocol,
    useless_checkpoints,
)

HERE = Path(__file__).parent / "user_protocols"

@pytest.fixture(autouse=True)
def _small_bounds(monkeypatch):
    """Small exhaustive bounds: the default ones cost a minute per protocol (test_explore.py and
    test_protocol_corpus.py cover the explorer itself)."""
    monkeypatch.setenv("ROLLCHECK_BOUND", "2x8,3x7")



def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"user_protocols_{name}", HERE / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


NRAS = _load("nras").NRAS
CBR_MOD = _load("cbr")
U = _load("unsafe_protocols")


# --- the namespaces ---------------------------------------------------------------------------


def test_the_fuzzer_is_not_part_of_the_testing_namespace() -> None:
    """rollcheck's own CLI fuzzer lives in ``rollcheck.fuzz``, not in the public ``rollcheck.testing``."""
    assert importlib.util.find_spec("rollcheck.testing.fuzzing") is None
    assert not any("fuzz" in name.lower() for name in rt.__all__)
    import rollcheck.fuzz as fuzz

    assert {"FORMATS", "run_cli", "mutated_document"} <= set(fuzz.__all__)


@pytest.mark.parametrize("module", [rt, pyimpl], ids=["testing", "pyimpl"])
def test_public_names_exist_and_are_documented(module) -> None:
    assert len(module.__all__) == len(set(module.__all__))
    for name in module.__all__:
        obj = getattr(module, name)
        if callable(obj) and not isinstance(obj, str):
            assert (obj.__doc__ or "").strip(), f"{module.__name__}.{name} has no docstring"


def test_contract_imports() -> None:
    from rollcheck.pyimpl import Pattern, PatternBuilder, recovery_line, useless_checkpoints, zpath  # noqa: F401
    from rollcheck.testing import (  # noqa: F401
        Protocol,
        assert_protocol_safe,
        check_protocol,
        patterns,
        schedules,
    )

    assert rt.Protocol is pyimpl.Protocol


# --- profiles and seed ------------------------------------------------------------------------


def test_profiles_are_prefixed_and_user_profiles_survive() -> None:
    previous = settings.default
    settings.register_profile("ci", max_examples=7)
    try:
        settings.load_profile("ci")
        importlib.reload(profiles)  # importing (again) registers only rollcheck-* names
        rt.check_protocol("hmnr", max_examples=3, picture=False)
        assert settings.get_profile("ci").max_examples == 7
        assert settings.default.max_examples == 7
        assert settings.get_profile("rollcheck-ci").max_examples == 60
        assert settings.get_profile("rollcheck-verify").max_examples == 600
        assert profiles.hypothesis_name("verify") == "rollcheck-verify"
        assert profiles.registered("ci") == "rollcheck-ci" and profiles.registered("_tmp") == "_tmp"
    finally:
        settings.register_profile("_restore", previous)
        settings.load_profile("_restore")


@pytest.mark.parametrize("raw, want", [("", None), ("  ", None), ("12", 12), (" -3 ", -3)])
def test_seed_reader(monkeypatch, raw, want) -> None:
    monkeypatch.setenv("ROLLCHECK_SEED", raw)
    assert profiles.seed() == want


def test_seed_reader_rejects_garbage(monkeypatch) -> None:
    monkeypatch.setenv("ROLLCHECK_SEED", "twelve")
    with pytest.raises(InvalidInputError, match="ROLLCHECK_SEED.*integer"):
        profiles.seed()


def test_empty_seed_does_not_crash_the_protocol_mutant_hunt(monkeypatch, tmp_path) -> None:
    """``ROLLCHECK_SEED=""`` means derandomised, for the protocol mutants as everywhere."""
    from rollcheck.cli.main import main

    monkeypatch.setenv("ROLLCHECK_SEED", "")
    rc = main(["mutants", "--only", "hmnr-no-c1", "--out", str(tmp_path / "m"), "--json"])
    assert rc == 0


# --- strategies -------------------------------------------------------------------------------


def test_schedules_are_zcycle_prone() -> None:
    """At the ci budget, at least 30% of the drawn schedules leave a useless checkpoint under UC
    (uniform random traffic of the same size: about 12%)."""
    seen = []

    @settings(max_examples=60, derandomize=True, database=None, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(p=rt.schedules())
    def draw(p):
        seen.append(p)

    draw()
    assert len(seen) == 60
    assert all(p.n <= 4 and len(p.events) <= 30 and not any(e.forced for e in p.events) for p in seen)
    hit = sum(1 for p in seen if useless_checkpoints(run_protocol("uc", p).pattern))
    assert hit / len(seen) >= 0.3


def test_strategy_bounds_are_checked() -> None:
    with pytest.raises(InvalidInputError):
        rt.schedules(min_processes=1)


@settings(max_examples=40, deadline=None, database=None)
@given(p=rt.patterns(max_processes=3, max_actions=12), f=st.integers(0, 2))
def test_max_consistent_line_matches_brute_force(p, f) -> None:
    f %= p.n
    assert rt.max_consistent_line(p, [f]) == brute_recovery_line(p, [f], True)


# --- check_protocol ---------------------------------------------------------------------------


@pytest.mark.parametrize("cls, rate", [(NRAS, None), (CBR_MOD.CBR, 1.0)], ids=["nras", "cbr"])
def test_safe_user_protocols(tmp_path, cls, rate) -> None:
    r = rt.check_protocol(cls, out=tmp_path, max_examples=150)
    assert r.verdict == "safe" and r.exit_code == 0 and r.property is None
    assert r.random["schedules"] == 150 and r.counterexample is None and list(tmp_path.iterdir()) == []
    assert [b["complete"] for b in r.exhaustive] == [True, True]
    assert r.examples == sum(b["schedules"] for b in r.exhaustive) + 150
    assert set(r.compared) == {"hmnr", "bcs"}
    assert 0 < r.compared["hmnr"] <= r.compared["bcs"] <= 1
    assert r.forced_per_delivery >= r.compared["hmnr"]  # nobody beats HMNR's rate on the same schedules
    if rate is not None:
        assert r.forced_per_delivery == rate
    assert r.uc_useless_fraction > 0  # the random schedules do hold Z-cycles
    assert "no-useless-checkpoint" in r.properties


@pytest.mark.parametrize("cls, min_n, events", [
    (U.LazyIndex, 2, 5), (U.ForgetfulIndex, 2, 7), (U.PairwiseNRAS, 3, 7), (U.SaturatingIndex, 2, 8)],
    ids=["lazy", "forgetful", "pairwise", "saturating"])
def test_unsafe_user_protocols_are_caught(tmp_path, cls, min_n, events) -> None:
    r = rt.check_protocol(cls, out=tmp_path)
    assert r.verdict == "unsafe" and r.exit_code == 1 and r.property == "no-useless-checkpoint"
    assert r.counterexample_events == events  # the smallest (brute force in test_explore.py)
    assert r.random["schedules"] == 0  # found exhaustively
    cex = load_pattern(r.counterexample)
    assert Path(r.picture).read_bytes()[:4] == b"\x89PNG"
    # the saved file really holds a useless checkpoint, by brute force over all global checkpoints
    useless = brute_useless(cex)
    assert useless and sorted(cex.checkpoint_name(c) for c in useless) == sorted(r.useless)
    assert cex.n == min_n  # no idle process
    # and it is the protocol's own output: rerunning the protocol on its basic schedule gives it back
    basic = pyimpl.Pattern(cex.processes, tuple(e for e in cex.events if not e.forced))
    assert run_protocol(cls(), basic).pattern == cex
    assert len(cex.events) <= 30 + sum(1 for e in cex.events if e.forced)
    if cls is U.SaturatingIndex:  # only wrong once some index saturates: several checkpoints
        assert max(cex.last_index(i) for i in range(cex.n)) >= 3


def test_same_seed_same_result(tmp_path) -> None:
    a = rt.check_protocol(U.ForgetfulIndex, out=tmp_path / "a", seed=11, picture=False)
    b = rt.check_protocol(U.ForgetfulIndex, out=tmp_path / "b", seed=11, picture=False)
    assert a.seed == 11 and a.examples == b.examples
    assert Path(a.counterexample).read_text() == Path(b.counterexample).read_text()


def test_rollback_bound_is_checked(tmp_path) -> None:
    r = rt.check_protocol(CBR_MOD.CBRClaimsBound, out=tmp_path, picture=False)
    assert r.verdict == "unsafe" and r.property == "rollback-bounded" and r.picture is None
    cex = load_pattern(r.counterexample)
    from rollcheck.testing._properties import check_rollback_bound

    with pytest.raises(rt.ProtocolViolation):
        check_rollback_bound(cex, 0)
    check_rollback_bound(cex, 1000)


def test_recovery_line_property_catches_a_broken_line(tmp_path) -> None:
    def last_checkpoints(p, failed):  # consistent, but not the maximum: survivors lose their state
        return recovery_line(p, failed, virtual=False)

    r = rt.check_protocol(NRAS, out=tmp_path, line=last_checkpoints, picture=False)
    assert r.verdict == "unsafe" and r.property == "recovery-line-is-max-consistent"


def test_zero_examples_is_inconclusive(tmp_path) -> None:
    r = rt.check_protocol(NRAS, out=tmp_path, max_examples=0, bounds="")
    assert r.verdict == "inconclusive" and r.exit_code == 3 and r.examples == 0
    assert r.forced_per_delivery is None


def test_a_protocol_that_claims_nothing_is_inconclusive() -> None:
    r = rt.check_protocol("uc", max_examples=10)
    assert r.verdict == "inconclusive" and "claims neither" in r.detail
    assert r.forced_per_delivery == 0.0


def test_an_exception_in_user_code_is_bad_input(tmp_path) -> None:
    with pytest.raises(rt.UserCodeError, match=r"Crashes\.must_force: events\[\d+\]: must_force\(.*KeyError") as e:
        rt.check_protocol(U.Crashes, out=tmp_path)
    saved = tmp_path / "crashes-error-input.json"
    assert str(saved) in str(e.value) and load_pattern(saved).n >= 2


def test_assert_protocol_safe(tmp_path) -> None:
    assert rt.assert_protocol_safe(NRAS, out=tmp_path, max_examples=10).verdict == "safe"
    with pytest.raises(AssertionError, match=r"lazy-index: unsafe .*counterexample .*lazy-index-no-useless-checkpoint\.json"):
        rt.assert_protocol_safe(U.LazyIndex, out=tmp_path)


def test_specs_accepted(tmp_path, monkeypatch) -> None:
    monkeypatch.syspath_prepend(str(HERE))
    sys.modules.pop("unsafe_protocols", None)
    assert rt.check_protocol("unsafe_protocols:PairwiseNRAS", out=tmp_path).verdict == "unsafe"
    assert rt.check_protocol(f"{HERE / 'nras.py'}:NRAS", max_examples=5).verdict == "safe"
    with pytest.raises(InvalidInputError, match="no class"):
        rt.check_protocol(f"{HERE / 'nras.py'}:Nope")


def test_zigzag_property_passes_on_references_and_catches_a_variant() -> None:
    import rollcheck.properties.protocols_cic  # noqa: F401
    from rollcheck.properties.registry import run_property
    from rollcheck.pyimpl.protocols import get_protocol

    ok = run_property("cic-no-useless-zigzag", profile="ci")
    assert ok.status == "pass" and ok.examples == 60
    broken = run_property("cic-no-useless-zigzag", profile="ci", get=lambda name: get_protocol("hmnr-no-c2"))
    assert broken.status == "fail" and "useless" in broken.error


def test_a_nondeterministic_protocol_is_bad_input(tmp_path) -> None:
    """The method whose result differs on the same schedule run twice is named (not only the class)."""
    with pytest.raises(InvalidInputError, match=r"Moody\.must_force: events\[\d+\]: must_force gave "
                       r"different results on the same schedule run twice .*not deterministic"):
        rt.check_protocol(U.Moody, out=tmp_path)
    # without an exhaustive phase too (the random phase alone must not call it safe)
    with pytest.raises(InvalidInputError, match=r"Moody\.must_force: .*not deterministic"):
        rt.check_protocol(U.Moody, out=tmp_path, bounds="", max_examples=20)
