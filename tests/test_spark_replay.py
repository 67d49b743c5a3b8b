"""Trace format, LZ4/UnsafeRow decoding, replay conformance and tampering - without Spark.

Streaming traces come from real PySpark runs recorded here (``tests/data/spark``); message-passing
traces are recorded by the identical rounds executed in-process (``engine="local"``). The Spark
runs themselves are in ``test_spark.py``.
"""

from __future__ import annotations

import json
import os
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rollcheck.pyimpl.errors import InvalidInputError
from rollcheck.spark_replay.checkpoint.lz4block import (
    STREAM_SEED,
    lz4_block_decompress,
    lz4_stream_decompress,
    xxh32,
)
from rollcheck.spark_replay.checkpoint.reader import Field, decode_unsafe_row, parse_state_records
from rollcheck.spark_replay.checkpoint.watcher import base_kind
from rollcheck.spark_replay.jobs import nhop as nhop_mod
from rollcheck.spark_replay.jobs.nhop import NhopConfig, record_nhop, simulate
from rollcheck.spark_replay.jobs.sweep import properties_work, protocols_work, random_pattern
from rollcheck.spark_replay.replay.conformance import replay_file, replay_trace
from rollcheck.spark_replay.tamper import (
    delete_forced_checkpoint,
    drop_commit,
    move_resume,
    to_lines,
)
from rollcheck.spark_replay.trace import TraceWriter, parse_trace_text, read_trace

DATA = Path(__file__).parent / "data" / "spark"
ROOT = Path(__file__).resolve().parent.parent
RC = [sys.executable, "-m", "rollcheck.cli.main"]


