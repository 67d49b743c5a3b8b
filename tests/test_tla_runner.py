"""TLC runner: the -tool output parser on recorded outputs, and real runs of tiny specs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

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


# ------------------------------------------------------------------ lassos, markers, cfgs
def test_lasso_back_to_is_parsed():
    out = (HEADER + msg(2116, 1, "Temporal properties were violated.")
           + msg(2264, 1, "The following behavior constitutes a counter-example:")
           + trace_state(1, "Initial predicate", "x = 0")
           + trace_state(2, "Next line 5, col 9 to line 5, col 24 of module L", "x = 1")
           + msg(2122, 4, "1: Back to state: <Next line 5, col 9 to line 5, col 24 of module L>\n") + COUNTS)
    r = interpret(out, 13)
    assert r.status == "violation"
    last = r.trace[-1]
    assert (last.number, last.back_to, last.action, last.values) == (3, 1, "Next", {})
    assert r.to_json()["trace"][-1]["back_to"] == 1


def test_initial_state_violation_keeps_the_state():
    out = HEADER + msg(2107, 1, "Invariant Positive is violated by the initial state:\nx = 0\n")
    r = interpret(out, 12)
    assert r.status == "violation" and r.violated == "Positive"
    assert [(s.number, s.action, s.values) for s in r.trace] == [(1, "Initial predicate", {"x": 0})]
    assert r.distinct_states == 1 and "@!@!@" not in r.message


def test_config_error_nested_in_an_exception_names_the_cfg_line():
    out = HEADER + ("@!@!@STARTMSG 1000:1 @!@!@\nTLC threw an unexpected exception.\nThe exception was a "
                    "tlc2.tool.ConfigFileException\n: @!@!@STARTMSG 5006:0 @!@!@\nTLC found an error in the "
                    "configuration file at line 3\nIt was expecting a keyword, but did not find it.\n"
                    "@!@!@ENDMSG 5006 @!@!@\n@!@!@ENDMSG 1000 @!@!@\n")
    r = interpret(out, 150)
    assert r.status == "error"
    e = r.errors[0]
    assert e.kind == "config" and e.line == 3 and "@!@!@" not in e.message


def test_missing_module_message_has_no_markers(tmp_path):
    (tmp_path / "M.tla").write_text("---- MODULE M ----\nEXTENDS Naturals,\n  Gone\n====\n")
    sany = (f"Parsing file {tmp_path}/M.tla\nFile does not exist: {tmp_path}/Gone.tla\n\nFatal errors while "
            "parsing TLA+ spec in file M\n\ntla2sany.semantic.AbortException\n*** Abort messages: 1\n\n"
            "Unknown location\n\nCannot find source file for module Gone imported in module M.\n\n\n")
    out = msg(2220, 0, "Starting SANY...") + sany + msg(2219, 0, "SANY finished.") + msg(3002, 1, "failed")
    r = interpret(out, 150)
    e = r.errors[0]
    assert "@!@!@" not in r.message and "cannot find module Gone" in e.message
    assert (e.file, e.line) == (f"{tmp_path}/M.tla", 3)


# ------------------------------------------------------------------ public-style specs
SPECS = Path(__file__).parent / "tla_specs"


@pytest.mark.tlc
def test_public_check_deadlock_false_is_translated(own_tmp):
    r = run_tlc(SPECS / "DieHard.tla")  # the cfg says CHECK_DEADLOCK FALSE; TLC 2.15 rejects it
    assert r.status == "violation" and r.violated == "NotSolved"
    assert "-deadlock" in r.command
    assert r.trace[-1].values["big"] == 4 and r.trace[0].values == {"small": 0, "big": 0}
    assert os.listdir(own_tmp) == []


@pytest.mark.tlc
def test_public_lasso_counterexample():
    r = run_tlc(SPECS / "HourClock.tla")
    assert r.status == "violation" and r.violated == "temporal property"
    last = r.trace[-1]
    assert last.back_to is not None and 1 <= last.back_to < last.number
    assert last.number == r.trace[-2].number + 1
    # the loop target is a real state of the trace, the step after the last shown state
    hours = [s.values["hr"] for s in r.trace[:-1]]
    assert hours[last.back_to - 1] == (hours[-1] % 12) + 1


@pytest.mark.tlc
def test_public_multiline_cfg_with_liveness_and_check_deadlock_true():
    r = run_tlc(SPECS / "Peterson.tla")
    assert r.status == "ok" and r.distinct_states > 0
    assert "-deadlock" not in r.command


@pytest.mark.tlc
def test_public_initial_state_violation():
    r = run_tlc(SPECS / "BadInit.tla")
    assert r.status == "violation" and r.violated == "Positive"
    assert r.trace[0].values["x"] == 0 and r.trace[0].values["y"] == (1, "a")
    assert r.distinct_states >= 1


@pytest.mark.tlc
def test_public_missing_module_is_located_without_markers():
    with pytest.raises(InvalidInputError) as ei:
        run_tlc(SPECS / "UsesMissing.tla")
    text = str(ei.value)
    assert "@!@!@" not in text and "NoSuchHelpers" in text
    assert text.startswith(f"{SPECS / 'UsesMissing.tla'}:3:")


@pytest.mark.tlc
def test_public_parse_error_without_cfg_reports_the_module():
    assert not (SPECS / "Broken.cfg").exists()
    with pytest.raises(InvalidInputError) as ei:
        run_tlc(SPECS / "Broken.tla")
    assert str(ei.value).startswith(f"{SPECS / 'Broken.tla'}:5:") and "configuration" not in str(ei.value)


@pytest.mark.tlc
def test_public_cfg_error_is_attributed_to_the_cfg(tmp_path):
    (tmp_path / "K.tla").write_text((SPECS / "BadInit.tla").read_text().replace("BadInit", "K"))
    (tmp_path / "K.cfg").write_text("INIT Init\nNEXT Next\n\n= 3\n")
    with pytest.raises(InvalidInputError) as ei:
        run_tlc(tmp_path / "K.tla")
    assert str(ei.value).startswith(f"{tmp_path / 'K.cfg'}:4:")
    # an unknown operator named by the cfg: TLC gives no line, the cfg is still the culprit
    (tmp_path / "K.cfg").write_text("INIT Init\nNEXT Next\nINVARIANT Positive\nFOO Bar\n")
    with pytest.raises(InvalidInputError) as ei:
        run_tlc(tmp_path / "K.tla")
    assert str(ei.value).startswith(f"{tmp_path / 'K.cfg'}: configuration:") and "FOO" in str(ei.value)


@pytest.mark.tlc
def test_sigterm_kills_tlc_and_removes_the_temporary_folder(tmp_path):
    env = dict(os.environ, TMPDIR=str(tmp_path))
    cli = Path(sys.executable).with_name("rollcheck")
    proc = subprocess.Popen([str(cli), "tlc", str(SPECS / "Slow.tla"), "--timeout", "120"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    java_pids: list[int] = []
    while time.monotonic() < deadline and not java_pids:
        time.sleep(0.5)
        if any(p.name.startswith("rollcheck-tlc-") for p in tmp_path.iterdir()):
            java_pids = _children(proc.pid)
    assert java_pids, "TLC did not start"
    time.sleep(1.0)
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=60)
    assert proc.returncode != 0
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("rollcheck-tlc-")]
    time.sleep(0.5)
    for pid in java_pids:
        assert not _alive(pid), f"java {pid} survived"


def _children(pid: int) -> list[int]:
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                stat = (d / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(d.name))
    return out


def _alive(pid: int) -> bool:
    try:
        state = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


# ------------------------------------------------------------------ CLI: inconclusive, never a pass
def test_cli_tlc_without_jar_is_inconclusive(tmp_path, monkeypatch, capsys):
    from rollcheck.cli.main import main

    monkeypatch.setenv("ROLLCHECK_TLA_JAR", str(tmp_path / "missing.jar"))
    assert main(["tlc", str(write_spec(tmp_path))]) == 3
    assert "inconclusive" in capsys.readouterr().err
    assert main(["tlc-manifest", "--only", "cic-hmnr-small", "--cover"]) == 3


def test_coverage_without_tlc_is_inconclusive_not_reached(tmp_path, monkeypatch):
    from rollcheck.tla.manifest import check_coverage, load_manifest

    monkeypatch.setenv("ROLLCHECK_TLA_JAR", str(tmp_path / "missing.jar"))
    e = next(x for x in load_manifest() if x.cover)
    outs = check_coverage(e)
    assert outs and all(c.status == "inconclusive" and not c.reached for c in outs)


def test_cli_tlc_trace_of_a_user_protocol_is_inconclusive(tmp_path, capsys):
    from rollcheck.cli.main import main

    pat = tmp_path / "p.json"
    pat.write_text('{"format": "rollcheck.pattern/1", "processes": ["P0", "P1"], "events": []}')
    assert main(["tlc-trace", "mypkg.proto:MyProtocol", str(pat)]) == 3
    err = capsys.readouterr().err
    assert "inconclusive" in err and "built-in protocols with a TLA+ model" in err
    assert main(["tlc-trace", f"{tmp_path / 'p.py'}:P", str(pat), "--json"]) == 3
    assert '"status": "inconclusive"' in capsys.readouterr().out
