"""The ``rollcheck`` pytest plugin, run on a user's own test suite with pytest's ``pytester``."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

HERE = Path(__file__).parent / "user_protocols"


@pytest.fixture(autouse=True)
def _small_bounds(monkeypatch):
    """Small exhaustive bounds: the default ones cost a minute per protocol (test_explore.py and
    test_protocol_corpus.py cover the explorer itself)."""
    monkeypatch.setenv("ROLLCHECK_BOUND", "2x6,3x5")

USER_CONFTEST = """
from hypothesis import settings

settings.register_profile("ci", max_examples=7)
settings.load_profile("ci")
"""

USER_TESTS = """
import os

from hypothesis import settings

from rollcheck.testing import assert_protocol_safe
from nras import NRAS
from unsafe_protocols import LazyIndex

def test_nras_is_safe():
    assert assert_protocol_safe(NRAS).random["schedules"] == int(os.environ["EXPECT_EXAMPLES"])


def test_lazy_index_is_safe():
    assert_protocol_safe(LazyIndex)


def test_my_hypothesis_profile_is_kept():
    assert settings.get_profile("ci").max_examples == 7
    assert settings.default.max_examples == 7


def test_artifact_dir_fixture(rollcheck_out):
    assert os.path.isdir(rollcheck_out)
"""


@pytest.fixture
def user_suite(pytester):
    for name in ("nras.py", "unsafe_protocols.py"):
        pytester.makepyfile(**{name[:-3]: (HERE / name).read_text()})
    pytester.makeconftest(USER_CONFTEST)
    pytester.makepyfile(test_user=USER_TESTS)
    return pytester


def test_plugin_options_and_artifacts(user_suite, monkeypatch) -> None:
    monkeypatch.setenv("EXPECT_EXAMPLES", "600")
    monkeypatch.delenv("ROLLCHECK_PROFILE", raising=False)
    monkeypatch.delenv("ROLLCHECK_SEED", raising=False)
    out = user_suite.path / "artifacts"
    result = user_suite.runpytest_subprocess("-p", "no:cacheprovider", "--rollcheck-out", str(out),
                                             "--rollcheck-profile", "ci", "-k", "not fixture")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines([
        "*AssertionError: lazy-index: unsafe*counterexample*lazy-index-no-useless-checkpoint.json*",
        "*= rollcheck =*",
        "nras: safe (* schedules, profile ci, seed derandomised)*exhaustive 2x6*random 600 schedules*",
        "lazy-index: unsafe (* schedules, profile ci, seed derandomised)*violated no-useless-checkpoint",
    ])
    assert sorted(p.name for p in out.iterdir()) == [
        "lazy-index-no-useless-checkpoint.json", "lazy-index-no-useless-checkpoint.png"]
    # the failure shows the verdict and the counterexample, not rollcheck's own source
    text = result.stdout.str()
    assert "_check.py" not in text and "def assert_protocol_safe" not in text


def test_plugin_profile_option_and_defaults(user_suite, monkeypatch) -> None:
    """Without --rollcheck-out the artifacts go to a temporary directory named in the failure."""
    tmp = user_suite.path / "tmp"
    tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp))  # the user's temp dir, here inside the test's folder
    result = user_suite.runpytest_subprocess("-p", "no:cacheprovider", "--rollcheck-profile", "verify",
                                             "-k", "lazy or profile or fixture")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines([
        "*AssertionError: lazy-index: unsafe*counterexample *rollcheck-*lazy-index-no-useless-checkpoint.json*",
        "lazy-index: unsafe (* schedules, profile verify, seed *)*",
    ])
    assert not (user_suite.path / "artifacts").exists()
    saved = sorted(p.name for p in tmp.glob("rollcheck-*/*"))
    assert saved == ["lazy-index-no-useless-checkpoint.json", "lazy-index-no-useless-checkpoint.png"]


ENGINE_TESTS = '''
from pathlib import Path

import pytest

import rollcheck.spark_replay.matrix.run as spark_matrix
from rollcheck.testing import assert_query_exactly_once, check_query


def _fake(cells):
    def run(opts, **_kw):
        out = Path(opts.out)
        return {"cells": cells, "index": str(out / "index.html"),
                "summary": {"conformant": sum(c["verdict"] == "conformant" for c in cells),
                            "not_conformant": sum(c["verdict"] == "not-conformant" for c in cells),
                            "inconclusive": sum(c["verdict"] == "inconclusive" for c in cells),
                            "expected_by_engine": sum(bool(c.get("expected_by_engine")) for c in cells),
                            "findings": 0}}
    return run


def _cell(verdict, column, **kw):
    return {"row": "ledger · hdfs", "column": column, "verdict": verdict, "reason": "because", **kw}


def test_ledger_query(monkeypatch):
    monkeypatch.setattr(spark_matrix, "run_matrix", _fake([_cell("conformant", "task"),
                        _cell("not-conformant", "sink", expected_by_engine=True, attributed_to="module")]))
    assert check_query("ledger.py").verdict == "not-conformant"


def test_counts_query(monkeypatch):
    monkeypatch.setattr(spark_matrix, "run_matrix", _fake([_cell("conformant", "sink")]))
    assert_query_exactly_once("counts.py")
'''


def test_summary_lists_engine_slices(pytester) -> None:
    """check_query / check_job slices (EngineReport) are listed at the end of the session too:
    verdict, summary, folder, table and the cells that are not conformant (the engine is faked)."""
    pytester.makepyfile(test_engines=ENGINE_TESTS)
    out = pytester.path / "artifacts"
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--rollcheck-out", str(out))
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines([
        "*= rollcheck =*",
        "ledger.py on spark: not-conformant (1 conformant, 1 not conformant (1 expected by the engine, "
        "0 finding(s)), 0 inconclusive)",
        f"    files: {out}/ledger-spark-*",
        f"    table: {out}/ledger-spark-*/index.html",
        "    ledger · hdfs · sink: not-conformant (expected by the engine)",
        "counts.py on spark: conformant (1 conformant, 0 not conformant (0 expected by the engine, "
        "0 finding(s)), 0 inconclusive)",
        f"    files: {out}/counts-spark-*",
    ])
    assert "ledger · hdfs · task" not in result.stdout.str()  # a conformant cell is not listed
