"""Trace validation: TLC accepts runs of the Python reference and rejects tampered ones at the
right event; the CLI commands tlc, tlc-trace, tlc-manifest and their exit codes."""

from __future__ import annotations

import json

import pytest

from rollcheck.cli.main import main
from rollcheck.pyimpl.errors import InvalidInputError
from rollcheck.pyimpl.generate import random_pattern
from rollcheck.pyimpl.pattern import CHECKPOINT, DELIVER, Pattern, PatternBuilder
from rollcheck.pyimpl.patternio import dump_pattern
from rollcheck.tla.trace import load_trace_events, trace_module_text, validate_trace

SEED = 6


def protocol_run(proto: str, n: int = 3, steps: int = 80, seed: int = SEED) -> Pattern:
    from rollcheck.pyimpl.protocols import run_protocol

    for s in range(seed, seed + 50):
        p = run_protocol(proto, random_pattern(n, steps, s)).pattern
        if any(e.kind == CHECKPOINT and e.forced for e in p.events):
            return p
    raise AssertionError("no run with a forced checkpoint")


def drop(p: Pattern, k: int) -> Pattern:
    evs = list(p.events)
    return Pattern(p.processes, tuple(evs[:k] + evs[k + 1 :]))


def test_trace_module_text_numbers_messages_and_processes():
    b = PatternBuilder(["a", "b"])
    m = b.send(1, 0, "x")
    b.checkpoint(0, forced=True)
    b.deliver(0, m)
    text = trace_module_text(b.build())
    assert '[k |-> "send", p |-> 1, m |-> 1, to |-> 0, f |-> FALSE]' in text
    assert '[k |-> "checkpoint", p |-> 0, m |-> 0, to |-> 0, f |-> TRUE]' in text
    assert "NumProcs == 2" in text


def test_unknown_protocol_is_bad_input():
    with pytest.raises(InvalidInputError, match="unknown protocol"):
        validate_trace("nope", random_pattern(2, 5, 1))


@pytest.mark.tlc
@pytest.mark.parametrize("proto", ["hmnr", "bcs"])
def test_accepts_reference_run_and_rejects_tampered(proto):
    p = protocol_run(proto)
    v = validate_trace(proto, p)
    assert v.status == "accepted" and v.accepted and v.first_rejected_event is None, v.reason
    forced = [k for k, e in enumerate(p.events) if e.kind == CHECKPOINT and e.forced]
    k = forced[-1]
    w = validate_trace(proto, drop(p, k))
    assert w.status == "rejected" and not w.accepted
    # After removing the forced checkpoint, the delivery it protected sits at index k.
    assert w.first_rejected_event == k
    assert drop(p, k).events[k].kind == DELIVER


@pytest.mark.tlc
def test_rejects_spurious_forced_checkpoint():
    """A forced checkpoint HMNR would not take (inserted before an unforced delivery)."""
    p = protocol_run("hmnr")
    forced_next = {k + 1 for k, e in enumerate(p.events) if e.kind == CHECKPOINT and e.forced}
    k = next(k for k, e in enumerate(p.events) if e.kind == DELIVER and k not in forced_next)
    evs = list(p.events)
    evs.insert(k, p.events[k]._replace(kind=CHECKPOINT, message=None, forced=True))
    w = validate_trace("hmnr", Pattern(p.processes, tuple(evs)))
    assert w.status == "rejected" and w.first_rejected_event == k + 1


@pytest.mark.tlc
def test_uc_run_is_not_an_hmnr_run_and_zcheck_finds_useless():
    # P1 -> P0: m0; P0 checkpoints; P0 -> P1: m1 delivered: C2 forces in HMNR, UC does not.
    b = PatternBuilder(2)
    m0 = b.send(1, 0)
    b.deliver(0, m0)
    b.checkpoint(0)
    m1 = b.send(0, 1)
    b.deliver(1, m1)
    uc = b.build()
    assert validate_trace("uc", uc).accepted
    w = validate_trace("hmnr", uc)
    assert w.status == "rejected" and w.first_rejected_event == 4
    z = validate_trace("uc", uc, zcheck=True)
    assert z.status == "rejected" and z.useless_found and z.first_rejected_event == 4


