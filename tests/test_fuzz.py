"""ci-sized fuzz of every input format and numeric option (issue 14, item 1).

Each input is a mutated valid document (or option set) run through the real CLI in-process:
exit 0/1/3 on valid input, otherwise exit 2 with one line naming the file (or flag) and the place,
within a time bound, nothing written, no traceback, never exit 4 (see ``fuzzing.py``). The
harness itself is checked first: a deliberately broken command must be caught.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest
from fuzzing import (
    FORMATS,
    TLA_VALUES,
    FileFormat,
    OptionsFormat,
    Outcome,
    check_outcome,
    mutated_document,
    mutated_options,
    mutated_text,
    run_cli,
    run_file_input,
    run_options_input,
    run_value_input,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rollcheck.properties.profiles import PROFILES, active_profile

# ci profile: 60 inputs per format (about 10 s each); verify profile: 600.
N = PROFILES[active_profile()]
FUZZ = settings(max_examples=N, deadline=None, database=None,
                suppress_health_check=list(HealthCheck), derandomize=True)
FILE_FORMATS = {k: v for k, v in FORMATS.items() if isinstance(v, FileFormat)}
OPTION_FORMATS = {k: v for k, v in FORMATS.items() if isinstance(v, OptionsFormat)}


def _file_case(name: str, tmp_path_factory: pytest.TempPathFactory):
    fmt = FILE_FORMATS[name]
    seeds = fmt.seeds()
    work = tmp_path_factory.mktemp(f"fuzz-{name}")
    found: list[tuple[str, str, list[str]]] = []

    @FUZZ
    @given(doc=mutated_document(seeds, fmt.lines), command=st.sampled_from(fmt.commands),
           special=st.sampled_from([None] * 18 + list(fmt.special)))
    def case(doc, command, special):
        what, data = doc
        o, problem = run_file_input(fmt, command, special or data, work)
        if problem:
            found.append((problem, special or what, command))

    case()
    return found


@pytest.mark.parametrize("name", sorted(FILE_FORMATS))
def test_fuzz_file_format(name, tmp_path_factory):
    found = _file_case(name, tmp_path_factory)
    assert not found, "\n".join(f"{p} <- {w} | {' '.join(c)}" for p, w, c in found[:10])


@pytest.mark.parametrize("name", sorted(OPTION_FORMATS))
def test_fuzz_options(name, tmp_path):
    fmt = OPTION_FORMATS[name]
    found = []

    @FUZZ
    @given(argv=mutated_options(fmt))
    def case(argv):
        o, problem = run_options_input(argv, tmp_path)
        if problem:
            found.append((problem, argv))

    case()
    assert not found, "\n".join(f"{p} <- {a}" for p, a in found[:10])


# TLA+ value strings: every mutation kind, huge ranges, deep nesting and huge integers included.


def test_fuzz_tla_values():
    found = []

    @FUZZ
    @given(text=mutated_text(TLA_VALUES.seeds))
    def case(text):
        problem = run_value_input(TLA_VALUES, text)
        if problem:
            found.append((problem, text[:80]))

    case()
    assert not found, found[:10]


def test_tla_values_deep_nesting_is_bad_input():
    assert run_value_input(TLA_VALUES, "<<" * 5000 + "1" + ">>" * 5000) is None


def test_tla_values_huge_integer_is_bad_input():
    assert run_value_input(TLA_VALUES, "9" * 5000) is None


def test_tla_values_huge_range_is_bad_input():
    assert run_value_input(TLA_VALUES, "1..1000000000000") is None


# ----------------------------------------------------------------------------- the harness bites
def _broken_command(monkeypatch, behaviour):
    """Register a hidden command ``fuzz-broken`` whose handler does ``behaviour(path)``."""
    import rollcheck.cli.main as cli_main

    real = cli_main.build_parser

    def build():
        parser = real()
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        p = sub.add_parser("fuzz-broken")
        p.add_argument("input")
        p.add_argument("--json", action="store_true")
        p.set_defaults(handler=lambda args: behaviour(args.input))
        return parser

    monkeypatch.setattr(cli_main, "build_parser", build)


@pytest.mark.parametrize("behaviour, expect", [
    (lambda path: [][1], "exit code 4"),                                   # a bug → exit 4
    (lambda path: exec("while True: pass"), "unbounded run"),               # computes forever
    (lambda path: print("rollcheck: error: something\nrollcheck: error: x",
                        file=__import__("sys").stderr) or 2, "one error line"),
    (lambda path: print('{"x": NaN}') or 0, "not one strict JSON"),       # Infinity/NaN is not JSON
])
def test_harness_catches_broken_commands(monkeypatch, tmp_path, behaviour, expect):
    _broken_command(monkeypatch, behaviour)
    fmt = FileFormat("probe", lambda: [{}], [["fuzz-broken", "{input}", "--json"]])
    o, problem = run_file_input(fmt, fmt.commands[0], b"{}", tmp_path, time_limit=1.0)
    assert problem is not None and expect in problem, (problem, o)


def test_harness_catches_half_written_output(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "partial.json").write_text("{")
    problem = check_outcome(Outcome(2, "", "rollcheck: error: f.json: bad\n", 0.1), names=["f.json"],
                            json_out=False, out_dir=out)
    assert problem and "files were written" in problem
    problem = check_outcome(Outcome(2, "", "rollcheck: error: other: bad\n", 0.1), names=["f.json"],
                            json_out=False, out_dir=None)
    assert problem and "names neither" in problem


def test_mutator_makes_bad_and_good_inputs():
    """The mutator covers every byte-level kind and keeps some inputs valid."""
    seeds = FILE_FORMATS["pattern"].seeds()
    notes: set[str] = set()

    @settings(max_examples=300, database=None, derandomize=True, suppress_health_check=list(HealthCheck))
    @given(mutated_document(seeds))
    def case(doc):
        what, data = doc
        notes.update(w.split(" ")[0] for w in what.split("; "))
        if what == "valid seed":
            json.loads(data)

    case()
    assert {"valid", "nan", "bom", "bad_utf8", "truncate", "replace", "nest"} <= notes


def test_eight_formats_are_fuzzed():
    """Issue 19: the newest user-facing parser, ``rollcheck.trace/1``, is fuzzed with the others."""
    assert set(FORMATS) == {"pattern", "spans", "dataflow", "elastic", "trt profile", "trace", "options"}
    trace = FORMATS["trace"]
    assert trace.lines and trace.suffix == ".jsonl"
    used = {" ".join(c[:2]) for c in trace.commands}
    assert used == {"check trace", "trace validate", "trace to-pattern"}
    assert all("--no-tlc" in c for c in trace.commands if c[0] == "check")


def test_trace_mutator_writes_json_lines_and_reaches_the_checker():
    """Seeds are written one object per line; renumbered line mutations keep the seq framing, so
    some mutated traces get past the reader to the checker (exit 0 or 1, not only 2)."""
    fmt = FORMATS["trace"]
    seeds = fmt.seeds()
    notes: set[str] = set()
    framed = 0

    @settings(max_examples=200, database=None, derandomize=True, suppress_health_check=list(HealthCheck))
    @given(mutated_document(seeds, True))
    def case(doc):
        nonlocal framed
        what, data = doc
        notes.update(w.split(" ")[0] for w in what.split("; "))
        if what == "valid seed":
            lines = data.decode().splitlines()
            assert json.loads(lines[0])["format"] == "rollcheck.trace/1"
            assert [json.loads(x)["seq"] for x in lines[1:]] == list(range(1, len(lines)))
        if "renumber seq" in what:
            framed += 1

    case()
    assert {"valid", "truncate", "renumber", "drop", "repeat", "swap", "move"} <= notes, notes
    assert framed > 5


def test_harness_catches_a_crash_in_the_trace_checker(monkeypatch, tmp_path):
    """A recursion bug planted in the trace checker is an internal error the fuzzer reports."""
    import rollcheck.pyimpl.traces as traces

    def runaway(*a, **k):
        return runaway(*a, **k)

    monkeypatch.setattr(traces, "check_trace_file", runaway)
    fmt = FORMATS["trace"]
    data = "".join(json.dumps(x) + "\n" for x in fmt.seeds()[0]).encode()
    o, problem = run_file_input(fmt, fmt.commands[0], data, tmp_path)
    assert problem is not None and "exit code 4" in problem and "RecursionError" in problem, (problem, o)


def test_run_cli_reports_the_code(tmp_path):
    o = run_cli(["validate", str(Path(tmp_path) / "none.json")])
    assert o.code == 2 and "cannot read" in o.stderr


@pytest.mark.parametrize("code", [130, 143])
def test_interrupted_fuzzing_stops_instead_of_counting_an_outcome(code, monkeypatch):
    """SIGINT/SIGTERM during an input: main() exits 130/143, and the fuzzing stops there (it used
    to record one more outcome and go on, so a scheduler could not stop a fuzz part)."""
    import rollcheck.cli.main as cli
    from rollcheck.fuzz.run import run_cli

    monkeypatch.setattr(cli, "main", lambda argv: code)
    with pytest.raises(KeyboardInterrupt):
        run_cli(["check", "trace", "x.jsonl"])
    monkeypatch.setattr(cli, "main", lambda argv: 2)
    assert run_cli(["check", "trace", "x.jsonl"]).code == 2
