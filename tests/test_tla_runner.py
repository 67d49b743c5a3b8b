"""TLC runner: the -tool output parser on recorded outputs, and real runs of tiny specs."""

from __future__ import annotations

import os
import textwrap

import pytest

from rollcheck.pyimpl.errors import InvalidInputError
from rollcheck.tla.runner import interpret, parse_tool_output, run_tlc


def msg(code: int, klass: int, body: str) -> str:
    return f"@!@!@STARTMSG {code}:{klass} @!@!@\n{body}\n@!@!@ENDMSG {code} @!@!@\n"


HEADER = msg(2262, 0, "TLC2 Version 2.15 of Day Month 20?? (rev: d5b5a7f)") + msg(
    2401, 3, "Please run the Java VM ... -XX:+UseParallelGC"
) + msg(2220, 0, "Starting SANY...") + "Parsing file /x/M.tla\nSemantic processing of module M\n" + msg(
    2219, 0, "SANY finished."
)
COUNTS = msg(2199, 0, "12,345 states generated, 6,789 distinct states found, 0 states left on queue.") + msg(
    2194, 0, "The depth of the complete state graph search is 17."
)


def trace_state(n: int, action: str, body: str) -> str:
    return msg(2217, 4, f"{n}: <{action}>\n{body}\n")


def test_ok_with_counts():
    r = interpret(HEADER + msg(2193, 0, "Model checking completed. No error has been found.") + COUNTS, 0)
    assert (r.status, r.generated_states, r.distinct_states, r.depth) == ("ok", 12345, 6789, 17)


def test_no_error_but_zero_states_is_inconclusive():
    zero = msg(2199, 0, "0 states generated, 0 distinct states found, 0 states left on queue.")
    r = interpret(HEADER + msg(2193, 0, "No error has been found.") + zero, 0)
    assert r.status == "inconclusive"


def test_no_verdict_is_inconclusive():
    assert interpret(HEADER, 1).status == "inconclusive"
    assert interpret("", None).status == "inconclusive"


def test_invariant_violation_with_multiline_trace():
    out = (
        HEADER
        + msg(2110, 1, "Invariant NoUseless is violated.")
        + msg(2121, 1, "The behavior up to this point is:")
        + trace_state(1, "Initial predicate", "/\\ x = 0\n/\\ s = {}")
        + trace_state(2, "Next line 5, col 9 to line 5, col 63 of module M",
                      "/\\ x = 1\n/\\ s = { [a |-> 1,\n      b |-> <<2, 3>>] }")
        + COUNTS
    )
    r = interpret(out, 12)
    assert r.status == "violation" and r.violated == "NoUseless"
    assert [s.number for s in r.trace] == [1, 2]
    assert r.trace[1].action == "Next"
    assert r.trace[1].values["s"] == frozenset({parse_rec()})


def parse_rec():
    from rollcheck.tla.values import FrozenDict

    return FrozenDict(a=1, b=(2, 3))


def test_trace_keep_last():
    out = HEADER + msg(2114, 1, "Deadlock reached.") + "".join(
        trace_state(k, "Next line 1, col 1 to line 1, col 2 of module M", f"/\\ i = {k}") for k in range(1, 6)
    ) + COUNTS
    r = interpret(out, 11, trace_keep_last=1)
    assert r.status == "deadlock"
    assert len(r.trace) == 1 and r.trace[0].values == {"i": 5} and r.trace[0].number == 5


def test_temporal_violation_and_stuttering():
    out = HEADER + msg(2116, 1, "Temporal properties were violated.") + trace_state(1, "Initial predicate", "x = 0") + msg(
        2218, 4, "2: Stuttering") + COUNTS
    r = interpret(out, 13)
    assert r.status == "violation" and r.trace[-1].stuttering


def test_nested_messages_with_marker_mid_line():
    out = ("@!@!@STARTMSG 1000:1 @!@!@\nTLC threw an unexpected exception.\nThe exception was a X\n: "
           "@!@!@STARTMSG 2154:0 @!@!@\nCannot cast StringValue\n@!@!@ENDMSG 2154 @!@!@\n@!@!@ENDMSG 1000 @!@!@\n")
    top, loose = parse_tool_output(out)
    assert [m.code for m in top] == [1000] and top[0].children[0].code == 2154
    r = interpret(HEADER + out + COUNTS, 75)
    assert r.status == "error" and "Cannot cast" in r.message


def test_unbalanced_output_closes_open_messages():
    top, _ = parse_tool_output("@!@!@STARTMSG 2217:4 @!@!@\n1: <Initial predicate>\nx = 0\n")
    assert top[0].code == 2217 and "x = 0" in top[0].text


def test_semantic_error_location(tmp_path):
    sany = ("Semantic errors:\n\n*** Errors: 1\n\nline 5, col 27 to line 5, col 27 of module M\n\n"
            "The operator + requires 2 arguments.\n\n\n")
    out = msg(2220, 0, "Starting SANY...") + f"Parsing file {tmp_path}/M.tla\n" + sany + msg(
        2219, 0, "SANY finished.") + msg(3002, 1, "Parsing or semantic analysis failed.")
    r = interpret(out, 150)
    assert r.status == "error"
    e = r.errors[0]
    assert (e.file, e.line, e.column) == (f"{tmp_path}/M.tla", 5, 27)
    assert "requires 2 arguments" in e.message


