"""The protocol corpus of ``examples/protocols``: every published protocol SAFE, every broken variant
UNSAFE with a counterexample no larger than its known smallest witness (smallest first)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from rollcheck.cli.main import main
from rollcheck.pyimpl import load_pattern, useless_checkpoints
from rollcheck.testing import check_protocol

CORPUS = Path(__file__).resolve().parent.parent / "examples" / "protocols"

PUBLISHED = [("bcs.py", "BCS"), ("fdas.py", "FDAS"), ("fdi.py", "FDI"), ("cbr.py", "CBR"),
             ("nras.py", "NRAS"), ("casbr.py", "CASBR"), ("ms.py", "ManivannanSinghal"),
             ("bqf.py", "BQF"), ("hmnr.py", "HMNR")]

#: file, class, bound that holds the smallest witness, (processes, events) of that witness
BROKEN = [("broken_fi_eqclock.py", "FIEqClock", "2x8", (2, 8)),
          ("broken_fdas_sender_only.py", "FDASSenderOnly", "3x7", (3, 7)),
          ("broken_ms_skip.py", "MSSkip", "2x6", (2, 6)),
          ("broken_fi_taken_no_or.py", "FITakenNoOr", "3x9", (3, 9))]


@pytest.mark.parametrize("file, cls", PUBLISHED, ids=[c for _, c in PUBLISHED])
def test_published_protocols_are_safe(file, cls):
    r = check_protocol(f"{CORPUS / file}:{cls}", bounds="2x8,3x6", max_examples=0, picture=False)
    assert r.verdict == "safe", r.detail
    assert all(b["complete"] for b in r.exhaustive)
    assert r.symmetry.startswith("claimed, verified")


@pytest.mark.parametrize("file, cls, bound, witness",
                         [pytest.param(*b, marks=pytest.mark.slow) if b[3] == (3, 9) else b
                          for b in BROKEN], ids=[b[1] for b in BROKEN])
def test_broken_variants_give_their_smallest_witness(tmp_path, file, cls, bound, witness):
    r = check_protocol(f"{CORPUS / file}:{cls}", bounds=bound, max_examples=0, picture=False,
                       out=tmp_path)
    assert r.verdict == "unsafe" and r.property == "no-useless-checkpoint"
    cex = load_pattern(r.counterexample)
    assert (cex.n, r.counterexample_events) == witness
    assert useless_checkpoints(cex)
    # nothing smaller exists: one event less finds nothing (the 3x8 walk is left to test_explore's
    # smallest-first checks for the slow case)
    p, e = witness
    if witness == (3, 9):
        return
    smaller = check_protocol(f"{CORPUS / file}:{cls}", bounds=f"{p}x{e - 1}", max_examples=0,
                             picture=False, out=tmp_path / "smaller")
    assert smaller.verdict == "safe"


def test_the_relay_flaw_needs_three_processes():
    r = check_protocol(f"{CORPUS / 'broken_fdas_sender_only.py'}:FDASSenderOnly", bounds="2x9",
                       max_examples=0, picture=False)
    assert r.verdict == "safe"


@pytest.mark.slow
@pytest.mark.parametrize("file, cls, events", [("broken_fi_eqclock.py", "FIEqClock", 8),
                                                ("broken_fdas_sender_only.py", "FDASSenderOnly", 7)])
def test_plain_default_finds_the_smallest(tmp_path, capsys, file, cls, events):
    # the exhaustive phase does not depend on the seed (the random phase, which does, is not
    # reached: the protocol is already unsafe)
    rc = main(["check", "protocol", f"{CORPUS / file}:{cls}", "--out", str(tmp_path),
               "--no-picture", "--seed", "1", "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert rc == 1 and doc["counterexample_events"] == events and doc["random"]["schedules"] == 0
    assert [(b["processes"], b["events"]) for b in doc["exhaustive"]] == [(2, 11), (3, 9), (4, 6)]


def test_one_argument_on_checkpoint_still_works(monkeypatch):
    monkeypatch.syspath_prepend(str(CORPUS))
    sys.modules.pop("hmnr", None)
    r = check_protocol("rollcheck.pyimpl.protocols.bcs:BCS", bounds="2x6", max_examples=0,
                       picture=False)
    assert r.verdict == "safe"
