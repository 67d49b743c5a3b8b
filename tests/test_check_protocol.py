"""``rollcheck check protocol SPEC`` and ``rollcheck protocol MODULE:CLASS``, as in the contract."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from rollcheck.cli.main import main
from rollcheck.pyimpl import PatternBuilder, dump_pattern, load_pattern, useless_checkpoints

HERE = Path(__file__).parent / "user_protocols"
KEYS = {"protocol", "verdict", "property", "examples", "counterexample", "picture",
        "forced_per_delivery", "compared"}

@pytest.fixture(autouse=True)
def _small_bounds(monkeypatch):
    """Small exhaustive bounds: the default ones cost a minute per protocol (test_explore.py and
    test_protocol_corpus.py cover the explorer itself)."""
    monkeypatch.setenv("ROLLCHECK_BOUND", "2x6,3x5")



def _run(capsys, *argv: str) -> tuple[int, dict]:
    rc = main(["check", "protocol", *argv, "--json"])
    cap = capsys.readouterr()
    _run.err = cap.err  # type: ignore[attr-defined]
    return rc, (json.loads(cap.out) if cap.out.strip() else {})


def test_safe_file_spec(tmp_path, capsys) -> None:
    rc, doc = _run(capsys, f"{HERE / 'nras.py'}:NRAS", "--out", str(tmp_path / "o"))
    assert rc == 0 and KEYS <= set(doc)
    assert doc["protocol"] == "nras" and doc["verdict"] == "safe" and doc["property"] is None
    assert doc["random"] == {"schedules": 600, "max_processes": 6, "max_events": 60}
    assert [(b["processes"], b["events"], b["complete"]) for b in doc["exhaustive"]] == [
        (2, 6, True), (3, 5, True)]
    assert doc["examples"] == 600 + sum(b["schedules"] for b in doc["exhaustive"])
    assert doc["counterexample"] is None and doc["picture"] is None and doc["counterexample_events"] is None
    assert set(doc["compared"]) == {"hmnr", "bcs"} and isinstance(doc["forced_per_delivery"], float)
    assert doc["uc_useless_fraction"] > 0  # the random schedules do hold Z-cycles
    assert doc["verdict_line"] == (f"SAFE: exhaustive 2x6 ({doc['exhaustive'][0]['schedules']} schedules), "
                                   f"3x5 ({doc['exhaustive'][1]['schedules']}); random 600 schedules up to 6x60")
    assert not (tmp_path / "o").exists()


def test_unsafe_module_spec(tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.syspath_prepend(str(HERE))
    sys.modules.pop("unsafe_protocols", None)
    rc, doc = _run(capsys, "unsafe_protocols:PairwiseNRAS", "--out", str(tmp_path), "--seed", "3",
                   "--bound", "3x7")
    assert rc == 1 and doc["verdict"] == "unsafe" and doc["property"] == "no-useless-checkpoint"
    assert doc["counterexample_events"] == 7 and doc["random"]["schedules"] == 0
    assert doc["seed"] == 3
    cex = load_pattern(doc["counterexample"])
    assert useless_checkpoints(cex) and Path(doc["picture"]).stat().st_size > 0
    assert Path(doc["counterexample"]).parent == tmp_path


def test_builtin_and_profile(capsys, tmp_path) -> None:
    rc, doc = _run(capsys, "bcs", "--profile", "ci", "--max-examples", "12", "--out", str(tmp_path))
    assert rc == 0 and doc["random"]["schedules"] == 12 and doc["profile"] == "ci"
    assert doc["forced_per_delivery"] == doc["compared"]["bcs"]


@pytest.mark.parametrize("argv", [["uc", "--max-examples", "20"], ["hmnr", "--max-examples", "0", "--bound", ""]],
                         ids=["claims-nothing", "zero"])
def test_inconclusive(capsys, tmp_path, argv) -> None:
    rc, doc = _run(capsys, *argv, "--out", str(tmp_path))
    assert rc == 3 and doc["verdict"] == "inconclusive"


@pytest.mark.parametrize("spec, message", [
    ("no_such_module_xyz:P", "no module named"),
    ("nope/missing.py:P", "no such file"),
    ("rollcheck.pyimpl.pattern:Pattern", "not a subclass"),
    ("made-up-name", "unknown"),
])
def test_bad_spec_exits_2(capsys, tmp_path, spec, message) -> None:
    rc, doc = _run(capsys, spec, "--out", str(tmp_path))
    err = _run.err.lower()  # type: ignore[attr-defined]
    assert rc == 2 and doc == {}
    assert message in err and "traceback" not in err


def test_bad_spec_message(capsys, tmp_path) -> None:
    rc = main(["check", "protocol", "nope/missing.py:P", "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert rc == 2 and "nope/missing.py:P" in err and "no such file" in err and len(err.strip().splitlines()) == 2


def test_user_code_exception_exits_2(capsys, tmp_path) -> None:
    rc = main(["check", "protocol", f"{HERE / 'unsafe_protocols.py'}:Crashes", "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert rc == 2 and "Crashes.must_force" in err and "KeyError" in err and "Traceback" not in err


@pytest.mark.parametrize("value, rc", [("", 0), ("x1", 2)])
def test_seed_from_environment(capsys, tmp_path, monkeypatch, value, rc) -> None:
    monkeypatch.setenv("ROLLCHECK_SEED", value)
    assert main(["check", "protocol", "hmnr", "--max-examples", "3", "--out", str(tmp_path)]) == rc


def test_text_output(capsys, tmp_path) -> None:
    assert main(["check", "protocol", f"{HERE / 'unsafe_protocols.py'}:LazyIndex", "--out", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert out.startswith("UNSAFE: no-useless-checkpoint: lazy-index leaves the useless checkpoint(s)")
    assert "smallest counterexample: 5 events" in out and "counterexample:" in out


def test_protocol_command_takes_a_class(tmp_path, capsys) -> None:
    b = PatternBuilder(2)
    b.deliver(0, b.send(1, 0))
    b.checkpoint(0)
    b.deliver(1, b.send(0, 1))
    path = tmp_path / "p.json"
    dump_pattern(b.build(), path)
    assert main(["protocol", f"{HERE / 'nras.py'}:NRAS", str(path), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["protocol"] == "nras" and doc["forced"] == ["m1"] and doc["forced_checkpoints"] == 1
    assert main(["protocol", f"{HERE / 'unsafe_protocols.py'}:Crashes", str(path)]) == 2
    err = capsys.readouterr().err
    assert "Crashes.must_force" in err and str(path) in err


def test_unwritable_out_exits_2(capsys, tmp_path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    rc = main(["check", "protocol", f"{HERE / 'unsafe_protocols.py'}:LazyIndex", "--out", str(blocker / "sub")])
    assert rc == 2 and "cannot write the counterexample" in capsys.readouterr().err


def test_budget_that_cuts_a_bound_is_inconclusive(capsys, tmp_path) -> None:
    """SAFE means complete: a requested bound the budget cut makes the verdict inconclusive (exit
    3), the line naming the bounds completed and the one cut (it used to say SAFE, exit 0)."""
    rc, doc = _run(capsys, "hmnr", "--bound", "2x6,3x9", "--budget", "2", "--max-examples", "5",
                   "--out", str(tmp_path))
    first, second = doc["exhaustive"]
    assert first["complete"] is True and second["complete"] is False
    assert 0 < second["schedules"] < 15077682
    assert rc == 3 and doc["verdict"] == "inconclusive" and doc["budget"] == 2
    line = doc["verdict_line"]
    assert line.startswith(f"INCONCLUSIVE: exhaustive 2x6 ({first['schedules']} schedules); 3x9 cut "
                           f"by the budget after {second['schedules']} schedules;"), line
    assert "--budget" in line and line.endswith("(random 5 schedules up to 6x60)")
    gap = next(c for c in doc["checks"] if c["name"] == "exhaustive-bounds")
    assert gap["status"] == "unchecked" and gap["completed"] == ["2x6"] and gap["cut"] == ["3x9"]


def test_the_default_bounds_cut_after_one_second_are_not_safe(capsys, tmp_path) -> None:
    """The case of the issue: ``--budget 1 --max-examples 0`` on the default bounds said SAFE."""
    rc = main(["check", "protocol", "hmnr", "--bound", "2x11,3x9,4x6", "--budget", "1",
               "--max-examples", "0", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    # (on a loaded machine the vetting of the protocol's code can use the whole second: then 2x11
    # is "not started" rather than "cut by the budget after N schedules")
    assert rc == 3 and out.startswith("INCONCLUSIVE: exhaustive 2x11"), out
    assert "4x6 not started" in out and "no bound completed" in out and "SAFE" not in out


def test_a_violation_found_despite_the_cut_is_unsafe(capsys, tmp_path) -> None:
    b = PatternBuilder(2)
    b.deliver(0, b.send(1, 0))
    b.checkpoint(0)
    b.deliver(1, b.send(0, 1))
    path = tmp_path / "paper.json"
    dump_pattern(b.build(), path)
    rc, doc = _run(capsys, f"{HERE / 'unsafe_protocols.py'}:LazyIndex", "--bound", "2x11",
                   "--budget", "0", "--max-examples", "0", "--schedule", str(path),
                   "--no-picture", "--out", str(tmp_path / "o"))
    assert doc["exhaustive"][0]["complete"] is False
    assert rc == 1 and doc["verdict"] == "unsafe" and doc["verdict_line"].startswith("UNSAFE: ")
    assert "2x11 not started" in doc["verdict_line"]


@pytest.mark.parametrize("cls, needles", [
    ("Unpicklable", ["Unpicklable.initial", "cannot be copied", "cannot pickle '_thread.lock'"]),
    ("ClassCounter", ["ClassCounter.must_force", "different results on the same schedule run twice",
                      "not deterministic", "schedule is saved in"]),
    ("Dice", ["Dice.on_send", "different results on the same schedule run twice"]),
])
@pytest.mark.parametrize("bound", ["2x6,3x5", ""], ids=["exhaustive", "random-only"])
def test_protocol_code_that_breaks_the_rules_exits_2(capsys, tmp_path, cls, needles, bound) -> None:
    """A state that cannot be copied and results that differ on the same schedule are the
    protocol's errors, exit 2 naming the method (they were SAFE, or an internal error, exit 4)."""
    rc = main(["check", "protocol", f"{HERE / 'misbehaving.py'}:{cls}", "--bound", bound,
               "--max-examples", "20", "--no-picture", "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert rc == 2, err
    for needle in needles:
        assert needle in err, (needle, err)
    assert "internal error" not in err and "Traceback" not in err


def test_a_symmetry_claim_false_only_at_five_processes_is_refuted(capsys, tmp_path) -> None:
    """The claim is sampled at every process count of the bounds (it was sampled at 2-4 only, the
    reduction was used at 5 and the flaw was missed: SAFE)."""
    rc, doc = _run(capsys, f"{HERE / 'misbehaving.py'}:FifthApart", "--bound", "5x5",
                   "--max-examples", "0", "--no-picture", "--out", str(tmp_path))
    assert rc == 1 and doc["verdict"] == "unsafe" and doc["counterexample_events"] == 5
    assert doc["symmetry"].startswith("claimed but refuted") and "[0, 1, 2, 3, 4]" in doc["symmetry"]


def test_given_schedule_is_run(capsys, tmp_path) -> None:
    b = PatternBuilder(2)
    b.deliver(0, b.send(1, 0))
    b.checkpoint(0)
    b.deliver(1, b.send(0, 1))
    path = tmp_path / "paper.json"
    dump_pattern(b.build(), path)
    # a protocol that is wrong only on that schedule's shape, with no exhaustive phase to find it
    rc, doc = _run(capsys, f"{HERE / 'unsafe_protocols.py'}:LazyIndex", "--bound", "",
                   "--max-examples", "0", "--schedule", str(path), "--out", str(tmp_path / "o"))
    assert rc == 1 and doc["schedule"] == str(path) and doc["counterexample_events"] == 5
    assert "given schedule" in doc["verdict_line"]


@pytest.mark.parametrize("argv, where", [(["--bound", "1x5"], "bound"), (["--bound", "3y9"], "bound"),
                                         (["--budget", "-1"], "budget"),
                                         (["--call-timeout", "0"], "call-timeout"),
                                         (["--master", "local[2]"], "--master"),
                                         (["--schedule", "nope.json"], "nope.json")])
def test_bad_flags_exit_2(capsys, tmp_path, argv, where) -> None:
    rc = main(["check", "protocol", "hmnr", *argv, "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert rc == 2 and where in err and "Traceback" not in err


@pytest.mark.slow
def test_random_phase_counterexample_has_no_idle_process(capsys, tmp_path) -> None:
    rc, doc = _run(capsys, f"{HERE / 'unsafe_protocols.py'}:LazyIndex", "--bound", "",
                   "--max-examples", "300", "--seed", "5", "--no-picture", "--out", str(tmp_path))
    assert rc == 1 and doc["random"]["schedules"] >= 1
    cex = load_pattern(doc["counterexample"])
    assert {e.process for e in cex.events} == set(range(cex.n)) and useless_checkpoints(cex)