def test_parse_error_location():
    sany = ('Parsing file /w/S.tla\n***Parse Error***\nEncountered "====" at line 4, column 1 and token "="\n\n'
            "Residual stack trace follows:\n\nFatal errors while parsing TLA+ spec in file S\n")
    out = msg(2220, 0, "Starting SANY...") + sany + msg(2219, 0, "SANY finished.") + msg(3002, 1, "failed")
    e = interpret(out, 150).errors[0]
    assert (e.file, e.line, e.column) == ("/w/S.tla", 4, 1)


def test_config_error():
    out = HEADER + msg(2229, 1, "The next state action Nxt specified in the configuration file\nis not defined")
    r = interpret(out, 255)
    assert r.status == "error" and r.errors and r.errors[0].message.startswith("configuration")


# ------------------------------------------------------------------ real TLC runs
SPEC = """
---- MODULE Tiny ----
EXTENDS Naturals
VARIABLES x, s
Init == x = 0 /\\ s = [a |-> <<1, "q">>, b |-> {{1, 2}}]
Next == x < {limit} /\\ x' = x + 1 /\\ s' = [s EXCEPT !.b = @ \\cup {{x}}]
Stop == x = {limit} /\\ UNCHANGED <<x, s>>
Inv == x < {bound}
====
"""


def write_spec(tmp_path, limit=3, bound=10, stop=True, inv=True):
    (tmp_path / "Tiny.tla").write_text(textwrap.dedent(SPEC.format(limit=limit, bound=bound)))
    nxt = "Nxt" if stop else "Next"
    if stop:
        (tmp_path / "Tiny.tla").write_text(
            (tmp_path / "Tiny.tla").read_text().replace("====", "Nxt == Next \\/ Stop\n====")
        )
    cfg = f"INIT Init\nNEXT {nxt}\n" + ("INVARIANT Inv\n" if inv else "")
    (tmp_path / "Tiny.cfg").write_text(cfg)
    return tmp_path / "Tiny.tla"


@pytest.fixture
def own_tmp(tmp_path, monkeypatch):
    """Make the runner's temporary directories land in a private directory we can inspect."""
    d = tmp_path / "tmp"
    d.mkdir()
    monkeypatch.setattr("tempfile.tempdir", str(d))
    return d


@pytest.mark.tlc
def test_real_ok_and_cleanup(tmp_path, own_tmp):
    r = run_tlc(write_spec(tmp_path))
    assert r.status == "ok" and r.distinct_states == 4 and r.depth == 4
    assert os.listdir(own_tmp) == []  # the metadir was removed


@pytest.mark.tlc
def test_real_violation_with_trace(tmp_path):
    r = run_tlc(write_spec(tmp_path, bound=2))
    assert r.status == "violation" and r.violated == "Inv"
    assert [s.values["x"] for s in r.trace] == [0, 1, 2]
    assert r.trace[0].values["s"]["a"] == (1, "q")
    assert r.trace[2].values["s"]["b"] == frozenset({0, 1, 2})


@pytest.mark.tlc
def test_real_deadlock_and_no_deadlock_flag(tmp_path):
    spec = write_spec(tmp_path, stop=False, inv=False)
    assert run_tlc(spec).status == "deadlock"
    assert run_tlc(spec, deadlock=False).status == "ok"


@pytest.mark.tlc
def test_real_parse_error_names_file_and_line(tmp_path):
    spec = write_spec(tmp_path)
    spec.write_text(spec.read_text().replace("x' = x + 1", "x' = x + + 1"))
    with pytest.raises(InvalidInputError) as ei:
        run_tlc(spec)
    assert f"{spec}:" in str(ei.value) and ":6:" in str(ei.value)


@pytest.mark.tlc
def test_real_missing_config_and_module(tmp_path):
    spec = write_spec(tmp_path)
    with pytest.raises(InvalidInputError):
        run_tlc(spec, tmp_path / "nope.cfg")
    with pytest.raises(InvalidInputError):
        run_tlc(tmp_path / "Nope.tla")
    (tmp_path / "bad.cfg").write_text("INIT Init\nNEXT Nope\n")
    with pytest.raises(InvalidInputError, match="configuration"):
        run_tlc(spec, tmp_path / "bad.cfg")


@pytest.mark.tlc
def test_real_timeout_is_inconclusive(tmp_path):
    spec = write_spec(tmp_path, limit=10**8, bound=10**9)
    r = run_tlc(spec, timeout=3)
    assert r.status == "inconclusive" and "timeout" in r.message


def test_missing_jar_is_inconclusive(tmp_path, monkeypatch):
    monkeypatch.setenv("ROLLCHECK_TLA_JAR", str(tmp_path / "missing.jar"))
    r = run_tlc(write_spec(tmp_path))
    assert r.status == "inconclusive" and "ROLLCHECK_TLA_JAR" in r.message


def test_missing_java_is_inconclusive(tmp_path, monkeypatch):
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    r = run_tlc(write_spec(tmp_path))
    assert r.status == "inconclusive" and "Java" in r.message


def test_timeout_keeps_progress_counts():
    out = HEADER + msg(2200, 0, "Progress(7) at 2026-11-22 01:07:27: 1,500 states generated (90,000 s/min), "
                              "1,200 distinct states found (72,000 ds/min), 300 states left on queue.")
    r = interpret(out, None)
    assert r.status == "inconclusive" and (r.generated_states, r.distinct_states) == (1500, 1200)
