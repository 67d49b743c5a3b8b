"""The engine-neutral trace format: strict validation naming line and seq (exit 2), truncation,
the JSON Schema (package data), and a fuzz test: mutated traces always give one line and an exit
code in {0, 1, 2, 3}, never a traceback."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rollcheck.cli.main import main
from rollcheck.pyimpl.traces import TraceLines
from rollcheck.pyimpl.traces.schema import trace_schema

EX = Path(__file__).resolve().parent.parent / "examples"
TRACE = EX / "trace-hmnr-3p.jsonl"
RC = [sys.executable, "-P", "-m", "rollcheck.cli.main"]
LINES = TRACE.read_bytes().splitlines(keepends=True)


def check(capsys, data: bytes, tmp_path: Path, *extra: str) -> tuple[int, str]:
    f = tmp_path / "t.jsonl"
    f.write_bytes(data)
    rc = main(["check", "trace", str(f), "--no-tlc", *extra])
    err = capsys.readouterr().err
    return rc, err


def edit(k: int, change) -> bytes:
    """The example with event line ``k`` (1-based line number) changed by ``change(obj)``."""
    out = list(LINES)
    obj = json.loads(out[k - 1])
    change(obj)
    out[k - 1] = (json.dumps(obj) + "\n").encode()
    return b"".join(out)


@pytest.mark.parametrize("line,change,expect", [
    (5, lambda e: e.update(kind="recv"), "line 5 (seq 4): kind: unknown kind 'recv'"),
    (5, lambda e: e.update(kind="recv"), "did you mean 'deliver'?"),
    (5, lambda e: e.update(kind="x-note"), None),
    (5, lambda e: e.update(kind="toy.note"), None),
    (5, lambda e: e.update(kind="spark.note"), "line 5 (seq 4): kind: unknown kind 'spark.note'"),
    (5, lambda e: e.update(forced="false"), "line 5 (seq 4): forced: expected true or false"),
    (14, lambda e: e.update(to="snk"), "line 14 (seq 13): to: unknown process 'snk' (the header lists src, op, sink); did you mean 'sink'?"),
    (6, lambda e: e.update(process="src"), "line 6 (seq 5): process: message 'm0' is addressed to 'op', delivered by 'src'"),
    (6, lambda e: e.update(message="m9"), "line 6 (seq 5): message: delivery of 'm9', which was never sent"),
    (12, lambda e: e.update(message="m0"), "line 12 (seq 11): message: 'm0' is already delivered"),
    (4, lambda e: e.update(to="src"), "line 4 (seq 3): to: self-send"),
    (11, lambda e: e.update(message="m1"), "line 11 (seq 10): message: duplicate message id 'm1'"),
    (7, lambda e: e.update(seq=7), "line 7 (seq 7): seq: expected 6 after 5"),
    (7, lambda e: e.pop("seq"), "line 7 (after seq 5): seq: expected an integer"),
    (20, lambda e: e.update(line={"src": "volatile", "op": "one"}), "line 20 (seq 19): line.op: expected a checkpoint index"),
    (20, lambda e: e.update(in_transit="m0"), "line 20 (seq 19): in_transit: expected a list"),
    (19, lambda e: e.update(processes=["op", "snk"]), "line 19 (seq 18): processes: unknown process 'snk'"),
    (21, lambda e: e.update(replayed="yes"), "line 21 (seq 20): replayed: expected true or false"),
    (19, lambda e: e.update(kind="recovery", line={}, in_transit=[]), "line 19 (seq 18): kind: a recovery without a failure"),
    (20, lambda e: e.update(kind="send", process="op", message="m7", to="src"), "line 20 (seq 19): process: op failed at seq 18"),
    (22, lambda e: e.pop("key"), "line 22 (seq 21): key: missing"),
])
def test_malformed_events_exit_2_naming_line_seq_and_field(capsys, tmp_path, line, change, expect):
    rc, err = check(capsys, edit(line, change), tmp_path)
    if expect is None:
        assert rc in (0, 1), err
        return
    assert rc == 2, err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "t.jsonl: line " in err and expect in err, err


def test_event_after_end(capsys, tmp_path):
    rc, err = check(capsys, b"".join(LINES) + b'{"seq": 28, "kind": "end"}\n', tmp_path)
    assert rc == 2 and "line 29 (seq 28): kind: 'end' after the end event (seq 27)" in err


def test_bom_and_non_utf8_and_header(capsys, tmp_path):
    rc, err = check(capsys, b"\xef\xbb\xbf" + b"".join(LINES), tmp_path)
    assert rc == 2 and "t.jsonl: line 1: the file starts with a byte-order mark" in err
    rc, err = check(capsys, b"".join(LINES[:3]) + b'{"seq": 3, "kind": "x-n\xe9"}\n' + b"".join(LINES[4:]), tmp_path)
    assert rc == 2 and "t.jsonl: line 4 (after seq 2): not UTF-8 text" in err
    rc, err = check(capsys, b"", tmp_path)
    assert rc == 2 and "empty file" in err
    rc, err = check(capsys, b'{"format": "rollcheck.trace/1"}\n' + b"".join(LINES[1:]), tmp_path)
    assert rc == 2 and "line 1: processes: expected a non-empty list" in err
    rc, err = check(capsys, b"".join(LINES[:3]) + b"not json\n" + b"".join(LINES[4:]), tmp_path)
    assert rc == 2 and "line 4 (after seq 2): not valid JSON" in err


def test_truncated_last_line_is_truncated_not_an_error(capsys, tmp_path):
    cut = b"".join(LINES[:25]) + LINES[25][:17]
    f = tmp_path / "t.jsonl"
    f.write_bytes(cut)
    rc = main(["check", "trace", str(f), "--no-tlc", "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert rc == 0 and doc["truncated"] is True and doc["truncated_after_seq"] == 24
    assert doc["conformant"] is True
    # a complete last line without its newline is not truncated
    f.write_bytes(b"".join(LINES)[:-1])
    rc = main(["check", "trace", str(f), "--no-tlc", "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert rc == 0 and doc["truncated"] is False
    t = TraceLines(f)
    assert sum(1 for _ in t) == 27 and not t.truncated


def test_strict_mode_applies_the_schema(capsys, tmp_path):
    assert set(trace_schema()["$defs"]) >= {"header", "event"}
    rc, err = check(capsys, b"".join(LINES), tmp_path, "--strict")
    assert rc == 0, err
    rc, err = check(capsys, edit(5, lambda e: e.update(forced="false")), tmp_path, "--strict")
    assert rc == 2 and "line 5 (seq 4): forced: schema:" in err
    rc, err = check(capsys, edit(5, lambda e: e.update(kind="recv")), tmp_path, "--strict")
    assert rc == 2 and "line 5 (seq 4): kind: schema:" in err


def test_trace_validate_and_to_pattern_cli(capsys, tmp_path):
    assert main(["trace", "validate", str(TRACE)]) == 0
    assert capsys.readouterr().out.strip() == "valid"
    bad = tmp_path / "b.jsonl"
    bad.write_bytes(edit(5, lambda e: e.update(kind="recv")))
    out = tmp_path / "p.json"
    assert main(["trace", "to-pattern", str(bad), "-o", str(out)]) == 2
    assert not out.exists()  # nothing half-written


def test_subprocess_one_line_and_exit_code():
    r = subprocess.run([*RC, "check", "trace", str(EX / "trace-hmnr-3p-orphan.jsonl"), "--no-tlc"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 1 and "NOT conformant (first offending seq 19)" in r.stdout
    r = subprocess.run([*RC, "check", "trace", str(EX / "missing.jsonl")], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "cannot read trace" in r.stderr


_KEYS = ["seq", "kind", "process", "to", "message", "forced", "index", "replayed", "line", "in_transit",
         "processes", "key", "value"]
_VALUES = st.one_of(st.none(), st.booleans(), st.integers(-2, 30), st.sampled_from(
    ["src", "op", "sink", "snk", "m0", "m1", "m4", "volatile", "send", "deliver", "checkpoint",
     "failure", "recovery", "output", "end", "recv", "x-a", "false"]),
    st.lists(st.sampled_from(["src", "op", "m0", "m1"]), max_size=3),
    st.dictionaries(st.sampled_from(["src", "op", "sink", "snk"]), st.one_of(st.integers(-1, 3), st.just("volatile")),
                    max_size=3))


@st.composite
def mutated(draw):
    lines = [x.rstrip(b"\n") for x in LINES]
    for _ in range(draw(st.integers(1, 3))):
        op = draw(st.sampled_from(["set", "drop", "dup", "swap", "bytes", "cut"]))
        k = draw(st.integers(1, len(lines) - 1))
        if op == "set":
            obj = json.loads(lines[k])
            obj[draw(st.sampled_from(_KEYS))] = draw(_VALUES)
            lines[k] = json.dumps(obj).encode()
        elif op == "drop":
            del lines[k]
        elif op == "dup":
            lines.insert(k, lines[k])
        elif op == "swap" and k + 1 < len(lines):
            lines[k], lines[k + 1] = lines[k + 1], lines[k]
        elif op == "bytes":
            i = draw(st.integers(0, max(0, len(lines[k]) - 1)))
            lines[k] = lines[k][:i] + draw(st.binary(min_size=1, max_size=3)) + lines[k][i + 1:]
        elif op == "cut":
            return b"\n".join(lines[:k]) + b"\n" + lines[k][: draw(st.integers(0, len(lines[k])))]
        if len(lines) < 2:
            break
    return b"\n".join(lines) + b"\n"


@settings(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=mutated())
def test_fuzz_mutated_traces_never_crash(capsys, tmp_path, data):
    f = tmp_path / "fz.jsonl"
    f.write_bytes(data)
    t0 = time.monotonic()
    rc = main(["check", "trace", str(f), "--no-tlc", "--reference", str(EX / "trace-hmnr-3p.reference.json")])
    cap = capsys.readouterr()
    assert time.monotonic() - t0 < 10
    assert rc in (0, 1, 2, 3)
    if rc == 2:
        assert cap.err.count("\n") == 1 and cap.err.startswith("rollcheck: error: ")
        assert "line" in cap.err or "empty" in cap.err


def test_a_pattern_file_and_a_bad_reference_are_named(capsys, tmp_path):
    rc = main(["check", "trace", str(EX / "three-processes.json")])
    assert rc == 2 and "this is a rollcheck.pattern/1 file, not a rollcheck.trace/1 trace" in capsys.readouterr().err
    ref = tmp_path / "r.json"
    ref.write_text('[{"process": "snk", "key": 1, "value": 2}]')
    rc = main(["check", "trace", str(TRACE), "--reference", str(ref), "--no-tlc"])
    assert rc == 2 and f"{ref}: [0]: process: unknown process 'snk'" in capsys.readouterr().err
    ref.write_text("[1,")
    rc = main(["check", "trace", str(TRACE), "--reference", str(ref), "--no-tlc"])
    assert rc == 2 and "not valid JSON" in capsys.readouterr().err