@pytest.mark.tlc
def test_zcheck_accepts_hmnr_run():
    p = protocol_run("hmnr", steps=40)
    v = validate_trace("hmnr", p, zcheck=True)
    assert v.accepted, v.reason


def test_load_trace_file_jsonl_with_truncated_line(tmp_path):
    lines = [
        {"format": "rollcheck.trace/1", "source": "test", "seed": 1, "config": {"processes": ["P0", "P1"]}},
        {"seq": 1, "kind": "send", "process": "P0", "message": "m0", "to": "P1"},
        {"seq": 2, "kind": "batch_planned", "batch": 0},
        {"seq": 3, "kind": "checkpoint", "process": "P1", "forced": True},
        {"seq": 4, "kind": "deliver", "process": "P1", "message": "m0"},
    ]
    f = tmp_path / "t.jsonl"
    f.write_text("\n".join(json.dumps(x) for x in lines) + '\n{"seq": 5, "kind": "se')
    p = load_trace_events(f)
    assert p.processes == ("P0", "P1")
    assert [e.kind for e in p.events] == ["send", "checkpoint", "deliver"]
    assert p.events[1].forced


@pytest.mark.parametrize("text", ["", "not json\n", '{"format": "other/1"}\n',
                                  '{"format": "rollcheck.trace/1"}\n{"seq": 1, "kind": "deliver", "process": "P0", "message": "x"}\n'])
def test_load_trace_bad_input(tmp_path, text):
    f = tmp_path / "bad.jsonl"
    f.write_text(text)
    with pytest.raises(InvalidInputError):
        load_trace_events(f)


# ------------------------------------------------------------------------------- CLI
def run_cli(argv, capsys):
    rc = main(argv)
    out = capsys.readouterr()
    return rc, out.out, out.err


@pytest.mark.tlc
def test_cli_tlc_trace_exit_codes(tmp_path, capsys):
    p = protocol_run("hmnr")
    good = tmp_path / "good.json"
    dump_pattern(p, good)
    rc, out, _ = run_cli(["tlc-trace", "hmnr", str(good), "--json"], capsys)
    doc = json.loads(out)
    assert rc == 0 and doc["accepted"] is True and doc["first_rejected_event"] is None
    k = next(k for k, e in enumerate(p.events) if e.kind == CHECKPOINT and e.forced)
    bad = tmp_path / "bad.json"
    dump_pattern(drop(p, k), bad)
    rc, out, _ = run_cli(["tlc-trace", "hmnr", str(bad), "--json"], capsys)
    doc = json.loads(out)
    assert rc == 1 and doc["accepted"] is False and doc["first_rejected_event"] == k


def test_cli_tlc_trace_bad_input(tmp_path, capsys):
    rc, out, err = run_cli(["tlc-trace", "hmnr", str(tmp_path / "missing.json"), "--json"], capsys)
    assert rc == 2 and out == "" and "missing.json" in err and "Traceback" not in err
    f = tmp_path / "p.json"
    dump_pattern(random_pattern(2, 6, 1), f)
    rc, _, err = run_cli(["tlc-trace", "nope", str(f)], capsys)
    assert rc == 2 and "unknown protocol" in err


@pytest.mark.tlc
def test_cli_tlc_statuses(tmp_path, capsys):
    (tmp_path / "M.tla").write_text(
        "---- MODULE M ----\nEXTENDS Naturals\nVARIABLE x\nInit == x = 0\nNext == x < 2 /\\ x' = x + 1\n"
        "Inv == x < 2\n====\n")
    (tmp_path / "M.cfg").write_text("INIT Init\nNEXT Next\nINVARIANT Inv\n")
    (tmp_path / "D.cfg").write_text("INIT Init\nNEXT Next\n")
    rc, out, _ = run_cli(["tlc", str(tmp_path / "M.tla"), "--json"], capsys)
    doc = json.loads(out)
    assert rc == 1 and doc["status"] == "violation" and [s["state"]["x"] for s in doc["trace"]] == [0, 1, 2]
    rc, out, _ = run_cli(["tlc", str(tmp_path / "M.tla"), "--config", str(tmp_path / "D.cfg"), "--json"], capsys)
    assert rc == 1 and json.loads(out)["status"] == "deadlock"
    rc, out, _ = run_cli(["tlc", str(tmp_path / "M.tla"), "--config", str(tmp_path / "D.cfg"),
                          "--no-deadlock", "--json"], capsys)
    assert rc == 0 and json.loads(out)["distinct_states"] == 3
    (tmp_path / "M.tla").write_text((tmp_path / "M.tla").read_text().replace("x + 1", "x +"))
    rc, out, err = run_cli(["tlc", str(tmp_path / "M.tla"), "--json"], capsys)
    assert rc == 2 and out == "" and f"{tmp_path / 'M.tla'}:" in err


