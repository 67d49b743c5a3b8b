"""``rollcheck check trace`` on traces of an engine that is not Spark: a hand-made 3-process HMNR
run (examples/trace-hmnr-3p.jsonl), its broken variants, and seeded runs of the toy engine
(rollcheck.pyimpl.traces.synth) with several failures. Each broken trace must be non-conformant
with the right check and the right seq."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rollcheck.cli.main import main
from rollcheck.pyimpl.traces import check_trace_file
from rollcheck.pyimpl.traces.synth import synthetic_trace

EX = Path(__file__).resolve().parent.parent / "examples"
TRACE = EX / "trace-hmnr-3p.jsonl"
REF = EX / "trace-hmnr-3p.reference.json"


def events_of(path: Path) -> tuple[dict, list[dict]]:
    lines = path.read_text().splitlines()
    return json.loads(lines[0]), [json.loads(x) for x in lines[1:]]


def write(path: Path, header: dict, events: list[dict]) -> Path:
    out = [json.dumps(header)]
    for k, e in enumerate(events, 1):
        out.append(json.dumps({**e, "seq": k}))
    path.write_text("\n".join(out) + "\n")
    return path


def run_json(capsys, *argv: str) -> tuple[int, dict]:
    rc = main(["check", "trace", *argv, "--json", "--no-tlc"])
    out = capsys.readouterr().out
    return rc, json.loads(out)


def failed(doc: dict) -> dict[str, int | None]:
    return {c["name"]: c.get("offending_seq") for c in doc["checks"] if c["ok"] is False}


def test_correct_hmnr_run_is_conformant(capsys):
    rc, doc = run_json(capsys, str(TRACE), "--reference", str(REF))
    assert rc == 0 and doc["conformant"] is True and doc["first_offending_seq"] is None
    assert [c["name"] for c in doc["checks"]] == ["pattern-valid", "forced-checkpoints", "no-useless-checkpoints",
                                                 "recovery-line", "log-replay", "outputs-exactly-once",
                                                 "checkpoint-indices", "tlc-trace"]
    assert doc["checks"][-1]["status"] == "not-applicable" and doc["checks"][-1]["enabled_by"] == "--tlc"
    assert doc["truncated"] is False


def test_deleted_forced_checkpoint_is_flagged_at_its_delivery(capsys, tmp_path):
    h, evs = events_of(TRACE)
    k = next(i for i, e in enumerate(evs) if e.get("forced"))
    rc, doc = run_json(capsys, str(write(tmp_path / "t.jsonl", h, evs[:k] + evs[k + 1:])))
    assert rc == 1 and doc["first_offending_seq"] == k + 1  # the delivery takes the deleted seq
    assert failed(doc)["forced-checkpoints"] == k + 1
    assert "forces a checkpoint of sink" in next(c["detail"] for c in doc["checks"] if c["name"] == "forced-checkpoints")


def test_spurious_forced_checkpoint_is_flagged_at_itself(capsys, tmp_path):
    h, evs = events_of(TRACE)
    k = next(i for i, e in enumerate(evs) if e["kind"] == "deliver" and e["process"] == "src")
    n = 1 + sum(1 for e in evs[:k] if e["kind"] == "checkpoint" and e["process"] == "src")
    fixed = [dict(e) for e in evs]
    for e in fixed[k:]:
        if e["kind"] == "checkpoint" and e["process"] == "src":
            e["index"] += 1
    fixed.insert(k, {"kind": "checkpoint", "process": "src", "index": n, "forced": True})
    rc, doc = run_json(capsys, str(write(tmp_path / "t.jsonl", h, fixed)))
    assert rc == 1 and failed(doc)["forced-checkpoints"] == k + 1


def test_too_little_rollback_names_the_orphan(capsys):
    rc, doc = run_json(capsys, str(EX / "trace-hmnr-3p-orphan.jsonl"))
    assert rc == 1 and failed(doc) == {"recovery-line": 19}
    detail = next(c["detail"] for c in doc["checks"] if c["name"] == "recovery-line")
    assert "too little rollback" in detail and "'m4' is an orphan" in detail


def test_too_much_rollback_names_the_process(capsys, tmp_path):
    h, evs = events_of(TRACE)
    rec = next(e for e in evs if e["kind"] == "recovery")
    rec["line"] = {**rec["line"], "src": 0}
    rec["in_transit"] = ["m0", "m1", "m2"]  # the channel state of that line: an honest but wrong engine
    rc, doc = run_json(capsys, str(write(tmp_path / "t.jsonl", h, evs)))
    assert rc == 1 and failed(doc)["recovery-line"] == rec["seq"]
    detail = next(c["detail"] for c in doc["checks"] if c["name"] == "recovery-line")
    assert "too much rollback: src restored src:0" in detail
    # the engine then delivers m0, whose send its own line undid: an orphan in the effective execution
    assert failed(doc)["pattern-valid"] == rec["seq"] + 1


def test_checkpoint_index_off_the_numbering(capsys, tmp_path):
    h, evs = events_of(TRACE)
    k = max(i for i, e in enumerate(evs) if e["kind"] == "checkpoint")
    evs[k]["index"] += 1
    rc, doc = run_json(capsys, str(write(tmp_path / "t.jsonl", h, evs)))
    assert rc == 1 and failed(doc) == {"checkpoint-indices": k + 1}


def test_wrong_in_transit_set_is_flagged(capsys, tmp_path):
    h, evs = events_of(TRACE)
    rec = next(e for e in evs if e["kind"] == "recovery")
    rec["in_transit"] = ["m0"]
    rc, doc = run_json(capsys, str(write(tmp_path / "t.jsonl", h, evs)))
    assert rc == 1 and "recovery-line" in failed(doc)


def test_message_not_replayed(capsys):
    rc, doc = run_json(capsys, str(EX / "trace-hmnr-3p-not-replayed.jsonl"))
    assert rc == 1 and failed(doc) == {"log-replay": 26}  # known at the end
    assert "['m1']" in next(c["detail"] for c in doc["checks"] if c["name"] == "log-replay")


def test_message_replayed_twice(capsys, tmp_path):
    h, evs = events_of(TRACE)
    k = next(i for i, e in enumerate(evs) if e.get("replayed"))
    rc, doc = run_json(capsys, str(write(tmp_path / "t.jsonl", h, evs[:k + 1] + [evs[k]] + evs[k + 1:])))
    assert rc == 1 and failed(doc) == {"log-replay": k + 2}
    assert "replayed twice" in next(c["detail"] for c in doc["checks"] if c["name"] == "log-replay")


def test_replayed_flag_missing(capsys, tmp_path):
    h, evs = events_of(TRACE)
    k = next(i for i, e in enumerate(evs) if e.get("replayed"))
    del evs[k]["replayed"]
    rc, doc = run_json(capsys, str(write(tmp_path / "t.jsonl", h, evs)))
    assert rc == 1 and failed(doc) == {"log-replay": k + 1}


def test_duplicated_output(capsys):
    rc, doc = run_json(capsys, str(EX / "trace-hmnr-3p-duplicate-output.jsonl"), "--reference", str(REF))
    assert rc == 1 and failed(doc) == {"outputs-exactly-once": 23}
    assert "duplicate output sink" in next(c["detail"] for c in doc["checks"] if c["name"] == "outputs-exactly-once")


def test_missing_output_and_outputs_of_undone_work_removed(capsys, tmp_path):
    ref = json.loads(REF.read_text())
    p = tmp_path / "ref.json"
    p.write_text(json.dumps(ref + [{"process": "op", "key": "never", "value": 0}]))
    rc, doc = run_json(capsys, str(TRACE), "--reference", str(p))
    assert rc == 1 and failed(doc) == {"outputs-exactly-once": 27}
    # The trace recorded no output in rolled-back work; one emitted by op after its restored
    # checkpoint and before the failure is withdrawn by the recovery (not a duplicate).
    h, evs = events_of(TRACE)
    k = next(i for i, e in enumerate(evs) if e["kind"] == "failure")
    evs.insert(k, {"kind": "output", "process": "op", "key": "op-1-1", "value": 86})
    rc, doc = run_json(capsys, str(write(tmp_path / "t.jsonl", h, evs)), "--reference", str(REF))
    assert rc == 0, doc


def test_only_format_checked_is_inconclusive(capsys, tmp_path):
    h, evs = events_of(TRACE)
    h.pop("protocol")
    evs = [e for e in evs if e["seq"] < 18] + [{"kind": "end"}]
    rc, doc = run_json(capsys, str(write(tmp_path / "t.jsonl", h, evs)))
    assert rc == 3 and doc["conformant"] is None


def test_user_protocol_spec_and_header_protocol(capsys, tmp_path):
    rc, doc = run_json(capsys, str(TRACE), "--protocol", "uc")
    # UC never forces: the recorded forced checkpoint is one UC would not take.
    assert rc == 1 and failed(doc) == {"forced-checkpoints": 15}
    rc, doc = run_json(capsys, str(TRACE), "--protocol", "rollcheck.pyimpl.protocols.hmnr:HMNR")
    assert rc == 0


@pytest.mark.parametrize("seed", range(12))
def test_generated_runs_with_several_failures_conform_and_mutants_are_caught(tmp_path, seed):
    evs = list(synthetic_trace(["a", "b", "c", "d"], 50, seed=seed, failures=[15, 30, 42]))
    head, body, ref = evs[0], evs[1:], evs[-1].pop("reference")
    f = write(tmp_path / "g.jsonl", head, body)
    rep, _ = check_trace_file(f, reference=ref)
    assert rep.conformant is True, [c.to_json() for c in rep.checks if not c.ok]
    assert len([c for c in body if c["kind"] == "recovery"]) == 3
    forced = [k for k, e in enumerate(body) if e.get("forced")]
    if forced:  # delete the last forced checkpoint: flagged at the delivery that takes its seq
        k = forced[-1]
        bad = [dict(e) for e in body[:k] + body[k + 1:]]
        for e in bad[k:]:
            if e["kind"] == "checkpoint" and e["process"] == body[k]["process"]:
                e["index"] -= 1
        for e in bad[k:]:
            if e["kind"] == "recovery":
                break
        else:
            rep, _ = check_trace_file(write(tmp_path / "m.jsonl", head, bad), reference=ref)
            assert rep.first_offending_seq == k + 1
            assert rep.check("forced-checkpoints").offending_seq == k + 1
    outs = [k for k, e in enumerate(body) if e["kind"] == "output"]
    k = outs[-1]  # duplicate the last output: flagged at the copy
    rep, _ = check_trace_file(write(tmp_path / "o.jsonl", head, body[:k + 1] + [body[k]] + body[k + 1:]),
                              reference=ref)
    assert rep.conformant is False
    assert rep.check("outputs-exactly-once").ok is False


def test_to_pattern_is_accepted_by_useless_and_recovery_line(capsys, tmp_path):
    out = tmp_path / "p.json"
    assert main(["trace", "to-pattern", str(TRACE), "-o", str(out)]) == 0
    capsys.readouterr()
    assert main(["useless", str(out), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"useless": []}
    assert main(["recovery-line", str(out), "--failed", "op", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    # the same line the engine restored (examples/trace-hmnr-3p.jsonl, seq 19)
    assert doc["line"] == {"src": "volatile", "op": 1, "sink": 1}
    assert sorted(doc["in_transit"]) == ["m0", "m1"]


@pytest.mark.tlc
def test_tlc_accepts_the_example_and_rejects_the_missing_forced_checkpoint(capsys):
    assert main(["check", "trace", str(TRACE), "--tlc", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    tlc = next(c for c in doc["checks"] if c["name"] == "tlc-trace")
    assert tlc["ok"] is True
    assert main(["check", "trace", str(EX / "trace-hmnr-3p-no-forced.jsonl"), "--tlc", "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    tlc = next(c for c in doc["checks"] if c["name"] == "tlc-trace")
    assert tlc["ok"] is False and tlc["offending_seq"] == 15


def test_csv_adapter_output_is_checked(capsys, tmp_path):
    import subprocess
    import sys

    adapter = EX / "adapters" / "csv_to_trace.py"
    csv_text = (EX / "adapters" / "sample-log.csv").read_text()
    out = tmp_path / "run.jsonl"
    subprocess.run([sys.executable, "-P", str(adapter), str(EX / "adapters" / "sample-log.csv"),
                    "--protocol", "hmnr", "-o", str(out)], check=True, timeout=60, capture_output=True)
    rc, doc = run_json(capsys, str(out))
    assert rc == 0 and doc["conformant"] is True
    bad_csv = tmp_path / "bad.csv"
    bad_csv.write_text(csv_text.replace("0.50,sink,checkpoint,,,1\n", ""))  # the forced checkpoint lost
    subprocess.run([sys.executable, "-P", str(adapter), str(bad_csv), "--protocol", "hmnr", "-o", str(out)],
                   check=True, timeout=60, capture_output=True)
    rc, doc = run_json(capsys, str(out))
    assert rc == 1 and failed(doc) == {"forced-checkpoints": 10}  # sink receives m4 at seq 10


def test_recording_stopped_between_failure_and_recovery(capsys, tmp_path):
    """The recovery the user asked about was never recorded: inconclusive (exit 3), never a pass."""
    h, evs = events_of(TRACE)
    stop = next(e["seq"] for e in evs if e["kind"] == "failure")
    rc, doc = run_json(capsys, str(write(tmp_path / "t.jsonl", h, [e for e in evs if e["seq"] <= stop])))
    assert rc == 3 and doc["conformant"] is None and doc["verdict"] == "inconclusive"
    assert doc["truncated"] is True and doc["truncated_after_seq"] == stop
    rl = next(c for c in doc["checks"] if c["name"] == "recovery-line")
    assert rl["ok"] is None and "no recovery" in rl["detail"]
    # with an end event, the missing recovery is a violation at the failure
    rc, doc = run_json(capsys, str(write(tmp_path / "e.jsonl", h, [e for e in evs if e["seq"] <= stop]
                                         + [{"kind": "end"}])))
    assert rc == 1 and failed(doc) == {"recovery-line": stop}


def test_spark_nhop_trace_is_a_core_trace_and_a_deleted_delivery_is_caught(capsys, tmp_path):
    """The message-passing recorder writes the core vocabulary: check trace accepts its recording,
    and spark replay (the same checker plus Spark's own checks) catches a deleted delivery."""
    from rollcheck.spark_replay.jobs.nhop import NhopConfig, record_nhop
    from rollcheck.spark_replay.replay.conformance import replay_file

    out = tmp_path / "nh.jsonl"
    record_nhop(NhopConfig(protocol="hmnr", processes=3, rounds=5, seed=4, fail_process=1, fail_round=3),
                out, engine="local")
    rc, doc = run_json(capsys, str(out))
    assert rc == 0 and doc["conformant"] is True
    assert {"recovery-line", "log-replay", "forced-checkpoints"} <= {c["name"] for c in doc["checks"]}
    h, evs = events_of(out)
    k = max(i for i, e in enumerate(evs) if e["kind"] == "deliver" and not e.get("replayed")
            and not evs[i - 1].get("forced"))  # the last delivery: no decision depends on it
    bad = write(tmp_path / "bad.jsonl", h, evs[:k] + evs[k + 1:])
    r = replay_file(bad)
    assert r.conformant is False
    assert [c.name for c in r.checks if c.ok is False] == ["outputs-failure-free"]
    assert r.first_offending_seq == len(evs) - 1  # the end record


def test_no_useless_checkpoints_catches_a_protocol_that_claims_too_much(capsys, tmp_path):
    """A user's protocol that never forces but claims zcycle_free: its forced decisions match the
    trace, and the Z-cycle it lets through is named where it closes."""
    proto = tmp_path / "myproto.py"
    proto.write_text("from rollcheck.pyimpl.protocols.uc import UC\n\n"
                     "class Optimist(UC):\n    name = 'optimist'\n    zcycle_free = True\n")
    h = {"format": "rollcheck.trace/1", "source": "toy", "processes": ["a", "b"]}
    evs = [{"kind": "send", "process": "b", "message": "m0", "to": "a"},
           {"kind": "deliver", "process": "a", "message": "m0"},
           {"kind": "checkpoint", "process": "a", "index": 1, "forced": False},
           {"kind": "send", "process": "a", "message": "m1", "to": "b"},
           {"kind": "deliver", "process": "b", "message": "m1"},
           {"kind": "end"}]
    f = write(tmp_path / "z.jsonl", h, evs)
    rc, doc = run_json(capsys, str(f), "--protocol", f"{proto}:Optimist")
    assert rc == 1 and failed(doc) == {"no-useless-checkpoints": 5}
    assert "a:1" in next(c["detail"] for c in doc["checks"] if c["name"] == "no-useless-checkpoints")
    rc, doc = run_json(capsys, str(f), "--protocol", "hmnr")  # HMNR would have forced before m1
    assert rc == 1 and failed(doc) == {"forced-checkpoints": 5, "no-useless-checkpoints": 5}


def test_spark_replay_runs_the_same_checker_on_any_engine_trace():
    from rollcheck.spark_replay.replay.conformance import replay_file

    ok = replay_file(TRACE)
    assert ok.conformant and {c.name for c in ok.checks} >= {"recovery-line", "log-replay", "forced-checkpoints"}
    bad = replay_file(EX / "trace-hmnr-3p-orphan.jsonl")
    assert not bad.conformant and bad.first_offending_seq == 19
    assert [c.name for c in bad.checks if c.ok is False] == ["recovery-line"]