def _write(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _edit(trace_path: Path, out: Path, kind: str, change) -> Path:
    """Apply ``change`` to the first event of ``kind`` (a deliberately broken recording)."""
    t = read_trace(trace_path)
    events = [dict(e) for e in t.events]
    for e in events:
        if base_kind(e["kind"]) == kind:
            change(e)
            break
    return _write(out, to_lines(t.header, events))


# ----------------------------------------------------------------------------- trace format
def test_writer_continues_a_trace_and_counts_attempts(tmp_path):
    p = tmp_path / "t.jsonl"
    with TraceWriter(p, {"source": "x", "seed": 1, "config": {}}) as w:
        w.emit("a")
        w.emit("b")
    with open(p, "ab") as f:  # a killed writer's incomplete last line
        f.write(b'{"seq":3,"kind":"c"')
    t = read_trace(p)
    assert t.truncated and t.truncated_after_seq == 2 and len(t.events) == 2
    with TraceWriter(p) as w:  # a restarted driver continues the file
        assert w.attempt == 2 and w.seq == 2
        assert w.emit("c") == 3
    t = read_trace(p)
    assert not t.truncated
    assert [(e["seq"], e["attempt"]) for e in t.events] == [(1, 1), (2, 1), (3, 2)]
    assert len({e["run"] for e in t.events}) == 1


def test_observations_after_the_end_are_not_written_but_named(tmp_path, capsys):
    # Spark's listener bus can deliver a batch's progress after the recorder wrote the end event
    p = tmp_path / "t.jsonl"
    with TraceWriter(p, {"source": "x", "seed": 1, "config": {}}) as w:
        w.emit("a")
        assert w.emit("end") == 2
        assert w.emit("spark.progress", batch=3) == 0
        assert w.emit("spark.progress", batch=4) == 0
    assert [e["kind"] for e in read_trace(p).events] == ["a", "end"]
    err = capsys.readouterr().err
    assert "2 observation(s) arrived after the trace's end event" in err and "spark.progress" in err


def test_reader_accepts_every_prefix(tmp_path):
    data = (DATA / "wordcount-sink.jsonl").read_bytes()
    first_nl = data.index(b"\n")
    complete = 0
    for cut in range(first_nl + 1, len(data) + 1, 37):
        t = parse_trace_text(data[:cut])
        assert [e["seq"] for e in t.events] == list(range(1, len(t.events) + 1))
        assert t.truncated == (not data[:cut].endswith(b"\n"))
        assert len(t.events) >= complete
        complete = len(t.events)


@pytest.mark.parametrize("bad, line", [
    (b'{"seq":1,"kind":"a"}\nnot json\n', 3),
    (b'{"seq":1,"kind":"a"}\n{"seq":5,"kind":"b"}\n', 3),
    (b'{"seq":1,"kind":"a"}\n[1,2]\n', 3),
    (b'{"seq":1}\n', 2),
])
def test_malformed_line_names_its_number(bad, line):
    head = b'{"format":"rollcheck.trace/1","source":"spark-nhop"}\n'
    with pytest.raises(InvalidInputError) as e:
        parse_trace_text(head + bad, source="t.jsonl")
    assert f"line {line}" in str(e.value)


def test_malformed_trace_exits_2_with_line_number(tmp_path):
    lines = (DATA / "wordcount-sink.jsonl").read_text().splitlines()
    lines[5] = lines[5][:-3] + "@@"
    p = _write(tmp_path / "bad.jsonl", lines)
    r = subprocess.run([*RC, "spark", "replay", str(p), "--json"], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 2, r.stderr
    assert "line 6" in r.stderr and r.stdout == ""


# ----------------------------------------------------------------------------- decoders
def test_xxh32_known_values():
    assert xxh32(b"") == 0x02CC5D05
    assert xxh32(b"abc") == 0x32D153FF
    assert xxh32(b"Nobody inspects the spammish repetition") == 0xE2293B2F


def test_lz4_block_overlapping_match_and_long_lengths():
    lit = bytes(range(20))  # 20 literals: 15 + extra byte 5
    # then a match of 15 + 255 + 10 + 4 at offset 1, then the 12 final literals the format requires
    block = bytes([0xF0 | 0x0F, 5]) + lit + bytes([1, 0]) + bytes([255, 10]) + bytes([0xC0]) + b"z" * 12
    out = lz4_block_decompress(block, 20 + 15 + 4 + 255 + 10 + 12)
    assert out[:20] == lit and set(out[20:-12]) == {19} and out[-12:] == b"z" * 12


def test_lz4_stream_rejects_corruption():
    payload = b"rollcheck " * 5
    head = b"LZ4Block" + bytes([0x10]) + struct.pack("<iii", len(payload), len(payload),
                                                    xxh32(payload, STREAM_SEED) & 0xFFFFFFF)
    end = b"LZ4Block" + bytes([0x10]) + struct.pack("<iii", 0, 0, 0)
    assert lz4_stream_decompress(head + payload + end) == payload
    with pytest.raises(InvalidInputError, match="checksum"):
        lz4_stream_decompress(head + payload[:-1] + b"X" + end)
    with pytest.raises(InvalidInputError, match="end-of-stream"):
        lz4_stream_decompress(head + payload)
    with pytest.raises(InvalidInputError, match="before the start"):
        lz4_block_decompress(bytes([0x10]) + b"a" + bytes([9, 0]) + bytes([0x10]) + b"b", 7)


def test_unsafe_row_and_state_records():
    fields = [Field("word", "string"), Field("win", "long"), Field("gid", "long")]
    row = struct.pack("<Q", 0b010) + struct.pack("<q", (32 << 32) | 3) + bytes(8) + struct.pack("<q", 1) + b"elm" + bytes(5)
    assert decode_unsafe_row(row, fields) == ("elm", None, 1)
    recs = struct.pack(">i", len(row)) + row + struct.pack(">i", -1) + struct.pack(">i", -1)
    assert parse_state_records(recs) == [(row, None)]
    with pytest.raises(InvalidInputError, match="end marker"):
        parse_state_records(recs[:-4])


# ----------------------------------------------------------------------------- streaming replay
@pytest.mark.parametrize("name", ["wordcount-sink.jsonl", "wordcount-kill.jsonl"])
def test_recorded_streaming_traces_conform(name):
    r = replay_file(DATA / name)
    assert r.conformant, [c.to_json() for c in r.checks if not c.ok]
    names = {c.name for c in r.checks}
    assert {"commit-protocol", "resume-prediction", "state-fold", "sink-exactly-once",
            "side-channel-duplicates", "statestore-crosscheck"} <= names
    if name == "wordcount-sink.jsonl":
        assert "listener-progress" in names
    assert not r.extra["truncated"]
    # the Spark adapter maps the restart onto a core recovery: the generic check confirms it too
    assert r.check("recovery-line").ok is True


@pytest.mark.parametrize("tamper", [drop_commit, move_resume])
def test_tampered_streaming_trace_flags_first_offending_event(tmp_path, tamper):
    lines, seq = tamper(read_trace(DATA / "wordcount-sink.jsonl"))
    r = replay_file(_write(tmp_path / "t.jsonl", lines))
    assert not r.conformant and r.first_offending_seq == seq


@pytest.mark.parametrize("name", ["wordcount-sink.jsonl", "wordcount-kill.jsonl"])
def test_dropping_any_commit_is_flagged_where_it_first_matters(tmp_path, name):
    t = read_trace(DATA / name)
    for b in range(len(t.of_kind("batch_committed"))):
        lines, seq = drop_commit(t, b)
        r = replay_trace(parse_trace_text(("\n".join(lines) + "\n").encode()))
        assert not r.conformant and r.first_offending_seq == seq, (b, seq, r.first_offending_seq)


@pytest.mark.parametrize("kind, change, check", [
    ("final_state", lambda e: e["rows"][0].__setitem__(3, e["rows"][0][3] + 1), "state-fold"),
    ("sink_final", lambda e: e["batches"].pop("2"), "sink-exactly-once"),
    ("side_channel", lambda e: e["entries"].pop(1), "side-channel-duplicates"),
    ("restart", lambda e: e["restored_versions"].__setitem__("1", 0), "resume-prediction"),
    ("state_crosscheck", lambda e: e.__setitem__("agree", False), "statestore-crosscheck"),
    ("batch_planned", lambda e: e.__setitem__("batch", 3), "commit-protocol"),
    ("progress", lambda e: e.__setitem__("state_rows", [1]), "listener-progress"),
])
def test_each_streaming_check_catches_a_broken_recording(tmp_path, kind, change, check):
    p = _edit(DATA / "wordcount-sink.jsonl", tmp_path / "t.jsonl", kind, change)
    r = replay_file(p)
    bad = {c.name for c in r.checks if c.ok is False}
    assert check in bad and r.conformant is False


def test_killed_streaming_prefix_is_truncated_and_never_a_pass(tmp_path):
    """A prefix cut before the restart checks what it has but cannot pass: the requested failure
    was not seen to be recovered from, so the replay is inconclusive (exit 3), not conformant."""
    data = (DATA / "wordcount-kill.jsonl").read_bytes()
    cut = data.index(b'"kind":"spark.restart"') - 20  # killed in the middle of a line
    p = tmp_path / "t.jsonl"
    p.write_bytes(data[:cut])
    r = replay_file(p)
    assert r.extra["truncated"] and r.conformant is None and r.exit_code == 3
    assert all(c.ok is not False for c in r.checks)
    assert r.to_json()["truncated"] is True and r.to_json()["inconclusive"] is True
    assert r.check("end-of-run").status.value == "unchecked"
    r = subprocess.run([*RC, "spark", "replay", str(p), "--json"], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 3 and json.loads(r.stdout)["conformant"] is None


def test_requested_failure_that_did_not_happen_is_inconclusive(tmp_path):
    """Delete the failure event (or the restart) of a conformant trace: exit 3, never 0."""
    t = read_trace(DATA / "wordcount-sink.jsonl")
    for kind in ("failure", "restart"):
        events = [e for e in t.events if base_kind(e["kind"]) != kind]
        r = replay_trace(parse_trace_text(("\n".join(to_lines(t.header, events)) + "\n").encode()))
        fo = next(c for c in r.checks if c.name == "failure-observed")
        assert fo.status.value == "unchecked" and r.exit_code != 0, (kind, fo)
        # without the failure event, the side channel's duplicate is unexplained; without the
        # restart, the failure has no recovery (the run went on): violations (1), never 0
        assert r.exit_code == 1, [c.to_json() for c in r.checks]
        assert r.check("side-channel-duplicates" if kind == "failure" else "recovery-line").ok is False
    # a request for another batch than the one that failed
    header = {**t.header, "config": {**t.header["config"], "fail_at_batch": 3}}
    r = replay_trace(parse_trace_text(("\n".join(to_lines(header, t.events)) + "\n").encode()))
    assert r.conformant is None and "did not happen" in r.check("failure-observed").detail


def test_nhop_failure_requested_but_missing_is_inconclusive(tmp_path):
    p = _nhop(tmp_path, protocol="bcs", topology="cyclic", seed=2, processes=3, rounds=4,
              fail_process=2, fail_round=2)
    t = read_trace(p)
    assert replay_trace(t).conformant is True
    # the run as it would look had the failure never fired: everything before it, then the end
    cut = next(k for k, e in enumerate(t.events) if e["kind"] == "failure")
    end = next(e for e in t.events if e["kind"] == "end")
    events = [*t.events[:cut], {**end, "seq": cut + 1}]
    r = replay_trace(parse_trace_text(("\n".join(to_lines(t.header, events)) + "\n").encode()))
    assert r.check("failure-observed").status.value == "unchecked" and r.exit_code != 0


# ----------------------------------------------------------------------------- message passing
def _nhop(tmp_path: Path, **kw) -> Path:
    cfg = NhopConfig(**kw)
    out = tmp_path / f"nhop-{cfg.protocol}-{cfg.topology}-{cfg.seed}.jsonl"
    record_nhop(cfg, out, engine="local")
    return out


@settings(deadline=None)
@given(protocol=st.sampled_from(["uc", "bcs", "hmnr"]), topology=st.sampled_from(["pipeline", "scatter", "cyclic"]),
       seed=st.integers(0, 10_000), n=st.integers(2, 5), fail=st.integers(0, 100))
def test_nhop_recordings_conform(tmp_path_factory, protocol, topology, seed, n, fail):
    """specs/spark.md#message-passing-conformance: every check holds for every configuration."""
    tmp = tmp_path_factory.mktemp("nh")
    p = _nhop(tmp, protocol=protocol, topology=topology, seed=seed, processes=n, rounds=5,
              fail_process=fail % n, fail_round=1 + fail % 5)
    r = replay_file(p)
    assert r.conformant, [c.to_json() for c in r.checks if not c.ok]


def test_nhop_delete_forced_checkpoint_is_flagged(tmp_path):
    for seed in range(20):
        p = _nhop(tmp_path, protocol="hmnr", topology="cyclic", seed=seed, processes=4, rounds=6,
                  fail_process=1, fail_round=3)
        t = read_trace(p)
        if any(e["kind"] == "checkpoint" and e.get("forced") for e in t.events):
            break
    lines, seq = delete_forced_checkpoint(t)
    r = replay_file(_write(tmp_path / "tampered.jsonl", lines))
    assert not r.conformant and r.first_offending_seq == seq
    assert [c.name for c in r.checks if c.ok is False][0] == "forced-checkpoints"


@pytest.mark.parametrize("protocol", ["bcs", "hmnr"])
def test_deleting_any_forced_checkpoint_is_flagged_at_its_delivery(tmp_path, protocol):
    """Every forced checkpoint of several recordings, deleted one at a time (also the ones before
    the failure, which shift the recovery line's indices), is flagged at the delivery it preceded."""
    tried = 0
    for seed in range(4):
        p = _nhop(tmp_path, protocol=protocol, topology="scatter", seed=seed, processes=4, rounds=6,
                  fail_process=seed % 4, fail_round=2 + seed)
        t = read_trace(p)
        for k, e in enumerate(t.events):
            if e["kind"] == "checkpoint" and e.get("forced"):
                ev = t.events[:k] + t.events[k + 1:]
                r = replay_trace(parse_trace_text(("\n".join(to_lines(t.header, ev)) + "\n").encode()))
                assert not r.conformant and r.first_offending_seq == k + 1
                tried += 1
    assert tried > 0


def _no_propagation(current, checkpoints, failed):
    """Broken recovery: only the failed process rolls back (orphans survive)."""
    line = {i: (current[i].index if i in failed else None) for i in range(len(current))}
    st = [current[i] if line[i] is None else checkpoints[i][line[i]] for i in range(len(current))]
    replay = [(s, r, q) for r in range(len(current)) for s in range(len(current)) if s != r
              for q in range(st[r].delivered[s] + 1, st[s].sent[r] + 1)]
    return line, replay


def test_broken_recovery_is_caught(tmp_path, monkeypatch):
    monkeypatch.setattr(nhop_mod, "recovery_from_counters", _no_propagation)
    caught = 0
    for seed in range(12):
        p = _nhop(tmp_path, protocol="uc", topology="cyclic", seed=seed, processes=3, rounds=6,
                  fail_process=0, fail_round=5)
        r = replay_file(p)
        caught += not r.conformant
        if not r.conformant:
            assert {c.name for c in r.checks if c.ok is False} & {"recovery-line", "pattern-valid",
                                                             "outputs-failure-free"}
    assert caught > 0


def test_broken_protocol_in_tasks_is_caught(tmp_path, monkeypatch):
    """A task that runs HMNR without C2 records forced checkpoints the real HMNR would not take."""
    import rollcheck.pyimpl.protocols as protocols

    real = protocols.get_protocol
    monkeypatch.setattr(protocols, "get_protocol",
                        lambda name: real("hmnr-no-c2" if name == "hmnr" else name))
    caught = 0
    for seed in range(15):
        r = replay_file(_nhop(tmp_path, protocol="hmnr", topology="scatter", seed=seed, processes=4, rounds=6))
        caught += any(c.name == "forced-checkpoints" and not c.ok for c in r.checks)
    assert caught > 0


def test_outputs_check_catches_lost_message(tmp_path):
    p = _nhop(tmp_path, protocol="bcs", topology="pipeline", seed=3, processes=3, rounds=5,
              fail_process=1, fail_round=3)
    bad = _edit(p, tmp_path / "t.jsonl", "end", lambda e: e["outputs"]["P2"].__setitem__(0, 0))
    r = replay_file(bad)
    assert [c.name for c in r.checks if c.ok is False] == ["outputs-failure-free"]


def test_log_replay_check_catches_an_unreplayed_message(tmp_path):
    for seed in range(10):
        p = _nhop(tmp_path, protocol="hmnr", topology="cyclic", seed=seed, processes=3, rounds=5,
                  fail_process=1, fail_round=3)
        if any(e.get("replayed") for e in read_trace(p).events):
            break
    assert replay_file(p).conformant
    bad = _edit(p, tmp_path / "t.jsonl", "deliver", lambda e: None)  # unchanged copy
    t = read_trace(bad)
    events = [dict(e) for e in t.events]
    first = next(e for e in events if e.get("replayed"))
    del first["replayed"]  # delivered, but not from the log
    r = replay_file(_write(tmp_path / "t2.jsonl", to_lines(t.header, events)))
    assert [c.name for c in r.checks if c.ok is False] == ["log-replay"]


def test_failure_free_matches_simulation(tmp_path):
    cfg = dict(protocol="bcs", topology="scatter", seed=5, processes=4, rounds=5)
    t = read_trace(_nhop(tmp_path, **cfg))
    assert t.events[-1]["outputs"] == simulate(NhopConfig(**cfg))["outputs"]


def test_killed_recorder_leaves_a_truncated_prefix_that_never_passes(tmp_path):
    """The prefix is checked (no violation), but the end of the run was never reached: exit 3."""
    target = tmp_path / "killed.jsonl"
    out = tmp_path / "killed.jsonl.partial"  # a run cut short leaves its fragment beside --out
    (tmp_path / "tmp").mkdir()  # a SIGKILLed recorder cannot remove its work folder: keep it here
    proc = subprocess.Popen([*RC, "spark", "record", "nhop", "--protocol", "hmnr", "--engine", "local",
                             "--processes", "6", "--rounds", "3000", "--out", str(target)],
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={**os.environ, "TMPDIR": str(tmp_path / "tmp")})
    try:
        deadline = time.time() + 60
        while time.time() < deadline and (not out.exists() or out.stat().st_size < 20_000):
            time.sleep(0.05)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    assert not target.exists()
    r = subprocess.run([*RC, "spark", "replay", str(out), "--json", "--no-tlc"], capture_output=True,
                       text=True, cwd=ROOT)
    doc = json.loads(r.stdout)
    assert r.returncode == 3, r.stderr
    assert doc["truncated"] is True and doc["conformant"] is None
    assert all(c["ok"] is not False for c in doc["checks"])
    assert any(c["name"] == "end-of-run" and c["status"] == "unchecked" for c in doc["checks"])


def test_replay_cli_exit_codes(tmp_path):
    good = _nhop(tmp_path, protocol="bcs", topology="cyclic", seed=2, processes=3, rounds=4,
                 fail_process=2, fail_round=2)
    r = subprocess.run([*RC, "spark", "replay", str(good), "--json"], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0 and json.loads(r.stdout)["conformant"] is True
    lines, seq = drop_commit(read_trace(DATA / "wordcount-sink.jsonl"))
    bad = _write(tmp_path / "bad.jsonl", lines)
    r = subprocess.run([*RC, "spark", "replay", str(bad), "--json"], capture_output=True, text=True, cwd=ROOT)
    doc = json.loads(r.stdout)
    assert r.returncode == 1 and doc["first_offending_seq"] == seq and doc["conformant"] is False
    r = subprocess.run([*RC, "spark", "replay", str(tmp_path / "missing.jsonl")], capture_output=True,
                       text=True, cwd=ROOT)
    assert r.returncode == 2 and "missing.jsonl" in r.stderr


def test_unknown_source_is_invalid_input():
    t = parse_trace_text(b'{"format":"rollcheck.trace/1","source":"other"}\n')
    with pytest.raises(InvalidInputError, match="unknown trace source"):
        replay_trace(t)


# ----------------------------------------------------------------------------- sweeps
def test_sweep_work_is_deterministic_and_catches_a_broken_protocol(monkeypatch):
    assert protocols_work(3) == protocols_work(3)
    rows = protocols_work(3)
    assert all(r["useless"] == 0 for r in rows if r["protocol"] in ("bcs", "hmnr"))
    assert random_pattern(4, 3, 40) == random_pattern(4, 3, 40)
    assert properties_work(1)["violations"] == []
    import rollcheck.pyimpl.protocols as protocols

    real = protocols.run_protocol
    monkeypatch.setattr(protocols, "run_protocol",
                        lambda name, p: real("hmnr-no-c1" if name == "hmnr" else name, p))
    assert any(properties_work(s, 3)["violations"] for s in range(6))


# ----------------------------------------------------------------------------- checkpoints
def _ck(tmp_path, offsets, commits, meta='{"id": "q"}'):
    d = tmp_path / "ck"
    for sub, ids in (("offsets", offsets), ("commits", commits)):
        (d / sub).mkdir(parents=True)
        for b in ids:
            (d / sub / str(b)).write_text('v1\n{"batchWatermarkMs":0}\n{"logOffset":0}\n')
    if meta is not None:
        (d / "metadata").write_text(meta)
    return d


@pytest.mark.parametrize("offsets, commits, meta, problem", [
    ([0, 1, 2], [0, 1, 2], '{"id": "q"}', None),
    ([0, 1, 2], [0, 1], '{"id": "q"}', None),                 # batch 2 in progress: a note
    ([0, 1, 3], [0, 1], '{"id": "q"}', "not contiguous"),
    ([0, 1, 2, 3], [0, 1], '{"id": "q"}', "at most one batch"),
    ([0, 1], [0, 1, 2], '{"id": "q"}', "never planned"),
    ([0, 1], [0, 1], "nonsense", "metadata"),
])
def test_checkpoint_log_validation(tmp_path, offsets, commits, meta, problem):
    from rollcheck.spark_replay.checkpoint.check import check_checkpoint

    res = check_checkpoint(_ck(tmp_path, offsets, commits, meta), spark=False)
    if problem is None:
        assert res["valid"] and res["last_committed"] == commits[-1], res
    else:
        assert not res["valid"] and any(problem in p for p in res["problems"]), res["problems"]


def test_checkpoint_cli_exit_codes(tmp_path):
    good = _ck(tmp_path, [0, 1], [0, 1])
    r = subprocess.run([*RC, "spark", "checkpoint", str(good), "--no-spark", "--json"], capture_output=True,
                       text=True, cwd=ROOT)
    doc = json.loads(r.stdout)
    assert r.returncode == 0 and doc["valid"] and doc["last_committed"] == 1 and doc["operators"] == []
    (good / "commits" / "3").write_text("v1\n{}\n")
    r = subprocess.run([*RC, "spark", "checkpoint", str(good), "--no-spark", "--json"], capture_output=True,
                       text=True, cwd=ROOT)
    assert r.returncode == 1 and json.loads(r.stdout)["problems"]
    r = subprocess.run([*RC, "spark", "checkpoint", str(tmp_path / "nope")], capture_output=True, text=True,
                       cwd=ROOT)
    assert r.returncode == 2 and "nope" in r.stderr and "Traceback" not in r.stderr


def test_nested_struct_state_columns():
    """A window() key: a struct inside the key row, decoded as a nested tuple; a null struct is None."""
    win = Field("window", "struct", (Field("start", "timestamp"), Field("end", "timestamp")))
    inner = bytes(8) + struct.pack("<qq", 5_000_000, 15_000_000)
    user = b"ann" + bytes(5)
    row = (bytes(8) + struct.pack("<Q", (24 << 32) | len(inner)) + struct.pack("<Q", ((24 + 24) << 32) | 3)
           + inner + user)
    assert decode_unsafe_row(row, [win, Field("user", "string")]) == ((5_000_000, 15_000_000), "ann")
    null_row = bytes([1]) + bytes(7) + bytes(8) + struct.pack("<Q", (24 << 32) | 3) + user
    assert decode_unsafe_row(null_row, [win, Field("user", "string")]) == (None, "ann")


def test_spark_adapter_places_a_late_commit_before_the_failure():
    """The killed attempt's watcher may report a commit after the failure event was written: the
    commit was made before the failure, so the recovery to the batch Spark resumed at holds."""
    from rollcheck.pyimpl.traces.checker import TraceChecker
    from rollcheck.spark_replay.replay.adapter import SparkAdapter

    h = SparkAdapter().header({"format": "rollcheck.trace/1", "source": "spark", "job": "wordcount",
                               "processes": ["driver"]})
    evs = [{"kind": "spark.batch_committed", "batch": 0}, {"kind": "failure", "processes": ["driver"]},
           {"kind": "spark.batch_committed", "batch": 1}, {"kind": "spark.attempt_start"},
           {"kind": "spark.restart", "resume_batch": 2}, {"kind": "spark.batch_committed", "batch": 2},
           {"kind": "end"}]
    pairs = [(k + 2, {**e, "seq": k + 1}) for k, e in enumerate(evs)]
    r = TraceChecker(h).run(SparkAdapter().events(h, pairs)).finish()
    assert r.check("recovery-line").ok is True and r.verdict.value == "conformant"
    bad = [(n, {**e, "resume_batch": 1} if e["kind"] == "spark.restart" else e) for n, e in pairs]
    r = TraceChecker(h).run(SparkAdapter().events(h, bad)).finish()  # resumed a committed batch again
    assert r.check("recovery-line").ok is False and r.first_offending_seq == 5