def test_cli_tlc_missing_tool_is_inconclusive(tmp_path, capsys, monkeypatch):
    (tmp_path / "M.tla").write_text("---- MODULE M ----\nVARIABLE x\nInit == x = 0\nNext == x' = x\n====\n")
    (tmp_path / "M.cfg").write_text("INIT Init\nNEXT Next\n")
    monkeypatch.setenv("ROLLCHECK_TLA_JAR", str(tmp_path / "none.jar"))
    rc, out, _ = run_cli(["tlc", str(tmp_path / "M.tla"), "--json"], capsys)
    assert rc == 3 and json.loads(out)["status"] == "inconclusive"


@pytest.mark.tlc
def test_recorded_nhop_trace_is_accepted_and_tampered_one_rejected(tmp_path):
    """A trace recorded by the message-passing job (its in-process engine runs the same rounds as
    the Spark engine) is accepted by the TLA+ model of its protocol."""
    from rollcheck.spark_replay.jobs.nhop import NhopConfig, record_nhop

    out = tmp_path / "hmnr.jsonl"
    record_nhop(NhopConfig(protocol="hmnr", processes=3, rounds=6, seed=3, topology="cyclic"), out, engine="local")
    p = load_trace_events(out)
    assert p.processes == ("P0", "P1", "P2") and len(p.events) > 20
    assert validate_trace("hmnr", p).accepted
    lines = out.read_text().splitlines()
    k = next(i for i, ln in enumerate(lines) if '"kind":"checkpoint"' in ln and '"forced":true' in ln)
    evs = [json.loads(x) for x in lines[1:k] + lines[k + 1:]]
    for s, e in enumerate(evs, 1):  # a trace has no seq gaps: renumber after the deletion
        e["seq"] = s
    (tmp_path / "t.jsonl").write_text("\n".join([lines[0], *map(json.dumps, evs)]) + "\n")
    w = validate_trace("hmnr", load_trace_events(tmp_path / "t.jsonl"))
    assert w.status == "rejected"
    # the trace's own numbering: the delivery that took the deleted checkpoint's seq (line k + 1)
    assert w.first_rejected_seq == k and w.first_rejected_event == k - 1
    assert evs[k - 1]["kind"] == DELIVER and f"seq {k}" in w.reason


@pytest.mark.tlc
def test_core_trace_segments_after_a_failure_are_validated(tmp_path):
    """Events after a failure are not ignored: every execution between failures is validated, and a
    rejection names the seq of the trace."""
    from rollcheck.pyimpl.traces.synth import synthetic_trace

    for seed in range(40):
        evs = list(synthetic_trace(3, 40, seed=seed, failures=[12]))
        evs[-1].pop("reference")
        body = evs[1:]
        rec = next(e["seq"] for e in body if e["kind"] == "recovery")
        late = [k for k, e in enumerate(body) if e.get("forced") and e["seq"] > rec]
        if late:
            break
    f = tmp_path / "g.jsonl"
    f.write_text("\n".join(json.dumps(e) for e in evs) + "\n")
    p = load_trace_events(f)
    assert len(p.segments) == 2
    v = validate_trace("hmnr", p)
    assert v.accepted and "2 execution(s)" in v.reason, v.reason
    k = late[0]
    bad = body[:k] + body[k + 1:]
    for s, e in enumerate(bad, 1):
        e["seq"] = s
    f.write_text("\n".join(json.dumps(e) for e in [evs[0], *bad]) + "\n")
    w = validate_trace("hmnr", load_trace_events(f))
    assert w.status == "rejected" and w.first_rejected_seq == k + 1, w.reason
    assert w.to_json()["first_rejected_seq"] == k + 1 and w.first_rejected_line == k + 2
