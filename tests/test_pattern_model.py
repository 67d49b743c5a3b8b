"""The pattern model, its JSON format, validation errors and the CLI's bad-input handling."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rollcheck.cli.main import main
from rollcheck.pyimpl.errors import InvalidInputError
from rollcheck.pyimpl.pattern import Event, Pattern, PatternBuilder
from rollcheck.pyimpl.patternio import (
    atomic_write_text,
    dump_pattern,
    load_pattern,
    pattern_from_dict,
    pattern_to_dict,
    validate_schema,
)

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "useless.json"


def doc(events, processes=("P0", "P1", "P2")):
    return {"format": "rollcheck.pattern/1", "processes": list(processes), "events": events}


def send(p, m, to):
    return {"process": p, "kind": "send", "message": m, "to": to}


def deliver(p, m):
    return {"process": p, "kind": "deliver", "message": m}


def test_intervals_and_in_transit():
    b = PatternBuilder(2)
    m0 = b.send(0, 1)
    b.checkpoint(0)
    m1 = b.send(0, 1)
    b.checkpoint(1, forced=True)
    b.deliver(1, m0)
    p = b.build()
    msgs = p.message_by_id
    assert (msgs[m0].send_interval, msgs[m0].deliver_interval) == (0, 1)
    assert msgs[m1].send_interval == 1 and msgs[m1].deliver_interval is None
    assert [m.id for m in p.in_transit] == [m1]
    assert p.is_forced(1, 1) and not p.is_forced(0, 1)
    assert p.volatile_index(0) == 2


@pytest.mark.parametrize(
    "events, where, words",
    [
        ([send("P0", "m", "P9")], "events[0].to", "unknown process"),
        ([{"process": "PX", "kind": "checkpoint"}], "events[0].process", "unknown process"),
        ([deliver("P1", "m"), send("P0", "m", "P1")], "events[0]", "before its send"),
        ([send("P0", "m", "P1"), deliver("P2", "m")], "events[1]", "addressed to"),
        ([send("P0", "m", "P0")], "events[0]", "self-send"),
        ([send("P0", "m", "P1"), send("P1", "m", "P2")], "events[1]", "duplicate message id"),
        ([send("P0", "m", "P1"), deliver("P1", "m"), deliver("P1", "m")], "events[2]", "duplicate delivery"),
        ([{"process": "P0", "kind": "explode"}], "events[0].kind", "unknown kind"),
        ([{"kind": "checkpoint"}], "events[0]", "missing field 'process'"),
        ([{"process": "P0", "kind": "send", "message": 3, "to": "P1"}], "events[0].message", "expected a string"),
        ([{"process": "P0", "kind": "checkpoint", "forced": "yes"}], "events[0].forced", "true or false"),
        (["not an object"], "events[0]", "expected an object"),
    ],
)
def test_invalid_events_named(events, where, words):
    with pytest.raises(InvalidInputError) as ei:
        pattern_from_dict(doc(events), "in.json")
    e = ei.value
    assert e.source == "in.json"
    assert e.location == where
    assert words in e.reason


@pytest.mark.parametrize(
    "document, where",
    [
        ({"format": "other", "processes": ["a"], "events": []}, "format"),
        ({"format": "rollcheck.pattern/1", "processes": [], "events": []}, "processes"),
        ({"format": "rollcheck.pattern/1", "processes": ["a", "a"], "events": []}, "processes[1]"),
        ({"format": "rollcheck.pattern/1", "processes": ["a"], "events": {}}, "events"),
        ([], None),
    ],
)
def test_invalid_documents(document, where):
    with pytest.raises(InvalidInputError) as ei:
        pattern_from_dict(document)
    assert ei.value.location == where


def test_roundtrip_and_atomic_dump(tmp_path):
    p = load_pattern(EXAMPLE)
    out = tmp_path / "sub" / "p.json"
    dump_pattern(p, out)
    assert load_pattern(out) == p
    assert [f.name for f in out.parent.iterdir()] == ["p.json"]  # no temporary left behind
    validate_schema(pattern_to_dict(p))


def test_atomic_write_leaves_old_file_on_failure(tmp_path, monkeypatch):
    target = tmp_path / "x.json"
    target.write_text("old")

    def boom(*a, **k):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError):
        atomic_write_text(target, "new")
    assert target.read_text() == "old"
    assert sorted(f.name for f in tmp_path.iterdir()) == ["x.json"]


def test_schema_rejects_what_loader_rejects_structurally():
    with pytest.raises(InvalidInputError) as ei:
        validate_schema(doc([{"process": "P0", "kind": "send", "message": "m"}]))
    assert ei.value.location == "events[0]"


def test_pattern_constructor_validates():
    with pytest.raises(InvalidInputError) as ei:
        Pattern(("a", "b"), (Event(0, "deliver", "m"),))
    assert ei.value.location == "events[0]"


# ----------------------------------------------------------------------------- CLI bad input
def run_cli(args, capsys):
    rc = main(args)
    out = capsys.readouterr()
    return rc, out.out, out.err


def write(tmp_path, name, text):
    f = tmp_path / name
    f.write_text(text)
    return str(f)


@pytest.mark.parametrize(
    "text, needle",
    [
        ("", "empty file"),
        ("{not json", "malformed JSON"),
        (json.dumps(doc([deliver("P1", "m")])), "events[0]"),
        (json.dumps(doc([send("P0", "m", "P1"), deliver("P1", "m"), deliver("P1", "m")])), "duplicate delivery"),
    ],
)
@pytest.mark.parametrize("command", ["validate", "useless", "render"])
def test_cli_bad_input_exit_2(tmp_path, capsys, text, needle, command):
    path = write(tmp_path, "bad.json", text)
    extra = ["-o", str(tmp_path / "out.png")] if command == "render" else []
    rc, out, err = run_cli([command, path, *extra], capsys)
    assert rc == 2
    assert path in err and needle in err
    assert "Traceback" not in err
    assert not (tmp_path / "out.png").exists()


def test_cli_missing_file_and_bad_flags(tmp_path, capsys):
    rc, _, err = run_cli(["validate", str(tmp_path / "nope.json")], capsys)
    assert rc == 2 and "cannot read" in err
    rc, _, err = run_cli(["zpath", str(EXAMPLE), "--from", "P0:9", "--to", "P1:1", "--json"], capsys)
    assert rc == 2 and "--from" in err
    rc, _, err = run_cli(["recovery-line", str(EXAMPLE), "--failed", "Q", "--json"], capsys)
    assert rc == 2 and "unknown process 'Q'" in err
    rc, _, err = run_cli(["render", str(EXAMPLE), "-o", str(tmp_path / "x.gif")], capsys)
    assert rc == 2 and ".png or .svg" in err
    with pytest.raises(SystemExit) as ei:
        main(["useless"])
    assert ei.value.code == 2


def test_cli_contract_outputs(tmp_path, capsys):
    rc, out, _ = run_cli(["validate", str(EXAMPLE)], capsys)
    assert rc == 0 and out.strip() == "valid"
    rc, out, _ = run_cli(["useless", str(EXAMPLE), "--json"], capsys)
    assert rc == 0
    assert json.loads(out) == {"useless": [{"process": "P0", "index": 2}, {"process": "P1", "index": 1},
                                           {"process": "P1", "index": 2}]}
    rc, out, _ = run_cli(["zpath", str(EXAMPLE), "--from", "P1:1", "--to", "P1:1", "--json"], capsys)
    got = json.loads(out)
    assert got["exists"] is True and got["messages"] == ["m4", "m1"]
    rc, out, _ = run_cli(["recovery-line", str(EXAMPLE), "--failed", "P1", "--json"], capsys)
    got = json.loads(out)
    assert got["line"] == {"P0": 1, "P1": 0, "P2": 1}
    assert got["in_transit"] == ["m3"] and got["rolled_back"] == ["P0", "P1", "P2"]
    for method in ("networkx", "cgraph"):
        rc, out2, _ = run_cli(["recovery-line", str(EXAMPLE), "--failed", "P1", "--method", method, "--json"], capsys)
        assert json.loads(out2) == got
    rc, out, _ = run_cli(["consistent", str(EXAMPLE), "P1:1", "--json"], capsys)
    got = json.loads(out)
    assert got["exists"] is False and got["witness"] == ["m4", "m1"]
    for ext in ("png", "svg"):
        target = tmp_path / f"d.{ext}"
        rc, _, _ = run_cli(["render", str(EXAMPLE), "-o", str(target), "--failed", "P1", "--zcycles"], capsys)
        assert rc == 0 and target.stat().st_size > 1000


def test_volatile_in_line(capsys):
    b = PatternBuilder(["A", "B", "C"])
    b.checkpoint(0)
    b.deliver(1, b.send(0, 1))
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        f = Path(d) / "p.json"
        dump_pattern(b.build(), f)
        rc, out, _ = run_cli(["recovery-line", str(f), "--failed", "A", "--json"], capsys)
        got = json.loads(out)
        assert got["line"] == {"A": 1, "B": 0, "C": "volatile"}
        assert got["rolled_back"] == ["A", "B"]
        rc, out, _ = run_cli(["recovery-line", str(f), "--failed", "A", "--no-virtual", "--json"], capsys)
        assert json.loads(out)["line"] == {"A": 1, "B": 0, "C": 0}


def test_help_is_fast_and_lazy():
    code = ("import sys, time; t=time.perf_counter(); from rollcheck.cli.main import build_parser; "
            "build_parser(); print(time.perf_counter()-t); "
            "print(sorted(m for m in ('numpy','scipy','matplotlib','z3','pyspark','networkx') if m in sys.modules))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    elapsed, loaded = r.stdout.splitlines()
    assert loaded == "[]", f"heavy modules imported at start-up: {loaded}"
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "rollcheck.cli.main", "--help"], capture_output=True, text=True)
    assert r.returncode == 0 and "recovery-line" in r.stdout
    assert time.perf_counter() - t0 < 5  # generous: the machine may be loaded; measured ~0.1 s


# ----------------------------------------------------------------------------- loader fuzzing
from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=8), kids, max_size=4),
    max_leaves=20,
)
_event = st.fixed_dictionaries(
    {},
    optional={
        "process": st.sampled_from(["P0", "P1", "P9", 3, None]),
        "kind": st.sampled_from(["send", "deliver", "checkpoint", "boom", 1]),
        "message": st.sampled_from(["m0", "m1", 7]),
        "to": st.sampled_from(["P0", "P1", "P9", None]),
        "forced": st.sampled_from([True, False, "yes"]),
    },
)


@given(doc=st.one_of(_json, st.fixed_dictionaries(
    {"format": st.just("rollcheck.pattern/1"), "processes": st.just(["P0", "P1"]),
     "events": st.lists(_event, max_size=8)})))
def test_loader_fuzz_only_invalid_input_errors(doc):
    """Arbitrary documents either load or raise InvalidInputError naming a location; nothing else."""
    try:
        p = pattern_from_dict(doc, "fuzz.json")
    except InvalidInputError as e:
        assert e.source == "fuzz.json" and e.reason
        return
    assert pattern_from_dict(pattern_to_dict(p)) == p


# ----------------------------------------------------------------------------- hardened loader
def test_loader_reports_first_offending_event_before_a_later_field_error():
    from rollcheck.pyimpl.patternio import loads_pattern

    text = json.dumps(doc([deliver("P1", "m"), {"process": "P0", "kind": "teleport"}]))
    with pytest.raises(InvalidInputError) as ei:
        loads_pattern(text, "f.json")
    assert ei.value.location == "events[0]" and ei.value.source == "f.json"
    text = json.dumps(doc([send("P0", "m", "P1"), {"process": "P0", "kind": "teleport"}]))
    with pytest.raises(InvalidInputError) as ei:
        loads_pattern(text, "f.json")
    assert ei.value.location == "events[1].kind"


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity", "1e999", "9" * 200])
def test_loader_rejects_non_json_numbers(literal):
    from rollcheck.pyimpl.patternio import loads_pattern

    text = json.dumps(doc([]))[:-1] + f', "x": {literal}}}'
    with pytest.raises(InvalidInputError) as ei:
        loads_pattern(text, "f.json")
    assert ei.value.location.startswith("line 1 column")


def test_check_output_path_and_modes(tmp_path):
    from rollcheck.pyimpl.patternio import check_output_path

    with pytest.raises(InvalidInputError, match="is a folder"):
        check_output_path(tmp_path, "-o")
    f = tmp_path / "f.txt"
    f.write_text("x")
    with pytest.raises(InvalidInputError, match="is a file, not a folder"):
        check_output_path(f / "sub" / "y.json", "-o")
    f.chmod(0o444)
    with pytest.raises(InvalidInputError, match="write-protected"):
        atomic_write_text(f, "new")
    assert f.read_text() == "x"
    f.chmod(0o604)
    atomic_write_text(f, "new")
    assert f.read_text() == "new" and (f.stat().st_mode & 0o777) == 0o604
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.txt"]
