"""A verify row's detail is a sentence: names joined with commas and "and", never a Python repr
(``['P0:1']``, ``{'p': 1}``, ``None``, ``conformant=False``).

The sections run here on synthetic inputs (the engines and the protocol search are replaced by
fakes): every detail they build is checked, including the failure paths a good run never shows.
"""

from __future__ import annotations

import re
from types import SimpleNamespace
from typing import Any

import pytest

from rollcheck.sections import _words, sec_spans, sec_spark, sec_yours
from rollcheck.suite import VerifyContext

#: What a Python repr of a list, dict, set or None looks like inside a sentence.
REPR = re.compile(r"[\[{(]['\"]|\bNone\b|\w=[\[{(A-Z]|\[\]|\{\}")


def _assert_words(rows: list[Any]) -> None:
    assert rows
    for r in rows:
        assert not REPR.search(r.detail), r.detail


def _ctx(tmp_path) -> VerifyContext:
    return VerifyContext(profile="ci", quick=True, out_dir=tmp_path, seed=1, log=lambda m: None)


def test_the_pattern_catches_reprs():
    """The test's own pattern: each repr the sections used to print is caught, a sentence is not."""
    for bad in (f"no Z-cycle through {['P0:1']}", f"useless {['P0:1', 'P1:2']}", f"spans {({'p': 1})}",
                f"conformant={False}; failed checks {[]}", f"recording did not finish: {({'status': 'failed'})}",
                f"depth {None}"):
        assert REPR.search(bad), bad
    assert not REPR.search("useless P0:1 and P1:2 (the report names P0:1); events[3]: seq 4")


def test_words():
    assert _words.and_join(["P0:1", "P1:2", "P2:3"]) == "P0:1, P1:2 and P2:3"
    assert _words.and_join([]) == "none" and _words.word(None, "unknown") == "unknown"
    assert _words.mapping_words({"p": 1, "q": "top"}) == "p 1 and q top"


def _fake_protocol_report(verdict: str) -> Any:
    return SimpleNamespace(verdict=verdict, examples=12, forced_per_delivery=None, compared={"bcs": 0.5},
                           counterexample="cx.json", useless=["P0:1", "P1:2"], picture=None,
                           detail="incomplete: the budget ended it")


@pytest.mark.parametrize("verdict", ["unsafe", "safe", "inconclusive"])
def test_your_protocol_rows(monkeypatch, tmp_path, verdict):
    import rollcheck.pyimpl.patternio as patternio
    import rollcheck.pyimpl.zpaths as zpaths
    import rollcheck.testing as testing

    monkeypatch.setattr(testing, "check_protocol", lambda *a, **k: _fake_protocol_report(verdict))
    monkeypatch.setattr(patternio, "load_pattern", lambda path: SimpleNamespace(checkpoint_name=str))
    monkeypatch.setattr(zpaths, "useless_checkpoints", lambda p: ["P0:1", "P2:4"])
    monkeypatch.setattr(sec_yours, "confirm_counterexample",
                        lambda p, useless: (False, f"no Z-cycle through {_words.and_join(useless)}"))
    rows = sec_yours._protocol_rows(_ctx(tmp_path))
    _assert_words(rows)
    if verdict == "unsafe":
        assert "useless P0:1 and P2:4 (the report names P0:1 and P1:2)" in rows[0].detail
    assert "forced per delivery not measured (hmnr not measured, bcs 0.5)" in rows[0].detail


def _zcycle_pattern() -> Any:
    """P1:1 is useless (a Z-cycle through it), P0:1 is not (as in test_verify_confirmations)."""
    from rollcheck.pyimpl.pattern import PatternBuilder

    b = PatternBuilder(["P0", "P1"])
    b.deliver(1, b.send(0, 1))
    b.checkpoint(1)
    b.deliver(0, b.send(1, 0))
    b.checkpoint(0)
    return b.build()


def test_a_false_claim_is_said_in_words():
    ok, note = sec_yours.confirm_counterexample(_zcycle_pattern(), ["P0:1", "P1:1"])
    assert not ok and note.startswith("no Z-cycle through P0:1 (")
    ok, note = sec_yours.confirm_counterexample(_zcycle_pattern(), ["P1:1"])
    assert ok and "each of P1:1 found" in note


@pytest.mark.parametrize("conformant,failed,seq", [(None, [], None), (False, ["recovery-line", "log-replay"], 7),
                                                   (True, [], None)])
def test_your_trace_rows(monkeypatch, conformant, failed, seq):
    import rollcheck.pyimpl.traces.api as api

    checks = [SimpleNamespace(name=n, ok=False) for n in failed] + [SimpleNamespace(name="pattern-valid", ok=True)]
    report = SimpleNamespace(conformant=conformant, checks=checks, first_offending_seq=seq)
    monkeypatch.setattr(api, "check_trace_file", lambda *a, **k: (report, None))
    rows = sec_yours._trace_rows()
    _assert_words(rows)
    if failed:
        assert rows[0].detail == "not conformant; the failed checks are log-replay and recovery-line; " \
                                 "the first offending event is seq 7"
    else:
        assert rows[0].detail.split(";")[0] == {None: "inconclusive", True: "conformant"}[conformant]


def test_spark_recording_that_did_not_finish(monkeypatch, tmp_path):
    import rollcheck.spark_replay.jobs.wordcount as wordcount
    import rollcheck.spark_replay.replay.tlc as tlc_replay

    monkeypatch.setattr(wordcount, "record_wordcount",
                        lambda cfg, out: {"status": "failed", "seconds": 4.5, "children": 2, "trace": str(out)})
    report = SimpleNamespace(checks=[SimpleNamespace(name="recovery", detail="held", status=SimpleNamespace(
        value="held"))], conformant=True)
    monkeypatch.setattr(tlc_replay, "replay_with_tlc", lambda path, tlc=True: report)
    monkeypatch.setattr(sec_spark, "_tamper_rows", lambda *a: [])
    rows = sec_spark._streaming(_ctx(tmp_path), tmp_path)
    _assert_words(rows)
    assert rows[0].detail == "the recording did not finish: it ended failed after 2 driver run(s) in 4.5 s"


def test_spark_checkpoint_problems_in_words():
    val = {"valid": False, "problems": ["offsets/3 has no commit", "operator 0 store 0: rows differ"],
           "operators": [{"operator": 0, "reader_agrees": False}, {"operator": 1, "reader_agrees": True}]}
    said = sec_spark._checkpoint_words(val)
    assert not REPR.search(said), said
    assert said == ("the checkpoint folder's problems: offsets/3 has no commit and operator 0 store 0: rows "
                    "differ; Spark's state reader did not agree (or could not read) on operator 0")


def test_span_rows_in_words(tmp_path):
    """The spans section's pure rows (no engine): spans and watermarks said as pairs."""
    _assert_words([sec_spans._contract_row(), sec_spans._non_monotone_row(), sec_spans._dataflow_row()])
    assert "spans p 1 and q 1" in sec_spans._contract_row().detail
