"""``rollcheck protocol NAME PATTERN --json`` as in cli-and-formats.md."""

from __future__ import annotations

import json

from rollcheck.cli.main import main
from rollcheck.pyimpl.pattern import PatternBuilder
from rollcheck.pyimpl.patternio import dump_pattern, load_pattern


def _pattern(tmp_path):
    b = PatternBuilder(2)
    b.deliver(0, b.send(1, 0))
    b.checkpoint(0)
    b.deliver(1, b.send(0, 1))
    path = tmp_path / "p.json"
    dump_pattern(b.build(), path)
    return path


def test_protocol_json(tmp_path, capsys):
    path = _pattern(tmp_path)
    out = tmp_path / "out.json"
    assert main(["protocol", "hmnr", str(path), "--json", "-o", str(out)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["protocol"] == "hmnr" and doc["forced"] == ["m1"]
    assert doc["basic_checkpoints"] == 1 and doc["forced_checkpoints"] == 1
    evs = doc["pattern"]["events"]
    k = next(i for i, e in enumerate(evs) if e.get("forced"))
    assert evs[k] == {"process": "P1", "kind": "checkpoint", "forced": True}
    assert evs[k + 1] == {"process": "P1", "kind": "deliver", "message": "m1"}
    assert load_pattern(out).is_forced(1, 1)


def test_protocol_uc_and_text_output(tmp_path, capsys):
    path = _pattern(tmp_path)
    assert main(["protocol", "uc", str(path), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["forced"] == [] and doc["forced_checkpoints"] == 0
    assert main(["protocol", "bcs", str(path)]) == 0
    assert "1 forced" in capsys.readouterr().out


def test_protocol_bad_input_exit_2(tmp_path, capsys):
    path = _pattern(tmp_path)
    assert main(["protocol", "nope", str(path), "--json"]) == 2
    assert "unknown protocol 'nope'" in capsys.readouterr().err
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"format": "rollcheck.pattern/1", "processes": ["P0", "P1"],
                               "events": [{"process": "P1", "kind": "deliver", "message": "x"}]}))
    out = tmp_path / "never.json"
    assert main(["protocol", "hmnr", str(bad), "--json", "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert "events[0]" in err and "bad.json" in err
    assert not out.exists()
    assert main(["protocol", "hmnr", str(tmp_path / "missing.json")]) == 2
